// Reference (scalar) quantization formats, bit-exact with the GGUF/ggml
// definitions: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K, and Q8_K (activations).
//
// Block layouts (little-endian, packed):
//   Q8_0: { f16 d; int8 qs[32]; }                          34 bytes / 32 values
//   Q4_0: { f16 d; uint8 qs[16]; }                         18 bytes / 32 values
//         value j (<16) is low nibble of qs[j], j+16 the high nibble; x = d*(q-8)
//   Q4_K: { f16 d; f16 dmin; uint8 scales[12]; uint8 qs[128]; }   144 bytes / 256
//   Q6_K: { uint8 ql[128]; uint8 qh[64]; int8 scales[16]; f16 d; } 210 bytes / 256
//   Q8_K: { float d; int8 qs[256]; int16 bsums[16]; }      292 bytes / 256
//
// The block structs themselves are in kernels/quant_blocks.h.
//
// All functions are pure and thread-safe. `n` must be a multiple of the
// type's block size (CHECKed).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "format/ggml_type.h"

namespace zl {

// IEEE half and bfloat16 conversions (round to nearest even, subnormals kept,
// overflow to inf). A NaN stays NaN with its sign: fp32_to_fp16 keeps the top
// payload bits and sets the quiet bit (as x86 F16C does); fp32_to_bf16 returns
// (bits >> 16) | 64 as ggml does.
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);

// Bytes taken by `n` values of `type` (n a multiple of the block size).
size_t row_size(GgmlType type, int64_t n);

// Dequantizes `n` values of a supported type from `src` into `dst`.
void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n);

// Quantizes `n` floats into `type` (F32/F16/BF16/Q8_0/Q4_0/Q4_K/Q6_K/Q8_K).
// Every format follows ggml's reference quantizer (quantize_row_*_ref, no
// importance matrix) bit for bit, so the output equals llama-quantize's for
// these types (tests/unit/quant_test.cc checks this on shared/models).
// Q4_K/Q6_K are much slower than the rest (a grid search per sub-block).
void quantize_row(GgmlType type, const float* src, void* dst, int64_t n);

// --- Reference dot products (ggml's CPU matmul, scalar path) ---------------
//
// ggml multiplies a weight row by an activation row by first converting the
// activations to the weight type's "vec_dot partner" and then running a
// type-pair dot product. These reproduce that scalar ("generic") arithmetic:
//   weight F32  x F32  : float products summed in double, rounded to float
//   weight F16  x F16  : same, products of the converted halves
//   weight BF16 x BF16 : same, products of the converted bfloat16s
//   weight Q8_0 x Q8_0 : per block int sum, sumf += sumi * (dw * da)
//   weight Q4_0 x Q8_0 : per block int sum, sumf += sumi * dw * da
//   weight Q4_K x Q8_K : per super-block integer sums with the 6-bit scales in
//                        8 lanes, lanes += (dw * da) * lane; mins folded in
//                        through bsums: sumf -= (dmin * da) * sum(bsum*min)
//   weight Q6_K x Q8_K : like Q4_K with signed 8-bit scales and no mins
// (double accumulation for the float types is what ggml's scalar
// ggml_vec_dot_f32/f16/bf16 do; its SIMD paths round differently.)

// The activation type ggml pairs with `weight_type` (F32->F32, F16->F16,
// BF16->BF16, Q8_0/Q4_0->Q8_0, Q4_K/Q6_K->Q8_K). CHECKs the type is supported.
GgmlType vec_dot_type(GgmlType weight_type);

// Converts `n` activations to vec_dot_type(weight_type) into `out` (resized to
// row_size of that type). Allocates only when `out` must grow.
void quantize_activations(GgmlType weight_type, const float* x, std::vector<uint8_t>& out,
                          int64_t n);

// Dot product of one weight row (`n` values of `weight_type`) with activations
// produced by quantize_activations for the same type and `n`. O(n), no allocation.
float vec_dot(GgmlType weight_type, const void* w_row, const void* act, int64_t n);

}  // namespace zl
