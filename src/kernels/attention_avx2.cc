// AVX2 + FMA + F16C attention (compiled with those flags; called only when
// CPUID reports them). The body is attention_impl.h.
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/attention_query_q8.h"
#include "kernels/simd_avx2.h"

namespace zl::kern {
namespace {

struct Vec {
  using T = __m256;
  static constexpr int kWidth = 8;
  static constexpr bool kTreeScores = false;  // 8 lanes: horizontal sums (hsum4)
  static constexpr bool kRowsSoftmax = false;  // chunk_rows_nv's softmax a row at a time
  static constexpr bool kGemmScores = false;  // score_chunk / score_rows only
  static constexpr int kAccRegs = 8;  // accumulators of accumulate_rows
  static constexpr int kMaxRows = 4;  // V accumulators held in registers
  static constexpr int kAccRows = 4;  // rows per accumulate_rows pass
  // Over a Q8_0 cache the float kernels score with the dequantized query
  // (no int8 dot product here).
  static constexpr bool kVnniQ8 = false;
  static constexpr int64_t kKtQ8Bytes = 0;  // nor a transposed Q8_0 chunk (transpose_q8)
  static void quantize_q8(const float* x, int64_t hd, QueryQ8* out) { quantize_query_q8(x, hd, out, nullptr); }
  static T zero() { return _mm256_setzero_ps(); }
  static T load(const float* p) { return _mm256_loadu_ps(p); }
  static T load_f16(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  // d (f16 bits) times the 8 int8 at p.
  static T load_q8(const int8_t* p, uint16_t d) {
    return _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(d)),
                         _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)))));
  }
  // The 8 int8 at p as floats (unscaled), and an f16 broadcast.
  static T load_i8(const int8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static T set1_f16(uint16_t d) { return _mm256_set1_ps(_cvtsh_ss(d)); }
  static void store(float* p, T v) { _mm256_storeu_ps(p, v); }
  static T set1(float x) { return _mm256_set1_ps(x); }
  static T fmadd(T a, T b, T c) { return _mm256_fmadd_ps(a, b, c); }
  static T mul(T a, T b) { return _mm256_mul_ps(a, b); }
  static T sub(T a, T b) { return _mm256_sub_ps(a, b); }
  static T exp(T x) { return exp256(x); }
  // x on the lanes whose index c0 + lane lies in [lo, hi), 0 elsewhere.
  static T keep_lanes(T x, int c0, int lo, int hi) {
    const __m256 idx = _mm256_add_ps(_mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_ps(static_cast<float>(c0)));
    const __m256 in = _mm256_and_ps(_mm256_cmp_ps(idx, _mm256_set1_ps(static_cast<float>(lo)), _CMP_GE_OQ),
                                    _mm256_cmp_ps(idx, _mm256_set1_ps(static_cast<float>(hi)), _CMP_LT_OQ));
    return _mm256_and_ps(x, in);
  }
  // The largest of p[0, valid) (valid >= 1) and the sum of p[0, 16) (a
  // chunk of kChunk = 16 softmax weights, zero past the valid ones).
  static float chunk_max(const float* p, int valid) {
    const __m256 lanes = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7), lim = _mm256_set1_ps(static_cast<float>(valid)),
                 ninf = _mm256_set1_ps(-INFINITY);
    const __m256 lo = _mm256_blendv_ps(ninf, _mm256_loadu_ps(p), _mm256_cmp_ps(lanes, lim, _CMP_LT_OQ));
    const __m256 hi = _mm256_blendv_ps(ninf, _mm256_loadu_ps(p + 8),
                                       _mm256_cmp_ps(_mm256_add_ps(lanes, _mm256_set1_ps(8)), lim, _CMP_LT_OQ));
    __m256 m = _mm256_max_ps(lo, hi);
    m = _mm256_max_ps(m, _mm256_permute2f128_ps(m, m, 1));
    m = _mm256_max_ps(m, _mm256_permute_ps(m, 0x4E));
    m = _mm256_max_ps(m, _mm256_permute_ps(m, 0xB1));
    return _mm256_cvtss_f32(m);
  }
  static float chunk_sum(const float* p) { return hsum(_mm256_add_ps(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8))); }
  // pr[g][c] = scale * (sum of d[g]'s lanes) for g < nh.
  static void hsum4(const T* d, int nh, int c, float (*pr)[16], float scale) {
    for (int g = 0; g < nh; ++g) pr[g][c] = hsum(d[g]) * scale;
  }
};

}  // namespace
}  // namespace zl::kern

#include "kernels/attention_impl.h"

namespace zl::kern {

void avx2_attention(const AttentionShape& s, const float* q, int64_t n_q, const void* k_cache, const void* v_cache,
                    KvType kv_type, const int32_t* block_table, int64_t n_kv_first, float* out, int64_t kv_h0,
                    int64_t kv_h1) {
  attention_rows(s, q, n_q, k_cache, v_cache, kv_type, block_table, n_kv_first, out, kv_h0, kv_h1);
}

void avx2_attention_range(const AttentionShape& s, const float* q, const void* k_cache, const void* v_cache,
                        KvType kv_type, const int32_t* block_table, int64_t n_kv, int64_t range, float* partial) {
  attention_range_impl(s, q, k_cache, v_cache, kv_type, block_table, n_kv, range, partial);
}

void avx2_attention_merge(const AttentionShape& s, float* partials, int64_t n_ranges, float* out) {
  attention_merge_impl(s, partials, n_ranges, out);
}

}  // namespace zl::kern
