// AVX2 twins of kernels/fused.h (compiled with -mavx2 -mfma -mf16c).
#include <immintrin.h>

#include <cmath>

#include "kernels/fused.h"
#include "kernels/simd_avx2.h"

namespace zl::kern {

void avx2_swiglu(const float* gate, const float* up, float* out, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = exp256(_mm256_sub_ps(_mm256_setzero_ps(), g));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

double avx2_sum_exp(const float* x, int64_t n, float shift) {
  const __m256 s = _mm256_set1_ps(shift), floor = _mm256_set1_ps(-87.0f);
  __m256d acc[2] = {_mm256_setzero_pd(), _mm256_setzero_pd()};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 a = _mm256_sub_ps(_mm256_loadu_ps(x + i), s);
    // Terms at or below e^-87 (exp256 clamps there) and NaN arguments: 0.
    const __m256 e = _mm256_and_ps(exp256(a), _mm256_cmp_ps(a, floor, _CMP_GT_OQ));
    acc[0] = _mm256_add_pd(acc[0], _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    acc[1] = _mm256_add_pd(acc[1], _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
  }
  alignas(32) double lanes[4];
  _mm256_store_pd(lanes, _mm256_add_pd(acc[0], acc[1]));
  double sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  for (; i < n; ++i) {
    const float a = x[i] - shift;
    if (a > -87.0f) sum += std::exp(a);
  }
  return sum;
}

void avx2_fp32_to_fp16_row(const float* x, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) out[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}

void avx2_rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  // Partial sums 0..3 and 4..7 in two registers, exactly rms_norm_scalar's:
  // the square in float, then widened and added in double (no contraction
  // possible across the conversion).
  __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 sq = _mm256_mul_ps(v, v);
    a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(sq)));
    a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(sq, 1)));
  }
  alignas(32) double acc[8];
  _mm256_store_pd(acc, a0);
  _mm256_store_pd(acc + 4, a1);
  for (; i < n; ++i) {
    const float sq = x[i] * x[i];
    acc[0] += static_cast<double>(sq);
  }
  const double sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  const __m256 s = _mm256_set1_ps(scale);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    _mm256_storeu_ps(y + j, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + j), s), _mm256_loadu_ps(w + j)));
  }
  for (; j < n; ++j) y[j] = x[j] * scale * w[j];
}

}  // namespace zl::kern
