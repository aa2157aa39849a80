// AVX-512 VNNI kernels of the later integer formats (compiled with -mavx512f
// -mavx512bw -mavx512vl -mavx512vnni; called only when CPUID reports them),
// on the repacked layouts of matmul_internal.h.
//
// One design for all of them, that of the Q4_0 and Q4_K kernels
// (matmul_avx512.cc): per group of 16 rows and tile of NT tokens, each
// 64-byte weight vector (4 values of each of the 16 rows) is loaded once and
// decoded into unsigned bytes — the value plus an offset that keeps it
// non-negative: nibbles as they are, a fifth or third bit OR-ed in, the
// IQ4/MXFP4 grids looked up with vpshufb — then multiplied by vpdpbusd
// against a 4-byte broadcast of every token's int8 activations. The exact
// integer block sums are then corrected for the offset (per 32-value block:
// Acts::corr; per K-quant sub-block: the Q8_K pair sums against the
// sub-block scales, vpdpwssd), scaled and accumulated in float. Only the
// float scaling differs from quant.cc's scalar order.
// GCC 12 warns inside its own avx512fintrin.h (_mm512_undefined_*).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <array>
#include <utility>

#include "kernels/matmul_internal.h"
#include "kernels/simd_avx512.h"

namespace zl::kern {
namespace {


// A 16-entry grid + 128 (unsigned) in every 128-bit lane, for vpshufb.
struct alignas(64) GridTable {
  uint8_t bytes[64];
};
constexpr GridTable make_grid_table(const int8_t* grid) {
  GridTable t{};
  for (int i = 0; i < 64; ++i) t.bytes[i] = static_cast<uint8_t>(grid[i % 16] + 128);
  return t;
}
constexpr GridTable kIq4Table = make_grid_table(kIq4nlValues), kMxfp4Table = make_grid_table(kMxfp4Values);
inline __m512i grid_table(const GridTable& t) { return _mm512_load_si512(t.bytes); }

// Bit `from` of every byte of v moved to bit `to` (other bits garbage; mask
// after). Shifts of 16-bit words never carry a byte's bit into the other
// byte's bit `to` for 0 <= from, to <= 7.
inline __m512i move_bit(__m512i v, int from, int to) {
  return from >= to ? _mm512_srl_epi16(v, _mm_cvtsi32_si128(from - to)) : _mm512_sll_epi16(v, _mm_cvtsi32_si128(to - from));
}

inline __m512i low_nibbles(__m512i raw) { return _mm512_and_si512(raw, _mm512_set1_epi8(0x0F)); }
inline __m512i high_nibbles(__m512i raw) { return _mm512_and_si512(_mm512_srli_epi16(raw, 4), _mm512_set1_epi8(0x0F)); }

// The 16 f16 at p as floats.
inline __m512 load_f16(const void* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(static_cast<const __m256i*>(p))); }

// ============================================================================
// 32-value blocks: Q4_1, Q5_0, IQ4_NL, MXFP4 (activations Q8_0)
// ============================================================================

template <GgmlType kType, int NT>
void group32(const uint8_t* quants, const uint8_t* scales, int64_t nb, const Acts& a, int64_t t0, float* y,
             int64_t n_out, int64_t row0, __mmask16 store_mask) {
  constexpr int64_t kGb = group_block_bytes(kType), kSb = scale_bytes_per_block(kType);
  constexpr int64_t kNear = 2048 / kGb, kFar = 12288 / kGb;
  constexpr bool kGrid = kType == GgmlType::kIQ4_NL || kType == GgmlType::kMXFP4;
  constexpr int kSplit = NT <= 2 ? 2 : 1;  // two chains of vpdpbusd for few tokens (latency)
  const __m512i table = grid_table(kType == GgmlType::kMXFP4 ? kMxfp4Table : kIq4Table);
  const __m512i bit4 = _mm512_set1_epi8(0x10);
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  const int8_t* qa = a.qs + t0 * nb * 32;
  const float* da = a.d + t0 * nb;
  const int32_t* ca = a.corr + t0 * nb;
  const float* sa = kType == GgmlType::kQ4_1 ? a.sa + t0 * nb : nullptr;
  for (int64_t b = 0; b < nb; ++b, quants += kGb, scales += kSb, qa += NT * 32, da += NT, ca += NT) {
    for (int i = 0; i < kGb; i += 64) _mm_prefetch(reinterpret_cast<const char*>(quants + kNear * kGb + i), _MM_HINT_T0);
    for (int i = 0; i < kGb; i += 64) _mm_prefetch(reinterpret_cast<const char*>(quants + kFar * kGb + i), _MM_HINT_T1);
    if (b % (64 / kSb) == 0) _mm_prefetch(reinterpret_cast<const char*>(scales + kFar * kSb), _MM_HINT_T1);
    __m512i s[NT * kSplit];
#pragma GCC unroll 16
    for (int t = 0; t < NT * kSplit; ++t) {
      // Q4_1 has no offset: its corr holds the plain sums (for Acts::sa).
      s[t] = t < NT && kType != GgmlType::kQ4_1 ? _mm512_set1_epi32(ca[t]) : _mm512_setzero_si512();
    }
    __m512i high_bits;
    if constexpr (kType == GgmlType::kQ5_0) high_bits = _mm512_load_si512(quants + 256);
#pragma GCC unroll 8
    for (int j = 0; j < 8; ++j) {
      // Vector j: values 4j.. (low nibbles of stored vector j) for j < 4,
      // 16 + 4(j - 4).. (high nibbles of stored vector j - 4) above.
      const __m512i raw = _mm512_load_si512(quants + 64 * (j & 3));
      __m512i w = j < 4 ? low_nibbles(raw) : high_nibbles(raw);
      if constexpr (kGrid) w = _mm512_shuffle_epi8(table, w);
      if constexpr (kType == GgmlType::kQ5_0) {
        const int bit = 2 * (j & 3) + (j >> 2);  // (matmul_internal.h)
        w = _mm512_ternarylogic_epi32(move_bit(high_bits, bit, 4), bit4, w, 0xEA);  // (hb & bit4) | w
      }
      const int8_t* at = qa + (j < 4 ? 4 * j : 16 + 4 * (j - 4));
#pragma GCC unroll 16
      for (int t = 0; t < NT; ++t) {
        const int c = kSplit == 2 && j >= 4 ? NT + t : t;
        s[c] = dpbusd_bcast(s[c], w, at + 32 * t);
      }
    }
    if constexpr (kSplit == 2) {
      for (int t = 0; t < NT; ++t) s[t] = _mm512_add_epi32(s[t], s[NT + t]);
    }
    __m512 dw;
    if constexpr (kType == GgmlType::kMXFP4) {
      // e8m0 -> 2^(e - 127) / 2 (quant_blocks.h e8m0_to_fp32_half).
      const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales)));
      const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
      const __m512i tiny = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
      dw = _mm512_castsi512_ps(_mm512_mask_blend_epi32(_mm512_cmplt_epi32_mask(e, _mm512_set1_epi32(2)), normal, tiny));
    } else {
      dw = load_f16(scales);
    }
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t]), _mm512_mul_ps(dw, _mm512_set1_ps(da[t])), acc[t]);
      if constexpr (kType == GgmlType::kQ4_1) acc[t] = _mm512_fmadd_ps(load_f16(scales + 32), _mm512_set1_ps(sa[t]), acc[t]);
    }
    if constexpr (kType == GgmlType::kQ4_1) sa += NT;
  }
  for (int t = 0; t < NT; ++t) _mm512_mask_storeu_ps(y + (t0 + t) * n_out + row0, store_mask, acc[t]);
}

