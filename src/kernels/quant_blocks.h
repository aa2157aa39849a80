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

// x[j] = d * q + m with 4-bit q laid out as in Q4_0.
struct BlockQ4_1 {
  uint16_t d;  // f16
  uint16_t m;  // f16
  uint8_t qs[kQk32 / 2];
};

// Q8_0 plus s = d * sum(qs) (before d's rounding), Q4_1's activation partner.
struct BlockQ8_1 {
  uint16_t d;  // f16
  uint16_t s;  // f16
  int8_t qs[kQk32];
};

// x[j] = d * (q - 16), q 5 bits: the low 4 as in Q4_0, the fifth of value j
// in bit j of qh (little-endian uint32).
struct BlockQ5_0 {
  uint16_t d;  // f16
  uint8_t qh[4];
  uint8_t qs[kQk32 / 2];
};

// x[j] = d * kIq4nlValues[q], 4-bit q laid out as in Q4_0.
struct BlockIq4Nl {
  uint16_t d;  // f16
  uint8_t qs[kQk32 / 2];
};

// OCP microscaling FP4: x[j] = 2^(e - 127) * fp4(q) with fp4 e2m1 values;
// ggml stores the values doubled (kMxfp4Values) and halves the scale
// (e8m0_to_fp32_half). 4-bit q laid out as in Q4_0.
struct BlockMxfp4 {
  uint8_t e;  // e8m0 exponent
  uint8_t qs[kQk32 / 2];
};

// Q4_K plus a fifth bit: value 64c + l (l < 32) has it in bit 2c of qh[l],
// value 64c + 32 + l in bit 2c + 1. x = d*scale*q - dmin*min, q < 32.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[kQkK / 8];
  uint8_t qs[kQkK / 2];
};

// 16 sub-blocks of 16, 6-bit scales (stored + 32, packed in 12 bytes, see
// unpack_scales_q3_k). Value 128h + 32g + l (h < 2, g < 4, l < 32): 2 low
// bits (qs[32h + l] >> 2g) & 3, high bit hmask[l] bit 4h + g;
// x = d * (scale - 32) * (q - 4) with q < 8, scale index 8h + 2g + l / 16.
struct BlockQ3_K {
  uint8_t hmask[kQkK / 8];
  uint8_t qs[kQkK / 4];
  uint8_t scales[12];
  uint16_t d;  // f16
};

// Q3_K's value p (< 256) as 0..7: q + 4, the 2 low bits and the high bit.
inline int q3_k_value(const BlockQ3_K& b, int p) {
  const int h = p / 128, g = (p % 128) / 32, l = p % 32;
  const int lo = (b.qs[32 * h + l] >> (2 * g)) & 3;
  return lo | (((b.hmask[l] >> (4 * h + g)) & 1) << 2);
}

// 16 sub-blocks of 16 with a 4-bit scale (low nibble) and min (high) each.
// Value 128h + 32g + l: q = (qs[32h + l] >> 2g) & 3, scale index 8h + 2g +
// l / 16; x = d * scale * q - dmin * min.
struct BlockQ2_K {
  uint8_t scales[kQkK / 16];
  uint8_t qs[kQkK / 4];
  uint16_t d;     // f16
  uint16_t dmin;  // f16
};

// 8 sub-blocks of 32 with 6-bit scales (low 4 bits in scales_l nibbles,
// high 2 in scales_h); x = d * (scale - 32) * kIq4nlValues[q], sub-block s's
// q laid out as a Q4_0 block in qs[16s .. 16s + 15].
struct BlockIq4Xs {
  uint16_t d;  // f16
  uint16_t scales_h;
  uint8_t scales_l[kQkK / 64];
  uint8_t qs[kQkK / 2];
};

// The non-linear 4-bit grid of IQ4_NL / IQ4_XS, and MXFP4's e2m1 values doubled.
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// 2^(e - 127) / 2 as ggml computes it (the MXFP4 scale with the values doubled).
inline float e8m0_to_fp32_half(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

// Q3_K's 16 scales (6 bits each, offset 32) from their 12 packed bytes:
// scale j's low 4 bits are the low nibble of byte j (j < 8) or the high
// nibble of byte j - 8 (j >= 8), its top 2 bits those at bit 2 * (j / 4) of
// byte 8 + j % 4.
inline void unpack_scales_q3_k(const uint8_t packed[12], int8_t out[16]) {
  for (int j = 0; j < 16; ++j) {
    const int lo = j < 8 ? packed[j] & 0xF : packed[j - 8] >> 4;
    const int hi = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
    out[j] = static_cast<int8_t>((lo | (hi << 4)) - 32);
  }
}

static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockIq4Nl) == 18);
static_assert(sizeof(BlockMxfp4) == 17);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockIq4Xs) == 136);
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
