// AVX-512 VNNI kernels (compiled with -mavx512f -mavx512bw -mavx512vl
// -mavx512vnni; called only when CPUID reports them).
//
// Micro-kernel: 16 weight rows (one repacked group, matmul_internal.h) x NT
// tokens. Per 32-value block, each of the group's 8 weight vectors (16 rows
// x 4 bytes) is loaded — and for Q4_0 unpacked — once and used by vpdpbusd
// against 4-byte broadcasts of every token's activations. The 16 int32
// lanes are then the exact per-row block sums (plus the activation-side
// correction for the unsigned weight encoding), scaled by dw * da and
// accumulated in float. One weight read thus serves NT <= kTokenTile tokens.
// GCC 12 warns inside its own avx512fintrin.h (_mm512_undefined_*).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <utility>

#include "kernels/matmul_internal.h"

namespace zl::kern {
namespace {

template <int NT, bool kQ4>
void group_tokens(const uint8_t* quants, const uint16_t* scales, int64_t nb, const Acts& a, int64_t t0,
                  float* y, int64_t n_out, int64_t row0, __mmask16 store_mask) {
  constexpr int64_t kGb = kQ4 ? kGroupBlockQ4_0 : kGroupBlockQ8_0;
  // Prefetch distances in blocks: near into L1, ~12 KiB ahead into L2.
  constexpr int64_t kNear = 4, kFar = kQ4 ? 48 : 24;
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  // Tiled activations: block b of the tile's token t at [b * NT + t].
  const int8_t* qa = a.qs + t0 * nb * 32;
  const float* da = a.d + t0 * nb;
  const int32_t* ca = a.corr + t0 * nb;
  for (int64_t b = 0; b < nb; ++b, quants += kGb, qa += NT * 32, da += NT, ca += NT) {
    // Software prefetch: near into L1, far into L2 (more misses in flight
    // than the L1 fill buffers allow; worth ~10% of decode bandwidth).
    for (int i = 0; i < kGb; i += 64) _mm_prefetch(reinterpret_cast<const char*>(quants + kNear * kGb + i), _MM_HINT_T0);
    for (int i = 0; i < kGb; i += 64) _mm_prefetch(reinterpret_cast<const char*>(quants + kFar * kGb + i), _MM_HINT_T1);
    // The scales are a second stream (32 bytes a block): fetch them as far ahead.
    _mm_prefetch(reinterpret_cast<const char*>(scales + (b + kFar) * 16), _MM_HINT_T1);
    const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(scales + b * 16)));
    // Fully unrolled, the NT independent vpdpbusd chains interleaved (latency
    // 5, two per cycle) so that the accumulators stay in registers and the
    // scheduler never waits on one long chain. With few tokens each sum is
    // split in two chains (j < 4, j >= 4).
    constexpr int kSplit = NT <= 2 ? 2 : 1;
    __m512i s[NT * kSplit];
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
      s[t] = _mm512_set1_epi32(ca[t]);
      if constexpr (kSplit == 2) s[NT + t] = _mm512_setzero_si512();
    }
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      // Weight vector j, unpacked just before its NT uses (few registers live).
      __m512i w;
      if constexpr (kQ4) {
        const __m512i p = _mm512_load_si512(quants + 64 * (j & 3));
        w = j < 4 ? _mm512_and_si512(p, m4) : _mm512_and_si512(_mm512_srli_epi16(p, 4), m4);
      } else {
        w = _mm512_load_si512(quants + 64 * j);
      }
#pragma GCC unroll 16
      for (int t = 0; t < NT; ++t) {
        int32_t v;
        std::memcpy(&v, qa + 32 * t + 4 * j, 4);
        const int k = kSplit == 2 && j >= 4 ? NT + t : t;
        s[k] = _mm512_dpbusd_epi32(s[k], w, _mm512_set1_epi32(v));
      }
    }
    if constexpr (kSplit == 2) {
      for (int t = 0; t < NT; ++t) s[t] = _mm512_add_epi32(s[t], s[NT + t]);
    }
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
      const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(da[t]));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t]), scale, acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) _mm512_mask_storeu_ps(y + (t0 + t) * n_out + row0, store_mask, acc[t]);
}

using GroupFn = void (*)(const uint8_t*, const uint16_t*, int64_t, const Acts&, int64_t, float*, int64_t, int64_t,
                        __mmask16);

// group_tokens<1..kTokenTile> by token count.
template <bool kQ4, int... Ns>
constexpr std::array<GroupFn, sizeof...(Ns)> group_table(std::integer_sequence<int, Ns...>) {
  return {group_tokens<Ns + 1, kQ4>...};
}

