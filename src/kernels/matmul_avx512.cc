// AVX-512 VNNI kernels (compiled with -mavx512f -mavx512bw -mavx512vl
// -mavx512vnni; called only when CPUID reports them).
//
// Micro-kernel: 16 weight rows (one repacked group, matmul_internal.h) x NT
// tokens. Per 32-value block, each of the group's 8 weight vectors (16 rows
// x 4 bytes) is loaded — and for Q4_0 unpacked — once and used by vpdpbusd
// against 4-byte broadcasts of every token's activations. The 16 int32
// lanes are then the exact per-row block sums (plus the activation-side
// correction for the unsigned weight encoding), scaled by dw * da and
// accumulated in float. One weight read thus serves NT <= kTokenTile tokens.
// GCC 12 warns inside its own avx512fintrin.h (_mm512_undefined_*).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <utility>

#include "kernels/matmul_internal.h"
#include "kernels/simd_avx512.h"

namespace zl::kern {
namespace {

template <int NT, bool kQ4>
void group_tokens(const uint8_t* quants, const uint16_t* scales, int64_t nb, const Acts& a, int64_t t0,
                  float* y, int64_t n_out, int64_t row0, __mmask16 store_mask) {
  constexpr int64_t kGb = kQ4 ? kGroupBlockQ4_0 : kGroupBlockQ8_0;
  // Prefetch distances in blocks: 2 KiB ahead into L1, 12 KiB into L2.
  constexpr int64_t kNear = kQ4 ? 8 : 4, kFar = kQ4 ? 48 : 24;
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  const __m512i m4 = _mm512_set1_epi8(0x0F), m4h = _mm512_set1_epi8(static_cast<char>(0xF0));
  // Tiled activations: block b of the tile's token t at [b * NT + t].
  const int8_t* qa = a.qs + t0 * nb * 32;
  const float* da = a.d + t0 * nb;
  const int32_t* ca = a.corr + t0 * nb;
  for (int64_t b = 0; b < nb; ++b, quants += kGb, qa += NT * 32, da += NT, ca += NT) {
    // Software prefetch: near into L1, far into L2 (more misses in flight
    // than the L1 fill buffers allow; worth ~10% of decode bandwidth).
    for (int i = 0; i < kGb; i += 64) _mm_prefetch(reinterpret_cast<const char*>(quants + kNear * kGb + i), _MM_HINT_T0);
    for (int i = 0; i < kGb; i += 64) _mm_prefetch(reinterpret_cast<const char*>(quants + kFar * kGb + i), _MM_HINT_T1);
    // The scales are a second stream (32 bytes a block, a line every other
    // block): fetch them as far ahead.
    if ((b & 1) == 0) _mm_prefetch(reinterpret_cast<const char*>(scales + (b + kFar) * 16), _MM_HINT_T1);
    const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(scales + b * 16)));
    // Fully unrolled, the NT independent vpdpbusd chains interleaved (latency
    // 5, two per cycle) so that the accumulators stay in registers and the
    // scheduler never waits on one long chain. With few tokens each sum is
    // split in two chains (j < 4, j >= 4).
    constexpr int kSplit = NT <= 2 ? 2 : 1;
    __m512i s[NT * kSplit];
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
      s[t] = _mm512_set1_epi32(ca[t]);
      if constexpr (kSplit == 2) s[NT + t] = _mm512_setzero_si512();
    }
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      // Weight vector j, unpacked just before its NT uses (few registers live).
      __m512i w;
      if constexpr (kQ4) {
        const __m512i p = _mm512_load_si512(quants + 64 * (j & 3));
        // With the high nibbles in a chain of their own (kSplit), they are
        // used in place as 16 * q (one and, no shift) and the chain's sum is
        // divided by 16 once, exactly (every term is a multiple of 16).
        w = j < 4 ? _mm512_and_si512(p, m4)
            : kSplit == 2 ? _mm512_and_si512(p, m4h)
                          : _mm512_and_si512(_mm512_srli_epi16(p, 4), m4);
      } else {
        w = _mm512_load_si512(quants + 64 * j);
      }
#pragma GCC unroll 16
      for (int t = 0; t < NT; ++t) {
        const int k = kSplit == 2 && j >= 4 ? NT + t : t;
        s[k] = dpbusd_bcast(s[k], w, qa + 32 * t + 4 * j);
      }
    }
    if constexpr (kSplit == 2) {
      for (int t = 0; t < NT; ++t) s[t] = _mm512_add_epi32(s[t], kQ4 ? _mm512_srai_epi32(s[NT + t], 4) : s[NT + t]);
    }
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
      const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(da[t]));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t]), scale, acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) _mm512_mask_storeu_ps(y + (t0 + t) * n_out + row0, store_mask, acc[t]);
}