// ============================================================================
// 256-value super-blocks: Q5_K, Q3_K, Q2_K, IQ4_XS (activations Q8_K)
// ============================================================================

// Prefetch part `part` of 8 of a super-block: 6 ahead into L2, 2 KiB into L1
// (matmul_avx512.cc prefetch_k).
template <int kBytes>
inline void prefetch_part(const uint8_t* w, int part) {
  constexpr int kLines = kBytes / 64, kPer = (kLines + 7) / 8;
  for (int i = part * kPer; i < (part + 1) * kPer && i < kLines; ++i) {
    _mm_prefetch(reinterpret_cast<const char*>(w + 6 * kBytes + 64 * i), _MM_HINT_T1);
    _mm_prefetch(reinterpret_cast<const char*>(w + 2048 + 64 * i), _MM_HINT_T0);
  }
}

// Zero-extended byte `i` of every 32-bit lane.
inline __m512i byte_u32(__m512i v, int i) {
  return _mm512_and_si512(_mm512_srl_epi32(v, _mm_cvtsi32_si128(8 * i)), _mm512_set1_epi32(0xFF));
}
// Two int32 vectors (values fit int16) as (lo, hi) int16 pairs.
inline __m512i pair16(__m512i lo, __m512i hi) {
  return _mm512_or_si512(_mm512_and_si512(lo, _mm512_set1_epi32(0xFFFF)), _mm512_slli_epi32(hi, 16));
}

