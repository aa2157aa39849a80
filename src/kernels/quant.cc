// Reference quantization formats. Everything here follows ggml's scalar
// definitions operation by operation (same expression order, same float
// types), because the results are compared bit-for-bit with llama.cpp:
// reordering a float sum or folding a product changes the last bits.
// Build without -ffast-math and without FP contraction (ISO C++ mode, the
// project default, keeps -ffp-contract=off under GCC).
#include "kernels/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_internal.h"

namespace zl {
namespace quant_detail {

// Fits x ≈ scale*L + min with L in [0, nmax] and min <= 0, minimising the
// weighted squared error: start from the min/max grid, then try nstep+1
// rescaled grids, solving the 2x2 least-squares system for each and keeping
// the best. Returns scale; *neg_min = -min. `aux` is scratch of n bytes.
// use_mad: absolute instead of squared errors. (ggml: make_qkx2_quants.)
float fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float* neg_min, uint8_t* aux,
                    float rmin, float rdelta, int nstep, bool use_mad) {
  float min = x[0], max = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::fill(L, L + n, 0);
    *neg_min = -min;
    return 0.f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = static_cast<uint8_t>(std::clamp(l, 0, nmax));
    const float diff = scale * L[i] + min - x[i];
    best_error += w[i] * (use_mad ? std::fabs(diff) : diff * diff);
  }
  if (nstep < 1) {
    *neg_min = -min;
    return scale;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - min)), 0, nmax);
      aux[i] = static_cast<uint8_t>(l);
      sum_l += w[i] * l;
      sum_l2 += w[i] * l * l;
      sum_xl += w[i] * l * x[i];
    }
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (!(det > 0)) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0) {
      this_min = 0;
      this_scale = sum_xl / sum_l2;
    }
    float error = 0;
    for (int i = 0; i < n; ++i) {
      const float diff = this_scale * aux[i] + this_min - x[i];
      error += w[i] * (use_mad ? std::fabs(diff) : diff * diff);
    }
    if (error < best_error) {
      std::copy(aux, aux + n, L);
      best_error = error;
      scale = this_scale;
      min = this_min;
    }
  }
  *neg_min = -min;
  return scale;
}

}  // namespace quant_detail

using quant_detail::fit_scale_min;
using quant_detail::LaneSums;
using quant_detail::nearest_int;
using quant_detail::quantize_q8_block;
using quant_detail::signed_max;

namespace {

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

int64_t block_size_of(GgmlType type) {
  auto traits = ggml_type_traits(static_cast<uint32_t>(type));
  CHECK(traits.has_value()) << "unknown ggml type " << static_cast<uint32_t>(type);
  return traits->block_size;
}

void check_row(GgmlType type, int64_t n) {
  const int64_t bs = block_size_of(type);
  CHECK(n >= 0 && n % bs == 0) << ggml_type_name(type) << ": n=" << n
                               << " is not a multiple of the block size " << bs;
}

// ============================================================================
// Dequantization
// ============================================================================

void dequantize_q8_0(const BlockQ8_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < kQk32; ++j) y[i * kQk32 + j] = x[i].qs[j] * d;
  }
}

void dequantize_q4_0(const BlockQ4_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < kQk32 / 2; ++j) {
      const int lo = (x[i].qs[j] & 0x0F) - 8;
      const int hi = (x[i].qs[j] >> 4) - 8;
      y[i * kQk32 + j] = lo * d;
      y[i * kQk32 + j + kQk32 / 2] = hi * d;
    }
  }
}

void dequantize_q4_k(const BlockQ4_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* q = x[i].qs;
    const float d = fp16_to_fp32(x[i].d);
    const float dmin = fp16_to_fp32(x[i].dmin);
    for (int c = 0; c < 4; ++c) {  // 64 values: two sub-blocks sharing 32 bytes
      uint8_t sc, m;
      unpack_scale_min_k4(2 * c, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      unpack_scale_min_k4(2 * c + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
      q += 32;
    }
  }
}

void dequantize_q6_k(const BlockQ6_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    for (int half = 0; half < 2; ++half) {
      for (int l = 0; l < 32; ++l) {
        const int s = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l + 0] = d * sc[s + 0] * q1;
        y[l + 32] = d * sc[s + 2] * q2;
        y[l + 64] = d * sc[s + 4] * q3;
        y[l + 96] = d * sc[s + 6] * q4;
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}

void dequantize_q8_k(const BlockQ8_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    for (int j = 0; j < kQkK; ++j) y[i * kQkK + j] = x[i].d * x[i].qs[j];
  }
}

// ============================================================================
// Quantization: the simple formats
// ============================================================================

// d = amax/127, q = roundf(x/d) (ties away from zero).
void quantize_q8_0(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQk32) y[i].d = fp32_to_fp16(quantize_q8_block<kQk32>(x, y[i].qs));
}

