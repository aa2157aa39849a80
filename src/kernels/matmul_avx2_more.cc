// AVX2 kernels of the later integer formats (compiled with -mavx2 -mfma
// -mf16c; called only when CPUID reports them), on the repacked layouts of
// matmul_internal.h read as two 8-row halves (the low 32 bytes of a vector
// are rows 0-7, the high 32 rows 8-15), as matmul_avx2_repacked.cc does.
//
// Without VNNI, and with weights up to 241 after an unsigned offset (IQ4's
// grid) that would saturate vpmaddubsw's int16 pairs, each weight vector is
// decoded into its signed values (q - 16, q - 4, the grid itself) and
// multiplied as ggml's AVX2 kernels do: vpmaddubsw(|w|, sign(a, w)), whose
// pairs stay within 2 * 127 * 127, then vpmaddwd against ones to int32. No
// offset correction is needed (prepare_acts passes corr_mul 0); the K-quant
// mins (Q5_K, Q2_K) are real terms, formed from the Q8_K pair sums.
// Q5_K, Q3_K and Q2_K, whose unsigned values stay below 32, skip the signs:
// vpmaddubsw(w, a) straight, int16 sums per 16-value half scaled by one
// vpmaddwd, and Q3_K's offset (values q + 4) corrected from the pair sums.
// Micro-kernel: one half x up to 4 tokens, the weight vector decoded once
// for all of them. Within a token the float operations are the same for
// every tile shape: results are batch invariant.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "kernels/matmul_internal.h"
#include "kernels/simd_avx2.h"

namespace zl::kern {
namespace {


inline __m256i load32(const uint8_t* p) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256i low_nibbles(__m256i raw) { return _mm256_and_si256(raw, _mm256_set1_epi8(0x0F)); }
inline __m256i high_nibbles(__m256i raw) { return _mm256_and_si256(_mm256_srli_epi16(raw, 4), _mm256_set1_epi8(0x0F)); }

// Bit `from` of every byte moved to bit `to`, masked to that bit.
inline __m256i move_bit(__m256i v, int from, int to) {
  const __m256i m = from >= to ? _mm256_srl_epi16(v, _mm_cvtsi32_si128(from - to))
                               : _mm256_sll_epi16(v, _mm_cvtsi32_si128(to - from));
  return _mm256_and_si256(m, _mm256_set1_epi8(static_cast<char>(1 << to)));
}

// A signed 16-entry grid in both 128-bit lanes, for vpshufb.
inline __m256i grid_table(const int8_t* grid) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(grid)));
}

// Sum of w * a over each 4-byte lane, as int32: w signed (|w| <= 127), a the
// broadcast activations.
inline __m256i dot4(__m256i abs_w, __m256i w, __m256i a) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(abs_w, _mm256_sign_epi8(a, w)), _mm256_set1_epi16(1));
}

// An empty asm: GCC keeps a chain of int16 additions in order (matmul_avx2_repacked.cc).
inline __m256i chained(__m256i v) {
  __asm__("" : "+x"(v));
  return v;
}

inline __m256 load_f16x8(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }


// One half of one group x a sub-tile of tokens.
struct HalfCall {
  const uint8_t* w;       // the group's first block
  const uint8_t* scales;  // its first block's scales (null where none)
  int64_t nb;             // blocks (super-blocks) per row
  int h;                  // the half: rows 8h .. 8h + 7 of the group
  const int8_t* qa;       // the sub-tile's first token, block 0
  const float* da;        // its scale of block 0
  const int32_t* aux;     // its Q8_K pair sums of block 0 (K-quants)
  const float* sa;        // its Q8_1 sums of block 0 (Q4_1)
  int64_t stride;         // the tile's width: block b of token t at index b * stride + t
  float* y;               // output of the sub-tile's first token, row 8h of the group
  int64_t n_out;
  int valid;              // rows of the half that exist
};

// ============================================================================
// 32-value blocks
// ============================================================================

