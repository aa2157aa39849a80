// AVX2 kernels of the float formats (compiled with -mavx2 -mfma -mf16c;
// called only when CPUID reports them): register tiles of several rows x
// tokens (see rows_float); the Q8_0 activation row quantizer, the int8 peak and
// the bandwidth probe. The integer formats: matmul_avx2_repacked.cc.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/matmul_float.h"
#include "kernels/matmul_internal.h"
#include "kernels/quant.h"

namespace zl::kern {
namespace {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float f16(uint16_t h) { return _cvtsh_ss(h); }

// ---------------------------------------------------------------------------
// Float weights (F32/F16/BF16) against float activations (already rounded
// through the weight type), batch-invariant like the AVX-512 kernel
// (kernels/matmul_float.h): one 8-lane accumulator per (row, token), lane j
// summing w[i] * x[i] over i = j (mod 8) in order of i, one FMA per 8
// values, the last n_in % 8 values zero-padded into one more FMA, then
// hsum's fixed tree — in every tile shape. Tiles of up to 8 rows x 1 token
// or 4 rows x 3 tokens (x-major: T + 1 + R * T of the 16 ymm registers)
// convert each weight vector once for all the tile's tokens; more tokens
// take more passes over the rows, which stay in L1/L2 meanwhile. The first
// pass prefetches the next tile into L2 and the next lines into L1.

struct F32Row {
  using Elem = float;
  static __m256 load(const float* p) { return _mm256_loadu_ps(p); }
  static float one(const float* p) { return *p; }
};
struct F16Row {
  using Elem = uint16_t;
  static __m256 load(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static float one(const uint16_t* p) { return f16(*p); }
};
struct BF16Row {  // the value is the high half of a float
  using Elem = uint16_t;
  static __m256 load(const uint16_t* p) {
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
  }
  static float one(const uint16_t* p) { return bf16_to_fp32(*p); }
};

// v, kept in a register: GCC would otherwise fold a load used several times
// into each FMA as a memory operand, loading it again for every use.
inline __m256 pinned(__m256 v) {
  __asm__("" : "+x"(v));
  return v;
}

constexpr int64_t kFloatNearBytes = 512;   // L1 prefetch distance within a row
constexpr int64_t kFloatFarBytes = 16384;  // minimum L2 prefetch distance

// y[t * n_out + r] for R rows at w (n_in apart) x T tokens at x (n_in apart).
template <class W, int R, int T>
void float_tile(const typename W::Elem* w, const float* x, int64_t n_in, float* y, int64_t n_out, int64_t pf_far) {
  using E = typename W::Elem;
  constexpr int kChunksPerLine = 64 / (8 * static_cast<int>(sizeof(E)));
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  // 8 values: every token's in registers, then each row's against them.
  auto chunk = [&](auto load_w, auto load_x) __attribute__((always_inline)) {
    __m256 xv[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) xv[t] = pinned(load_x(t));
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 wv = pinned(load_w(r));
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[r][t] = _mm256_fmadd_ps(wv, xv[t], acc[r][t]);
    }
  };
  auto full = [&](int64_t i) __attribute__((always_inline)) {
    chunk([&](int r) { return W::load(w + r * n_in + i); }, [&](int t) { return _mm256_loadu_ps(x + t * n_in + i); });
  };
  const int64_t n_full = n_in / 8;
  int64_t c = 0;
  for (; pf_far != 0 && c + kChunksPerLine <= n_full; c += kChunksPerLine) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const char* p = reinterpret_cast<const char*>(w + r * n_in + c * 8);
      _mm_prefetch(p + kFloatNearBytes, _MM_HINT_T0);
      _mm_prefetch(p + pf_far, _MM_HINT_T1);
    }
#pragma GCC unroll 4
    for (int s = 0; s < kChunksPerLine; ++s) full((c + s) * 8);
  }
  for (; c < n_full; ++c) full(c * 8);
  if (const int64_t rest = n_in % 8; rest != 0) {
    alignas(32) float wt[R][8] = {}, xt[T][8] = {};
    for (int r = 0; r < R; ++r) {
      for (int64_t j = 0; j < rest; ++j) wt[r][j] = W::one(w + r * n_in + n_full * 8 + j);
    }
    for (int t = 0; t < T; ++t) {
      for (int64_t j = 0; j < rest; ++j) xt[t][j] = x[t * n_in + n_full * 8 + j];
    }
    chunk([&](int r) { return _mm256_load_ps(wt[r]); }, [&](int t) { return _mm256_load_ps(xt[t]); });
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) y[t * n_out + r] = hsum(acc[r][t]);
  }
}

// Rows per tile and token-tile width for n_tokens: 8 x 1, else 4 x up to 3
// of equal widths (5 tokens: 3 + 2).
struct FloatShape {
  int64_t rows, width;
};
FloatShape float_shape(int64_t n_tokens) {
  if (n_tokens == 1) return {.rows = 8, .width = 1};
  const int64_t n_tiles = (n_tokens + 2) / 3;
  return {.rows = 4, .width = (n_tokens + n_tiles - 1) / n_tiles};
}

