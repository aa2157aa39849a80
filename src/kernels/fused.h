// Small fused element-wise kernels of the forward pass, each with a scalar
// twin (the reference arithmetic) for tests. Pure and thread-safe.
#pragma once

#include <cstdint>

namespace zl {

// out[i] = silu(gate[i]) * up[i] with silu(x) = x / (1 + e^-x). `out` may
// alias `gate` or `up`. The SIMD path uses a polynomial e^x (~2 ulp).
void swiglu(const float* gate, const float* up, float* out, int64_t n);
void swiglu_scalar(const float* gate, const float* up, float* out, int64_t n);

// out[i] = fp32_to_fp16(x[i]) (round to nearest even; F16C where the ISA
// has it), e.g. K/V rows into an F16 cache.
void fp32_to_fp16_row(const float* x, uint16_t* out, int64_t n);
void fp32_to_fp16_row_scalar(const float* x, uint16_t* out, int64_t n);

}  // namespace zl