// d = -max/8 where max is the signed value of largest magnitude, so that max
// maps to q = 0 exactly; q = min(15, trunc(x/d + 8.5)).
void quantize_q4_0(const float* x, BlockQ4_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQk32) {
    const float d = signed_max(x, kQk32) / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    for (int j = 0; j < kQk32 / 2; ++j) {
      const float x0 = x[j] * id;
      const float x1 = x[j + kQk32 / 2] * id;
      const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>(x0 + 8.5f)));
      const int q1 = std::min(15, static_cast<int>(static_cast<int8_t>(x1 + 8.5f)));
      y[i].qs[j] = static_cast<uint8_t>(static_cast<uint8_t>(q0) | (static_cast<uint8_t>(q1) << 4));
    }
  }
}

// d = -max/127 for the signed max-magnitude value (stored as 1/iscale in f32),
// q = min(127, nearest_int(x/d)).
void quantize_q8_k(const float* x, BlockQ8_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQkK) {
    const float max = signed_max(x, kQkK);
    if (max == 0.0f) {
      std::memset(&y[i], 0, sizeof(y[i]));
      continue;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < kQkK; ++j) {
      y[i].qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
    }
    for (int g = 0; g < kQkK / 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += y[i].qs[16 * g + l];
      y[i].bsums[g] = static_cast<int16_t>(sum);
    }
    y[i].d = 1 / iscale;
  }
}

// ============================================================================
// Quantization: K-quant fitting (ggml's reference quantizers, no imatrix)
// ============================================================================

// Fits x ≈ scale*(L - nmax) with L - nmax in [-nmax, nmax-1], weighting each
// value by x^2: tries 19 grids around nmax/max and keeps the one with the best
// least-squares scale. Returns the (signed) scale; L holds offset quants.
// (ggml: make_qx_quants with rmse_type = 1 and no importance weights.)
float fit_symmetric_scale(int n, int nmax, const float* x, int8_t* L) {
  const float max = signed_max(x, n);
  if (std::fabs(max) < 1e-15f) {
    std::fill(L, L + n, 0);
    return 0.f;
  }
  auto quant = [&](float iscale, int i) { return std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1); };
  float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = quant(iscale, i);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = quant(iscale, i);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(nmax + quant(iscale, i));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// Per sub-block of 32: fit (scale, min) with weights rms + |x|; quantize the
// 8 scales and 8 mins to 6 bits against their maxima; requantize the values
// with the rounded scales. (ggml: quantize_row_q4_K_ref.)
void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t nb) {
  uint8_t L[kQkK];
  uint8_t aux[32];
  float weights[32];
  float mins[kQkK / 32];
  float scales[kQkK / 32];
  for (int64_t i = 0; i < nb; ++i, x += kQkK) {
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < kQkK / 32; ++j) {
      const float* xs = x + 32 * j;
      float sum_x2 = 0;
      for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
      const float av_x = std::sqrt(sum_x2 / 32);
      for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
      scales[j] = fit_scale_min(32, 15, xs, weights, L + 32 * j, &mins[j], aux, -1.f, 0.1f, 20, false);
      max_scale = std::max(max_scale, scales[j]);
      max_min = std::max(max_min, mins[j]);
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    uint8_t ls[8], lm[8];
    for (int j = 0; j < kQkK / 32; ++j) {
      ls[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
      lm[j] = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
    }
    pack_scale_min_k4(ls, lm, y[i].scales);
    y[i].d = fp32_to_fp16(max_scale / 63.f);
    y[i].dmin = fp32_to_fp16(max_min / 63.f);

    for (int j = 0; j < kQkK / 32; ++j) {
      uint8_t sc, m;
      unpack_scale_min_k4(j, y[i].scales, &sc, &m);
      const float d = fp16_to_fp32(y[i].d) * sc;
      if (d == 0.0f) continue;  // keeps the fit's L, as ggml does
      const float dm = fp16_to_fp32(y[i].dmin) * m;
      for (int l = 0; l < 32; ++l) {
        L[32 * j + l] = static_cast<uint8_t>(std::clamp(nearest_int((x[32 * j + l] + dm) / d), 0, 15));
      }
    }
    uint8_t* q = y[i].qs;
    for (int c = 0; c < kQkK; c += 64, q += 32) {
      for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[c + l] | (L[c + l + 32] << 4));
    }
  }
}

