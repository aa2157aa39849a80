// Inline AVX-512 helpers. Include only from translation units compiled with
// the AVX-512 VNNI flags (matmul_avx512*.cc); internal linkage, as
// simd_avx2.h.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace zl::kern {
namespace {

// acc += w . broadcast(4 bytes at p), the broadcast embedded in vpdpbusd's
// memory operand ({1to16}): one fused uop instead of a separate broadcast
// load (GCC does not fold _mm512_set1_epi32 into vpdpbusd by itself).
[[maybe_unused]] inline __m512i dpbusd_bcast(__m512i acc, __m512i w, const int8_t* p) {
  __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*reinterpret_cast<const int32_t*>(p)));
  return acc;
}

}  // namespace
}  // namespace zl::kern
