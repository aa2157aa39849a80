#include "core/random_id.h"

#include <atomic>
#include <chrono>
#include <random>

namespace zl {
namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

// Read once: std::random_device, falling back to the clock and an address
// where the platform has no entropy source (its constructor then throws).
uint64_t process_seed() {
  static const uint64_t seed = [] {
    uint64_t s = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    s ^= reinterpret_cast<uintptr_t>(&s) * kGolden;
    try {
      std::random_device rd;
      s ^= (static_cast<uint64_t>(rd()) << 32) ^ rd();
    } catch (...) {
    }
    return s;
  }();
  return seed;
}

std::atomic<uint64_t> g_counter{0};

}  // namespace

uint64_t random_u64() {
  // splitmix64 of the next counter value: a bijection, so no two calls in a
  // process (on any threads) return the same value.
  uint64_t z = process_seed() + (g_counter.fetch_add(1, std::memory_order_relaxed) + 1) * kGolden;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::string random_id(std::string_view prefix, int n_chars) {
  static constexpr char kAlphabet[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
  constexpr int kCharsPerWord = 10;  // 62^10 < 2^64: ten digits from one draw
  std::string id;
  id.reserve(prefix.size() + static_cast<size_t>(n_chars));
  id.append(prefix);
  uint64_t bits = 0;
  for (int i = 0; i < n_chars; ++i) {
    if (i % kCharsPerWord == 0) bits = random_u64();
    id += kAlphabet[bits % 62];
    bits /= 62;
  }
  return id;
}

}  // namespace zl