using GroupFn = void (*)(const uint8_t*, const uint16_t*, int64_t, const Acts&, int64_t, float*, int64_t, int64_t,
                        __mmask16);

// group_tokens<1..kTokenTile> by token count.
template <bool kQ4, int... Ns>
constexpr std::array<GroupFn, sizeof...(Ns)> group_table(std::integer_sequence<int, Ns...>) {
  return {group_tokens<Ns + 1, kQ4>...};
}

// Rows [r0, r1) in whole groups of kGroupRows, each group's tokens in tiles
// of up to kTile: fns[nt - 1] multiplies one group (nb blocks of gb bytes in
// w.quants(), and 16 f16 scales a block in w.scales() where the layout has
// them) by nt tokens starting at token t.
template <size_t kTile>
void rows_in_groups(const PackedMatrix& w, const Acts& a, float* y, int64_t r0, int64_t r1, int64_t nb, int64_t gb,
                    const std::array<GroupFn, kTile>& fns) {
  const int64_t n_out = w.n_out(), tile = static_cast<int64_t>(kTile);
  for (int64_t row0 = r0; row0 < r1; row0 += kGroupRows) {
    const int64_t g = row0 / kGroupRows;
    const int64_t n_rows = n_out - row0 < kGroupRows ? n_out - row0 : kGroupRows;
    const __mmask16 mask = static_cast<__mmask16>((1u << n_rows) - 1);
    const uint8_t* quants = w.quants() + g * nb * gb;
    const uint16_t* scales = w.scales() ? w.scales() + g * nb * kGroupRows : nullptr;
    for (int64_t t = 0; t < a.n_tokens; t += tile) {
      const int64_t nt = a.n_tokens - t < tile ? a.n_tokens - t : tile;
      fns[nt - 1](quants, scales, nb, a, t, y, n_out, row0, mask);
    }
  }
}

template <bool kQ4>
void rows_repacked(const PackedMatrix& w, const Acts& a, float* y, int64_t r0, int64_t r1) {
  static constexpr auto kFns = group_table<kQ4>(std::make_integer_sequence<int, kTokenTile>());
  rows_in_groups(w, a, y, r0, r1, w.n_in() / 32, kQ4 ? kGroupBlockQ4_0 : kGroupBlockQ8_0, kFns);
}

// ---- K-quants ----
//
// Per super-block, per token, the exact integer sums of ggml's dot products
// (quant.cc dot_q4_k_q8_k / dot_q6_k_q8_k): vpdpbusd gives each sub-block's
// sum of q * a in the 16 row lanes, vpmulld scales it by the row's sub-block
// scale, and vpdpwssd forms the (sub-block scale or min) x (activation block
// sum) term from the pair sums. Only the final float scaling is per token.

// Software prefetch of the stream `kAhead` super-blocks ahead into L2 and
// kNearBytes ahead into L1, spread over the super-block's compute: part
// `part` of `kParts` of the lines (a burst of dozens of prefetches at once
// would wait for fill buffers and stall the pipeline). Measured with
// kernel_bench: the L1 prefetch adds ~5% of the read bandwidth at one token,
// the spreading ~8%. kAhead 6 (13.5 KB ahead for Q4_K, 19.5 KB for Q6_K)
// instead of 2: in decode, where each thread streams one contiguous range,
// Q4_K ~1.8% and Q6_K ~0.3% less time a token (runs of 2, 4, 5 and 6
// alternated; 4 and 6 were the best, bench/README.md).
template <int kBytes, int kParts>
inline void prefetch_k(const uint8_t* w, int part) {
  constexpr int kAhead = 6, kNearBytes = 2048, kLines = kBytes / 64, kPer = (kLines + kParts - 1) / kParts;
  for (int i = part * kPer; i < (part + 1) * kPer && i < kLines; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(w + kAhead * kBytes + 64 * i), _MM_HINT_T1);
    _mm_prefetch(reinterpret_cast<const char*>(w + kNearBytes + 64 * i), _MM_HINT_T0);
  }
}

