// Block structs of the quantized GGUF formats, laid out exactly as on disk
// (little-endian, no padding; the static_asserts pin the sizes). Kernels cast
// a row's bytes to an array of these. f16 fields hold raw IEEE-half bits:
// convert them with fp16_to_fp32 (kernels/quant.h).
#pragma once

#include <cstdint>

namespace zl {

inline constexpr int kQk32 = 32;   // values per block of Q8_0 / Q4_0
inline constexpr int kQkK = 256;   // values per super-block of the K-quants

// x[j] = d * qs[j]
struct BlockQ8_0 {
  uint16_t d;  // f16
  int8_t qs[kQk32];
};

// x[j] = d * ((qs[j] & 0xF) - 8), x[j + 16] = d * ((qs[j] >> 4) - 8), j < 16
struct BlockQ4_0 {
  uint16_t d;  // f16
  uint8_t qs[kQk32 / 2];
};

// 8 sub-blocks of 32 with a 6-bit scale and a 6-bit min each, packed into
// `scales` (see unpack_scale_min_k4). Values 64*c .. 64*c+31 are the low
// nibbles of qs[32*c .. 32*c+31] (sub-block 2c), the next 32 the high nibbles
// (sub-block 2c+1). x = d*scale*q - dmin*min.
struct BlockQ4_K {
  uint16_t d;     // f16, super-scale of the scales
  uint16_t dmin;  // f16, super-scale of the mins
  uint8_t scales[12];
  uint8_t qs[kQkK / 2];
};

// 16 sub-blocks of 16 with a signed 8-bit scale. 6-bit quants q in [0, 63]:
// low 4 bits in ql, high 2 bits in qh; x = d * scales[s] * (q - 32). In each
// half h (128 values), value 32*g + l (g < 4, l < 32) has its low bits in
// ql[64h + l + 32*(g & 1)] >> (4*(g >> 1)), its high bits in
// qh[32h + l] >> (2*g), and scale index 8h + 2g + l/16.
struct BlockQ6_K {
  uint8_t ql[kQkK / 2];
  uint8_t qh[kQkK / 4];
  int8_t scales[kQkK / 16];
  uint16_t d;  // f16
};

// Activations paired with the K-quants in dot products: x[j] = d * qs[j];
// bsums[g] = sum of qs[16g .. 16g+15] (lets Q4_K fold its mins in cheaply).
struct BlockQ8_K {
  float d;
  int8_t qs[kQkK];
  int16_t bsums[kQkK / 16];
};

static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);

// Q4_K scale packing. Sub-block j < 4 keeps its scale in the low 6 bits of
// scales[j] and its min in the low 6 bits of scales[j + 4]; j >= 4 keeps the
// low 4 bits of both in scales[j + 4] (scale low nibble, min high nibble) and
// the top 2 bits in bits 6-7 of scales[j - 4] (scale) and scales[j] (min).
inline void unpack_scale_min_k4(int j, const uint8_t* scales, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *m = scales[j + 4] & 63;
  } else {
    *sc = (scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4);
    *m = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

// Packs eight 6-bit (scale, min) pairs (values must be < 64) into `scales`.
inline void pack_scale_min_k4(const uint8_t sc[8], const uint8_t m[8], uint8_t scales[12]) {
  for (int j = 0; j < 4; ++j) {
    scales[j] = sc[j];
    scales[j + 4] = m[j];
  }
  for (int j = 4; j < 8; ++j) {
    scales[j + 4] = static_cast<uint8_t>((sc[j] & 0xF) | ((m[j] & 0xF) << 4));
    scales[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
    scales[j] |= static_cast<uint8_t>((m[j] >> 4) << 6);
  }
}

}  // namespace zl
