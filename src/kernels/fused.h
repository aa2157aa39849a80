// Small fused element-wise kernels of the forward pass, each with a scalar
// twin (the reference arithmetic) for tests. Pure and thread-safe.
#pragma once

#include <cstdint>

namespace zl {

// out[i] = silu(gate[i]) * up[i] with silu(x) = x / (1 + e^-x). `out` may
// alias `gate` or `up`. The SIMD path uses a polynomial e^x (~2 ulp).
void swiglu(const float* gate, const float* up, float* out, int64_t n);
void swiglu_scalar(const float* gate, const float* up, float* out, int64_t n);

// out[i] = gelu(gate[i]) * up[i], GELU in its tanh form
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) evaluated as llama.cpp's CPU
// backend does (what GGUF Gemma models are validated against): x rounded to
// F16 and looked up in a table of F16 GELU values for -10 < x < 10, 0 below,
// x above. One path for every ISA (a table load per value). `out` may alias
// `gate` or `up`.
void geglu(const float* gate, const float* up, float* out, int64_t n);

// RMSNorm: y[i] = x[i] * s * w[i] with s = 1 / sqrt(mean(x^2) + eps). The
// mean is summed in double over eight interleaved partial sums (x[i]^2, the
// product in float, into sum i % 8; a tail below a multiple of 8 into sum 0)
// added as ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)): one serial
// chain of n adds cost ~3 us at n = 2048, twice a layer, on the decode
// critical path. The SIMD path is bitwise the scalar one (the same sums in
// the same order). `y` may alias `x`.
void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps);
void rms_norm_scalar(const float* x, const float* w, float* y, int64_t n, float eps);

// The sum of e^(x[i] - shift), in double (each term in float), for shift >= every x[i] (each
// term at most 1): the sum of a log-sum-exp, e.g. of a vocabulary's logits (a token's
// logprobs). A term below e^-87 (and a NaN or -inf argument) adds 0. The SIMD path's e^x is a
// polynomial (~2 ulp) and sums in another order: ~1e-7 relative from the scalar one.
double sum_exp(const float* x, int64_t n, float shift);
double sum_exp_scalar(const float* x, int64_t n, float shift);

// out[i] = fp32_to_fp16(x[i]) (round to nearest even; F16C where the ISA
// has it), e.g. K/V rows into an F16 cache.
void fp32_to_fp16_row(const float* x, uint16_t* out, int64_t n);
void fp32_to_fp16_row_scalar(const float* x, uint16_t* out, int64_t n);

}  // namespace zl
