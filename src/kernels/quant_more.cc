// Reference (scalar) code of the formats added after the first seven: Q4_1
// (+ its activation partner Q8_1), Q5_0, IQ4_NL, MXFP4, Q5_K, Q3_K, Q2_K and
// IQ4_XS. Dequantization and the dot products follow ggml's scalar
// ("generic") definitions operation by operation, as quant.cc does; the
// quantizers follow ggml's reference quantizers (quantize_row_*_ref, no
// importance matrix) closely enough for make-model and the kernel tests,
// but unlike quant.cc's they are not checked bit for bit against
// llama-quantize.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "format/ggml_type.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_internal.h"

namespace zl::quant_detail {
namespace {

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// ============================================================================
// Dequantization
// ============================================================================

void dequantize_q4_1(const BlockQ4_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(x[i].d), m = fp16_to_fp32(x[i].m);
    for (int j = 0; j < kQk32 / 2; ++j) {
      y[i * kQk32 + j] = (x[i].qs[j] & 0x0F) * d + m;
      y[i * kQk32 + j + kQk32 / 2] = (x[i].qs[j] >> 4) * d + m;
    }
  }
}

void dequantize_q8_1(const BlockQ8_1* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < kQk32; ++j) y[i * kQk32 + j] = x[i].qs[j] * d;
  }
}

// Q5_0's value j as 0..31.
int q5_0_value(const BlockQ5_0& b, int j) {
  const uint32_t qh = load_u32(b.qh);
  const int lo = j < 16 ? b.qs[j] & 0x0F : b.qs[j - 16] >> 4;
  return lo | static_cast<int>(((qh >> j) & 1) << 4);
}

void dequantize_q5_0(const BlockQ5_0* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    for (int j = 0; j < kQk32; ++j) y[i * kQk32 + j] = (q5_0_value(x[i], j) - 16) * d;
  }
}

// IQ4_NL and MXFP4: a 16-entry grid indexed by Q4_0-style nibbles.
template <class Block>
void dequantize_grid4(const Block* x, float* y, int64_t nb, const int8_t* grid, float (*scale)(const Block&)) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = scale(x[i]);
    for (int j = 0; j < kQk32 / 2; ++j) {
      y[i * kQk32 + j] = d * grid[x[i].qs[j] & 0x0F];
      y[i * kQk32 + j + kQk32 / 2] = d * grid[x[i].qs[j] >> 4];
    }
  }
}

float iq4_nl_scale(const BlockIq4Nl& b) { return fp16_to_fp32(b.d); }
float mxfp4_scale(const BlockMxfp4& b) { return e8m0_to_fp32_half(b.e); }

// Q5_K's 5-bit value p (0..255) of a super-block.
int q5_k_value(const BlockQ5_K& b, int p) {
  const int c = p / 64, l = p % 32, hi = (p % 64) >= 32;
  const uint8_t byte = b.qs[32 * c + l];
  const int lo = hi ? byte >> 4 : byte & 0xF;
  return lo | (((b.qh[l] >> (2 * c + hi)) & 1) << 4);
}

void dequantize_q5_k(const BlockQ5_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQkK) {
    const float d = fp16_to_fp32(x[i].d), dmin = fp16_to_fp32(x[i].dmin);
    for (int s = 0; s < 8; ++s) {
      uint8_t sc, m;
      unpack_scale_min_k4(s, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      for (int l = 0; l < 32; ++l) y[32 * s + l] = d1 * q5_k_value(x[i], 32 * s + l) - m1;
    }
  }
}

void dequantize_q3_k(const BlockQ3_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQkK) {
    const float d_all = fp16_to_fp32(x[i].d);
    int8_t sc[16];
    unpack_scales_q3_k(x[i].scales, sc);
    for (int p = 0; p < kQkK; ++p) {
      const int h = p / 128, g = (p % 128) / 32, l = p % 32;
      const float dl = d_all * sc[8 * h + 2 * g + l / 16];
      y[p] = dl * (q3_k_value(x[i], p) - 4);
    }
  }
}

int q2_k_value(const BlockQ2_K& b, int p) {
  const int h = p / 128, g = (p % 128) / 32, l = p % 32;
  return (b.qs[32 * h + l] >> (2 * g)) & 3;
}

int q2_k_scale_index(int p) { return 8 * (p / 128) + 2 * ((p % 128) / 32) + (p % 32) / 16; }