template <class W>
void rows_float(const PackedMatrix& m, const Acts& a, float* y, int64_t r0, int64_t r1) {
  using E = typename W::Elem;
  using TileFn = void (*)(const E*, const float*, int64_t, float*, int64_t, int64_t);
  // [R - 1][T - 1]: 1-8 rows x 1 token, 1-4 rows x 1-3 tokens.
  static constexpr TileFn kOne[8] = {float_tile<W, 1, 1>, float_tile<W, 2, 1>, float_tile<W, 3, 1>, float_tile<W, 4, 1>,
                                     float_tile<W, 5, 1>, float_tile<W, 6, 1>, float_tile<W, 7, 1>, float_tile<W, 8, 1>};
  static constexpr TileFn kMany[4][3] = {{float_tile<W, 1, 1>, float_tile<W, 1, 2>, float_tile<W, 1, 3>},
                                         {float_tile<W, 2, 1>, float_tile<W, 2, 2>, float_tile<W, 2, 3>},
                                         {float_tile<W, 3, 1>, float_tile<W, 3, 2>, float_tile<W, 3, 3>},
                                         {float_tile<W, 4, 1>, float_tile<W, 4, 2>, float_tile<W, 4, 3>}};
  const int64_t n_in = m.n_in(), n_out = m.n_out(), n_tokens = a.n_tokens;
  const auto [rows_per_tile, width] = float_shape(n_tokens);
  const E* base = reinterpret_cast<const E*>(m.data());
  const int64_t far = std::max<int64_t>(rows_per_tile * n_in * static_cast<int64_t>(sizeof(E)), kFloatFarBytes);
  for (int64_t r = r0; r < r1; r += rows_per_tile) {
    const int64_t nr = std::min(rows_per_tile, r1 - r);
    for (int64_t t = 0; t < n_tokens; t += width) {
      const int64_t nt = std::min(width, n_tokens - t);
      const TileFn fn = rows_per_tile == 8 ? kOne[nr - 1] : kMany[nr - 1][nt - 1];
      fn(base + r * n_in, a.f + t * n_in, n_in, y + t * n_out + r, n_out, t == 0 ? far : 0);
    }
  }
}

// roundf (ties away from zero), exactly (see the avx512 twin).
inline __m256 round_away(__m256 v) {
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 frac = _mm256_sub_ps(v, t);
  const __m256 sign = _mm256_and_ps(v, _mm256_set1_ps(-0.0f));
  const __m256 absfrac = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), frac);
  const __m256 up = _mm256_cmp_ps(absfrac, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  return _mm256_add_ps(t, _mm256_and_ps(up, _mm256_or_ps(_mm256_set1_ps(1.0f), sign)));
}

}  // namespace

int64_t avx2_float_row_grain(int64_t n_tokens) { return float_shape(n_tokens).rows; }

RowsKernel avx2_rows_kernel(GgmlType type) {
  switch (type) {
    case GgmlType::kF32: return rows_float<F32Row>;
    case GgmlType::kF16: return rows_float<F16Row>;
    case GgmlType::kBF16: return rows_float<BF16Row>;
    default: return nullptr;
  }
}

void avx2_quantize_q8_0(const float* x, int64_t nb, int64_t stride, int32_t corr_mul, int8_t* qs, float* d,
                        int32_t* corr) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t o = b * stride;
    __m256 v[4];
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < 4; ++k) {
      v[k] = _mm256_loadu_ps(x + 32 * b + 8 * k);
      m = _mm256_max_ps(m, _mm256_and_ps(v[k], abs_mask));
    }
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    const float dd = amax / 127;
    const float id = dd != 0.0f ? 1.0f / dd : 0.0f;
    d[o] = _cvtsh_ss(_cvtss_sh(dd, _MM_FROUND_TO_NEAREST_INT));
    const __m256 vid = _mm256_set1_ps(id);
    __m256i q[4];
    for (int k = 0; k < 4; ++k) q[k] = _mm256_cvttps_epi32(round_away(_mm256_mul_ps(v[k], vid)));
    // Pack 32 int32 -> 32 int8 (values fit: |q| <= 127), restoring order.
    const __m256i p01 = _mm256_packs_epi32(q[0], q[1]);
    const __m256i p23 = _mm256_packs_epi32(q[2], q[3]);
    __m256i p = _mm256_packs_epi16(p01, p23);
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + 32 * o), p);
    __m256i s = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
    __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
    s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
    corr[o] = corr_mul * _mm_cvtsi128_si32(s4);
  }
}

// 8 independent maddubs + madd + add chains.
int64_t avx2_int8_peak(int64_t rounds) {
  __m256i acc[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) acc[i] = _mm256_set1_epi32(i);
  __m256i a[2] = {_mm256_set1_epi8(3), _mm256_set1_epi8(5)}, b[4];  // 8 + 4 + 2 + 1 of 16 ymm
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) b[i] = _mm256_set1_epi8(static_cast<char>(i - 4));
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t r = 0; r < rounds; ++r) {
    __asm__ volatile("" : "+x"(a[0]), "+x"(a[1]));  // keeps the products inside the loop
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(_mm256_maddubs_epi16(a[i >> 2], b[i & 3]), ones));
    }
  }
  __m256i s = acc[0];
  for (int i = 1; i < 8; ++i) s = _mm256_add_epi32(s, acc[i]);
  return _mm256_extract_epi32(s, 0);
}

uint64_t avx2_read_bytes(const uint8_t* p, size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < n; i += 256) {
    for (int k = 0; k < 256; k += 64) _mm_prefetch(reinterpret_cast<const char*>(p + i + 2048 + k), _MM_HINT_T0);
    a0 = _mm256_add_epi64(a0, _mm256_add_epi64(_mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)),
                                               _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32))));
    a1 = _mm256_add_epi64(a1, _mm256_add_epi64(_mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)),
                                               _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96))));
    a2 = _mm256_add_epi64(a2, _mm256_add_epi64(_mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 128)),
                                               _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 160))));
    a3 = _mm256_add_epi64(a3, _mm256_add_epi64(_mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 192)),
                                               _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 224))));
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  return static_cast<uint64_t>(_mm256_extract_epi64(s, 0) + _mm256_extract_epi64(s, 1) + _mm256_extract_epi64(s, 2) +
                               _mm256_extract_epi64(s, 3));
}

double avx2_int8_peak_ops_per_round() { return 8 * 32 * 2; }

}  // namespace zl::kern
