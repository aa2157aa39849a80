// Quantization formats: conversions, hand-built blocks, reference quantizers
// against hand-computed values, round-trip error bounds, dot products against
// dequantize-then-dot, and (when shared/models is present) bit-exactness with
// the tensors llama-quantize wrote for the tiny-llama models.
#include "kernels/quant.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "kernels/quant_blocks.h"

namespace zl {
namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::vector<float> random_row(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> x(n);
  for (auto& v : x) v = dist(rng);
  return x;
}

std::vector<float> round_trip(GgmlType type, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> q(row_size(type, n));
  quantize_row(type, x.data(), q.data(), n);
  std::vector<float> y(n);
  dequantize_row(type, q.data(), y.data(), n);
  return y;
}

double relative_rmse(const std::vector<float>& x, const std::vector<float>& y) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    ref += double(x[i]) * x[i];
  }
  return std::sqrt(err / ref);
}

// ---------------------------------------------------------------- fp16 / bf16

TEST(Fp16, EdgeCases) {
  EXPECT_EQ(fp32_to_fp16(0.0f), 0x0000);
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3C00);
  EXPECT_EQ(fp32_to_fp16(-2.0f), 0xC000);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7BFF);                    // max half
  EXPECT_EQ(fp32_to_fp16(65519.996f), 0x7BFF);                  // just below the tie
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7C00);                    // tie to even -> inf
  EXPECT_EQ(fp32_to_fp16(1e10f), 0x7C00);
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(fp32_to_fp16(-std::numeric_limits<float>::infinity()), 0xFC00);
  const uint16_t nan = fp32_to_fp16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7C00, 0x7C00);
  EXPECT_NE(nan & 0x03FF, 0);
  EXPECT_EQ(fp32_to_fp16(-std::numeric_limits<float>::quiet_NaN()) & 0x8000, 0x8000);
  EXPECT_EQ(fp32_to_fp16(from_bits(0x7F800001)) & 0x7E00, 0x7E00);  // signaling -> quiet nan

  // Subnormals: units of 2^-24.
  const float u = std::ldexp(1.0f, -24);
  EXPECT_EQ(fp32_to_fp16(u), 0x0001);
  EXPECT_EQ(fp32_to_fp16(-u), 0x8001);
  EXPECT_EQ(fp32_to_fp16(0.5f * u), 0x0000);               // tie -> even (0)
  EXPECT_EQ(fp32_to_fp16(0.50001f * u), 0x0001);
  EXPECT_EQ(fp32_to_fp16(1.5f * u), 0x0002);               // tie -> even (2)
  EXPECT_EQ(fp32_to_fp16(2.5f * u), 0x0002);               // tie -> even (2)
  EXPECT_EQ(fp32_to_fp16(1023.0f * u), 0x03FF);            // largest subnormal
  EXPECT_EQ(fp32_to_fp16(1023.5f * u), 0x0400);            // tie rounds up into normal
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::denorm_min()), 0x0000);

  // Normal ties: halfway between 1 and 1+2^-10 goes to the even mantissa.
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  EXPECT_EQ(fp32_to_fp16(from_bits(bits(1.0f + std::ldexp(1.0f, -11)) + 1)), 0x3C01);
  EXPECT_EQ(fp32_to_fp16(2047.0f / 1024.0f + std::ldexp(1.0f, -11)), 0x4000);  // carry into exponent

  EXPECT_EQ(fp16_to_fp32(0x0001), u);
  EXPECT_EQ(fp16_to_fp32(0x03FF), 1023.0f * u);
  EXPECT_EQ(fp16_to_fp32(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(fp16_to_fp32(0x7BFF), 65504.0f);
  EXPECT_EQ(fp16_to_fp32(0x3555), 0.333251953125f);
  EXPECT_EQ(bits(fp16_to_fp32(0x8000)), 0x80000000u);
  EXPECT_EQ(fp16_to_fp32(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fp16_to_fp32(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7E00)));
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7C01)));
}

TEST(Fp16, AllHalvesRoundTrip) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    const uint16_t back = fp32_to_fp16(f);
    const bool is_nan = (h & 0x7C00) == 0x7C00 && (h & 0x03FF) != 0;
    if (!is_nan) {
      ASSERT_EQ(back, h) << "h=" << h;
    } else {
      ASSERT_TRUE(std::isnan(f)) << "h=" << h;
      ASSERT_EQ(back, h | 0x0200) << "h=" << h;  // payload kept, made quiet
    }
  }
}

