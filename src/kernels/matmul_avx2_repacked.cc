// AVX2 kernels for the repacked integer formats (compiled with -mavx2 -mfma
// -mf16c; called only when CPUID reports them). They read the same repacked
// layouts as the AVX-512 kernels (matmul_internal.h: groups of 16 rows, each
// 64-byte vector holding 4 bytes of every row of the group), as two 8-row
// halves: the low 32 bytes of a vector are rows 0-7, the high 32 rows 8-15.
//
// Without VNNI the integer dot product is vpmaddubsw (u8 x s8 -> pairs summed
// into saturating int16) and vpmaddwd (int16 pairs -> int32). The weights go
// in as unsigned nibbles (0..15; Q8_0's q + 128 as two nibbles, Q6_K 6-bit
// values 0..63), so that several products sum in int16 without saturating:
// 16 products of a nibble and an activation (|a| <= 127) stay within
// 16 * 15 * 127 = 30480. One vpmaddwd per block then widens the int16 sums
// to int32 — against ones, 16 (Q8_0's high nibbles) or the sub-block scale
// (K-quants), so the scale multiplication is free. The activation side
// corrects for the unsigned encoding as in the AVX-512 path (Acts::corr,
// Acts::kpairs).
//
// Micro-kernel: R halves (8 rows each) x T tokens. Each weight vector is
// loaded and unpacked once and multiplied with a 4-byte broadcast of every
// token's activations, so that decode (T = 1, both halves: R = 2) needs
// ~2 vector operations per 32 weight bytes and prefill (R = 1, T up to 4) is
// bound by vpmaddubsw throughput. Within a token the order of the float
// operations is the same for every R and T: results are batch invariant.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "kernels/matmul_internal.h"
#include "kernels/simd_avx2.h"