// vpshufb controls (the same in every 128-bit lane, 4-byte lanes at 4d):
//   kPackHi: bytes 0, 1 of every 4-byte lane to bytes 2, 3 (pack_pairs)
//   kSignedPairAt[j], kUnsignedPairAt[j]: bytes 2j, 2j + 1 of every lane to
//       bytes 1 and 3 (a signed int16 pair after srai by 8) or 0 and 2
//       (unsigned: bytes 1 and 3 zero)
struct alignas(64) ShufTable {
  uint8_t bytes[64];
};
constexpr ShufTable make_shuf(int b0, int b1, int b2, int b3) {  // < 0: zero
  ShufTable t{};
  const int src[4] = {b0, b1, b2, b3};
  for (int i = 0; i < 64; ++i) t.bytes[i] = src[i % 4] < 0 ? 0x80 : static_cast<uint8_t>(i % 16 / 4 * 4 + src[i % 4]);
  return t;
}
constexpr ShufTable kPackHi = make_shuf(-1, -1, 0, 1);
constexpr ShufTable kSignedPairAt[2] = {make_shuf(0, 0, 1, 1), make_shuf(2, 2, 3, 3)};
constexpr ShufTable kUnsignedPairAt[2] = {make_shuf(0, -1, 1, -1), make_shuf(2, -1, 3, -1)};
inline __m512i shuf(const ShufTable& t) { return _mm512_load_si512(t.bytes); }

// (lo, hi) int16 pairs of two int32 vectors whose values fit int16: hi's
// low 16 bits moved over lo's high ones (one masked vpshufb).
inline __m512i pack_pairs(__m512i lo, __m512i hi) {
  return _mm512_mask_shuffle_epi8(lo, 0xCCCCCCCCCCCCCCCCull, hi, shuf(kPackHi));
}

// Per super-block decoding of one format: scales, the unsigned weight
// vectors, the correction pairs and the final scaling.
//   sub16: 16 sub-block scales (else 8 of 32 values)
//   Prep(w, scales): the super-block's scale data
//   vec(w, p, s, k): values 32s + 4k .. +3 of the 16 rows, unsigned
//   scale(p, i): sub-block i's scale (int32 per row); sub16: scale_pair(p,
//       s), the int16 pair (scale 2s, scale 2s + 1), the two 16-value halves
//       of sub-block s
//   corr(p, pairs, k): the k-th int16 pair vector multiplied with the
//       activations' pair sums (n_corr of them)
//   finish(p, isum, corr, da, acc)
struct Q5K {
  static constexpr bool sub16 = false;
  static constexpr int n_corr = 4;
  struct Prep {
    __m512i sc[2], mn_lo, mn_hi;
    __m512 d, dmin;
  };
  static Prep prep(const uint8_t* w, const uint8_t*) {
    const __m512i k1 = _mm512_set1_epi32(0x3f3f3f3f), k2 = _mm512_set1_epi32(0x0f0f0f0f), k3 = _mm512_set1_epi32(0x03030303);
    const __m512i u0 = _mm512_load_si512(w + 2048), u1 = _mm512_load_si512(w + 2112), u2 = _mm512_load_si512(w + 2176);
    Prep p;
    p.sc[0] = _mm512_and_si512(u0, k1);
    p.sc[1] = _mm512_or_si512(_mm512_and_si512(u2, k2), _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u0, 6), k3), 4));
    p.mn_lo = _mm512_and_si512(u1, k1);
    p.mn_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u2, 4), k2),
                              _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u1, 6), k3), 4));
    const __m512i dm = _mm512_load_si512(w + 2240);
    p.d = _mm512_cvtph_ps(_mm512_castsi512_si256(dm));
    p.dmin = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(dm, 1));
    return p;
  }
  static __m512i vec(const uint8_t* w, const Prep&, int s, int k) {
    const __m512i raw = _mm512_load_si512(w + 512 * (s >> 1) + 64 * k);
    const __m512i lo = (s & 1) ? high_nibbles(raw) : low_nibbles(raw);
    const __m512i qh = _mm512_load_si512(w + 64 * (36 + k));
    return _mm512_ternarylogic_epi32(move_bit(qh, s, 4), _mm512_set1_epi8(0x10), lo, 0xEA);
  }
  static __m512i scale(const Prep& p, int s) { return byte_u32(p.sc[s >> 2], s & 3); }
  static __m512i corr(const Prep& p, int k) {
    const __m512i m = k < 2 ? p.mn_lo : p.mn_hi;
    return _mm512_and_si512(k & 1 ? _mm512_srli_epi32(m, 8) : m, _mm512_set1_epi32(0x00FF00FF));
  }
  static __m512 finish(const Prep& p, __m512i isum, __m512i corr, float da, __m512 acc) {
    const __m512 dat = _mm512_set1_ps(da);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(p.d, dat), acc);
    return _mm512_fnmadd_ps(_mm512_cvtepi32_ps(corr), _mm512_mul_ps(p.dmin, dat), acc);
  }
};