// Every float rounds to the nearer of its two neighbouring halves, ties to
// the even mantissa: checked on random floats over every binade from below the
// smallest subnormal to the largest normal, a quarter of them exact ties.
TEST(Fp16, RandomFloatsRoundToNearestEven) {
  std::mt19937 rng(7);
  for (int it = 0; it < 400000; ++it) {
    const uint32_t sign = (rng() & 1) << 31;
    const uint32_t exp = static_cast<uint32_t>(127 - 27 + static_cast<int>(rng() % 43));  // 2^-27 .. 2^15
    uint32_t mant = rng() & 0x7FFFFF;
    if (it % 4 == 0) mant = (mant & ~0x1FFFu) | 0x1000;  // a tie for normal halves
    const float f = from_bits(sign | (exp << 23) | mant);
    if (std::fabs(f) >= 65504.0f) continue;
    const uint16_t h = fp32_to_fp16(f);
    const double got = fp16_to_fp32(h);
    const uint16_t mag = h & 0x7FFF;
    const double up = fp16_to_fp32(static_cast<uint16_t>((h & 0x8000) | (mag + 1)));
    const double down = mag ? fp16_to_fp32(static_cast<uint16_t>((h & 0x8000) | (mag - 1))) : -got;
    const double e = std::fabs(double(f) - got);
    ASSERT_LE(e, std::fabs(double(f) - up)) << std::hexfloat << f;
    ASSERT_LE(e, std::fabs(double(f) - down)) << std::hexfloat << f;
    if (e == std::fabs(double(f) - up) || (mag && e == std::fabs(double(f) - down))) {
      if (e != 0) {
        ASSERT_EQ(h & 1, 0) << std::hexfloat << f;
      }
    }
  }
}

TEST(Bf16, Conversions) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(fp32_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_bf16(from_bits(0x3F808000)), 0x3F80);  // tie, even below
  EXPECT_EQ(fp32_to_bf16(from_bits(0x3F818000)), 0x3F82);  // tie, odd below -> up
  EXPECT_EQ(fp32_to_bf16(from_bits(0x3F808001)), 0x3F81);
  EXPECT_EQ(fp32_to_bf16(from_bits(0x3F807FFF)), 0x3F80);
  EXPECT_EQ(fp32_to_bf16(from_bits(0x00000001)), 0x0000);  // subnormals are rounded, not flushed
  EXPECT_EQ(fp32_to_bf16(from_bits(0x00008000)), 0x0000);
  EXPECT_EQ(fp32_to_bf16(from_bits(0x00018000)), 0x0002);
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::infinity()), 0x7F80);
  EXPECT_EQ(fp32_to_bf16(-std::numeric_limits<float>::infinity()), 0xFF80);
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::max()), 0x7F80);  // rounds to inf
  EXPECT_EQ(fp32_to_bf16(from_bits(0x7FA00000)), 0x7FE0);  // nan: (h >> 16) | 64
  EXPECT_EQ(fp32_to_bf16(from_bits(0xFF800001)), 0xFFC0);
  EXPECT_EQ(bits(bf16_to_fp32(0x3F80)), 0x3F800000u);
  EXPECT_EQ(bits(bf16_to_fp32(0xC049)), 0xC0490000u);
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = bf16_to_fp32(static_cast<uint16_t>(h));
    if (!std::isnan(f)) {
      ASSERT_EQ(fp32_to_bf16(f), h);
    }
  }
}

// ------------------------------------------------------------ hand-built blocks

TEST(Dequantize, Q4_0HandBuilt) {
  BlockQ4_0 b{};
  b.d = fp32_to_fp16(0.5f);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[32];
  dequantize_row(GgmlType::kQ4_0, &b, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * (j - 8));
    EXPECT_EQ(y[j + 16], 0.5f * (15 - j - 8));
  }
}

TEST(Dequantize, Q8_0HandBuilt) {
  BlockQ8_0 b[2]{};
  b[0].d = fp32_to_fp16(0.25f);
  b[1].d = fp32_to_fp16(-3.0f);
  for (int j = 0; j < 32; ++j) {
    b[0].qs[j] = static_cast<int8_t>(j - 16);
    b[1].qs[j] = static_cast<int8_t>(j == 0 ? -128 : 127 - j);
  }
  float y[64];
  dequantize_row(GgmlType::kQ8_0, b, y, 64);
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(y[j], 0.25f * (j - 16));
    EXPECT_EQ(y[32 + j], -3.0f * b[1].qs[j]);
  }
}