namespace zl::kern {
namespace {

// v after an empty asm: GCC's reassociation would otherwise turn each chain
// of int16 additions into a tree, computing every vpmaddubsw of a block
// first and spilling their results (measured: Q4_0 GEMM at 70 GMAC/s a core).
inline __m256i chained(__m256i v) {
  __asm__("" : "+x"(v));
  return v;
}

// Everything a group micro-kernel needs: halves [h0, h0 + R) of the group at
// `w` (its first block), tokens [0, T) of a sub-tile of the activations.
struct GroupCall {
  const uint8_t* w;         // the group's first block in the repacked stream
  const uint16_t* scales;   // Q4_0/Q8_0/Q6_K: the group's first block's 16 f16 scales
  int64_t nb;               // blocks (Q4_0/Q8_0) or super-blocks (K-quants) per row
  const int8_t* qa;         // the sub-tile's first token, block 0
  const float* da;          // its scale of block 0
  const int32_t* aux;       // its correction (Q4_0/Q8_0) or 8 pair sums (K-quants) of block 0
  int64_t stride;           // the tile's width: block b of token t is at index b * stride + t
  int h0;                   // first half
  int valid[2];             // rows of each half that exist (0..8)
  float* y;                 // y of the sub-tile's first token, row 0 of the group
  int64_t n_out;
  bool prefetch;            // the first pass over the group: prefetch ahead
};


// ---- Q4_0 / Q8_0 ----

template <int R, int T, bool kQ4>
void group_q(const GroupCall& c) {
  constexpr int64_t kGb = kQ4 ? kGroupBlockQ4_0 : kGroupBlockQ8_0;
  // Prefetch distances in blocks, as the AVX-512 kernel: 2 KiB ahead into
  // L1, 12 KiB into L2.
  constexpr int64_t kNear = kQ4 ? 8 : 4, kFar = kQ4 ? 48 : 24;
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  const uint8_t* wb = c.w + 32 * c.h0;
  for (int64_t b = 0; b < c.nb; ++b, wb += kGb) {
    const uint8_t* blk = c.w + b * kGb;
    if (c.prefetch) {
      for (int i = 0; i < kGb; i += 64) _mm_prefetch(reinterpret_cast<const char*>(blk + kNear * kGb + i), _MM_HINT_T0);
      for (int i = 0; i < kGb; i += 64) _mm_prefetch(reinterpret_cast<const char*>(blk + kFar * kGb + i), _MM_HINT_T1);
      if ((b & 1) == 0) _mm_prefetch(reinterpret_cast<const char*>(c.scales + (b + kFar) * 16), _MM_HINT_T1);
    }
    const int8_t* qa = c.qa + 32 * b * c.stride;
    // int16 sums: one per (half, token); Q8_0 two (low and high nibbles).
    constexpr int kSums = kQ4 ? 1 : 2;
    __m256i s[kSums][R][T];
    for (int k = 0; k < kSums; ++k) {
      for (int r = 0; r < R; ++r) {
        for (int t = 0; t < T; ++t) s[k][r][t] = _mm256_setzero_si256();
      }
    }
    constexpr int kVectors = kQ4 ? 4 : 8;
#pragma GCC unroll 8
    for (int j = 0; j < kVectors; ++j) {
      __m256i lo[R], hi[R];
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) {
        const __m256i p = _mm256_load_si256(reinterpret_cast<const __m256i*>(wb + 64 * j + 32 * r));
        lo[r] = _mm256_and_si256(p, m4);
        hi[r] = _mm256_and_si256(_mm256_srli_epi16(p, 4), m4);
      }
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const int8_t* at = qa + 32 * t;
        if constexpr (kQ4) {
          // Low nibbles are values 4j.., high nibbles 16 + 4j...
          const __m256i al = bcast4(at + 4 * j);
#pragma GCC unroll 2
          for (int r = 0; r < R; ++r) s[0][r][t] = chained(_mm256_add_epi16(s[0][r][t], _mm256_maddubs_epi16(lo[r], al)));
          const __m256i ah = bcast4(at + 16 + 4 * j);
#pragma GCC unroll 2
          for (int r = 0; r < R; ++r) s[0][r][t] = chained(_mm256_add_epi16(s[0][r][t], _mm256_maddubs_epi16(hi[r], ah)));
        } else {
          const __m256i a = bcast4(at + 4 * j);
#pragma GCC unroll 2
          for (int r = 0; r < R; ++r) {
            s[0][r][t] = chained(_mm256_add_epi16(s[0][r][t], _mm256_maddubs_epi16(lo[r], a)));
            s[1][r][t] = chained(_mm256_add_epi16(s[1][r][t], _mm256_maddubs_epi16(hi[r], a)));
          }
        }
      }
    }
    const int64_t ab = b * c.stride;
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
      const __m256 dw = _mm256_cvtph_ps(
          _mm_load_si128(reinterpret_cast<const __m128i*>(c.scales + b * kGroupRows + 8 * (c.h0 + r))));
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        __m256i i32 = _mm256_madd_epi16(s[0][r][t], _mm256_set1_epi16(1));
        if constexpr (!kQ4) i32 = _mm256_add_epi32(i32, _mm256_madd_epi16(s[1][r][t], _mm256_set1_epi16(16)));
        i32 = _mm256_add_epi32(i32, _mm256_set1_epi32(c.aux[ab + t]));
        const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(c.da[ab + t]));
        acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i32), scale, acc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) store_rows(c.y + t * c.n_out + 8 * (c.h0 + r), acc[r][t], c.valid[c.h0 + r]);
  }
}

// ---- K-quants ----

// Part `part` of `kParts` of the prefetches of a K-quant super-block: 6
// super-blocks ahead into L2, 2 KiB into L1 (the AVX-512 kernel's distances).
template <int kBytes, int kParts>
inline void prefetch_k(const uint8_t* w, int part) {
  constexpr int kAhead = 6, kNearBytes = 2048, kLines = kBytes / 64, kPer = (kLines + kParts - 1) / kParts;
  for (int i = part * kPer; i < (part + 1) * kPer && i < kLines; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(w + kAhead * kBytes + 64 * i), _MM_HINT_T1);
    _mm_prefetch(reinterpret_cast<const char*>(w + kNearBytes + 64 * i), _MM_HINT_T0);
  }
}

