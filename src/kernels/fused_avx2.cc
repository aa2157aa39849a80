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

void avx2_fp32_to_fp16_row(const float* x, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) out[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}

}  // namespace zl::kern