TEST(Dequantize, Q4_KHandBuilt) {
  BlockQ4_K b{};
  b.d = fp32_to_fp16(1.0f);
  b.dmin = fp32_to_fp16(0.5f);
  uint8_t sc[8], mn[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = static_cast<uint8_t>(j + 1 + 7 * j);  // up to 57: uses the high bits
    mn[j] = static_cast<uint8_t>(63 - 5 * j);
  }
  pack_scale_min_k4(sc, mn, b.scales);
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>((i % 16) | (((i * 7) % 16) << 4));
  float y[256];
  dequantize_row(GgmlType::kQ4_K, &b, y, 256);
  for (int p = 0; p < 256; ++p) {
    const int sub = p / 32;
    const uint8_t byte = b.qs[(p / 64) * 32 + p % 32];
    const int q = (p % 64) < 32 ? (byte & 0xF) : (byte >> 4);
    EXPECT_EQ(y[p], 1.0f * sc[sub] * q - 0.5f * mn[sub]) << p;
  }
}

// Builds a Q6_K block from 256 6-bit quants, written from the layout comment
// in quant_blocks.h (independently of the quantizer's packing loop).
BlockQ6_K make_q6_k(const int q[256], const int8_t scales[16], float d) {
  BlockQ6_K b{};
  for (int p = 0; p < 256; ++p) {
    const int h = p / 128, g = (p % 128) / 32, l = p % 32;
    b.ql[64 * h + l + 32 * (g & 1)] |= static_cast<uint8_t>((q[p] & 0xF) << (4 * (g >> 1)));
    b.qh[32 * h + l] |= static_cast<uint8_t>((q[p] >> 4) << (2 * g));
  }
  std::memcpy(b.scales, scales, 16);
  b.d = fp32_to_fp16(d);
  return b;
}

TEST(Dequantize, Q6_KHandBuilt) {
  int q[256];
  int8_t scales[16];
  for (int p = 0; p < 256; ++p) q[p] = (p * 37 + 11) % 64;
  for (int s = 0; s < 16; ++s) scales[s] = static_cast<int8_t>(s * 17 - 128);
  const BlockQ6_K b = make_q6_k(q, scales, 0.125f);
  float y[256];
  dequantize_row(GgmlType::kQ6_K, &b, y, 256);
  for (int p = 0; p < 256; ++p) EXPECT_EQ(y[p], 0.125f * scales[p / 16] * (q[p] - 32)) << p;
}

TEST(Dequantize, Q8_KAndPlainTypes) {
  BlockQ8_K b{};
  b.d = 0.1f;
  for (int j = 0; j < 256; ++j) b.qs[j] = static_cast<int8_t>(j - 128);
  std::vector<float> y(256);
  dequantize_row(GgmlType::kQ8_K, &b, y.data(), 256);
  for (int j = 0; j < 256; ++j) EXPECT_EQ(y[j], 0.1f * (j - 128));

  const float f[3] = {1.5f, -2.25f, 1e-3f};
  uint16_t h[3], bf[3];
  float out[3];
  quantize_row(GgmlType::kF16, f, h, 3);
  dequantize_row(GgmlType::kF16, h, out, 3);
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[1], -2.25f);
  EXPECT_EQ(out[2], fp16_to_fp32(fp32_to_fp16(1e-3f)));
  quantize_row(GgmlType::kBF16, f, bf, 3);
  dequantize_row(GgmlType::kBF16, bf, out, 3);
  EXPECT_EQ(out[1], -2.25f);
  EXPECT_EQ(bf[2], fp32_to_bf16(1e-3f));
  float copy[3];
  quantize_row(GgmlType::kF32, f, copy, 3);
  dequantize_row(GgmlType::kF32, copy, out, 3);
  EXPECT_EQ(std::memcmp(out, f, sizeof(f)), 0);
}