// vpshufb mask: in every 32-bit lane, the int16 pair (byte q, byte q) of
// that lane, zero-extended.
inline __m256i pair_mask_u(int q) {
  const uint32_t v = 0x80008000u | (static_cast<uint32_t>(q) << 16) | static_cast<uint32_t>(q);
  const __m256i lane = _mm256_setr_epi32(0, 0x00040004, 0x00080008, 0x000C000C, 0, 0x00040004, 0x00080008, 0x000C000C);
  return _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(v)), lane);
}

// Per half and super-block, computed once per pass and read as memory
// operands of vpmaddwd: the 8 sub-block scales as (sc, sc) int16 pairs and
// the 4 min pairs (Q4_K), or the 16 scale pairs and 8 correction pairs (Q6_K).
struct alignas(32) KScales {
  __m256i sc[16];
  __m256i corr[8];
};

template <int R, int T>
void group_q4_k(const GroupCall& c) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i k1 = _mm256_set1_epi32(0x3f3f3f3f), k2 = _mm256_set1_epi32(0x0f0f0f0f),
                k3 = _mm256_set1_epi32(0x03030303), pairs_mask = _mm256_set1_epi32(0x00FF00FF);
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  KScales ks[R];
  for (int64_t b = 0; b < c.nb; ++b) {
    const uint8_t* w = c.w + b * kGroupBlockQ4_K;
    const int8_t* qa = c.qa + 256 * b * c.stride;
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
      // ggml's kmask shuffle lane-wise: sc[0..3], sc[4..7], mn[0..3], mn[4..7].
      const int o = 32 * (c.h0 + r);
      const __m256i u0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(w + 2048 + o));
      const __m256i u1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(w + 2112 + o));
      const __m256i u2 = _mm256_load_si256(reinterpret_cast<const __m256i*>(w + 2176 + o));
      const __m256i sc_lo = _mm256_and_si256(u0, k1);
      const __m256i sc_hi = _mm256_or_si256(_mm256_and_si256(u2, k2),
                                            _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u0, 6), k3), 4));
      const __m256i mn_lo = _mm256_and_si256(u1, k1);
      const __m256i mn_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), k2),
                                            _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u1, 6), k3), 4));
      for (int q = 0; q < 4; ++q) {
        ks[r].sc[q] = _mm256_shuffle_epi8(sc_lo, pair_mask_u(q));
        ks[r].sc[4 + q] = _mm256_shuffle_epi8(sc_hi, pair_mask_u(q));
      }
      // Mins as int16 pairs (mn0, mn2), (mn1, mn3), (mn4, mn6), (mn5, mn7).
      ks[r].corr[0] = _mm256_and_si256(mn_lo, pairs_mask);
      ks[r].corr[1] = _mm256_and_si256(_mm256_srli_epi32(mn_lo, 8), pairs_mask);
      ks[r].corr[2] = _mm256_and_si256(mn_hi, pairs_mask);
      ks[r].corr[3] = _mm256_and_si256(_mm256_srli_epi32(mn_hi, 8), pairs_mask);
    }
    __m256i isum[R][T];
    for (int r = 0; r < R; ++r) {
      for (int t = 0; t < T; ++t) isum[r][t] = _mm256_setzero_si256();
    }
    // Sub-block s: vectors 8 (s / 2) + k, low (s even) or high nibbles.
    auto sub_block = [&](int s) __attribute__((always_inline)) {
      if (c.prefetch) prefetch_k<kGroupBlockQ4_K, 8>(w, s);
      // (The address hidden from GCC, which would otherwise keep the vectors of
      // an even sub-block in registers for the odd one, spilling them.)
      const uint8_t* ws = w + 512 * (s >> 1) + 32 * c.h0;
      __asm__("" : "+r"(ws));
      __m256i p[R][T];
      for (int r = 0; r < R; ++r) {
        for (int t = 0; t < T; ++t) p[r][t] = _mm256_setzero_si256();
      }
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        __m256i wv[R];
#pragma GCC unroll 2
        for (int r = 0; r < R; ++r) {
          const __m256i raw = _mm256_load_si256(reinterpret_cast<const __m256i*>(ws + 64 * k + 32 * r));
          wv[r] = (s & 1) ? _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4) : _mm256_and_si256(raw, m4);
        }
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          const __m256i a = bcast4(qa + 256 * t + 32 * s + 4 * k);
#pragma GCC unroll 2
          for (int r = 0; r < R; ++r) p[r][t] = chained(_mm256_add_epi16(p[r][t], _mm256_maddubs_epi16(wv[r], a)));
        }
      }
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
          isum[r][t] = chained(_mm256_add_epi32(isum[r][t], _mm256_madd_epi16(p[r][t], ks[r].sc[s])));
        }
      }
    };
    // Unrolled (the nibble choice and prefetch part known) where the loop
    // body is small: decode; a runtime loop for the wide prefill tiles,
    // which measured faster so (the code stays in the uop cache).
    if constexpr (R * T <= 2) {
#pragma GCC unroll 8
      for (int s = 0; s < 8; ++s) sub_block(s);
    } else {
#pragma GCC unroll 1
      for (int s = 0; s < 8; ++s) sub_block(s);
    }
    const int64_t ab = b * c.stride;
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
      const uint8_t* dm = w + 2240 + 16 * (c.h0 + r);
      const __m256 dw = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(dm)));
      const __m256 dminw = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(dm + 32)));
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const int32_t* pt = c.aux + 8 * (ab + t);
        __m256i mins = _mm256_madd_epi16(ks[r].corr[0], _mm256_set1_epi32(pt[0]));
        mins = _mm256_add_epi32(mins, _mm256_madd_epi16(ks[r].corr[1], _mm256_set1_epi32(pt[1])));
        mins = _mm256_add_epi32(mins, _mm256_madd_epi16(ks[r].corr[2], _mm256_set1_epi32(pt[2])));
        mins = _mm256_add_epi32(mins, _mm256_madd_epi16(ks[r].corr[3], _mm256_set1_epi32(pt[3])));
        const __m256 dat = _mm256_set1_ps(c.da[ab + t]);
        acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r][t]), _mm256_mul_ps(dw, dat), acc[r][t]);
        acc[r][t] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_mul_ps(dminw, dat), acc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) store_rows(c.y + t * c.n_out + 8 * (c.h0 + r), acc[r][t], c.valid[c.h0 + r]);
  }
}

