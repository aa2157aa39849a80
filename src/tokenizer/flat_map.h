// Open-addressing hash tables for the tokenizer's hot lookups (token text ->
// id, merge pair -> rank). Built once at load time, then read-only: lookups
// are thread-safe and allocation-free. Internal to src/tokenizer/.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

namespace zl::tok_internal {

// A fast non-cryptographic hash of bytes (8 bytes per step, multiply-xorshift).
inline uint64_t hash_bytes(std::string_view s) {
  constexpr uint64_t kMul = 0x9FB21C651E98DF25ull;
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (s.size() * kMul);
  const char* p = s.data();
  size_t n = s.size();
  while (n >= 8) {
    uint64_t k;
    std::memcpy(&k, p, 8);
    h = (h ^ (k * 0xBF58476D1CE4E5B9ull)) * kMul;
    h ^= h >> 29;
    p += 8;
    n -= 8;
  }
  if (n > 0) {
    uint64_t k = 0;
    std::memcpy(&k, p, n);
    h = (h ^ (k * 0xBF58476D1CE4E5B9ull)) * kMul;
  }
  h ^= h >> 32;
  h *= kMul;
  return h ^ (h >> 29);
}

inline uint64_t hash_u64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xFF51AFD7ED558CCDull;
  k ^= k >> 33;
  k *= 0xC4CEB9FE1A85EC53ull;
  return k ^ (k >> 33);
}

inline size_t table_capacity(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  return cap;
}

// Maps strings to int32 values. The strings are owned elsewhere and looked up
// through `key_of(value)`, so a slot is just the value (-1 = empty).
class StringIndex {
 public:
  // `keys[i]` is the key of value i. Later duplicates replace earlier ones.
  void build(const std::vector<std::string_view>& keys) {
    slots_.assign(table_capacity(keys.size()), -1);
    keys_ = keys;
    mask_ = slots_.size() - 1;
    for (size_t i = 0; i < keys.size(); ++i) {
      size_t h = hash_bytes(keys[i]) & mask_;
      while (slots_[h] >= 0 && keys_[slots_[h]] != keys[i]) h = (h + 1) & mask_;
      slots_[h] = static_cast<int32_t>(i);
    }
  }
  int32_t find(std::string_view key) const {
    if (slots_.empty()) return -1;
    size_t h = hash_bytes(key) & mask_;
    while (true) {
      const int32_t v = slots_[h];
      if (v < 0) return -1;
      if (keys_[v] == key) return v;
      h = (h + 1) & mask_;
    }
  }

 private:
  std::vector<int32_t> slots_;
  std::vector<std::string_view> keys_;
  size_t mask_ = 0;
};

// Maps (a, b) pairs of non-negative int32 to a small value. First insert wins.
template <typename V>
class PairMap {
 public:
  void reserve(size_t n) {
    keys_.assign(table_capacity(n), kEmpty);
    values_.assign(keys_.size(), V{});
    mask_ = keys_.size() - 1;
  }
  // Returns false if the key was already present (the old value is kept).
  bool insert(int32_t a, int32_t b, const V& v) {
    const uint64_t key = pack(a, b);
    size_t h = hash_u64(key) & mask_;
    while (keys_[h] != kEmpty) {
      if (keys_[h] == key) return false;
      h = (h + 1) & mask_;
    }
    keys_[h] = key;
    values_[h] = v;
    return true;
  }
  const V* find(int32_t a, int32_t b) const {
    if (keys_.empty()) return nullptr;
    const uint64_t key = pack(a, b);
    size_t h = hash_u64(key) & mask_;
    while (true) {
      const uint64_t k = keys_[h];
      if (k == key) return &values_[h];
      if (k == kEmpty) return nullptr;
      h = (h + 1) & mask_;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~0ull;
  static uint64_t pack(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  std::vector<uint64_t> keys_;
  std::vector<V> values_;
  size_t mask_ = 0;
};

}  // namespace zl::tok_internal
