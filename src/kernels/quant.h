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
// All functions are pure and thread-safe. `n` must be a multiple of the
// type's block size (CHECKed).
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/ggml_type.h"

namespace zl {

// IEEE half and bfloat16 conversions (round to nearest even; NaN preserved).
float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);
float bf16_to_fp32(uint16_t h);
uint16_t fp32_to_bf16(float f);

// Bytes taken by `n` values of `type` (n a multiple of the block size).
size_t row_size(GgmlType type, int64_t n);

// Dequantizes `n` values of a supported type from `src` into `dst`.
void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n);

// Quantizes `n` floats into `type` (F32/F16/BF16/Q8_0/Q4_0/Q4_K/Q6_K/Q8_K).
// Q8_0, Q4_0 and Q8_K follow ggml's reference quantizers exactly; Q4_K and Q6_K
// produce valid blocks with a good (not necessarily ggml-identical) fit.
void quantize_row(GgmlType type, const float* src, void* dst, int64_t n);

}  // namespace zl