template <GgmlType kType, int T>
void half32(const HalfCall& c) {
  constexpr int64_t kGb = group_block_bytes(kType), kSb = scale_bytes_per_block(kType);
  const __m256i table = grid_table(kType == GgmlType::kMXFP4 ? kMxfp4Values : kIq4nlValues);
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < c.nb; ++b) {
    const uint8_t* wb = c.w + b * kGb + 32 * c.h;
    const uint8_t* sb = c.scales + b * kSb;
    _mm_prefetch(reinterpret_cast<const char*>(wb + 16 * kGb), _MM_HINT_T0);
    if constexpr (kGb > 256) _mm_prefetch(reinterpret_cast<const char*>(wb + 16 * kGb + 256), _MM_HINT_T0);
    const int8_t* qa = c.qa + 32 * b * c.stride;
    __m256i s[T];
    for (int t = 0; t < T; ++t) s[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      const __m256i raw = load32(wb + 64 * (j & 3));
      __m256i w = j < 4 ? low_nibbles(raw) : high_nibbles(raw);
      if constexpr (kType == GgmlType::kIQ4_NL || kType == GgmlType::kMXFP4) w = _mm256_shuffle_epi8(table, w);
      if constexpr (kType == GgmlType::kQ5_0) {
        w = _mm256_or_si256(w, move_bit(load32(wb + 256), 2 * (j & 3) + (j >> 2), 4));
        w = _mm256_sub_epi8(w, _mm256_set1_epi8(16));
      }
      const __m256i aw = _mm256_sign_epi8(w, w);
      const int off = j < 4 ? 4 * j : 16 + 4 * (j - 4);
#pragma GCC unroll 4
      for (int t = 0; t < T; ++t) s[t] = _mm256_add_epi32(s[t], dot4(aw, w, bcast4(qa + 32 * t + off)));
    }
    __m256 dw;
    if constexpr (kType == GgmlType::kMXFP4) {
      const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sb + 8 * c.h)));
      const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
      const __m256i tiny = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
      dw = _mm256_castsi256_ps(_mm256_blendv_epi8(normal, tiny, _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e)));
    } else {
      dw = load_f16x8(sb + 16 * c.h);
    }
    const int64_t ab = b * c.stride;
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s[t]), _mm256_mul_ps(dw, _mm256_set1_ps(c.da[ab + t])), acc[t]);
      if constexpr (kType == GgmlType::kQ4_1) {
        acc[t] = _mm256_fmadd_ps(load_f16x8(sb + 32 + 16 * c.h), _mm256_set1_ps(c.sa[ab + t]), acc[t]);
      }
    }
  }
  for (int t = 0; t < T; ++t) store_rows(c.y + t * c.n_out, acc[t], c.valid);
}

// ============================================================================
// 256-value super-blocks (see matmul_avx512_more.cc for the shared scheme)
// ============================================================================

// vpshufb control taking, in every 4-byte lane, bytes b0 .. b3 of that lane
// (< 0: zero).
inline __m256i lane_bytes(int b0, int b1, int b2, int b3) {
  auto byte = [](int b) { return static_cast<uint32_t>(b < 0 ? 0x80 : b); };
  const uint32_t v = byte(b0) | byte(b1) << 8 | byte(b2) << 16 | byte(b3) << 24;
  const __m256i lane = _mm256_setr_epi32(0, 0x04040404, 0x08080808, 0x0C0C0C0C, 0, 0x04040404, 0x08080808, 0x0C0C0C0C);
  return _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(v)), lane);
}
// Byte i of every 4-byte lane as an (x, x) int16 pair, zero- / sign-extended.
inline __m256i pair_u16(__m256i v, int i) { return _mm256_shuffle_epi8(v, lane_bytes(i, -1, i, -1)); }
inline __m256i pair_s16(__m256i v, int i) { return _mm256_srai_epi16(_mm256_shuffle_epi8(v, lane_bytes(i, i, i, i)), 8); }