template <int R, int T>
void group_q6_k(const GroupCall& c) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30), m3f = _mm256_set1_epi8(0x3F);
  __m256 acc[R][T];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
  }
  KScales ks[R];
  for (int64_t b = 0; b < c.nb; ++b) {
    const uint8_t* w = c.w + b * kGroupBlockQ6_K;
    const int8_t* qa = c.qa + 256 * b * c.stride;
    if (c.prefetch) _mm_prefetch(reinterpret_cast<const char*>(c.scales + (b + 4) * kGroupRows), _MM_HINT_T1);
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
      const int o = 32 * (c.h0 + r);
      for (int i = 0; i < 4; ++i) {  // scales[4i .. 4i + 3] (int8) of every row
        const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(w + 3072 + 64 * i + o));
        // (sc[4i], sc[4i + 2]) and (sc[4i + 1], sc[4i + 3]) for the -32
        // correction; each word doubled gives the scale pairs.
        const __m256i even = _mm256_srai_epi16(_mm256_slli_epi16(v, 8), 8), odd = _mm256_srai_epi16(v, 8);
        ks[r].corr[2 * i] = even;
        ks[r].corr[2 * i + 1] = odd;
        const __m256i word0 = _mm256_setr_epi32(0x01000100, 0x05040504, 0x09080908, 0x0D0C0D0C, 0x01000100,
                                                0x05040504, 0x09080908, 0x0D0C0D0C);
        const __m256i word1 = _mm256_setr_epi32(0x03020302, 0x07060706, 0x0B0A0B0A, 0x0F0E0F0E, 0x03020302,
                                                0x07060706, 0x0B0A0B0A, 0x0F0E0F0E);
        ks[r].sc[4 * i] = _mm256_shuffle_epi8(even, word0);
        ks[r].sc[4 * i + 1] = _mm256_shuffle_epi8(odd, word0);
        ks[r].sc[4 * i + 2] = _mm256_shuffle_epi8(even, word1);
        ks[r].sc[4 * i + 3] = _mm256_shuffle_epi8(odd, word1);
      }
    }
    __m256i isum[R][T];
    for (int r = 0; r < R; ++r) {
      for (int t = 0; t < T; ++t) isum[r][t] = _mm256_setzero_si256();
    }