// Per sub-block of 16: fit a signed scale (6-bit quants, nmax 32); quantize
// the 16 scales to int8 against the largest-magnitude one; requantize.
// (ggml: quantize_row_q6_K_ref.)
void quantize_q6_k(const float* x, BlockQ6_K* y, int64_t nb) {
  int8_t L[kQkK];
  float scales[kQkK / 16];
  for (int64_t i = 0; i < nb; ++i, x += kQkK) {
    float max_scale = 0, max_abs_scale = 0;
    for (int s = 0; s < kQkK / 16; ++s) {
      scales[s] = fit_symmetric_scale(16, 32, x + 16 * s, L + 16 * s);
      if (std::fabs(scales[s]) > max_abs_scale) {
        max_abs_scale = std::fabs(scales[s]);
        max_scale = scales[s];
      }
    }
    if (max_abs_scale < 1e-15f) {
      std::memset(&y[i], 0, sizeof(y[i]));
      continue;
    }
    const float iscale = -128.f / max_scale;
    y[i].d = fp32_to_fp16(1 / iscale);
    for (int s = 0; s < kQkK / 16; ++s) {
      y[i].scales[s] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[s])));
    }
    for (int s = 0; s < kQkK / 16; ++s) {
      const float d = fp16_to_fp32(y[i].d) * y[i].scales[s];
      if (d == 0.0f) continue;  // keeps the fit's L, as ggml does
      for (int l = 0; l < 16; ++l) {
        L[16 * s + l] = static_cast<int8_t>(std::clamp(nearest_int(x[16 * s + l] / d), -32, 31) + 32);
      }
    }
    uint8_t* ql = y[i].ql;
    uint8_t* qh = y[i].qh;
    for (int h = 0; h < kQkK; h += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const int q1 = L[h + l], q2 = L[h + l + 32], q3 = L[h + l + 64], q4 = L[h + l + 96];
        ql[l] = static_cast<uint8_t>((q1 & 0xF) | ((q3 & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((q2 & 0xF) | ((q4 & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
      }
    }
  }
}

// ============================================================================
// Dot products (ggml's *_generic scalar kernels)
// ============================================================================

float dot_f32(const float* x, const float* y, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * y[i]);
  return static_cast<float>(sum);
}

template <float (*kToF32)(uint16_t)>
float dot_half(const uint16_t* x, const uint16_t* y, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(kToF32(x[i]) * kToF32(y[i]));
  return static_cast<float>(sum);
}

float dot_q8_0_q8_0(const BlockQ8_0* x, const BlockQ8_0* y, int64_t nb) {
  float sumf = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQk32; ++j) sumi += x[i].qs[j] * y[i].qs[j];
    sumf += sumi * (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d));
  }
  return sumf;
}

float dot_q4_0_q8_0(const BlockQ4_0* x, const BlockQ8_0* y, int64_t nb) {
  float sumf = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int sumi0 = 0, sumi1 = 0;
    for (int j = 0; j < kQk32 / 2; ++j) {
      sumi0 += ((x[i].qs[j] & 0x0F) - 8) * y[i].qs[j];
      sumi1 += ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + kQk32 / 2];
    }
    const int sumi = sumi0 + sumi1;
    sumf += sumi * fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d);
  }
  return sumf;
}

float dot_q4_k_q8_k(const BlockQ4_K* x, const BlockQ8_K* y, int64_t nb) {
  LaneSums sums;
  float sumf = 0;
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t sc[8], mn[8];
    for (int j = 0; j < 8; ++j) unpack_scale_min_k4(j, x[i].scales, &sc[j], &mn[j]);
    int32_t lane_ints[8] = {};
    for (int p = 0; p < kQkK; ++p) {
      const uint8_t byte = x[i].qs[(p / 64) * 32 + p % 32];
      const int q = (p % 64) < 32 ? (byte & 0xF) : (byte >> 4);
      lane_ints[p % 8] += sc[p / 32] * (q * y[i].qs[p]);
    }
    int summs = 0;
    for (int g = 0; g < kQkK / 16; ++g) summs += y[i].bsums[g] * mn[g / 2];
    sums.add(fp16_to_fp32(x[i].d) * y[i].d, lane_ints);
    const float dmin = fp16_to_fp32(x[i].dmin) * y[i].d;
    sumf -= dmin * summs;
  }
  return sums.finish(sumf);
}