void dequantize_q2_k(const BlockQ2_K* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQkK) {
    const float d = fp16_to_fp32(x[i].d), dmin = fp16_to_fp32(x[i].dmin);
    for (int p = 0; p < kQkK; ++p) {
      const uint8_t sc = x[i].scales[q2_k_scale_index(p)];
      const float dl = d * (sc & 0xF), ml = dmin * (sc >> 4);
      y[p] = dl * q2_k_value(x[i], p) - ml;
    }
  }
}

int iq4_xs_scale(const BlockIq4Xs& b, int s) {
  return ((b.scales_l[s / 2] >> (4 * (s % 2))) & 0xF) | (((b.scales_h >> (2 * s)) & 3) << 4);
}

void dequantize_iq4_xs(const BlockIq4Xs* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(x[i].d);
    for (int s = 0; s < 8; ++s, y += 32) {
      const float dl = d * (iq4_xs_scale(x[i], s) - 32);
      const uint8_t* qs = x[i].qs + 16 * s;
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * kIq4nlValues[qs[j] & 0xF];
        y[j + 16] = dl * kIq4nlValues[qs[j] >> 4];
      }
    }
  }
}

// ============================================================================
// Quantization
// ============================================================================

void quantize_q4_1(const float* x, BlockQ4_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQk32) {
    float min = x[0], max = x[0];
    for (int j = 1; j < kQk32; ++j) {
      min = std::min(min, x[j]);
      max = std::max(max, x[j]);
    }
    const float d = (max - min) / 15;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    y[i].m = fp32_to_fp16(min);
    for (int j = 0; j < kQk32 / 2; ++j) {
      const int q0 = std::min(15, static_cast<int>(static_cast<int8_t>((x[j] - min) * id + 0.5f)));
      const int q1 = std::min(15, static_cast<int>(static_cast<int8_t>((x[j + 16] - min) * id + 0.5f)));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void quantize_q8_1(const float* x, BlockQ8_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQk32) {
    int sum = 0;
    const float d = quantize_q8_block<kQk32>(x, y[i].qs, &sum);
    y[i].d = fp32_to_fp16(d);
    y[i].s = fp32_to_fp16(sum * d);
  }
}

void quantize_q5_0(const float* x, BlockQ5_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQk32) {
    const float d = signed_max(x, kQk32) / -16;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[i].d = fp32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < kQk32 / 2; ++j) {
      const int q0 = std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f)));
      const int q1 = std::min(31, static_cast<int>(static_cast<int8_t>(x[j + 16] * id + 16.5f)));
      y[i].qs[j] = static_cast<uint8_t>((q0 & 0xF) | ((q1 & 0xF) << 4));
      qh |= static_cast<uint32_t>((q0 & 0x10) >> 4) << j;
      qh |= static_cast<uint32_t>((q1 & 0x10) >> 4) << (j + 16);
    }
    std::memcpy(y[i].qh, &qh, 4);
  }
}

// Index of the grid value (ascending, 16 entries) nearest to x.
int best_index(const int8_t* grid, float x) {
  if (x <= grid[0]) return 0;
  if (x >= grid[15]) return 15;
  int lo = 0, hi = 15;
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (x < grid[mid]) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return x - grid[hi - 1] < grid[hi] - x ? hi - 1 : hi;
}