// Per format: Prep(w, scales, h); vec(w, p, s, k) the signed values
// 32s + 4k .. +3 of the half's rows (w already at the half), or with
// kUnsigned the unsigned ones (< 32: vpmaddubsw's int16 pairs of 4 vectors
// cannot saturate) and scale16(p, j) the scale of 16-value half j as (sc,
// sc) int16 pairs, else scale(p, i); n_mins int16 pair vectors mins(p, k)
// against the activations' pair sums (0: none), finish(p, isum, mins, da,
// acc).
struct Q5K {
  static constexpr bool sub16 = false, kUnsigned = true;
  static constexpr int n_mins = 4;
  struct Prep {
    __m256i sc[2], mn_lo, mn_hi;
    __m256 d, dmin;
  };
  static Prep prep(const uint8_t* w, const uint8_t*, int h) {
    const __m256i k1 = _mm256_set1_epi32(0x3f3f3f3f), k2 = _mm256_set1_epi32(0x0f0f0f0f), k3 = _mm256_set1_epi32(0x03030303);
    const __m256i u0 = load32(w + 2048), u1 = load32(w + 2112), u2 = load32(w + 2176);
    Prep p;
    p.sc[0] = _mm256_and_si256(u0, k1);
    p.sc[1] = _mm256_or_si256(_mm256_and_si256(u2, k2), _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u0, 6), k3), 4));
    p.mn_lo = _mm256_and_si256(u1, k1);
    p.mn_hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), k2),
                              _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u1, 6), k3), 4));
    p.d = load_f16x8(w - 32 * h + 2240 + 16 * h);
    p.dmin = load_f16x8(w - 32 * h + 2272 + 16 * h);
    return p;
  }
  static __m256i vec(const uint8_t* w, const Prep&, int s, int k) {
    const __m256i raw = load32(w + 512 * (s >> 1) + 64 * k);
    const __m256i lo = (s & 1) ? high_nibbles(raw) : low_nibbles(raw);
    return _mm256_or_si256(lo, move_bit(load32(w + 64 * (36 + k)), s, 4));
  }
  static __m256i scale16(const Prep& p, int j) { return pair_u16(p.sc[j >> 3], (j >> 1) & 3); }
  static __m256i mins(const Prep& p, int k) {
    const __m256i m = k < 2 ? p.mn_lo : p.mn_hi;
    return _mm256_and_si256(k & 1 ? _mm256_srli_epi32(m, 8) : m, _mm256_set1_epi32(0x00FF00FF));
  }
  static __m256 finish(const Prep& p, __m256i isum, __m256i mins, float da, __m256 acc) {
    const __m256 dat = _mm256_set1_ps(da);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(p.d, dat), acc);
    return _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_mul_ps(p.dmin, dat), acc);
  }
};

struct Q3K {
  static constexpr bool sub16 = true, kUnsigned = true;
  static constexpr int n_mins = 8;
  struct Prep {
    __m256i sc[4];
    __m256 d;
  };
  static Prep prep(const uint8_t* w, const uint8_t* scales, int h) {
    const __m256i k1 = _mm256_set1_epi32(0x03030303), k2 = _mm256_set1_epi32(0x0f0f0f0f);
    const __m256i a0 = load32(w + 64 * 24), a1 = load32(w + 64 * 25), t = load32(w + 64 * 26);
    Prep p;
    p.sc[0] = _mm256_or_si256(_mm256_and_si256(a0, k2), _mm256_slli_epi32(_mm256_and_si256(t, k1), 4));
    p.sc[1] = _mm256_or_si256(_mm256_and_si256(a1, k2), _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(t, 2), k1), 4));
    p.sc[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(a0, 4), k2),
                              _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(t, 4), k1), 4));
    p.sc[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(a1, 4), k2),
                              _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(t, 6), k1), 4));
    for (auto& v : p.sc) v = _mm256_sub_epi8(v, _mm256_set1_epi8(32));
    p.d = load_f16x8(scales + 16 * h);
    return p;
  }
  // Sub-block s's A, B, C (matmul_internal.h; matmul_avx512_more.cc).
  static __m256i vec(const uint8_t* w, const Prep&, int s, int k) {
    const uint8_t* v = w + 64 * 3 * s;
    __m256i q;
    if ((k & 3) < 3) {
      const __m256i raw = load32(v + 64 * (k & 3));
      q = _mm256_and_si256(k >= 4 ? _mm256_srli_epi16(raw, 3) : raw, _mm256_set1_epi8(7));
    } else {
      const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(load32(v + 64 * (k >> 2)), 6), _mm256_set1_epi8(3));
      q = _mm256_or_si256(lo, move_bit(load32(v + 128), k == 3 ? 6 : 7, 2));
    }
    return q;  // q + 4
  }
  static __m256i scale16(const Prep& p, int j) { return pair_s16(p.sc[j >> 2], j & 3); }
  // The offset: the scales as pairs (sc[4i], sc[4i + 2]), (sc[4i + 1],
  // sc[4i + 3]) against the activations' 16-value sums, times 4.
  static __m256i mins(const Prep& p, int k) {
    const __m256i v = p.sc[k >> 1];
    return k & 1 ? _mm256_srai_epi16(v, 8) : _mm256_srai_epi16(_mm256_slli_epi16(v, 8), 8);
  }
  static __m256 finish(const Prep& p, __m256i isum, __m256i mins, float da, __m256 acc) {
    const __m256i total = _mm256_sub_epi32(isum, _mm256_slli_epi32(mins, 2));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(total), _mm256_mul_ps(p.d, _mm256_set1_ps(da)), acc);
  }
};

