// The query of attention over a Q8_0 KV cache, quantized as llama.cpp does
// for a q8_0 cache (its q·k runs on the cache's vec_dot type): per query
// head, blocks of 32 values (the whole head when head_dim is not a multiple
// of 32) of int8 with a float scale d = max|x| / 127, x ≈ d * q. Every path
// (the scalar twin, AVX2, AVX-512 VNNI) scores with these same values: the
// VNNI kernel multiplies the int8 directly (vpdpbusd), the others the
// dequantized floats, so they differ by float rounding only.
//
// Internal linkage: included by attention.cc and the per-ISA kernel files,
// each compiling its own copy with its own instruction set.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/attention.h"

namespace zl::kern {
namespace {

// One quantized query row (a query head).
struct QueryQ8 {
  alignas(64) int8_t qs[kMaxHeadDim];
  float d[kMaxHeadDim / 32];
  // 128 x the sum of the block's qs: the VNNI kernel multiplies k + 128
  // (unsigned) by q, and subtracts this.
  int32_t corr[kMaxHeadDim / 32];
};

// Values per quantization block of a head of head_dim values.
inline int64_t query_q8_block(int64_t head_dim) { return head_dim % 32 == 0 ? 32 : head_dim; }

// The scale of a block whose largest magnitude is amax, and its inverse (0
// for an all-zero block).
inline void query_q8_scale(float amax, float* d, float* id) {
  *d = amax / 127.0f;
  *id = *d != 0.0f ? 1.0f / *d : 0.0f;
}

// Quantizes x[0, hd) into out; deq (when not null) gets the dequantized
// values d * q. Rounding to nearest even (the SIMD conversion's rounding).
[[maybe_unused]] inline void quantize_query_q8(const float* x, int64_t hd, QueryQ8* out, float* deq) {
  const int64_t qb = query_q8_block(hd);
  for (int64_t b = 0; b < hd / qb; ++b) {
    float amax = 0.0f;
    for (int64_t i = b * qb; i < (b + 1) * qb; ++i) amax = std::fmax(amax, std::fabs(x[i]));
    float d, id;
    query_q8_scale(amax, &d, &id);
    int32_t sum = 0;
    for (int64_t i = b * qb; i < (b + 1) * qb; ++i) {
      const float r = std::nearbyint(x[i] * id);
      const int v = static_cast<int>(std::fmin(127.0f, std::fmax(-127.0f, r)));
      out->qs[i] = static_cast<int8_t>(v);
      sum += v;
      if (deq != nullptr) deq[i] = d * static_cast<float>(v);
    }
    out->d[b] = d;
    out->corr[b] = 128 * sum;
  }
}

}  // namespace
}  // namespace zl::kern