// Fits x ≈ d * kIq4nlValues[L] for a block of 32 (weights x^2), trying
// 2*ntry+1 scales around max/-127 (ggml: quantize_row_iq4_nl_impl's block
// search). Returns d.
float fit_iq4(const float* x, uint8_t* L, int ntry) {
  const float max = signed_max(x, 32);
  if (std::fabs(max) < 1e-15f) {
    std::fill(L, L + 32, 0);
    return 0.0f;
  }
  auto fit = [&](float id, float* sumqx, float* sumq2, bool store) {
    *sumqx = *sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
      const int l = best_index(kIq4nlValues, id * x[j]);
      if (store) L[j] = static_cast<uint8_t>(l);
      const float q = kIq4nlValues[l], w = x[j] * x[j];
      *sumqx += w * q * x[j];
      *sumq2 += w * q * q;
    }
  };
  float sumqx, sumq2;
  fit(1 / (-max / kIq4nlValues[0]), &sumqx, &sumq2, true);
  float d = sumqx / sumq2, best = d * sumqx;
  for (int itry = -ntry; itry <= ntry; ++itry) {
    fit((itry + kIq4nlValues[0]) / max, &sumqx, &sumq2, false);
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

void requantize_iq4(const float* x, float d, uint8_t* L) {
  const float id = d != 0.0f ? 1 / d : 0.0f;
  for (int j = 0; j < 32; ++j) L[j] = static_cast<uint8_t>(best_index(kIq4nlValues, id * x[j]));
}

void pack_nibbles32(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(L[j] | (L[j + 16] << 4));
}

void quantize_iq4_nl(const float* x, BlockIq4Nl* y, int64_t nb) {
  uint8_t L[32];
  for (int64_t i = 0; i < nb; ++i, x += kQk32) {
    const float d = fit_iq4(x, L, 7);
    y[i].d = fp32_to_fp16(d);
    requantize_iq4(x, d, L);
    pack_nibbles32(L, y[i].qs);
  }
}

void quantize_mxfp4(const float* x, BlockMxfp4* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQk32) {
    float amax = 0.0f;
    for (int j = 0; j < kQk32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const uint8_t e = amax > 0.0f ? static_cast<uint8_t>(std::floor(std::log2(amax)) - 2 + 127) : 0;
    const float d = e8m0_to_fp32_half(e);
    y[i].e = e;
    uint8_t L[32];
    for (int j = 0; j < kQk32; ++j) {
      int best = 0;
      float best_err = std::fabs(kMxfp4Values[0] * d - x[j]);
      for (int k = 1; k < 16; ++k) {
        const float err = std::fabs(kMxfp4Values[k] * d - x[j]);
        if (err < best_err) {
          best = k;
          best_err = err;
        }
      }
      L[j] = static_cast<uint8_t>(best);
    }
    pack_nibbles32(L, y[i].qs);
  }
}

void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t nb) {
  uint8_t L[kQkK], aux[32];
  float weights[32], mins[8], scales[8];
  for (int64_t i = 0; i < nb; ++i, x += kQkK) {
    float max_scale = 0, max_min = 0;
    for (int s = 0; s < 8; ++s) {
      const float* xs = x + 32 * s;
      float sum_x2 = 0;
      for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
      const float av_x = std::sqrt(sum_x2 / 32);
      for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
      scales[s] = fit_scale_min(32, 31, xs, weights, L + 32 * s, &mins[s], aux, -0.5f, 0.1f, 15, false);
      max_scale = std::max(max_scale, scales[s]);
      max_min = std::max(max_min, mins[s]);
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    uint8_t ls[8], lm[8];
    for (int s = 0; s < 8; ++s) {
      ls[s] = static_cast<uint8_t>(std::min(63, nearest_int(inv_scale * scales[s])));
      lm[s] = static_cast<uint8_t>(std::min(63, nearest_int(inv_min * mins[s])));
    }
    std::memset(y[i].scales, 0, 12);
    pack_scale_min_k4(ls, lm, y[i].scales);
    y[i].d = fp32_to_fp16(max_scale / 63.f);
    y[i].dmin = fp32_to_fp16(max_min / 63.f);
    for (int s = 0; s < 8; ++s) {
      uint8_t sc, m;
      unpack_scale_min_k4(s, y[i].scales, &sc, &m);
      const float d = fp16_to_fp32(y[i].d) * sc;
      if (d == 0.0f) continue;
      const float dm = fp16_to_fp32(y[i].dmin) * m;
      for (int l = 0; l < 32; ++l) {
        L[32 * s + l] = static_cast<uint8_t>(std::clamp(nearest_int((x[32 * s + l] + dm) / d), 0, 31));
      }
    }
    std::memset(y[i].qh, 0, sizeof(y[i].qh));
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        const int l1 = L[64 * c + l], l2 = L[64 * c + 32 + l];
        y[i].qh[l] |= static_cast<uint8_t>(((l1 >> 4) << (2 * c)) | ((l2 >> 4) << (2 * c + 1)));
        y[i].qs[32 * c + l] = static_cast<uint8_t>((l1 & 0xF) | ((l2 & 0xF) << 4));
      }
    }
  }
}