TEST(Q4_K, ScalePackingRoundTripsEveryPair) {
  for (int pos = 0; pos < 8; ++pos) {
    for (int s = 0; s < 64; ++s) {
      for (int m = 0; m < 64; ++m) {
        uint8_t sc[8], mn[8];
        for (int j = 0; j < 8; ++j) {  // the other slots vary too
          sc[j] = static_cast<uint8_t>((s * 5 + j * 11 + m) % 64);
          mn[j] = static_cast<uint8_t>((m * 3 + j * 29 + s) % 64);
        }
        sc[pos] = static_cast<uint8_t>(s);
        mn[pos] = static_cast<uint8_t>(m);
        uint8_t packed[12] = {};
        pack_scale_min_k4(sc, mn, packed);
        for (int j = 0; j < 8; ++j) {
          uint8_t s2, m2;
          unpack_scale_min_k4(j, packed, &s2, &m2);
          ASSERT_EQ(s2, sc[j]);
          ASSERT_EQ(m2, mn[j]);
        }
      }
    }
  }
}

// ------------------------------------------------- reference quantizers, by hand

TEST(Quantize, Q8_0RoundsHalfAwayFromZero) {
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = (j % 2 ? -1.0f : 1.0f) * (j + 0.5f);  // ties
  x[31] = 127.0f;  // amax -> d = 1, id = 1
  BlockQ8_0 b;
  quantize_row(GgmlType::kQ8_0, x, &b, 32);
  EXPECT_EQ(b.d, 0x3C00);
  for (int j = 0; j < 31; ++j) EXPECT_EQ(b.qs[j], static_cast<int8_t>(std::roundf(x[j]))) << j;
  EXPECT_EQ(b.qs[2], 3);   // 2.5 -> 3
  EXPECT_EQ(b.qs[3], -4);  // -3.5 -> -4
  EXPECT_EQ(b.qs[31], 127);

  // General block: d = amax/127 in f32 (stored rounded to f16), q = roundf(x/d).
  const auto r = random_row(32, 3);
  quantize_row(GgmlType::kQ8_0, r.data(), &b, 32);
  float amax = 0;
  for (float v : r) amax = std::max(amax, std::fabs(v));
  const float d = amax / 127;
  EXPECT_EQ(b.d, fp32_to_fp16(d));
  for (int j = 0; j < 32; ++j) EXPECT_EQ(b.qs[j], static_cast<int8_t>(std::roundf(r[j] * (1.0f / d))));

  const float zeros[32] = {};
  quantize_row(GgmlType::kQ8_0, zeros, &b, 32);
  EXPECT_EQ(b.d, 0);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(b.qs[j], 0);
}

TEST(Quantize, Q4_0Truncates) {
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = 0.0f;
  x[0] = -8.0f;  // max magnitude, negative: d = 1, id = 1
  x[1] = 7.0f;
  x[2] = 7.6f;   // 16.1 -> 16 -> min(15)
  x[3] = 0.4f;   // 8.9 -> 8
  x[4] = -0.6f;  // 7.9 -> 7
  x[5] = 0.5f;   // 9.0 -> 9
  x[16] = -7.5f; // 1.0 -> 1
  x[17] = 3.49f; // 11.99 -> 11
  BlockQ4_0 b;
  quantize_row(GgmlType::kQ4_0, x, &b, 32);
  EXPECT_EQ(b.d, 0x3C00);
  auto q = [&](int j) { return j < 16 ? (b.qs[j] & 0xF) : (b.qs[j - 16] >> 4); };
  EXPECT_EQ(q(0), 0);
  EXPECT_EQ(q(1), 15);
  EXPECT_EQ(q(2), 15);
  EXPECT_EQ(q(3), 8);
  EXPECT_EQ(q(4), 7);
  EXPECT_EQ(q(5), 9);
  EXPECT_EQ(q(6), 8);
  EXPECT_EQ(q(16), 1);
  EXPECT_EQ(q(17), 11);

  // Positive max: d = -max/8 < 0, so the max lands on q = 0 and reads back exactly.
  for (int j = 0; j < 32; ++j) x[j] = 0.25f * (j % 7) - 0.5f;
  x[9] = 4.0f;
  quantize_row(GgmlType::kQ4_0, x, &b, 32);
  EXPECT_EQ(fp16_to_fp32(b.d), -0.5f);
  EXPECT_EQ(q(9), 0);
  float y[32];
  dequantize_row(GgmlType::kQ4_0, &b, y, 32);
  EXPECT_EQ(y[9], 4.0f);
}