template <int NT>
void group_q4_k(const uint8_t* w, int64_t nbk, const Acts& a, int64_t t0, float* y, int64_t n_out, int64_t row0,
                __mmask16 store_mask) {
  constexpr int kSplit = NT <= 2 ? 2 : 1;
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  const __m512i m4 = _mm512_set1_epi8(0x0F), m4h = _mm512_set1_epi8(static_cast<char>(0xF0)),
                byte = _mm512_set1_epi32(0xFF);
  const __m512i k1 = _mm512_set1_epi32(0x3f3f3f3f), k2 = _mm512_set1_epi32(0x0f0f0f0f),
                k3 = _mm512_set1_epi32(0x03030303), pairs_mask = _mm512_set1_epi32(0x00FF00FF);
  const int8_t* qa = a.kqs + t0 * nbk * 256;
  const float* da = a.kd + t0 * nbk;
  const int32_t* pa = a.kpairs + t0 * nbk * 8;
  for (int64_t b = 0; b < nbk; ++b, w += kGroupBlockQ4_K, qa += NT * 256, da += NT, pa += NT * 8) {
    // 6-bit scales and mins of the 16 rows, ggml's kmask shuffle lane-wise:
    // sc[0..3], sc[4..7], mn[0..3], mn[4..7] as bytes of each lane.
    const __m512i u0 = _mm512_load_si512(w + 2048), u1 = _mm512_load_si512(w + 2112),
                  u2 = _mm512_load_si512(w + 2176);
    const __m512i sc_v[2] = {
        _mm512_and_si512(u0, k1),
        _mm512_or_si512(_mm512_and_si512(u2, k2), _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u0, 6), k3), 4))};
    const __m512i mn_lo = _mm512_and_si512(u1, k1);
    const __m512i mn_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u2, 4), k2),
                                          _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u1, 6), k3), 4));
    __m512i isum[NT];
    for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
#pragma GCC unroll 1
    for (int j = 0; j < 4; ++j) {
      const uint8_t* wj = w + 512 * j;
#pragma GCC unroll 2
      for (int hi = 0; hi < 2; ++hi) {
        const int s = 2 * j + hi;
        prefetch_k<kGroupBlockQ4_K, 8>(w, s);
        const __m512i sc = _mm512_and_si512(
            _mm512_srl_epi32(sc_v[j >> 1], _mm_cvtsi32_si128(8 * (s & 3))), byte);
        __m512i p[NT * kSplit];
        for (int t = 0; t < NT * kSplit; ++t) p[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) {
          const __m512i raw = _mm512_load_si512(wj + 64 * k);
          // High nibbles in place as 16 * q: the sum is divided by 16 below (exact).
          const __m512i wv = _mm512_and_si512(raw, hi ? m4h : m4);
#pragma GCC unroll 8
          for (int t = 0; t < NT; ++t) {
            const int c = kSplit == 2 && (k & 1) ? NT + t : t;
            p[c] = dpbusd_bcast(p[c], wv, qa + 256 * t + 32 * s + 4 * k);
          }
        }
#pragma GCC unroll 8
        for (int t = 0; t < NT; ++t) {
          __m512i ps = kSplit == 2 ? _mm512_add_epi32(p[t], p[NT + t]) : p[t];
          if (hi) ps = _mm512_srai_epi32(ps, 4);
          isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(ps, sc));
        }
      }
    }
    // Mins: (mn0, mn2), (mn1, mn3), (mn4, mn6), (mn5, mn7) as int16 pairs.
    const __m512i mp0 = _mm512_and_si512(mn_lo, pairs_mask), mp1 = _mm512_and_si512(_mm512_srli_epi32(mn_lo, 8), pairs_mask);
    const __m512i mp2 = _mm512_and_si512(mn_hi, pairs_mask), mp3 = _mm512_and_si512(_mm512_srli_epi32(mn_hi, 8), pairs_mask);
    const __m512i dm = _mm512_load_si512(w + 2240);
    const __m512 dw = _mm512_cvtph_ps(_mm512_castsi512_si256(dm));
    const __m512 dminw = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(dm, 1));
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
      const int32_t* pt = pa + 8 * t;
      __m512i mins = _mm512_dpwssd_epi32(_mm512_setzero_si512(), mp0, _mm512_set1_epi32(pt[0]));
      mins = _mm512_dpwssd_epi32(mins, mp1, _mm512_set1_epi32(pt[1]));
      mins = _mm512_dpwssd_epi32(mins, mp2, _mm512_set1_epi32(pt[2]));
      mins = _mm512_dpwssd_epi32(mins, mp3, _mm512_set1_epi32(pt[3]));
      const __m512 dat = _mm512_set1_ps(da[t]);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[t]), _mm512_mul_ps(dw, dat), acc[t]);
      acc[t] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mins), _mm512_mul_ps(dminw, dat), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) _mm512_mask_storeu_ps(y + (t0 + t) * n_out + row0, store_mask, acc[t]);
}