// x ≈ scale * (L - nmax), L - nmax in [-nmax, nmax - 1], weights x^2, then up
// to 5 rounds of coordinate descent on the quants (ggml: make_q3_quants with
// do_rmse). Returns the scale.
float fit_q3(int n, int nmax, const float* x, int8_t* L) {
  const float max = signed_max(x, n);
  if (std::fabs(max) < 1e-15f) {
    std::fill(L, L + n, 0);
    return 0.f;
  }
  const float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = std::clamp(nearest_int(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * L[i];
      if (slx > 0) {
        float sl2 = suml2 - w * L[i] * L[i];
        const int new_l = std::clamp(nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
        if (new_l != L[i]) {
          slx += w * x[i] * new_l;
          sl2 += w * new_l * new_l;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (n_changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

void quantize_q3_k(const float* x, BlockQ3_K* y, int64_t nb) {
  int8_t L[kQkK];
  float scales[16];
  for (int64_t i = 0; i < nb; ++i, x += kQkK) {
    for (int s = 0; s < 16; ++s) scales[s] = fit_q3(16, 4, x + 16 * s, L + 16 * s);
    const float max_scale = signed_max(scales, 16);
    std::memset(y[i].scales, 0, 12);
    if (max_scale != 0.0f) {
      const float iscale = -32.f / max_scale;
      for (int s = 0; s < 16; ++s) {
        const int l = std::clamp(nearest_int(iscale * scales[s]), -32, 31) + 32;
        if (s < 8) {
          y[i].scales[s] = static_cast<uint8_t>(l & 0xF);
        } else {
          y[i].scales[s - 8] |= static_cast<uint8_t>((l & 0xF) << 4);
        }
        y[i].scales[s % 4 + 8] |= static_cast<uint8_t>((l >> 4) << (2 * (s / 4)));
      }
      y[i].d = fp32_to_fp16(1 / iscale);
    } else {
      y[i].d = fp32_to_fp16(0.0f);
    }
    int8_t sc[16];
    unpack_scales_q3_k(y[i].scales, sc);
    for (int s = 0; s < 16; ++s) {
      const float d = fp16_to_fp32(y[i].d) * sc[s];
      if (d == 0.0f) continue;
      for (int l = 0; l < 16; ++l) {
        L[16 * s + l] = static_cast<int8_t>(std::clamp(nearest_int(x[16 * s + l] / d), -4, 3) + 4);
      }
    }
    std::memset(y[i].hmask, 0, sizeof(y[i].hmask));
    std::memset(y[i].qs, 0, sizeof(y[i].qs));
    for (int p = 0; p < kQkK; ++p) {
      const int h = p / 128, g = (p % 128) / 32, l = p % 32;
      const int q = L[p];
      if (q > 3) y[i].hmask[l] |= static_cast<uint8_t>(1 << (4 * h + g));
      y[i].qs[32 * h + l] |= static_cast<uint8_t>((q & 3) << (2 * g));
    }
  }
}

void quantize_q2_k(const float* x, BlockQ2_K* y, int64_t nb) {
  uint8_t L[kQkK], aux[16];
  float weights[16], mins[16], scales[16];
  for (int64_t i = 0; i < nb; ++i, x += kQkK) {
    float max_scale = 0, max_min = 0;
    for (int s = 0; s < 16; ++s) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * s + l]);
      scales[s] = fit_scale_min(16, 3, x + 16 * s, weights, L + 16 * s, &mins[s], aux, -0.5f, 0.1f, 15, true);
      max_scale = std::max(max_scale, scales[s]);
      max_min = std::max(max_min, mins[s]);
    }
    if (max_scale > 0) {
      const float iscale = 15 / max_scale;
      for (int s = 0; s < 16; ++s) y[i].scales[s] = static_cast<uint8_t>(nearest_int(iscale * scales[s]));
      y[i].d = fp32_to_fp16(max_scale / 15);
    } else {
      std::memset(y[i].scales, 0, 16);
      y[i].d = fp32_to_fp16(0.f);
    }
    if (max_min > 0) {
      const float iscale = 15 / max_min;
      for (int s = 0; s < 16; ++s) y[i].scales[s] |= static_cast<uint8_t>(nearest_int(iscale * mins[s]) << 4);
      y[i].dmin = fp32_to_fp16(max_min / 15);
    } else {
      y[i].dmin = fp32_to_fp16(0.f);
    }
    for (int s = 0; s < 16; ++s) {
      const float d = fp16_to_fp32(y[i].d) * (y[i].scales[s] & 0xF);
      if (d == 0.0f) continue;
      const float dm = fp16_to_fp32(y[i].dmin) * (y[i].scales[s] >> 4);
      for (int l = 0; l < 16; ++l) {
        L[16 * s + l] = static_cast<uint8_t>(std::clamp(nearest_int((x[16 * s + l] + dm) / d), 0, 3));
      }
    }
    std::memset(y[i].qs, 0, sizeof(y[i].qs));
    for (int p = 0; p < kQkK; ++p) {
      const int h = p / 128, g = (p % 128) / 32, l = p % 32;
      y[i].qs[32 * h + l] |= static_cast<uint8_t>(L[p] << (2 * g));
    }
  }
}

void quantize_iq4_xs(const float* x, BlockIq4Xs* y, int64_t nb) {
  uint8_t L[kQkK];
  float scales[8];
  for (int64_t i = 0; i < nb; ++i, x += kQkK) {
    for (int s = 0; s < 8; ++s) scales[s] = fit_iq4(x + 32 * s, L + 32 * s, 7);
    const float max_scale = signed_max(scales, 8);
    const float d = -max_scale / 32;
    y[i].d = fp32_to_fp16(d);
    const float id = d != 0.0f ? 1 / d : 0.f;
    uint16_t scales_h = 0;
    std::memset(y[i].scales_l, 0, sizeof(y[i].scales_l));
    for (int s = 0; s < 8; ++s) {
      const int l = std::clamp(nearest_int(id * scales[s]), -32, 31);
      requantize_iq4(x + 32 * s, d * l, L + 32 * s);
      const int u = l + 32;
      y[i].scales_l[s / 2] |= static_cast<uint8_t>((u & 0xF) << (4 * (s % 2)));
      scales_h |= static_cast<uint16_t>((u >> 4) << (2 * s));
      pack_nibbles32(L + 32 * s, y[i].qs + 16 * s);
    }
    y[i].scales_h = scales_h;
  }
}

// ============================================================================
// Dot products (ggml's *_generic scalar kernels)
// ============================================================================

float dot_q4_1_q8_1(const BlockQ4_1* x, const BlockQ8_1* y, int64_t nb) {
  float sumf = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int sumi0 = 0, sumi1 = 0;
    for (int j = 0; j < kQk32 / 2; ++j) {
      sumi0 += (x[i].qs[j] & 0x0F) * y[i].qs[j];
      sumi1 += (x[i].qs[j] >> 4) * y[i].qs[j + 16];
    }
    const int sumi = sumi0 + sumi1;
    sumf += (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d)) * sumi + fp16_to_fp32(x[i].m) * fp16_to_fp32(y[i].s);
  }
  return sumf;
}

float dot_q5_0_q8_0(const BlockQ5_0* x, const BlockQ8_0* y, int64_t nb) {
  float sumf = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int sumi0 = 0, sumi1 = 0;
    for (int j = 0; j < kQk32 / 2; ++j) {
      sumi0 += (q5_0_value(x[i], j) - 16) * y[i].qs[j];
      sumi1 += (q5_0_value(x[i], j + 16) - 16) * y[i].qs[j + 16];
    }
    sumf += (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d)) * (sumi0 + sumi1);
  }
  return sumf;
}

