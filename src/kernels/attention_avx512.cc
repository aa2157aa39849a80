// AVX-512 attention (compiled with -mavx512f and friends; called only when
// CPUID reports them). The body is attention_impl.h.
// GCC 12 warns inside its own avx512fintrin.h (_mm512_undefined_*).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace zl::kern {
namespace {

// e^x (Cephes polynomial, ~2 ulp), x clamped to [-87, 88].
inline __m512 exp512(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_set1_ps(88.0f));
  const __m512 fx = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500E-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507E-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073E-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894E-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459E-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201E-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, fx);
}

struct Vec {
  using T = __m512;
  static constexpr int kWidth = 16;
  static constexpr int kAccRegs = 16;  // accumulators of accumulate_rows
  static constexpr int kMaxRows = 16;  // V accumulators held in registers
  static T zero() { return _mm512_setzero_ps(); }
  static T load(const float* p) { return _mm512_loadu_ps(p); }
  static T load_f16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  // d (f16 bits) times the 16 int8 at p.
  static T load_q8(const int8_t* p, uint16_t d) {
    return _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(d)),
                         _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))));
  }
  static void store(float* p, T v) { _mm512_storeu_ps(p, v); }
  static T set1(float x) { return _mm512_set1_ps(x); }
  static T fmadd(T a, T b, T c) { return _mm512_fmadd_ps(a, b, c); }
  static T mul(T a, T b) { return _mm512_mul_ps(a, b); }
  static T sub(T a, T b) { return _mm512_sub_ps(a, b); }
  static T exp(T x) { return exp512(x); }
  // x on the lanes whose index c0 + lane lies in [lo, hi), 0 elsewhere.
  static T keep_lanes(T x, int c0, int lo, int hi) {
    const int a = std::clamp(lo - c0, 0, 16), b = std::clamp(hi - c0, 0, 16);
    const unsigned mask = ((1u << b) - 1u) & ~((1u << a) - 1u);
    return _mm512_maskz_mov_ps(static_cast<__mmask16>(mask), x);
  }
  // The largest of p[0, valid) (valid >= 1) and the sum of p[0, 16) (a
  // chunk of kChunk = 16 softmax weights, zero past the valid ones).
  static float chunk_max(const float* p, int valid) {
    return _mm512_reduce_max_ps(
        _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), static_cast<__mmask16>((1u << valid) - 1), p));
  }
  static float chunk_sum(const float* p) { return _mm512_reduce_add_ps(_mm512_loadu_ps(p)); }
  // The transposing sum tree of score_chunk (attention_impl.h). pair_sum:
  // per 128-bit quarter [a0 + a2, b0 + b2, a1 + a3, b1 + b3]; quad_sum of
  // pair_sum(a, b) and pair_sum(c, d): per quarter the sums of a, b, c, d
  // over that quarter; quarter_sum of z[0..3]: lane 4k + j = the sum over the
  // four quarters of z[k]'s lane j.
  static constexpr bool kTreeScores = true;
  static T pair_sum(T a, T b) { return _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b)); }
  static T quad_sum(T x, T y) {
    const __m512d xd = _mm512_castps_pd(x), yd = _mm512_castps_pd(y);
    return _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(xd, yd)), _mm512_castpd_ps(_mm512_unpackhi_pd(xd, yd)));
  }
  static T quarter_sum(const T* z) {
    const T s01 = _mm512_add_ps(_mm512_shuffle_f32x4(z[0], z[1], 0x44), _mm512_shuffle_f32x4(z[0], z[1], 0xEE));
    const T s23 = _mm512_add_ps(_mm512_shuffle_f32x4(z[2], z[3], 0x44), _mm512_shuffle_f32x4(z[2], z[3], 0xEE));
    return _mm512_add_ps(_mm512_shuffle_f32x4(s01, s23, 0x88), _mm512_shuffle_f32x4(s01, s23, 0xDD));
  }
  // pr[g][c] = scale * (sum of d[g]'s lanes) for g < nh: the four vectors
  // are folded together (16 -> 8 -> 4 lanes each) before the last sums.
  static void hsum4(const T* d, int nh, int c, float (*pr)[16], float scale) {
    if (nh < 4) {
      for (int g = 0; g < nh; ++g) pr[g][c] = _mm512_reduce_add_ps(d[g]) * scale;
      return;
    }
    // 256-bit halves: [d0|d1] and [d2|d3] as pairs of 8-lane sums.
    const __m512 a = _mm512_add_ps(_mm512_shuffle_f32x4(d[0], d[1], 0x44), _mm512_shuffle_f32x4(d[0], d[1], 0xEE));
    const __m512 b = _mm512_add_ps(_mm512_shuffle_f32x4(d[2], d[3], 0x44), _mm512_shuffle_f32x4(d[2], d[3], 0xEE));
    // a = [d0 lo8+hi8 (8) | d1 (8)], b likewise; fold 128-bit lanes: -> 4 lanes per head.
    const __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x88), _mm512_shuffle_f32x4(a, b, 0xDD));
    // ab = [d0 (4) | d1 (4) | d2 (4) | d3 (4)]: sum each 128-bit lane.
    __m512 t = _mm512_add_ps(ab, _mm512_permute_ps(ab, 0x4E));
    t = _mm512_add_ps(t, _mm512_permute_ps(t, 0xB1));
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, t);
    for (int g = 0; g < 4; ++g) pr[g][c] = lanes[4 * g] * scale;
  }
};

}  // namespace
}  // namespace zl::kern

#include "kernels/attention_impl.h"

namespace zl::kern {

void avx512_attention(const AttentionShape& s, const float* q, int64_t n_q, const void* k_cache, const void* v_cache,
                    KvType kv_type, const int32_t* block_table, int64_t n_kv_first, float* out, int64_t kv_h0,
                    int64_t kv_h1) {
  attention_rows(s, q, n_q, k_cache, v_cache, kv_type, block_table, n_kv_first, out, kv_h0, kv_h1);
}

void avx512_attention_range(const AttentionShape& s, const float* q, const void* k_cache, const void* v_cache,
                        KvType kv_type, const int32_t* block_table, int64_t n_kv, int64_t range, float* partial) {
  attention_range_impl(s, q, k_cache, v_cache, kv_type, block_table, n_kv, range, partial);
}

void avx512_attention_merge(const AttentionShape& s, float* partials, int64_t n_ranges, float* out) {
  attention_merge_impl(s, partials, n_ranges, out);
}

}  // namespace zl::kern