struct Q2K {
  static constexpr bool sub16 = true, kUnsigned = true;
  static constexpr int n_mins = 8;
  struct Prep {
    __m256i sc[4];
    __m256 d, dmin;
  };
  static Prep prep(const uint8_t* w, const uint8_t*, int h) {
    Prep p;
    for (int i = 0; i < 4; ++i) p.sc[i] = load32(w + 64 * (16 + i));
    p.d = load_f16x8(w - 32 * h + 1280 + 16 * h);
    p.dmin = load_f16x8(w - 32 * h + 1312 + 16 * h);
    return p;
  }
  static __m256i vec(const uint8_t* w, const Prep&, int s, int k) {
    const int h = s >> 2, g = s & 3;
    return _mm256_and_si256(_mm256_srl_epi16(load32(w + 64 * (8 * h + k)), _mm_cvtsi32_si128(2 * g)), _mm256_set1_epi8(3));
  }
  static __m256i scale16(const Prep& p, int j) {
    return _mm256_and_si256(pair_u16(p.sc[j >> 2], j & 3), _mm256_set1_epi16(0x0F));
  }
  static __m256i mins(const Prep& p, int k) {
    const __m256i m = _mm256_and_si256(_mm256_srli_epi16(p.sc[k >> 1], 4), _mm256_set1_epi8(0x0F));
    return _mm256_and_si256(k & 1 ? _mm256_srli_epi32(m, 8) : m, _mm256_set1_epi32(0x00FF00FF));
  }
  static __m256 finish(const Prep& p, __m256i isum, __m256i mins, float da, __m256 acc) {
    const __m256 dat = _mm256_set1_ps(da);
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(p.d, dat), acc);
    return _mm256_fnmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_mul_ps(p.dmin, dat), acc);
  }
};

struct Iq4Xs {
  static constexpr bool sub16 = false, kUnsigned = false;
  static constexpr int n_mins = 0;
  struct Prep {
    __m256i sl, sh, table;
    __m256 d;
  };
  static Prep prep(const uint8_t* w, const uint8_t*, int h) {
    Prep p;
    p.sl = load32(w + 2048);
    p.d = load_f16x8(w - 32 * h + 2112 + 16 * h);
    p.sh = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w - 32 * h + 2144 + 16 * h)));
    p.table = grid_table(kIq4nlValues);
    return p;
  }
  static __m256i vec(const uint8_t* w, const Prep& p, int s, int k) {
    const __m256i raw = load32(w + 64 * (4 * s + (k & 3)));
    return _mm256_shuffle_epi8(p.table, k < 4 ? low_nibbles(raw) : high_nibbles(raw));
  }
  static __m256i scale(const Prep& p, int s) {
    const __m256i lo = _mm256_and_si256(_mm256_srl_epi32(p.sl, _mm_cvtsi32_si128(4 * s)), _mm256_set1_epi32(0xF));
    const __m256i hi = _mm256_and_si256(_mm256_srl_epi32(p.sh, _mm_cvtsi32_si128(2 * s)), _mm256_set1_epi32(3));
    return _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
  }
  static __m256i mins(const Prep&, int) { return _mm256_setzero_si256(); }
  static __m256 finish(const Prep& p, __m256i isum, __m256i, float da, __m256 acc) {
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(p.d, _mm256_set1_ps(da)), acc);
  }
};

