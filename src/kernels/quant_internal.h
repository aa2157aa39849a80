// Shared by the reference quantization files (quant.cc, quant_more.cc); not a
// public header.
#pragma once

#include <algorithm>
#include <cmath>
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

// The value of largest magnitude in x[0, n) (the first of equal ones; 0 when
// all are 0): the signed scale reference of the symmetric quantizers.
inline float signed_max(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

// One q8 block (Q8_0, Q8_1): d = amax/127, q = roundf(x/d) (ties away from
// zero). Returns d; `sum` (Q8_1), when given, gets the sum of the quants
// (in the same loop).
template <int N>
inline float quantize_q8_block(const float* x, int8_t* qs, int* sum = nullptr) {
  float amax = 0.0f;
  for (int j = 0; j < N; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  int s = 0;
  for (int j = 0; j < N; ++j) {
    qs[j] = static_cast<int8_t>(std::roundf(x[j] * id));
    s += qs[j];
  }
  if (sum) *sum = s;
  return d;
}

// ggml's generic K-quant dot kernels accumulate the integer products in 8
// lanes (lane = position mod 8) and keep 8 float lane sums across
// super-blocks, adding them to the total only at the end. Integer sums are
// exact in any order; the float lane structure is what must be reproduced.
struct LaneSums {
  float lanes[8] = {};
  void add(float d, const int32_t lane_ints[8]) {
    for (int l = 0; l < 8; ++l) lanes[l] += d * lane_ints[l];
  }
  float finish(float sumf) const {
    for (int l = 0; l < 8; ++l) sumf += lanes[l];
    return sumf;
  }
};

// Fits x ≈ scale*L + min with L in [0, nmax] and min <= 0 (quant.cc).
float fit_scale_min(int n, int nmax, const float* x, const float* w, uint8_t* L, float* neg_min, uint8_t* aux,
                    float rmin, float rdelta, int nstep, bool use_mad);

// The new formats' reference code (quant_more.cc), dispatched by quant.cc.
// Each returns false for a type it does not handle.
bool dequantize_more(int type, const void* src, float* dst, int64_t n);
bool quantize_more(int type, const float* src, void* dst, int64_t n);
bool vec_dot_more(int type, const void* w_row, const void* act, int64_t n, float* out);

}  // namespace zl::quant_detail