TEST(Quantize, Q8_KNearestEvenAndBsums) {
  std::vector<float> x(256);
  for (int j = 0; j < 256; ++j) x[j] = 0.5f * (j % 64) - 16.0f;  // includes .5 ties
  x[100] = 127.0f;                                               // max: iscale = -1
  BlockQ8_K b;
  quantize_row(GgmlType::kQ8_K, x.data(), &b, 256);
  EXPECT_EQ(b.d, -1.0f);
  for (int j = 0; j < 256; ++j) {
    EXPECT_EQ(b.qs[j], static_cast<int8_t>(std::nearbyint(-x[j]))) << j;  // ties to even
  }
  EXPECT_EQ(b.qs[5], 14);  // x = -13.5: 13.5 -> 14 (even)
  EXPECT_EQ(b.qs[7], 12);  // x = -12.5: 12.5 -> 12 (even)
  for (int g = 0; g < 16; ++g) {
    int sum = 0;
    for (int l = 0; l < 16; ++l) sum += b.qs[16 * g + l];
    EXPECT_EQ(b.bsums[g], sum);
  }

  // Negative max: iscale = -127/max > 0, q = min(127, round(x * iscale)).
  x.assign(256, 0.0f);
  x[0] = -2.0f;
  x[1] = 1.0f;
  x[2] = -1.0f;  // -63.5 -> -64 (even)
  quantize_row(GgmlType::kQ8_K, x.data(), &b, 256);
  EXPECT_EQ(b.qs[0], -127);
  EXPECT_EQ(b.qs[1], 64);  // 63.5 -> 64 (even)
  EXPECT_EQ(b.qs[2], -64);
  EXPECT_EQ(b.d, 1 / (-127.f / -2.0f));

  x.assign(256, 0.0f);
  quantize_row(GgmlType::kQ8_K, x.data(), &b, 256);
  EXPECT_EQ(b.d, 0.0f);
  for (int j = 0; j < 256; ++j) EXPECT_EQ(b.qs[j], 0);
  for (int g = 0; g < 16; ++g) EXPECT_EQ(b.bsums[g], 0);
}

TEST(Quantize, ZeroRowsStayZero) {
  for (GgmlType t : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kQ4_1,
                     GgmlType::kQ5_0, GgmlType::kIQ4_NL, GgmlType::kMXFP4, GgmlType::kQ5_K, GgmlType::kQ3_K,
                     GgmlType::kQ2_K, GgmlType::kIQ4_XS, GgmlType::kQ8_1}) {
    const std::vector<float> x(512, 0.0f);
    const auto y = round_trip(t, x);
    for (float v : y) ASSERT_EQ(v, 0.0f) << ggml_type_name(t);
  }
}

// ------------------------------------------------------- round-trip error bounds

struct ErrorBound {
  GgmlType type;
  double max_rel_rmse;
};

TEST(Quantize, RoundTripErrorIsSmall) {
  const ErrorBound bounds[] = {
      {GgmlType::kF32, 0.0},      {GgmlType::kF16, 1e-3},    {GgmlType::kBF16, 5e-3},
      {GgmlType::kQ8_0, 0.01},    {GgmlType::kQ4_0, 0.15},   {GgmlType::kQ8_K, 0.01},
      {GgmlType::kQ4_K, 0.12},    {GgmlType::kQ6_K, 0.03},   {GgmlType::kQ4_1, 0.12},
      {GgmlType::kQ8_1, 0.01},    {GgmlType::kQ5_0, 0.07},   {GgmlType::kIQ4_NL, 0.12},
      {GgmlType::kMXFP4, 0.25},   {GgmlType::kQ5_K, 0.06},   {GgmlType::kQ3_K, 0.25},
      {GgmlType::kQ2_K, 0.45},    {GgmlType::kIQ4_XS, 0.12},
  };
  for (const auto& b : bounds) {
    const int64_t bs = ggml_type_traits(static_cast<uint32_t>(b.type))->block_size;
    for (int64_t n : {32, 64, 256, 768, 4096}) {
      if (n % bs != 0) continue;
      for (float scale : {1.0f, 0.02f, 300.0f}) {
        const auto x = random_row(n, static_cast<uint32_t>(n) + 17, scale);
        const double e = relative_rmse(x, round_trip(b.type, x));
        EXPECT_LE(e, b.max_rel_rmse) << ggml_type_name(b.type) << " n=" << n << " scale=" << scale;
      }
    }
  }
}