struct Q3K {
  static constexpr bool sub16 = true;
  static constexpr int n_corr = 8;
  struct Prep {
    __m512i sc[4];  // scales 4i .. 4i + 3 (minus 32) as int8 in each lane
    __m512 d;
  };
  static Prep prep(const uint8_t* w, const uint8_t* scales) {
    const __m512i k1 = _mm512_set1_epi32(0x03030303), k2 = _mm512_set1_epi32(0x0f0f0f0f);
    const __m512i a0 = _mm512_load_si512(w + 64 * 24), a1 = _mm512_load_si512(w + 64 * 25),
                  t = _mm512_load_si512(w + 64 * 26);
    Prep p;
    p.sc[0] = _mm512_or_si512(_mm512_and_si512(a0, k2), _mm512_slli_epi32(_mm512_and_si512(t, k1), 4));
    p.sc[1] = _mm512_or_si512(_mm512_and_si512(a1, k2), _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(t, 2), k1), 4));
    p.sc[2] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(a0, 4), k2),
                              _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(t, 4), k1), 4));
    p.sc[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(a1, 4), k2),
                              _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(t, 6), k1), 4));
    for (auto& v : p.sc) v = _mm512_sub_epi8(v, _mm512_set1_epi8(32));
    p.d = load_f16(scales);
    return p;
  }
  // Sub-block s's A, B, C (matmul_internal.h): q_0 .. q_2 and q_4 .. q_6
  // are a mask or a shift and a mask away; q_3 and q_7 merge the top bits of
  // A (B) and C.
  static __m512i vec(const uint8_t* w, const Prep&, int s, int k) {
    const uint8_t* v = w + 64 * 3 * s;
    const __m512i m7 = _mm512_set1_epi8(7);
    if ((k & 3) < 3) {
      const __m512i raw = _mm512_load_si512(v + 64 * (k & 3));
      return _mm512_and_si512(k >= 4 ? _mm512_srli_epi16(raw, 3) : raw, m7);
    }
    const __m512i lo = _mm512_srli_epi16(_mm512_load_si512(v + 64 * (k >> 2)), 6);  // bits 0-1
    const __m512i hi = _mm512_srli_epi16(_mm512_load_si512(v + 128), k == 3 ? 4 : 5);  // bit 2
    return _mm512_and_si512(_mm512_ternarylogic_epi32(_mm512_set1_epi8(3), lo, hi, 0xCA), m7);  // m3 ? lo : hi
  }
  // The second half's values (k >= 4) times 8, left in bits 3-5.
  static constexpr bool kScaled = true;
  static int scaled_shift(int, int half) { return 3 * half; }
  static __m512i scaled_vec(const uint8_t* w, const Prep& p, int s, int k) {
    const uint8_t* v = w + 64 * 3 * s;
    if (k < 4) return vec(w, p, s, k);
    if (k < 7) return _mm512_and_si512(_mm512_load_si512(v + 64 * (k - 4)), _mm512_set1_epi8(0x38));
    const __m512i lo = _mm512_srli_epi16(_mm512_load_si512(v + 64), 3);  // bits 3-4
    const __m512i hi = _mm512_srli_epi16(_mm512_load_si512(v + 128), 2);  // bit 5
    return _mm512_and_si512(_mm512_ternarylogic_epi32(_mm512_set1_epi8(0x18), lo, hi, 0xCA), _mm512_set1_epi8(0x38));
  }
  static __m512i scale_pair(const Prep& p, int s) {
    return _mm512_srai_epi16(_mm512_shuffle_epi8(p.sc[s >> 1], shuf(kSignedPairAt[s & 1])), 8);
  }
  static __m512i corr(const Prep& p, int k) {
    const __m512i v = p.sc[k >> 1];
    return k & 1 ? _mm512_srai_epi16(v, 8) : _mm512_srai_epi16(_mm512_slli_epi16(v, 8), 8);
  }
  static __m512 finish(const Prep& p, __m512i isum, __m512i corr, float da, __m512 acc) {
    const __m512i total = _mm512_sub_epi32(isum, _mm512_slli_epi32(corr, 2));  // values q - 4
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(total), _mm512_mul_ps(p.d, _mm512_set1_ps(da)), acc);
  }
};