float dot_iq4_nl_q8_0(const BlockIq4Nl* x, const BlockQ8_0* y, int64_t nb) {
  float sumf = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int sumi1 = 0, sumi2 = 0;
    for (int j = 0; j < kQk32 / 2; ++j) {
      sumi1 += y[i].qs[j] * kIq4nlValues[x[i].qs[j] & 0xF];
      sumi2 += y[i].qs[j + 16] * kIq4nlValues[x[i].qs[j] >> 4];
    }
    sumf += (fp16_to_fp32(x[i].d) * fp16_to_fp32(y[i].d)) * (sumi1 + sumi2);
  }
  return sumf;
}

float dot_mxfp4_q8_0(const BlockMxfp4* x, const BlockQ8_0* y, int64_t nb) {
  float sumf = 0;
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_fp32(y[i].d) * e8m0_to_fp32_half(x[i].e);
    int sumi1 = 0, sumi2 = 0;
    for (int j = 0; j < kQk32 / 2; ++j) {
      sumi1 += y[i].qs[j] * kMxfp4Values[x[i].qs[j] & 0xF];
      sumi2 += y[i].qs[j + 16] * kMxfp4Values[x[i].qs[j] >> 4];
    }
    sumf += d * (sumi1 + sumi2);
  }
  return sumf;
}