float dot_q6_k_q8_k(const BlockQ6_K* x, const BlockQ8_K* y, int64_t nb) {
  LaneSums sums;
  for (int64_t i = 0; i < nb; ++i) {
    int32_t lane_ints[8] = {};
    for (int p = 0; p < kQkK; ++p) {
      const int h = p / 128, g = (p % 128) / 32, l = p % 32;
      const int lo = (x[i].ql[64 * h + l + 32 * (g & 1)] >> (4 * (g >> 1))) & 0xF;
      const int hi = (x[i].qh[32 * h + l] >> (2 * g)) & 3;
      const int q = (lo | (hi << 4)) - 32;
      lane_ints[p % 8] += x[i].scales[p / 16] * (q * y[i].qs[p]);
    }
    sums.add(fp16_to_fp32(x[i].d) * y[i].d, lane_ints);
  }
  return sums.finish(0.0f);
}

}  // namespace

// ============================================================================
// Half-precision conversions
// ============================================================================

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1F;
  const uint32_t mant = h & 0x3FF;
  if (exp == 0x1F) return bits_float(sign | 0x7F800000 | (mant << 13));  // inf, nan
  if (exp != 0) return bits_float(sign | ((exp + 112) << 23) | (mant << 13));
  // Zero or subnormal: mant * 2^-24 is exact in float.
  const float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
  return sign ? -v : v;
}

// NaN keeps its sign and top payload bits and is made quiet (what x86's
// F16C conversion does; ggml's software fallback returns 0x7E00 instead).
uint16_t fp32_to_fp16(float f) {
  const uint32_t x = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  const uint32_t ax = x & 0x7FFFFFFF;
  if (ax > 0x7F800000) return static_cast<uint16_t>(sign | 0x7E00 | ((ax & 0x7FFFFF) >> 13));
  if (ax >= 0x477FF000) return sign | 0x7C00;  // >= 65520 rounds to inf
  auto round_shift = [](uint32_t v, int shift) {  // v >> shift, ties to even
    const uint32_t q = v >> shift;
    const uint32_t rem = v & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    return q + ((rem > half || (rem == half && (q & 1))) ? 1 : 0);
  };
  if (ax >= 0x38800000) {  // normal half: rebias exponent, round 23 -> 10 bits
    const uint32_t v = ax - (112u << 23);  // exponent rebased, mantissa kept
    return static_cast<uint16_t>(sign | round_shift(v, 13));  // carry may bump exponent
  }
  // Subnormal half (or zero): value / 2^-24 = mant24 >> (126 - exp).
  const int exp = static_cast<int>(ax >> 23);
  const int shift = 126 - exp;
  if (exp == 0 || shift > 24) return sign;  // below half of the smallest subnormal
  const uint32_t mant24 = (ax & 0x7FFFFF) | 0x800000;
  return static_cast<uint16_t>(sign | round_shift(mant24, shift));
}

float bf16_to_fp32(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

uint16_t fp32_to_bf16(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7FFFFFFF) > 0x7F800000) return static_cast<uint16_t>((u >> 16) | 64);  // quiet nan
  return static_cast<uint16_t>((u + (0x7FFF + ((u >> 16) & 1))) >> 16);
}

// ============================================================================
// Row dispatch
// ============================================================================

size_t row_size(GgmlType type, int64_t n) {
  check_row(type, n);
  auto traits = ggml_type_traits(static_cast<uint32_t>(type));
  return static_cast<size_t>(n / traits->block_size * traits->type_size);
}

void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n) {
  check_row(type, n);
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::kF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(h[i]);
      return;
    }
    case GgmlType::kBF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(h[i]);
      return;
    }
    case GgmlType::kQ8_0: return dequantize_q8_0(static_cast<const BlockQ8_0*>(src), dst, n / kQk32);
    case GgmlType::kQ4_0: return dequantize_q4_0(static_cast<const BlockQ4_0*>(src), dst, n / kQk32);
    case GgmlType::kQ4_K: return dequantize_q4_k(static_cast<const BlockQ4_K*>(src), dst, n / kQkK);
    case GgmlType::kQ6_K: return dequantize_q6_k(static_cast<const BlockQ6_K*>(src), dst, n / kQkK);
    case GgmlType::kQ8_K: return dequantize_q8_k(static_cast<const BlockQ8_K*>(src), dst, n / kQkK);
    default:
      if (quant_detail::dequantize_more(static_cast<int>(type), src, dst, n)) return;
      break;
  }
  CHECK(false) << "dequantize_row: unsupported type " << ggml_type_name(type);
}