struct Q2K {
  static constexpr bool sub16 = true;
  static constexpr int n_corr = 8;
  struct Prep {
    __m512i sc[4];  // scales[4i .. 4i + 3]: scale in the low nibble, min in the high
    __m512 d, dmin;
  };
  static Prep prep(const uint8_t* w, const uint8_t*) {
    Prep p;
    for (int i = 0; i < 4; ++i) p.sc[i] = _mm512_load_si512(w + 64 * (16 + i));
    p.d = load_f16(w + 1280);
    p.dmin = load_f16(w + 1312);
    return p;
  }
  static __m512i vec(const uint8_t* w, const Prep&, int s, int k) {
    const int h = s >> 2, g = s & 3;
    return _mm512_and_si512(_mm512_srl_epi16(_mm512_load_si512(w + 64 * (8 * h + k)), _mm_cvtsi32_si128(2 * g)),
                            _mm512_set1_epi8(3));
  }
  // The values times 2^scaled_shift(s, half) (the 2-bit field left in
  // place: one vpand); group_k shifts the exact sums back.
  static constexpr bool kScaled = true;
  static int scaled_shift(int s, int) { return 2 * (s & 3); }
  static __m512i scaled_vec(const uint8_t* w, const Prep&, int s, int k) {
    return _mm512_and_si512(_mm512_load_si512(w + 64 * (8 * (s >> 2) + k)), _mm512_set1_epi8(static_cast<char>(3 << (2 * (s & 3)))));
  }
  static __m512i scale_pair(const Prep& p, int s) {
    return _mm512_and_si512(_mm512_shuffle_epi8(p.sc[s >> 1], shuf(kUnsignedPairAt[s & 1])), _mm512_set1_epi32(0x000F000F));
  }
  static __m512i corr(const Prep& p, int k) {  // mins (m[4i], m[4i + 2]), (m[4i + 1], m[4i + 3])
    const __m512i m = _mm512_and_si512(_mm512_srli_epi16(p.sc[k >> 1], 4), _mm512_set1_epi8(0x0F));
    return _mm512_and_si512(k & 1 ? _mm512_srli_epi32(m, 8) : m, _mm512_set1_epi32(0x00FF00FF));
  }
  static __m512 finish(const Prep& p, __m512i isum, __m512i corr, float da, __m512 acc) {
    const __m512 dat = _mm512_set1_ps(da);
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(p.d, dat), acc);
    return _mm512_fnmadd_ps(_mm512_cvtepi32_ps(corr), _mm512_mul_ps(p.dmin, dat), acc);
  }
};

