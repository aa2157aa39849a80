// Shared by the reference quantization files (quant.cc, quant_more.cc); not a
// public header.
#pragma once

#include <cstdint>
#include <cstring>

namespace zl::quant_detail {

// Round to nearest, ties to even, for |f| <= 2^22: adding 1.5*2^23 leaves the
// rounded integer in the low mantissa bits. This is ggml's nearest_int, kept
// as is so that out-of-range inputs (which ggml asserts against) behave alike.
inline int nearest_int(float f) {
  f += 12582912.f;
  int32_t i;
  std::memcpy(&i, &f, sizeof(i));
  return (i & 0x007fffff) - 0x00400000;
}

// Fits x ≈ scale*L + min with L in [0, nmax] and min <= 0 (quant.cc).
float fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float* neg_min, uint8_t* aux,
                    float rmin, float rdelta, int nstep, bool use_mad);

// The new formats' reference code (quant_more.cc), dispatched by quant.cc.
// Each returns false for a type it does not handle.
bool dequantize_more(int type, const void* src, float* dst, int64_t n);
bool quantize_more(int type, const float* src, void* dst, int64_t n);
bool vec_dot_more(int type, const void* w_row, const void* act, int64_t n, float* out);

}  // namespace zl::quant_detail