#pragma GCC unroll 1
    for (int h = 0; h < 2; ++h) {
      const uint8_t* wh = w + 64 * 24 * h + 32 * c.h0;
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {  // values 128h + 32g + l, l = 4k + byte
        if (c.prefetch) prefetch_k<kGroupBlockQ6_K, 8>(w, 4 * h + g);
#pragma GCC unroll 4
        for (int kp = 0; kp < 4; ++kp) {  // k = 2kp, 2kp + 1: half of sub-block 8h + 2g + kp / 2
          __m256i p[R][T];
#pragma GCC unroll 2
          for (int kk = 0; kk < 2; ++kk) {
            const int k = 2 * kp + kk;
            __m256i wv[R];
#pragma GCC unroll 2
            for (int r = 0; r < R; ++r) {
              // Vectors A, B, C = 3k, 3k + 1, 3k + 2 (matmul_internal.h).
              // (The address hidden from GCC: it would otherwise keep A and B
              // from groups 0 and 1 for groups 2 and 3, spilling them.)
              const uint8_t* v = wh + 64 * 3 * k + 32 * r;
              __asm__("" : "+r"(v));
              auto load = [&](int i) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(v + 64 * i)); };
              if (g < 2) {
                wv[r] = _mm256_and_si256(load(g), m3f);
              } else {
                const __m256i lo = g == 2 ? _mm256_and_si256(load(2), m4) : _mm256_and_si256(_mm256_srli_epi16(load(2), 4), m4);
                wv[r] = _mm256_or_si256(lo, _mm256_and_si256(_mm256_srli_epi16(load(g - 2), 2), m30));
              }
            }
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t) {
              const __m256i a = bcast4(qa + 256 * t + 128 * h + 32 * g + 4 * k);
#pragma GCC unroll 2
              for (int r = 0; r < R; ++r) {
                const __m256i m = _mm256_maddubs_epi16(wv[r], a);  // values <= 63: two products sum in int16
                p[r][t] = kk == 0 ? m : _mm256_add_epi16(p[r][t], m);
              }
            }
          }
          const int sb = 8 * h + 2 * g + (kp >> 1);
#pragma GCC unroll 2
          for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t) {
              isum[r][t] = chained(_mm256_add_epi32(isum[r][t], _mm256_madd_epi16(p[r][t], ks[r].sc[sb])));
            }
          }
        }
      }
    }
    const int64_t ab = b * c.stride;
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
      const __m256 dw = _mm256_cvtph_ps(
          _mm_load_si128(reinterpret_cast<const __m128i*>(c.scales + b * kGroupRows + 8 * (c.h0 + r))));
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) {
        const int32_t* pt = c.aux + 8 * (ab + t);
        __m256i corr = _mm256_madd_epi16(ks[r].corr[0], _mm256_set1_epi32(pt[0]));
        for (int i = 1; i < 8; ++i) corr = _mm256_add_epi32(corr, _mm256_madd_epi16(ks[r].corr[i], _mm256_set1_epi32(pt[i])));
        const __m256i total = _mm256_sub_epi32(isum[r][t], _mm256_slli_epi32(corr, 5));
        acc[r][t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_mul_ps(dw, _mm256_set1_ps(c.da[ab + t])), acc[r][t]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) store_rows(c.y + t * c.n_out + 8 * (c.h0 + r), acc[r][t], c.valid[c.h0 + r]);
  }
}