template <class F, GgmlType kType, int T>
void half_k(const HalfCall& c) {
  constexpr int64_t kGb = group_block_bytes(kType), kSb = scale_bytes_per_block(kType);
  __m256 acc[T];
  for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t b = 0; b < c.nb; ++b) {
    const uint8_t* w = c.w + b * kGb + 32 * c.h;
    const typename F::Prep p = F::prep(w, kSb > 0 ? c.scales + b * kSb : nullptr, c.h);
    const int8_t* qa = c.qa + 256 * b * c.stride;
    __m256i isum[T];
    for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
    // Sub-block s; unrolled for few tokens (immediate shift counts, as in
    // matmul_avx512_more.cc's group_k), a rolled loop for more.
    auto sub_block = [&](int s) __attribute__((always_inline)) {
      for (int i = 0; i < kGb / 8; i += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(w + 4 * kGb + s * (kGb / 8) + i), _MM_HINT_T1);
      }
      __m256i q[2][T];
      for (int t = 0; t < T; ++t) q[0][t] = q[1][t] = _mm256_setzero_si256();
      if constexpr (F::kUnsigned) {
        // Per 16-value half, int16 pair sums of vpmaddubsw (|sum| <= 4 * 2 *
        // 31 * 128), each applied its scale by one vpmaddwd.
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) {
          const __m256i wv = F::vec(w, p, s, k);
#pragma GCC unroll 4
          for (int t = 0; t < T; ++t) {
            q[k >> 2][t] = chained(_mm256_add_epi16(q[k >> 2][t], _mm256_maddubs_epi16(wv, bcast4(qa + 256 * t + 32 * s + 4 * k))));
          }
        }
        const __m256i sc0 = F::scale16(p, 2 * s), sc1 = F::scale16(p, 2 * s + 1);
        for (int t = 0; t < T; ++t) {
          isum[t] = _mm256_add_epi32(isum[t], _mm256_add_epi32(_mm256_madd_epi16(q[0][t], sc0), _mm256_madd_epi16(q[1][t], sc1)));
        }
      } else {
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) {
          const __m256i wv = F::vec(w, p, s, k), aw = _mm256_sign_epi8(wv, wv);
#pragma GCC unroll 4
          for (int t = 0; t < T; ++t) q[0][t] = _mm256_add_epi32(q[0][t], dot4(aw, wv, bcast4(qa + 256 * t + 32 * s + 4 * k)));
        }
        const __m256i sc = F::scale(p, s);
        for (int t = 0; t < T; ++t) isum[t] = _mm256_add_epi32(isum[t], _mm256_mullo_epi32(q[0][t], sc));
      }
    };
    if constexpr (T <= 2) {
#pragma GCC unroll 8
      for (int s = 0; s < 8; ++s) sub_block(s);
    } else {
#pragma GCC unroll 1
      for (int s = 0; s < 8; ++s) sub_block(s);
    }
    const int64_t ab = b * c.stride;
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      const int32_t* pt = c.aux + 8 * (ab + t);
      __m256i mins = _mm256_setzero_si256();
      for (int k = 0; k < F::n_mins; ++k) mins = _mm256_add_epi32(mins, _mm256_madd_epi16(F::mins(p, k), _mm256_set1_epi32(pt[k])));
      acc[t] = F::finish(p, isum[t], mins, c.da[ab + t], acc[t]);
    }
  }
  for (int t = 0; t < T; ++t) store_rows(c.y + t * c.n_out, acc[t], c.valid);
}

