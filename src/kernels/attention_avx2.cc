// AVX2 + FMA + F16C attention (compiled with those flags; called only when
// CPUID reports them). The body is attention_impl.h.
#include <immintrin.h>

#include <cstdint>

#include "kernels/simd_avx2.h"

namespace zl::kern {
namespace {

struct Vec {
  using T = __m256;
  static constexpr int kWidth = 8;
  static constexpr int kMaxRows = 4;  // V accumulators held in registers
  static T zero() { return _mm256_setzero_ps(); }
  static T load(const float* p) { return _mm256_loadu_ps(p); }
  static T load_f16(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static void store(float* p, T v) { _mm256_storeu_ps(p, v); }
  static T set1(float x) { return _mm256_set1_ps(x); }
  static T fmadd(T a, T b, T c) { return _mm256_fmadd_ps(a, b, c); }
  static T mul(T a, T b) { return _mm256_mul_ps(a, b); }
  static T sub(T a, T b) { return _mm256_sub_ps(a, b); }
  static T exp(T x) { return exp256(x); }
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

}  // namespace zl::kern

namespace zl::kern {

void avx2_attention_range(const AttentionShape& s, const float* q, const void* k_cache, const void* v_cache,
                        KvType kv_type, const int32_t* block_table, int64_t n_kv, int64_t range, float* partial) {
  attention_range_impl(s, q, k_cache, v_cache, kv_type, block_table, n_kv, range, partial);
}

void avx2_attention_merge(const AttentionShape& s, float* partials, int64_t n_ranges, float* out) {
  attention_merge_impl(s, partials, n_ranges, out);
}

}  // namespace zl::kern