template <int NT>
void group_q6_k(const uint8_t* w, const uint16_t* scales, int64_t nbk, const Acts& a, int64_t t0, float* y,
                int64_t n_out, int64_t row0, __mmask16 store_mask) {
  constexpr int kSplit = NT <= 2 ? 2 : 1;
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30), m3f = _mm512_set1_epi8(0x3F);
  const int8_t* qa = a.kqs + t0 * nbk * 256;
  const float* da = a.kd + t0 * nbk;
  const int32_t* pa = a.kpairs + t0 * nbk * 8;
  for (int64_t b = 0; b < nbk; ++b, w += kGroupBlockQ6_K, scales += 16, qa += NT * 256, da += NT, pa += NT * 8) {
    _mm_prefetch(reinterpret_cast<const char*>(scales + 64), _MM_HINT_T1);
    __m512i isum[NT];
    for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
#pragma GCC unroll 1
    for (int h = 0; h < 2; ++h) {
      const uint8_t* wh = w + 64 * 24 * h;
      const __m512i sv[2] = {_mm512_load_si512(w + 3072 + 128 * h), _mm512_load_si512(w + 3072 + 128 * h + 64)};
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {  // values 128h + 32g + l, l = 4k + byte
        prefetch_k<kGroupBlockQ6_K, 8>(w, 4 * h + g);
#pragma GCC unroll 2
        for (int kk = 0; kk < 2; ++kk) {
          const int sb = 2 * g + kk;  // sub-block within the half: scale byte sb & 3 of vector sb >> 2
          const __m512i sc = _mm512_srai_epi32(_mm512_sll_epi32(sv[sb >> 2], _mm_cvtsi32_si128(24 - 8 * (sb & 3))), 24);
          __m512i p[NT * kSplit];
          for (int t = 0; t < NT * kSplit; ++t) p[t] = _mm512_setzero_si512();
#pragma GCC unroll 4
          for (int k = 4 * kk; k < 4 * kk + 4; ++k) {
            // Vectors A, B, C = 3k, 3k + 1, 3k + 2 (matmul_internal.h): groups 0
            // and 1 are A and B masked; 2 and 3 take C's nibbles and the high
            // bits in A's and B's top two.
            const uint8_t* v = wh + 64 * 3 * k;
            auto load = [&](int i) { return _mm512_load_si512(v + 64 * i); };
            __m512i wv;
            if (g < 2) {
              wv = _mm512_and_si512(load(g), m3f);
            } else {
              const __m512i lo = g == 2 ? _mm512_and_si512(load(2), m4) : _mm512_and_si512(_mm512_srli_epi16(load(2), 4), m4);
              wv = _mm512_ternarylogic_epi32(_mm512_srli_epi16(load(g - 2), 2), m30, lo, 0xEA);  // (hb & m30) | lo
            }
#pragma GCC unroll 8
            for (int t = 0; t < NT; ++t) {
              const int c = kSplit == 2 && (k & 1) ? NT + t : t;
              p[c] = dpbusd_bcast(p[c], wv, qa + 256 * t + 128 * h + 32 * g + 4 * k);
            }
          }
#pragma GCC unroll 8
          for (int t = 0; t < NT; ++t) {
            const __m512i ps = kSplit == 2 ? _mm512_add_epi32(p[t], p[NT + t]) : p[t];
            isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(ps, sc));
          }
        }
      }
    }
    // -32 * sum over sub-blocks of scale * (activation block sum): the scales
    // as int16 pairs (sc[4i], sc[4i + 2]) and (sc[4i + 1], sc[4i + 3]).
    __m512i sp[8];
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const __m512i v = _mm512_load_si512(w + 3072 + 64 * i);
      sp[2 * i] = _mm512_srai_epi16(_mm512_slli_epi16(v, 8), 8);
      sp[2 * i + 1] = _mm512_srai_epi16(v, 8);
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(scales)));
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
      const int32_t* pt = pa + 8 * t;
      __m512i corr = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) corr = _mm512_dpwssd_epi32(corr, sp[i], _mm512_set1_epi32(pt[i]));
      const __m512i total = _mm512_sub_epi32(isum[t], _mm512_slli_epi32(corr, 5));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(total), _mm512_mul_ps(dw, _mm512_set1_ps(da[t])), acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) _mm512_mask_storeu_ps(y + (t0 + t) * n_out + row0, store_mask, acc[t]);
}