float dot_q5_k_q8_k(const BlockQ5_K* x, const BlockQ8_K* y, int64_t nb) {
  LaneSums sums;
  float sumf = 0;
  for (int64_t i = 0; i < nb; ++i) {
    uint8_t sc[8], mn[8];
    for (int j = 0; j < 8; ++j) unpack_scale_min_k4(j, x[i].scales, &sc[j], &mn[j]);
    int32_t ints[8] = {};
    for (int p = 0; p < kQkK; ++p) ints[p % 8] += sc[p / 32] * (q5_k_value(x[i], p) * y[i].qs[p]);
    int summs = 0;
    for (int g = 0; g < 16; ++g) summs += y[i].bsums[g] * mn[g / 2];
    sums.add(fp16_to_fp32(x[i].d) * y[i].d, ints);
    sumf -= fp16_to_fp32(x[i].dmin) * y[i].d * summs;
  }
  return sums.finish(sumf);
}

float dot_q3_k_q8_k(const BlockQ3_K* x, const BlockQ8_K* y, int64_t nb) {
  LaneSums sums;
  for (int64_t i = 0; i < nb; ++i) {
    int8_t sc[16];
    unpack_scales_q3_k(x[i].scales, sc);
    int32_t ints[8] = {};
    for (int p = 0; p < kQkK; ++p) {
      const int h = p / 128, g = (p % 128) / 32, l = p % 32;
      ints[p % 8] += sc[8 * h + 2 * g + l / 16] * ((q3_k_value(x[i], p) - 4) * y[i].qs[p]);
    }
    sums.add(fp16_to_fp32(x[i].d) * y[i].d, ints);
  }
  return sums.finish(0.0f);
}

float dot_q2_k_q8_k(const BlockQ2_K* x, const BlockQ8_K* y, int64_t nb) {
  float sumf = 0;
  for (int64_t i = 0; i < nb; ++i) {
    int summs = 0;
    for (int s = 0; s < 16; ++s) summs += y[i].bsums[s] * (x[i].scales[s] >> 4);
    const float dall = y[i].d * fp16_to_fp32(x[i].d);
    const float dmin = y[i].d * fp16_to_fp32(x[i].dmin);
    int isum = 0;
    for (int s = 0; s < 16; ++s) {  // sub-block s: values 128h + 32g + 16(s&1) + l
      const int h = s / 8, g = (s % 8) / 2, off = 16 * (s & 1);
      int isuml = 0;
      for (int l = 0; l < 16; ++l) {
        const int p = 128 * h + 32 * g + off + l;
        isuml += y[i].qs[p] * q2_k_value(x[i], p);
      }
      isum += (x[i].scales[s] & 0xF) * isuml;
    }
    sumf += dall * isum - dmin * summs;
  }
  return sumf;
}

float dot_iq4_xs_q8_k(const BlockIq4Xs* x, const BlockQ8_K* y, int64_t nb) {
  float sumf = 0;
  for (int64_t i = 0; i < nb; ++i) {
    const float d4d8 = fp16_to_fp32(x[i].d) * y[i].d;
    for (int s = 0; s < 8; ++s) {
      const uint8_t* qs = x[i].qs + 16 * s;
      const int8_t* q8 = y[i].qs + 32 * s;
      int sumi1 = 0, sumi2 = 0;
      for (int j = 0; j < 16; ++j) {
        sumi1 += q8[j] * kIq4nlValues[qs[j] & 0xF];
        sumi2 += q8[j + 16] * kIq4nlValues[qs[j] >> 4];
      }
      sumf += d4d8 * (iq4_xs_scale(x[i], s) - 32) * (sumi1 + sumi2);
    }
  }
  return sumf;
}

}  // namespace

