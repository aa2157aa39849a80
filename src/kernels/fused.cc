#include "kernels/fused.h"

#include <cmath>

#include "kernels/matmul.h"
#include "kernels/quant.h"

namespace zl {
namespace kern {
void avx2_swiglu(const float* gate, const float* up, float* out, int64_t n);  // fused_avx2.cc
void avx2_fp32_to_fp16_row(const float* x, uint16_t* out, int64_t n);        // fused_avx2.cc
}  // namespace kern

void swiglu_scalar(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  if (active_isa() == KernelIsa::kScalar) return swiglu_scalar(gate, up, out, n);
  kern::avx2_swiglu(gate, up, out, n);
}

void fp32_to_fp16_row_scalar(const float* x, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = fp32_to_fp16(x[i]);
}

void fp32_to_fp16_row(const float* x, uint16_t* out, int64_t n) {
  if (active_isa() == KernelIsa::kScalar) return fp32_to_fp16_row_scalar(x, out, n);
  kern::avx2_fp32_to_fp16_row(x, out, n);
}

}  // namespace zl