template <int NT>
void group_q4_k_fn(const uint8_t* w, const uint16_t*, int64_t nbk, const Acts& a, int64_t t0, float* y, int64_t n_out,
                   int64_t row0, __mmask16 mask) {
  group_q4_k<NT>(w, nbk, a, t0, y, n_out, row0, mask);
}

template <bool kQ6, int... Ns>
constexpr std::array<GroupFn, sizeof...(Ns)> group_k_table(std::integer_sequence<int, Ns...>) {
  if constexpr (kQ6) {
    return {group_q6_k<Ns + 1>...};
  } else {
    return {group_q4_k_fn<Ns + 1>...};
  }
}

template <bool kQ6>
void rows_repacked_k(const PackedMatrix& w, const Acts& a, float* y, int64_t r0, int64_t r1) {
  static constexpr auto kFns = group_k_table<kQ6>(std::make_integer_sequence<int, kTokenTileK>());
  rows_in_groups(w, a, y, r0, r1, w.n_in() / 256, kQ6 ? kGroupBlockQ6_K : kGroupBlockQ4_K, kFns);
}

// roundf (ties away from zero), exactly: trunc, then step away when the
// fraction (exact in float) is at least one half.
inline __m512 round_away(__m512 v) {
  const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m512 frac = _mm512_sub_ps(v, t);
  const __mmask16 up = _mm512_cmp_ps_mask(_mm512_abs_ps(frac), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  const __m512 one = _mm512_or_ps(_mm512_set1_ps(1.0f), _mm512_and_ps(v, _mm512_set1_ps(-0.0f)));
  return _mm512_mask_add_ps(t, up, t, one);
}

}  // namespace

RowsKernel avx512_rows_kernel(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0: return rows_repacked<true>;
    case GgmlType::kQ8_0: return rows_repacked<false>;
    case GgmlType::kQ4_K: return rows_repacked_k<false>;
    case GgmlType::kQ6_K: return rows_repacked_k<true>;
    default: return avx512_more_rows_kernel(type);
  }
}

void avx512_quantize_q8_0(const float* x, int64_t nb, int64_t stride, int32_t corr_mul, int8_t* qs, float* d,
                          int32_t* corr) {
  for (int64_t blk = 0; blk < nb; ++blk) {
    const float* xb = x + 32 * blk;
    const int64_t o = blk * stride;
    const __m512 x0 = _mm512_loadu_ps(xb);
    const __m512 x1 = _mm512_loadu_ps(xb + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
    const float dd = amax / 127;
    const float id = dd != 0.0f ? 1.0f / dd : 0.0f;
    d[o] = _cvtsh_ss(_cvtss_sh(dd, _MM_FROUND_TO_NEAREST_INT));
    const __m512 vid = _mm512_set1_ps(id);
    const __m512i q0 = _mm512_cvttps_epi32(round_away(_mm512_mul_ps(x0, vid)));
    const __m512i q1 = _mm512_cvttps_epi32(round_away(_mm512_mul_ps(x1, vid)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 32 * o), _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 32 * o + 16), _mm512_cvtepi32_epi8(q1));
    corr[o] = corr_mul * _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
  }
}