template <bool kQ4>
void rows_repacked(const PackedMatrix& w, const Acts& a, float* y, int64_t r0, int64_t r1) {
  constexpr int64_t kGb = kQ4 ? kGroupBlockQ4_0 : kGroupBlockQ8_0;
  static constexpr auto kFns = group_table<kQ4>(std::make_integer_sequence<int, kTokenTile>());
  const int64_t nb = w.n_in() / 32, n_out = w.n_out();
  for (int64_t row0 = r0; row0 < r1; row0 += kGroupRows) {
    const int64_t g = row0 / kGroupRows;
    const int64_t n_rows = n_out - row0 < kGroupRows ? n_out - row0 : kGroupRows;
    const __mmask16 mask = static_cast<__mmask16>((1u << n_rows) - 1);
    const uint8_t* quants = w.quants() + g * nb * kGb;
    const uint16_t* scales = w.scales() + g * nb * kGroupRows;
    for (int64_t t = 0; t < a.n_tokens; t += kTokenTile) {
      const int64_t nt = a.n_tokens - t < kTokenTile ? a.n_tokens - t : kTokenTile;
      kFns[nt - 1](quants, scales, nb, a, t, y, n_out, row0, mask);
    }
  }
}

// roundf (ties away from zero), exactly: trunc, then step away when the
// fraction (exact in float) is at least one half.
inline __m512 round_away(__m512 v) {
  const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m512 frac = _mm512_sub_ps(v, t);
  const __mmask16 up = _mm512_cmp_ps_mask(_mm512_abs_ps(frac), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  const __m512 one = _mm512_or_ps(_mm512_set1_ps(1.0f), _mm512_and_ps(v, _mm512_set1_ps(-0.0f)));
  return _mm512_mask_add_ps(t, up, t, one);
}

}  // namespace

RowsKernel avx512_rows_kernel(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0: return rows_repacked<true>;
    case GgmlType::kQ8_0: return rows_repacked<false>;
    default: return nullptr;
  }
}

void avx512_quantize_q8_0_tiled(const float* x, int64_t n_in, int64_t n_tokens, int64_t t0, int64_t t1,
                                int32_t corr_mul, int8_t* qs, float* d, int32_t* corr) {
  const int64_t nb = n_in / 32;
  for (int64_t i = t0; i < t1; ++i) {
    const int64_t tile0 = i / kTokenTile * kTokenTile;
    const int64_t width = std::min<int64_t>(kTokenTile, n_tokens - tile0);
    const int64_t tile_base = tile0 * nb + (i - tile0);
    for (int64_t blk = 0; blk < nb; ++blk) {
      const float* xb = x + i * n_in + 32 * blk;
      const int64_t o = tile_base + blk * width;
      const __m512 x0 = _mm512_loadu_ps(xb);
      const __m512 x1 = _mm512_loadu_ps(xb + 16);
      const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
      const float dd = amax / 127;
      const float id = dd != 0.0f ? 1.0f / dd : 0.0f;
      d[o] = _cvtsh_ss(_cvtss_sh(dd, _MM_FROUND_TO_NEAREST_INT));
      const __m512 vid = _mm512_set1_ps(id);
      const __m512i q0 = _mm512_cvttps_epi32(round_away(_mm512_mul_ps(x0, vid)));
      const __m512i q1 = _mm512_cvttps_epi32(round_away(_mm512_mul_ps(x1, vid)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 32 * o), _mm512_cvtepi32_epi8(q0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 32 * o + 16), _mm512_cvtepi32_epi8(q1));
      corr[o] = corr_mul * _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
    }
  }
}

// 16 independent vpdpbusd chains: latency 5 at up to two per cycle needs
// at least 10 in flight.
int64_t avx512_int8_peak(int64_t rounds) {
  __m512i acc[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_set1_epi32(i);
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  for (int64_t r = 0; r < rounds; ++r) {
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
  }
  __m512i s = acc[0];
  for (int i = 1; i < 16; ++i) s = _mm512_add_epi32(s, acc[i]);
  return _mm512_reduce_add_epi32(s);
}

uint64_t avx512_read_bytes(const uint8_t* p, size_t n) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < n; i += 256) {
    for (int k = 0; k < 256; k += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(p + i + 1024 + k), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(p + i + 6144 + k), _MM_HINT_T1);
    }
    a0 = _mm512_add_epi64(a0, _mm512_load_si512(p + i));
    a1 = _mm512_add_epi64(a1, _mm512_load_si512(p + i + 64));
    a2 = _mm512_add_epi64(a2, _mm512_load_si512(p + i + 128));
    a3 = _mm512_add_epi64(a3, _mm512_load_si512(p + i + 192));
  }
  return _mm512_reduce_add_epi64(_mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
}

double avx512_int8_peak_ops_per_round() { return 16 * 64 * 2; }

}  // namespace zl::kern