// Values that need a negative offset (all positive) exercise Q4_K's mins.
TEST(Quantize, Q4_KFitsShiftedRows) {
  auto x = random_row(1024, 5);
  for (auto& v : x) v = std::fabs(v) + 3.0f;
  EXPECT_LE(relative_rmse(x, round_trip(GgmlType::kQ4_K, x)), 0.03);
  for (auto& v : x) v = -v;
  EXPECT_LE(relative_rmse(x, round_trip(GgmlType::kQ4_K, x)), 0.03);
  EXPECT_LE(relative_rmse(x, round_trip(GgmlType::kQ6_K, x)), 0.03);
}

// ------------------------------------------------------------------ dot products

TEST(VecDot, PartnerTypes) {
  EXPECT_EQ(vec_dot_type(GgmlType::kF32), GgmlType::kF32);
  EXPECT_EQ(vec_dot_type(GgmlType::kF16), GgmlType::kF16);
  EXPECT_EQ(vec_dot_type(GgmlType::kBF16), GgmlType::kBF16);
  EXPECT_EQ(vec_dot_type(GgmlType::kQ8_0), GgmlType::kQ8_0);
  EXPECT_EQ(vec_dot_type(GgmlType::kQ4_0), GgmlType::kQ8_0);
  EXPECT_EQ(vec_dot_type(GgmlType::kQ4_K), GgmlType::kQ8_K);
  EXPECT_EQ(vec_dot_type(GgmlType::kQ6_K), GgmlType::kQ8_K);
  EXPECT_EQ(vec_dot_type(GgmlType::kQ4_1), GgmlType::kQ8_1);
  for (GgmlType t : {GgmlType::kQ5_0, GgmlType::kIQ4_NL, GgmlType::kMXFP4}) EXPECT_EQ(vec_dot_type(t), GgmlType::kQ8_0);
  for (GgmlType t : {GgmlType::kQ5_K, GgmlType::kQ3_K, GgmlType::kQ2_K, GgmlType::kIQ4_XS}) {
    EXPECT_EQ(vec_dot_type(t), GgmlType::kQ8_K);
  }
}

TEST(VecDot, MatchesDequantizedDot) {
  for (GgmlType t : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0, GgmlType::kQ4_0,
                     GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kIQ4_NL,
                     GgmlType::kMXFP4, GgmlType::kQ5_K, GgmlType::kQ3_K, GgmlType::kQ2_K, GgmlType::kIQ4_XS}) {
    for (int64_t n : {256, 768, 4096}) {
      const auto w = random_row(n, 100 + static_cast<uint32_t>(n), 0.02f);
      const auto x = random_row(n, 200 + static_cast<uint32_t>(n), 1.5f);
      std::vector<uint8_t> wq(row_size(t, n));
      quantize_row(t, w.data(), wq.data(), n);
      std::vector<uint8_t> act;
      quantize_activations(t, x.data(), act, n);
      ASSERT_EQ(act.size(), row_size(vec_dot_type(t), n));

      std::vector<float> wd(n), ad(n);
      dequantize_row(t, wq.data(), wd.data(), n);
      dequantize_row(vec_dot_type(t), act.data(), ad.data(), n);
      double exact = 0, abs_sum = 0, unquantized = 0, unq_abs = 0;
      for (int64_t i = 0; i < n; ++i) {
        exact += double(wd[i]) * ad[i];
        abs_sum += std::fabs(double(wd[i]) * ad[i]);
        unquantized += double(w[i]) * x[i];
        unq_abs += std::fabs(double(w[i]) * x[i]);
      }
      if (t == GgmlType::kQ4_1) {
        // Q8_1 carries its block sum s = d * sum(q) rounded to f16 (d before
        // its own rounding), and Q4_1's min multiplies that s: not quite the
        // dequantized activations' sum.
        const auto* wb = reinterpret_cast<const BlockQ4_1*>(wq.data());
        const auto* ab = reinterpret_cast<const BlockQ8_1*>(act.data());
        exact = 0;
        for (int64_t b = 0; b < n / 32; ++b) {
          double sum_q = 0;
          for (int j = 0; j < 32; ++j) sum_q += double(wd[32 * b + j] - fp16_to_fp32(wb[b].m)) * ad[32 * b + j];
          exact += sum_q + double(fp16_to_fp32(wb[b].m)) * fp16_to_fp32(ab[b].s);
        }
      }
      const float got = vec_dot(t, wq.data(), act.data(), n);
      // Only float rounding separates the two: a few ulps of the magnitude sum.
      EXPECT_NEAR(got, exact, 1e-6 * abs_sum + 1e-7 * std::sqrt(double(n)) * abs_sum)
          << ggml_type_name(t) << " n=" << n;
      // And quantization keeps it near the float dot product.
      EXPECT_NEAR(got, unquantized, 0.1 * unq_abs) << ggml_type_name(t) << " n=" << n;
    }
  }
}