struct Iq4Xs {
  static constexpr bool sub16 = false;
  static constexpr int n_corr = 4;
  struct Prep {
    __m512i sl, sh, table;
    __m512 d;
  };
  static Prep prep(const uint8_t* w, const uint8_t*) {
    Prep p;
    p.sl = _mm512_load_si512(w + 2048);
    p.d = load_f16(w + 2112);
    p.sh = _mm512_cvtepu16_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(w + 2144)));
    p.table = grid_table(kIq4Table);
    return p;
  }
  static __m512i vec(const uint8_t* w, const Prep& p, int s, int k) {
    const __m512i raw = _mm512_load_si512(w + 64 * (4 * s + (k & 3)));
    return _mm512_shuffle_epi8(p.table, k < 4 ? low_nibbles(raw) : high_nibbles(raw));
  }
  static __m512i scale(const Prep& p, int s) {
    const __m512i lo = _mm512_and_si512(_mm512_srl_epi32(p.sl, _mm_cvtsi32_si128(4 * s)), _mm512_set1_epi32(0xF));
    const __m512i hi = _mm512_and_si512(_mm512_srl_epi32(p.sh, _mm_cvtsi32_si128(2 * s)), _mm512_set1_epi32(3));
    return _mm512_sub_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)), _mm512_set1_epi32(32));
  }
  // Pairs (sc0, sc2), (sc1, sc3), (sc4, sc6), (sc5, sc7) (Q4_K's pair sums).
  static __m512i corr(const Prep& p, int k) {
    const int s0 = 4 * (k >> 1) + (k & 1);
    return pair16(scale(p, s0), scale(p, s0 + 2));
  }
  static __m512 finish(const Prep& p, __m512i isum, __m512i corr, float da, __m512 acc) {
    const __m512i total = _mm512_sub_epi32(isum, _mm512_slli_epi32(corr, 7));  // grid + 128
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(total), _mm512_mul_ps(p.d, _mm512_set1_ps(da)), acc);
  }
};

// Tiles of up to this many tokens unroll the sub-block loop (group_k).
constexpr int kUnrolledTokens = 2;

template <class F>
constexpr bool scaled_decode() {
  if constexpr (requires { F::kScaled; }) return F::kScaled;
  return false;
}

template <class F, GgmlType kType, int NT>
void group_k(const uint8_t* w, const uint8_t* scales, int64_t nbk, const Acts& a, int64_t t0, float* y,
             int64_t n_out, int64_t row0, __mmask16 store_mask) {
  constexpr int kGb = static_cast<int>(group_block_bytes(kType));
  constexpr int64_t kSb = scale_bytes_per_block(kType);
  // Two chains per token: the two 16-value halves (sub16), or for few tokens
  // the even and odd vectors (latency).
  constexpr bool kTwo = F::sub16 || NT <= 2;
  // Formats that can decode with fewer operations into values times a power
  // of two (F::scaled_vec) do so where the sums are few to shift back: the
  // unrolled decode tiles.
  constexpr bool kScaled = scaled_decode<F>() && NT <= kUnrolledTokens;
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  const int8_t* qa = a.kqs + t0 * nbk * 256;
  const float* da = a.kd + t0 * nbk;
  const int32_t* pa = a.kpairs + t0 * nbk * 8;
  for (int64_t b = 0; b < nbk; ++b, w += kGb, scales += kSb, qa += NT * 256, da += NT, pa += NT * 8) {
    if constexpr (kSb > 0) _mm_prefetch(reinterpret_cast<const char*>(scales + 4 * 64), _MM_HINT_T1);
    const typename F::Prep p = F::prep(w, scales);
    __m512i isum[NT];
    for (int t = 0; t < NT; ++t) isum[t] = _mm512_setzero_si512();
    // Sub-block s of the super-block. With s a constant (the loop below
    // unrolled) every shift count and bit move of F::vec / F::scale is an
    // immediate: the decode GEMV (NT = 1) runs 1.3-1.6x faster that way
    // (kernel_bench --cpu 1). The wider tiles keep a rolled loop: 8 copies of
    // their body cost more in instruction fetch than the immediates save.
    auto sub_block = [&](int s) __attribute__((always_inline)) {
      prefetch_part<kGb>(w, s);
      __m512i q[2 * NT];
      for (int t = 0; t < 2 * NT; ++t) q[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        __m512i wv;
        if constexpr (kScaled) {
          wv = F::scaled_vec(w, p, s, k);
        } else {
          wv = F::vec(w, p, s, k);
        }
        const bool second = F::sub16 ? k >= 4 : (k & 1);
#pragma GCC unroll 8
        for (int t = 0; t < NT; ++t) {
          const int c = kTwo && second ? NT + t : t;
          q[c] = dpbusd_bcast(q[c], wv, qa + 256 * t + 32 * s + 4 * k);
        }
      }
      if constexpr (F::sub16) {
        // The halves' sums fit int16 (|q| <= 7 * 128 * 16): one vpdpwssd
        // applies both scales.
        const __m512i sp = F::scale_pair(p, s);
        if constexpr (kScaled) {
#pragma GCC unroll 2
          for (int half = 0; half < 2; ++half) {
            if (const int sh = F::scaled_shift(s, half); sh > 0) {
              for (int t = 0; t < NT; ++t) q[half * NT + t] = _mm512_srai_epi32(q[half * NT + t], sh);
            }
          }
        }
        for (int t = 0; t < NT; ++t) isum[t] = _mm512_dpwssd_epi32(isum[t], pack_pairs(q[t], q[NT + t]), sp);
      } else {
        const __m512i sc = F::scale(p, s);
        for (int t = 0; t < NT; ++t) {
          const __m512i qs = kTwo ? _mm512_add_epi32(q[t], q[NT + t]) : q[t];
          isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(qs, sc));
        }
      }
    };
    if constexpr (NT <= kUnrolledTokens) {
#pragma GCC unroll 8
      for (int s = 0; s < 8; ++s) sub_block(s);
    } else {
#pragma GCC unroll 1
      for (int s = 0; s < 8; ++s) sub_block(s);
    }
    __m512i cp[F::n_corr];
    for (int k = 0; k < F::n_corr; ++k) cp[k] = F::corr(p, k);
#pragma GCC unroll 8
    for (int t = 0; t < NT; ++t) {
      const int32_t* pt = pa + 8 * t;
      __m512i corr = _mm512_setzero_si512();
      for (int k = 0; k < F::n_corr; ++k) corr = _mm512_dpwssd_epi32(corr, cp[k], _mm512_set1_epi32(pt[k]));
      acc[t] = F::finish(p, isum[t], corr, da[t], acc[t]);
    }
  }
  for (int t = 0; t < NT; ++t) _mm512_mask_storeu_ps(y + (t0 + t) * n_out + row0, store_mask, acc[t]);
}