bool dequantize_more(int type, const void* src, float* dst, int64_t n) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kQ4_1: dequantize_q4_1(static_cast<const BlockQ4_1*>(src), dst, n / kQk32); return true;
    case GgmlType::kQ8_1: dequantize_q8_1(static_cast<const BlockQ8_1*>(src), dst, n / kQk32); return true;
    case GgmlType::kQ5_0: dequantize_q5_0(static_cast<const BlockQ5_0*>(src), dst, n / kQk32); return true;
    case GgmlType::kIQ4_NL:
      dequantize_grid4(static_cast<const BlockIq4Nl*>(src), dst, n / kQk32, kIq4nlValues, iq4_nl_scale);
      return true;
    case GgmlType::kMXFP4:
      dequantize_grid4(static_cast<const BlockMxfp4*>(src), dst, n / kQk32, kMxfp4Values, mxfp4_scale);
      return true;
    case GgmlType::kQ5_K: dequantize_q5_k(static_cast<const BlockQ5_K*>(src), dst, n / kQkK); return true;
    case GgmlType::kQ3_K: dequantize_q3_k(static_cast<const BlockQ3_K*>(src), dst, n / kQkK); return true;
    case GgmlType::kQ2_K: dequantize_q2_k(static_cast<const BlockQ2_K*>(src), dst, n / kQkK); return true;
    case GgmlType::kIQ4_XS: dequantize_iq4_xs(static_cast<const BlockIq4Xs*>(src), dst, n / kQkK); return true;
    default: return false;
  }
}

bool quantize_more(int type, const float* src, void* dst, int64_t n) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kQ4_1: quantize_q4_1(src, static_cast<BlockQ4_1*>(dst), n / kQk32); return true;
    case GgmlType::kQ8_1: quantize_q8_1(src, static_cast<BlockQ8_1*>(dst), n / kQk32); return true;
    case GgmlType::kQ5_0: quantize_q5_0(src, static_cast<BlockQ5_0*>(dst), n / kQk32); return true;
    case GgmlType::kIQ4_NL: quantize_iq4_nl(src, static_cast<BlockIq4Nl*>(dst), n / kQk32); return true;
    case GgmlType::kMXFP4: quantize_mxfp4(src, static_cast<BlockMxfp4*>(dst), n / kQk32); return true;
    case GgmlType::kQ5_K: quantize_q5_k(src, static_cast<BlockQ5_K*>(dst), n / kQkK); return true;
    case GgmlType::kQ3_K: quantize_q3_k(src, static_cast<BlockQ3_K*>(dst), n / kQkK); return true;
    case GgmlType::kQ2_K: quantize_q2_k(src, static_cast<BlockQ2_K*>(dst), n / kQkK); return true;
    case GgmlType::kIQ4_XS: quantize_iq4_xs(src, static_cast<BlockIq4Xs*>(dst), n / kQkK); return true;
    default: return false;
  }
}

bool vec_dot_more(int type, const void* w, const void* a, int64_t n, float* out) {
  const auto* q8_0 = static_cast<const BlockQ8_0*>(a);
  const auto* q8_k = static_cast<const BlockQ8_K*>(a);
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kQ4_1:
      *out = dot_q4_1_q8_1(static_cast<const BlockQ4_1*>(w), static_cast<const BlockQ8_1*>(a), n / kQk32);
      return true;
    case GgmlType::kQ5_0: *out = dot_q5_0_q8_0(static_cast<const BlockQ5_0*>(w), q8_0, n / kQk32); return true;
    case GgmlType::kIQ4_NL: *out = dot_iq4_nl_q8_0(static_cast<const BlockIq4Nl*>(w), q8_0, n / kQk32); return true;
    case GgmlType::kMXFP4: *out = dot_mxfp4_q8_0(static_cast<const BlockMxfp4*>(w), q8_0, n / kQk32); return true;
    case GgmlType::kQ5_K: *out = dot_q5_k_q8_k(static_cast<const BlockQ5_K*>(w), q8_k, n / kQkK); return true;
    case GgmlType::kQ3_K: *out = dot_q3_k_q8_k(static_cast<const BlockQ3_K*>(w), q8_k, n / kQkK); return true;
    case GgmlType::kQ2_K: *out = dot_q2_k_q8_k(static_cast<const BlockQ2_K*>(w), q8_k, n / kQkK); return true;
    case GgmlType::kIQ4_XS: *out = dot_iq4_xs_q8_k(static_cast<const BlockIq4Xs*>(w), q8_k, n / kQkK); return true;
    default: return false;
  }
}

}  // namespace zl::quant_detail