TEST(VecDot, Q4_0TimesQ8_0ByHand) {
  BlockQ4_0 w{};
  w.d = fp32_to_fp16(0.5f);
  for (int j = 0; j < 16; ++j) w.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  BlockQ8_0 a{};
  a.d = fp32_to_fp16(0.25f);
  int sumi = 0;
  for (int j = 0; j < 32; ++j) {
    a.qs[j] = static_cast<int8_t>(3 * j - 40);
    const int qw = j < 16 ? j - 8 : (15 - (j - 16)) - 8;
    sumi += qw * a.qs[j];
  }
  EXPECT_EQ(vec_dot(GgmlType::kQ4_0, &w, &a, 32), sumi * 0.5f * 0.25f);
  BlockQ8_0 w8{};
  w8.d = fp32_to_fp16(-2.0f);
  int sumi8 = 0;
  for (int j = 0; j < 32; ++j) {
    w8.qs[j] = static_cast<int8_t>(j * 4 - 64);
    sumi8 += w8.qs[j] * a.qs[j];
  }
  EXPECT_EQ(vec_dot(GgmlType::kQ8_0, &w8, &a, 32), sumi8 * (-2.0f * 0.25f));
}

// The Q4_K mins enter through bsums: a block whose quants are all 0 reads as
// -dmin*min per sub-block, so the dot product is -dmin*d_a*sum(bsum*min).
TEST(VecDot, Q4_KMinsUseBsums) {
  BlockQ4_K w{};
  w.d = fp32_to_fp16(1.0f);
  w.dmin = fp32_to_fp16(0.5f);
  uint8_t sc[8] = {1, 2, 3, 4, 5, 6, 7, 8}, mn[8] = {8, 7, 6, 5, 4, 3, 2, 1};
  pack_scale_min_k4(sc, mn, w.scales);
  std::vector<float> x(256);
  for (int j = 0; j < 256; ++j) x[j] = static_cast<float>((j * 13) % 21) - 10.0f;
  std::vector<uint8_t> act;
  quantize_activations(GgmlType::kQ4_K, x.data(), act, 256);
  const auto* a = reinterpret_cast<const BlockQ8_K*>(act.data());
  int summs = 0;
  for (int g = 0; g < 16; ++g) summs += a->bsums[g] * mn[g / 2];
  EXPECT_EQ(vec_dot(GgmlType::kQ4_K, &w, act.data(), 256), -(0.5f * a->d) * summs);
}

TEST(QuantDeath, RejectsPartialBlocks) {
  std::vector<float> x(64), y(64);
  std::vector<uint8_t> q(1024);
  EXPECT_DEATH(quantize_row(GgmlType::kQ8_0, x.data(), q.data(), 33), "block size");
  EXPECT_DEATH(dequantize_row(GgmlType::kQ4_K, q.data(), y.data(), 64), "block size");
  EXPECT_DEATH(quantize_row(GgmlType::kQ5_1, x.data(), q.data(), 32), "unsupported");
}

// --------------------------------------------- bit-exactness with llama-quantize
//
// shared/models/tiny-llama-*.gguf were made from tiny-llama-F32.gguf by
// llama-quantize without an importance matrix, i.e. by ggml's reference
// quantizers. Re-quantizing the F32 tensors must reproduce them byte for byte.

struct TinyGguf {
  struct Tensor {
    GgmlType type;
    int64_t n;
    size_t offset;
  };
  std::vector<uint8_t> bytes;
  std::map<std::string, Tensor> tensors;
  size_t data_start = 0;

