// Float weight formats (F32, F16, BF16): the AVX-512 kernels and what
// matmul.cc needs besides matmul_internal.h to dispatch them and the AVX2
// ones. Not a public header; nothing here may use intrinsics (the kernel
// files have their own -m flags).
//
// Batch invariance (all float kernels, every ISA): the output for weight row
// r and token t is computed by the same sequence of float operations however
// many tokens the matmul has, whichever tile the token lands in and however
// the rows are split over threads, so a token's outputs are bit-identical
// alone and in any batch (the engine batches requests and relies on it).
#pragma once

#include <cstdint>

#include "kernels/matmul_internal.h"  // Acts, RowsKernel

namespace zl::kern {

// Row kernel for F32/F16/BF16 weights in the GGUF row layout (no repacking),
// Acts::f activations; null for other types. Thread-safe; from 11 tokens on
// it uses per-thread scratch (about 1 MiB of packed activations plus a few
// rows), grown on demand and kept.
RowsKernel avx512_float_rows_kernel(GgmlType type);
// Row splits in multiples of this keep every tile of the kernel full (any
// split is correct).
int64_t avx512_float_row_grain(int64_t n_tokens);

// AVX2 (matmul_avx2.cc, avx2_rows_kernel): row splits in multiples of this
// keep every tile full.
int64_t avx2_float_row_grain(int64_t n_tokens);

// out[i] = x[i] rounded to `type` (F16 or BF16) and back, bit-exact with
// fp16_to_fp32(fp32_to_fp16(x)) and bf16_to_fp32(fp32_to_bf16(x)); out may
// equal x.
void avx512_round_through(GgmlType type, const float* x, int64_t n, float* out);

}  // namespace zl::kern
