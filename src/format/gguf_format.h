// Internal to src/format/gguf*.cc: constants and helpers of the GGUF
// encoding shared by the reader (gguf.cc) and the writer (gguf_writer.cc).
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "format/gguf.h"

namespace zl::gguf_format {

static_assert(std::endian::native == std::endian::little, "GGUF I/O assumes a little-endian host");

inline constexpr uint8_t kMagic[4] = {'G', 'G', 'U', 'F'};
inline constexpr uint32_t kWriteVersion = 3;
inline constexpr uint64_t kMaxNameBytes = 65535;  // keys and tensor names
inline constexpr const char* kAlignmentKey = "general.alignment";
// Smallest possible encodings, used to reject counts before reserving memory:
// a kv is a non-empty key (8 + 1), a type (4) and at least a one-byte value;
// a tensor info is a non-empty name (8 + 1), n_dims (4), one dim (8), a type
// (4) and an offset (8).
inline constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;
inline constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;

// --- message helpers -------------------------------------------------------

inline void append(std::string& s, std::string_view v) {
  s += v;
}
template <typename T>
requires std::is_integral_v<T> || std::is_floating_point_v<T>
inline void append(std::string& s, T v) {
  s += std::to_string(v);
}
template <typename... Args>
inline std::string cat(const Args&... args) {
  std::string s;
  (append(s, args), ...);
  return s;
}

// 'name' for messages (gguf_quoted, gguf.h).
inline std::string quoted(std::string_view s) {
  return gguf_quoted(s);
}

inline std::string range(uint64_t begin, uint64_t end) {
  return cat("[", begin, ", ", end, ")");
}

// --- value types -----------------------------------------------------------

inline bool valid_value_type(uint32_t t) {
  return t <= static_cast<uint32_t>(GgufValueType::kFloat64);
}

// Bytes of a fixed-size value type; 0 for string and array.
inline uint64_t fixed_size(GgufValueType t) {
  switch (t) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
      return 8;
    case GgufValueType::kString:
    case GgufValueType::kArray:
      return 0;
  }
  return 0;
}

// Smallest on-disk encoding of one value of type t.
inline uint64_t min_encoded_size(GgufValueType t) {
  if (t == GgufValueType::kString) return 8;     // length
  if (t == GgufValueType::kArray) return 4 + 8;  // elem type, count
  return fixed_size(t);
}

template <typename T>
inline T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Decodes a fixed-size value; bools must already be checked to be 0 or 1.
inline GgufValue decode_fixed(GgufValueType t, const uint8_t* p) {
  switch (t) {
    case GgufValueType::kUint8:
      return GgufValue::u8(p[0]);
    case GgufValueType::kInt8:
      return GgufValue::i8(load<int8_t>(p));
    case GgufValueType::kUint16:
      return GgufValue::u16(load<uint16_t>(p));
    case GgufValueType::kInt16:
      return GgufValue::i16(load<int16_t>(p));
    case GgufValueType::kUint32:
      return GgufValue::u32(load<uint32_t>(p));
    case GgufValueType::kInt32:
      return GgufValue::i32(load<int32_t>(p));
    case GgufValueType::kFloat32:
      return GgufValue::f32(load<float>(p));
    case GgufValueType::kBool:
      return GgufValue::boolean(p[0] != 0);
    case GgufValueType::kUint64:
      return GgufValue::u64(load<uint64_t>(p));
    case GgufValueType::kInt64:
      return GgufValue::i64(load<int64_t>(p));
    case GgufValueType::kFloat64:
      return GgufValue::f64(load<double>(p));
    case GgufValueType::kString:
    case GgufValueType::kArray:
      break;
  }
  CHECK(false) << "decode_fixed on a variable-size type";
  return {};
}

// Keys and tensor names: non-empty, bounded, no control characters (they
// appear in messages and logs).
inline Status check_name(std::string_view s, std::string_view what) {
  if (s.empty()) return corrupt_file(cat("empty ", what));
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) {
      return corrupt_file(cat(what, " ", quoted(s), " contains a control character"));
    }
  }
  return {};
}

inline bool is_pow2(uint64_t x) {
  return x != 0 && (x & (x - 1)) == 0;
}
inline uint64_t align_up(uint64_t x, uint64_t a) {
  return (x + a - 1) / a * a;
}  // caller rules out overflow

// Bytes of a tensor; nullopt on overflow. `ne[0]` must be a multiple of the block size.
inline std::optional<uint64_t> tensor_bytes(const GgmlTypeTraits& tt, const int64_t* ne, int n_dims) {
  uint64_t n = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(ne[0] / tt.block_size),
                             static_cast<uint64_t>(tt.type_size), &n)) {
    return std::nullopt;
  }
  for (int i = 1; i < n_dims; ++i) {
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(ne[i]), &n)) return std::nullopt;
  }
  return n;
}

// --- bounds-checked reading -------------------------------------------------

}  // namespace zl::gguf_format
