#include "kernels/fused.h"

#include <cmath>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/quant.h"

namespace zl {
namespace kern {
void avx2_swiglu(const float* gate, const float* up, float* out, int64_t n);  // fused_avx2.cc
void avx2_fp32_to_fp16_row(const float* x, uint16_t* out, int64_t n);        // fused_avx2.cc
void avx2_rms_norm(const float* x, const float* w, float* y, int64_t n, float eps);  // fused_avx2.cc
double avx2_sum_exp(const float* x, int64_t n, float shift);                         // fused_avx2.cc
}  // namespace kern

double sum_exp_scalar(const float* x, int64_t n, float shift) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float a = x[i] - shift;
    if (a > -87.0f) sum += std::exp(a);  // false for NaN
  }
  return sum;
}

double sum_exp(const float* x, int64_t n, float shift) {
  if (active_isa() == KernelIsa::kScalar) return sum_exp_scalar(x, n, shift);
  return kern::avx2_sum_exp(x, n, shift);
}

void rms_norm_scalar(const float* x, const float* w, float* y, int64_t n, float eps) {
  double acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += static_cast<double>(x[i + k] * x[i + k]);
  }
  for (; i < n; ++i) acc[0] += static_cast<double>(x[i] * x[i]);
  const double sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int64_t j = 0; j < n; ++j) y[j] = x[j] * scale * w[j];
}

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  if (active_isa() == KernelIsa::kScalar) return rms_norm_scalar(x, w, y, n, eps);
  kern::avx2_rms_norm(x, w, y, n, eps);
}

void swiglu_scalar(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  if (active_isa() == KernelIsa::kScalar) return swiglu_scalar(gate, up, out, n);
  kern::avx2_swiglu(gate, up, out, n);
}

namespace {

// F16 bits -> F16 bits of the tanh GELU of that value, computed in float.
const std::vector<uint16_t>& gelu_f16_table() {
  static const std::vector<uint16_t> table = [] {
    std::vector<uint16_t> t(65536);
    for (uint32_t i = 0; i < t.size(); ++i) {
      const float x = fp16_to_fp32(static_cast<uint16_t>(i));
      const float g = 0.5f * x * (1.0f + std::tanh(0.7978845608028654f * x * (1.0f + 0.044715f * x * x)));
      t[i] = fp32_to_fp16(g);
    }
    return t;
  }();
  return table;
}

}  // namespace

void geglu(const float* gate, const float* up, float* out, int64_t n) {
  const uint16_t* table = gelu_f16_table().data();
  for (int64_t i = 0; i < n; ++i) {
    const float x = gate[i];
    float g;
    if (x <= -10.0f) {
      g = 0.0f;
    } else if (x >= 10.0f) {
      g = x;
    } else {
      g = fp16_to_fp32(table[fp32_to_fp16(x)]);
    }
    out[i] = g * up[i];
  }
}

void fp32_to_fp16_row_scalar(const float* x, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = fp32_to_fp16(x[i]);
}

void fp32_to_fp16_row(const float* x, uint16_t* out, int64_t n) {
  if (active_isa() == KernelIsa::kScalar) return fp32_to_fp16_row_scalar(x, out, n);
  kern::avx2_fp32_to_fp16_row(x, out, n);
}

}  // namespace zl