using GroupFn = void (*)(const GroupCall&);

// Micro-kernels of one format: both halves x up to pair_tokens tokens, one
// half x up to max_tokens (the accumulators of more would not fit the 16
// ymm registers).
struct Kernels {
  std::array<GroupFn, 2> both;  // [T - 1]
  std::array<GroupFn, 4> one;   // [T - 1], null past max_tokens
  int pair_tokens;
  int max_tokens;
};

constexpr Kernels kQ4_0 = {{group_q<2, 1, true>, group_q<2, 2, true>},
                           {group_q<1, 1, true>, group_q<1, 2, true>, group_q<1, 3, true>, group_q<1, 4, true>},
                           2, 4};
constexpr Kernels kQ8_0 = {{group_q<2, 1, false>, nullptr},
                           {group_q<1, 1, false>, group_q<1, 2, false>, group_q<1, 3, false>, nullptr},
                           1, 3};
constexpr Kernels kQ4_K = {{group_q4_k<2, 1>, nullptr},
                           {group_q4_k<1, 1>, group_q4_k<1, 2>, group_q4_k<1, 3>, group_q4_k<1, 4>},
                           1, 4};
constexpr Kernels kQ6_K = {{group_q6_k<2, 1>, nullptr},
                           {group_q6_k<1, 1>, group_q6_k<1, 2>, group_q6_k<1, 3>, nullptr},
                           1, 3};

// Rows [r0, r1) in whole groups: per group and token tile (kTokenTile or
// kTokenTileK wide, the activation layout's), both halves at once for a
// narrow tile, else each half in sub-tiles of up to max_tokens.
void rows_groups(const PackedMatrix& w, const Acts& a, float* y, int64_t r0, int64_t r1, bool k_quant,
                 const Kernels& ks) {
  const int64_t n_out = w.n_out();
  const int64_t block_values = k_quant ? 256 : 32, nb = w.n_in() / block_values;
  const int64_t gb = group_block_bytes(w.type()), tile = k_quant ? kTokenTileK : kTokenTile;
  for (int64_t row0 = r0; row0 < r1; row0 += kGroupRows) {
    const int64_t g = row0 / kGroupRows;
    const int n_rows = static_cast<int>(std::min<int64_t>(kGroupRows, n_out - row0));
    GroupCall c{};
    c.w = w.quants() + g * nb * gb;
    c.scales = w.scales() ? w.scales() + g * nb * kGroupRows : nullptr;
    c.nb = nb;
    c.valid[0] = std::min(n_rows, 8);
    c.valid[1] = n_rows - c.valid[0];
    c.n_out = n_out;
    const int halves = c.valid[1] > 0 ? 2 : 1;
    c.prefetch = true;
    for (int64_t t0 = 0; t0 < a.n_tokens; t0 += tile) {
      const int64_t width = std::min(tile, a.n_tokens - t0);
      c.stride = width;
      auto run = [&](int64_t k0, GroupFn fn) {
        const int64_t first = t0 * nb + k0;  // index of block 0 of token t0 + k0
        c.qa = (k_quant ? a.kqs : a.qs) + first * block_values;
        c.da = (k_quant ? a.kd : a.d) + first;
        c.aux = k_quant ? a.kpairs + 8 * first : a.corr + first;
        c.y = y + (t0 + k0) * n_out + row0;
        fn(c);
        c.prefetch = false;
      };
      if (halves == 2 && width <= ks.pair_tokens) {
        c.h0 = 0;
        run(0, ks.both[width - 1]);
        continue;
      }
      for (int h = 0; h < halves; ++h) {
        c.h0 = h;
        // Sub-tiles of equal widths (a tile of 5 at most 4: 3 + 2).
        const int64_t n_sub = (width + ks.max_tokens - 1) / ks.max_tokens, per = (width + n_sub - 1) / n_sub;
        for (int64_t k0 = 0; k0 < width; k0 += per) run(k0, ks.one[std::min(per, width - k0) - 1]);
      }
    }
  }
}