  const uint8_t* data(const Tensor& t) const { return bytes.data() + data_start + t.offset; }
};

// Minimal GGUF walk (header, skip metadata, tensor infos); test-only, trusts the file.
bool load_tiny_gguf(const std::string& path, TinyGguf& g) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  g.bytes.assign(std::istreambuf_iterator<char>(f), {});
  size_t pos = 0;
  auto rd = [&](auto& v) {
    std::memcpy(&v, g.bytes.data() + pos, sizeof(v));
    pos += sizeof(v);
  };
  auto rd_str = [&]() {
    uint64_t len;
    rd(len);
    std::string s(reinterpret_cast<const char*>(g.bytes.data() + pos), len);
    pos += len;
    return s;
  };
  uint32_t magic, version;
  uint64_t n_tensors, n_kv;
  rd(magic);
  rd(version);
  rd(n_tensors);
  rd(n_kv);
  const size_t kScalarSize[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
  uint32_t alignment = 32;
  std::function<void(uint32_t)> skip = [&](uint32_t type) {
    if (type == 8) {
      rd_str();
    } else if (type == 9) {
      uint32_t et;
      uint64_t count;
      rd(et);
      rd(count);
      for (uint64_t i = 0; i < count; ++i) skip(et);
    } else {
      pos += kScalarSize[type];
    }
  };
  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string key = rd_str();
    uint32_t type;
    rd(type);
    if (key == "general.alignment" && type == 4) {
      rd(alignment);
    } else {
      skip(type);
    }
  }
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const std::string name = rd_str();
    uint32_t n_dims, type;
    int64_t n = 1;
    rd(n_dims);
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t ne;
      rd(ne);
      n *= static_cast<int64_t>(ne);
    }
    rd(type);
    uint64_t offset;
    rd(offset);
    g.tensors[name] = {static_cast<GgmlType>(type), n, offset};
  }
  g.data_start = (pos + alignment - 1) / alignment * alignment;
  return true;
}

TEST(BitExact, RequantizingF32ReproducesLlamaQuantize) {
  const std::string dir = std::string(ZL_SHARED_DIR) + "/models/";
  TinyGguf f32;
  if (!load_tiny_gguf(dir + "tiny-llama-F32.gguf", f32)) GTEST_SKIP() << "no shared models";
  std::map<std::string, int> n_by_type;
  for (const char* name : {"F16", "BF16", "Q8_0", "Q4_0", "Q4_K_M", "Q6_K", "Q4_1", "Q5_0", "IQ4_NL"}) {
    TinyGguf q;
    ASSERT_TRUE(load_tiny_gguf(dir + "tiny-llama-" + name + ".gguf", q)) << name;
    int n_checked = 0;
    for (const auto& [tname, t] : q.tensors) {
      if (t.type == GgmlType::kF32) continue;  // norms stay F32 everywhere
      ASSERT_TRUE(f32.tensors.count(tname)) << tname;
      const auto& src = f32.tensors.at(tname);
      ASSERT_EQ(src.type, GgmlType::kF32);
      ASSERT_EQ(src.n, t.n);
      const size_t size = row_size(t.type, t.n);
      std::vector<uint8_t> mine(size);
      quantize_row(t.type, reinterpret_cast<const float*>(f32.data(src)), mine.data(), t.n);
      const uint8_t* theirs = q.data(t);
      size_t n_diff = 0, first = size;
      for (size_t i = 0; i < size; ++i) {
        if (mine[i] != theirs[i]) {
          ++n_diff;
          first = std::min(first, i);
        }
      }
      EXPECT_EQ(n_diff, 0u) << name << " " << tname << " (" << ggml_type_name(t.type)
                            << "): " << n_diff << " of " << size << " bytes differ, first at "
                            << first;
      ++n_checked;
      ++n_by_type[ggml_type_name(t.type)];
    }
    EXPECT_GT(n_checked, 0) << name;
  }
  // Every quantized type must have been met in the files.
  for (const char* type : {"F16", "BF16", "Q8_0", "Q4_0", "Q4_K", "Q6_K", "Q4_1", "Q5_0", "IQ4_NL"}) {
    EXPECT_GT(n_by_type[type], 0) << type;
  }
  for (const auto& [type, count] : n_by_type) std::printf("  %s: %d tensors bit-exact\n", type.c_str(), count);
}

}  // namespace
}  // namespace zl