void quantize_row(GgmlType type, const float* src, void* dst, int64_t n) {
  check_row(type, n);
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::kF16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_fp16(src[i]);
      return;
    }
    case GgmlType::kBF16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_bf16(src[i]);
      return;
    }
    case GgmlType::kQ8_0: return quantize_q8_0(src, static_cast<BlockQ8_0*>(dst), n / kQk32);
    case GgmlType::kQ4_0: return quantize_q4_0(src, static_cast<BlockQ4_0*>(dst), n / kQk32);
    case GgmlType::kQ4_K: return quantize_q4_k(src, static_cast<BlockQ4_K*>(dst), n / kQkK);
    case GgmlType::kQ6_K: return quantize_q6_k(src, static_cast<BlockQ6_K*>(dst), n / kQkK);
    case GgmlType::kQ8_K: return quantize_q8_k(src, static_cast<BlockQ8_K*>(dst), n / kQkK);
    default:
      if (quant_detail::quantize_more(static_cast<int>(type), src, dst, n)) return;
      break;
  }
  CHECK(false) << "quantize_row: unsupported type " << ggml_type_name(type);
}

GgmlType vec_dot_type(GgmlType weight_type) {
  switch (weight_type) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16: return weight_type;
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ5_0:
    case GgmlType::kIQ4_NL:
    case GgmlType::kMXFP4: return GgmlType::kQ8_0;
    case GgmlType::kQ4_1: return GgmlType::kQ8_1;
    case GgmlType::kQ4_K:
    case GgmlType::kQ6_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ3_K:
    case GgmlType::kQ2_K:
    case GgmlType::kIQ4_XS: return GgmlType::kQ8_K;
    default: break;
  }
  CHECK(false) << "vec_dot_type: unsupported weight type " << ggml_type_name(weight_type);
  return weight_type;
}

void quantize_activations(GgmlType weight_type, const float* x, std::vector<uint8_t>& out,
                          int64_t n) {
  const GgmlType act_type = vec_dot_type(weight_type);
  out.resize(row_size(act_type, n));
  quantize_row(act_type, x, out.data(), n);
}

float vec_dot(GgmlType weight_type, const void* w_row, const void* act, int64_t n) {
  check_row(weight_type, n);
  check_row(vec_dot_type(weight_type), n);
  switch (weight_type) {
    case GgmlType::kF32:
      return dot_f32(static_cast<const float*>(w_row), static_cast<const float*>(act), n);
    case GgmlType::kF16:
      return dot_half<fp16_to_fp32>(static_cast<const uint16_t*>(w_row),
                                    static_cast<const uint16_t*>(act), n);
    case GgmlType::kBF16:
      return dot_half<bf16_to_fp32>(static_cast<const uint16_t*>(w_row),
                                    static_cast<const uint16_t*>(act), n);
    case GgmlType::kQ8_0:
      return dot_q8_0_q8_0(static_cast<const BlockQ8_0*>(w_row), static_cast<const BlockQ8_0*>(act),
                           n / kQk32);
    case GgmlType::kQ4_0:
      return dot_q4_0_q8_0(static_cast<const BlockQ4_0*>(w_row), static_cast<const BlockQ8_0*>(act),
                           n / kQk32);
    case GgmlType::kQ4_K:
      return dot_q4_k_q8_k(static_cast<const BlockQ4_K*>(w_row), static_cast<const BlockQ8_K*>(act),
                           n / kQkK);
    case GgmlType::kQ6_K:
      return dot_q6_k_q8_k(static_cast<const BlockQ6_K*>(w_row), static_cast<const BlockQ8_K*>(act),
                           n / kQkK);
    default: {
      float out = 0.0f;
      if (quant_detail::vec_dot_more(static_cast<int>(weight_type), w_row, act, n, &out)) return out;
      break;
    }
  }
  CHECK(false) << "vec_dot: unsupported weight type " << ggml_type_name(weight_type);
  return 0.0f;
}

}  // namespace zl