void rows_q4_0(const PackedMatrix& w, const Acts& a, float* y, int64_t r0, int64_t r1) {
  rows_groups(w, a, y, r0, r1, false, kQ4_0);
}
void rows_q8_0(const PackedMatrix& w, const Acts& a, float* y, int64_t r0, int64_t r1) {
  rows_groups(w, a, y, r0, r1, false, kQ8_0);
}
void rows_q4_k(const PackedMatrix& w, const Acts& a, float* y, int64_t r0, int64_t r1) {
  rows_groups(w, a, y, r0, r1, true, kQ4_K);
}
void rows_q6_k(const PackedMatrix& w, const Acts& a, float* y, int64_t r0, int64_t r1) {
  rows_groups(w, a, y, r0, r1, true, kQ6_K);
}

inline int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// 32 int32 (|v| <= 127) -> 32 int8 in order.
inline void store_int8(int8_t* q, const __m256i v[4]) {
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q),
                      _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

}  // namespace

RowsKernel avx2_repacked_rows_kernel(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0: return rows_q4_0;
    case GgmlType::kQ8_0: return rows_q8_0;
    case GgmlType::kQ4_K: return rows_q4_k;
    case GgmlType::kQ6_K: return rows_q6_k;
    default: return avx2_more_rows_kernel(type);
  }
}

void avx2_quantize_q8_k(GgmlType type, const float* x, int64_t nbk, int64_t stride, int8_t* qs, float* d,
                        int32_t* pairs) {
  const __m256 magic = _mm256_set1_ps(12582912.f), abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256i mant = _mm256_set1_epi32(0x007fffff), bias = _mm256_set1_epi32(0x00400000),
                q_max = _mm256_set1_epi32(127);
  for (int64_t blk = 0; blk < nbk; ++blk) {
    const float* xb = x + 256 * blk;
    const int64_t o = blk * stride;
    int8_t* q = qs + 256 * o;
    int32_t* pr = pairs + 8 * o;
    // amax, and the first value of that magnitude (its sign sets d's).
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < 32; ++k) m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(xb + 8 * k), abs_mask));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    const float amax = _mm_cvtss_f32(m4);
    if (amax == 0.0f) {
      std::memset(q, 0, 256);
      d[o] = 0.0f;
      std::memset(pr, 0, 32);
      continue;
    }
    float max = 0.0f;
    for (int k = 0; k < 32; ++k) {
      const int hit = _mm256_movemask_ps(
          _mm256_cmp_ps(_mm256_and_ps(_mm256_loadu_ps(xb + 8 * k), abs_mask), _mm256_set1_ps(amax), _CMP_EQ_OQ));
      if (hit) {
        max = xb[8 * k + __builtin_ctz(hit)];
        break;
      }
    }
    const float iscale = -127.f / max;
    const __m256 vs = _mm256_set1_ps(iscale);
    int32_t bs[16];
    for (int k = 0; k < 8; ++k) {  // 32 values
      __m256i v[4];
      for (int e = 0; e < 4; ++e) {
        // ggml's nearest_int: the rounded integer in the low mantissa bits.
        // (The product rounded on its own, not fused into an FMA: see the avx512 twin.)
        __m256 prod = _mm256_mul_ps(vs, _mm256_loadu_ps(xb + 32 * k + 8 * e));
        __asm__("" : "+x"(prod));
        const __m256 f = _mm256_add_ps(prod, magic);
        v[e] = _mm256_min_epi32(_mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(f), mant), bias), q_max);
      }
      store_int8(q + 32 * k, v);
      bs[2 * k] = hsum_epi32(_mm256_add_epi32(v[0], v[1]));
      bs[2 * k + 1] = hsum_epi32(_mm256_add_epi32(v[2], v[3]));
    }
    d[o] = 1 / iscale;
    q8_k_pair_sums(type, bs, pr);
  }
}

}  // namespace zl::kern