using GroupFn = void (*)(const uint8_t*, const uint8_t*, int64_t, const Acts&, int64_t, float*, int64_t, int64_t,
                        __mmask16);

template <GgmlType kType, int... Ns>
constexpr std::array<GroupFn, sizeof...(Ns)> table32(std::integer_sequence<int, Ns...>) {
  return {group32<kType, Ns + 1>...};
}
template <class F, GgmlType kType, int... Ns>
constexpr std::array<GroupFn, sizeof...(Ns)> table_k(std::integer_sequence<int, Ns...>) {
  return {group_k<F, kType, Ns + 1>...};
}

// Rows [r0, r1) in whole groups, each group's tokens in tiles of kTile (the
// activation layout's).
template <size_t kTile>
void rows_in_groups(const PackedMatrix& w, const Acts& a, float* y, int64_t r0, int64_t r1, int64_t nb, GgmlType type,
                    const std::array<GroupFn, kTile>& fns) {
  const int64_t n_out = w.n_out(), tile = static_cast<int64_t>(kTile);
  const int64_t gb = group_block_bytes(type), sb = scale_bytes_per_block(type);
  const auto* scale_bytes = reinterpret_cast<const uint8_t*>(w.scales());
  for (int64_t row0 = r0; row0 < r1; row0 += kGroupRows) {
    const int64_t g = row0 / kGroupRows;
    const int64_t n_rows = n_out - row0 < kGroupRows ? n_out - row0 : kGroupRows;
    const __mmask16 mask = static_cast<__mmask16>((1u << n_rows) - 1);
    const uint8_t* quants = w.quants() + g * nb * gb;
    const uint8_t* scales = scale_bytes ? scale_bytes + g * nb * sb : nullptr;
    for (int64_t t = 0; t < a.n_tokens; t += tile) {
      const int64_t nt = a.n_tokens - t < tile ? a.n_tokens - t : tile;
      fns[nt - 1](quants, scales, nb, a, t, y, n_out, row0, mask);
    }
  }
}

template <GgmlType kType>
void rows32(const PackedMatrix& w, const Acts& a, float* y, int64_t r0, int64_t r1) {
  static constexpr auto kFns = table32<kType>(std::make_integer_sequence<int, kTokenTile>());
  rows_in_groups(w, a, y, r0, r1, w.n_in() / 32, kType, kFns);
}

template <class F, GgmlType kType>
void rows_k(const PackedMatrix& w, const Acts& a, float* y, int64_t r0, int64_t r1) {
  static constexpr auto kFns = table_k<F, kType>(std::make_integer_sequence<int, kTokenTileK>());
  rows_in_groups(w, a, y, r0, r1, w.n_in() / 256, kType, kFns);
}

}  // namespace

RowsKernel avx512_more_rows_kernel(GgmlType type) {
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