void avx512_quantize_q8_k(GgmlType type, const float* x, int64_t nbk, int64_t stride, int8_t* qs, float* d,
                          int32_t* pairs) {
  const __m512 magic = _mm512_set1_ps(12582912.f);
  const __m512i mant = _mm512_set1_epi32(0x007fffff), bias = _mm512_set1_epi32(0x00400000),
                q_max = _mm512_set1_epi32(127);
  for (int64_t blk = 0; blk < nbk; ++blk) {
    const float* xb = x + 256 * blk;
    const int64_t o = blk * stride;
    int8_t* q = qs + 256 * o;
    int32_t* pr = pairs + 8 * o;
    // amax, and the first value of that magnitude (its sign sets d's).
    __m512 m = _mm512_setzero_ps();
    for (int k = 0; k < 16; ++k) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(xb + 16 * k)));
    const float amax = _mm512_reduce_max_ps(m);
    if (amax == 0.0f) {
      std::memset(q, 0, 256);
      d[o] = 0.0f;
      std::memset(pr, 0, 32);
      continue;
    }
    float max = 0.0f;
    for (int k = 0; k < 16; ++k) {
      const __mmask16 hit =
          _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(xb + 16 * k)), _mm512_set1_ps(amax), _CMP_EQ_OQ);
      if (hit) {
        max = xb[16 * k + __builtin_ctz(hit)];
        break;
      }
    }
    const float iscale = -127.f / max;
    const __m512 vs = _mm512_set1_ps(iscale);
    int32_t bs[16];
    for (int k = 0; k < 16; ++k) {
      // ggml's nearest_int: the rounded integer in the low mantissa bits.
      // The product is rounded on its own (the empty asm keeps GCC, whose
      // C++ default is -ffp-contract=fast, from fusing it into an FMA with
      // the add: an exact product just above x.5 would round the other way).
      __m512 prod = _mm512_mul_ps(vs, _mm512_loadu_ps(xb + 16 * k));
      __asm__("" : "+v"(prod));
      const __m512 f = _mm512_add_ps(prod, magic);
      __m512i v = _mm512_sub_epi32(_mm512_and_si512(_mm512_castps_si512(f), mant), bias);
      v = _mm512_min_epi32(v, q_max);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16 * k), _mm512_cvtepi32_epi8(v));
      bs[k] = _mm512_reduce_add_epi32(v);
    }
    d[o] = 1 / iscale;
    q8_k_pair_sums(type, bs, pr);
  }
}

// 16 independent vpdpbusd chains: latency 5 at up to two per cycle needs
// at least 10 in flight.
int64_t avx512_int8_peak(int64_t rounds) {
  __m512i acc[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_set1_epi32(i);
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  for (int64_t r = 0; r < rounds; ++r) {
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
  }
  __m512i s = acc[0];
  for (int i = 1; i < 16; ++i) s = _mm512_add_epi32(s, acc[i]);
  return _mm512_reduce_add_epi32(s);
}

uint64_t avx512_read_bytes(const uint8_t* p, size_t n) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < n; i += 256) {
    for (int k = 0; k < 256; k += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(p + i + 1024 + k), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(p + i + 6144 + k), _MM_HINT_T1);
    }
    a0 = _mm512_add_epi64(a0, _mm512_load_si512(p + i));
    a1 = _mm512_add_epi64(a1, _mm512_load_si512(p + i + 64));
    a2 = _mm512_add_epi64(a2, _mm512_load_si512(p + i + 128));
    a3 = _mm512_add_epi64(a3, _mm512_load_si512(p + i + 192));
  }
  return _mm512_reduce_add_epi64(_mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
}

double avx512_int8_peak_ops_per_round() { return 16 * 64 * 2; }

}  // namespace zl::kern