using HalfFn = void (*)(const HalfCall&);
constexpr int kMaxTokens = 4;

// Rows [r0, r1) in whole groups: per group, half and token tile (the
// activation layout's), sub-tiles of up to kMaxTokens of equal widths.
void rows_halves(const PackedMatrix& w, const Acts& a, float* y, int64_t r0, int64_t r1,
                 const std::array<HalfFn, kMaxTokens>& fns) {
  const GgmlType type = w.type();
  const bool kq = uses_q8_k(type);
  const int64_t n_out = w.n_out(), block_values = kq ? 256 : 32, nb = w.n_in() / block_values;
  const int64_t gb = group_block_bytes(type), sb = scale_bytes_per_block(type), tile = kq ? kTokenTileK : kTokenTile;
  const auto* scale_bytes = reinterpret_cast<const uint8_t*>(w.scales());
  for (int64_t row0 = r0; row0 < r1; row0 += kGroupRows) {
    const int64_t g = row0 / kGroupRows;
    const int n_rows = static_cast<int>(std::min<int64_t>(kGroupRows, n_out - row0));
    for (int h = 0; h < 2 && 8 * h < n_rows; ++h) {
      HalfCall c{};
      c.w = w.quants() + g * nb * gb;
      c.scales = scale_bytes ? scale_bytes + g * nb * sb : nullptr;
      c.nb = nb;
      c.h = h;
      c.n_out = n_out;
      c.valid = std::min(8, n_rows - 8 * h);
      for (int64_t t0 = 0; t0 < a.n_tokens; t0 += tile) {
        const int64_t width = std::min(tile, a.n_tokens - t0);
        const int64_t n_sub = (width + kMaxTokens - 1) / kMaxTokens, per = (width + n_sub - 1) / n_sub;
        c.stride = width;
        for (int64_t k0 = 0; k0 < width; k0 += per) {
          const int64_t first = t0 * nb + k0;
          c.qa = (kq ? a.kqs : a.qs) + first * block_values;
          c.da = (kq ? a.kd : a.d) + first;
          c.aux = kq ? a.kpairs + 8 * first : nullptr;
          c.sa = a.sa ? a.sa + first : nullptr;
          c.y = y + (t0 + k0) * n_out + row0 + 8 * h;
          fns[std::min(per, width - k0) - 1](c);
        }
      }
    }
  }
}

template <GgmlType kType>
void rows32(const PackedMatrix& w, const Acts& a, float* y, int64_t r0, int64_t r1) {
  static constexpr std::array<HalfFn, kMaxTokens> kFns = {half32<kType, 1>, half32<kType, 2>, half32<kType, 3>,
                                                          half32<kType, 4>};
  rows_halves(w, a, y, r0, r1, kFns);
}

template <class F, GgmlType kType>
void rows_k(const PackedMatrix& w, const Acts& a, float* y, int64_t r0, int64_t r1) {
  static constexpr std::array<HalfFn, kMaxTokens> kFns = {half_k<F, kType, 1>, half_k<F, kType, 2>,
                                                          half_k<F, kType, 3>, half_k<F, kType, 4>};
  rows_halves(w, a, y, r0, r1, kFns);
}

}  // namespace

RowsKernel avx2_more_rows_kernel(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_1: return rows32<GgmlType::kQ4_1>;
    case GgmlType::kQ5_0: return rows32<GgmlType::kQ5_0>;
    case GgmlType::kIQ4_NL: return rows32<GgmlType::kIQ4_NL>;
    case GgmlType::kMXFP4: return rows32<GgmlType::kMXFP4>;
    case GgmlType::kQ5_K: return rows_k<Q5K, GgmlType::kQ5_K>;
    case GgmlType::kQ3_K: return rows_k<Q3K, GgmlType::kQ3_K>;
    case GgmlType::kQ2_K: return rows_k<Q2K, GgmlType::kQ2_K>;
    case GgmlType::kIQ4_XS: return rows_k<Iq4Xs, GgmlType::kIQ4_XS>;
    default: return nullptr;
  }
}

}  // namespace zl::kern
