// AVX-512 attention (compiled with -mavx512f and friends; called only when
// CPUID reports them). The body is attention_impl.h.
// GCC 12 warns inside its own avx512fintrin.h (_mm512_undefined_*).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/attention_query_q8.h"
#include "kernels/simd_avx512.h"

namespace zl::kern {
namespace {

// e^x (Cephes polynomial, ~2 ulp), x clamped to [-87, 88].
inline __m512 exp512(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_set1_ps(88.0f));
  const __m512 fx = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500E-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507E-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073E-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894E-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459E-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201E-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, fx);
}

struct Vec {
  using T = __m512;
  static constexpr int kWidth = 16;
  static constexpr int kAccRegs = 16;  // accumulators of accumulate_rows
  static constexpr int kMaxRows = 16;  // rows per chunk_rows_nv call
  // Rows per accumulate_rows pass: 8 rows x 2 vectors of 16 accumulators
  // (a weight broadcast serves 2 V vectors) measured ~5% faster prefill
  // than 16 rows x 1 vector (bench/README.md "The prefill tile").
  static constexpr int kAccRows = 8;

  // Q8_0 cache, head_dim a multiple of 32: q·k on int8 with vpdpbusd.
  static constexpr bool kVnniQ8 = true;
  // quantize_query_q8 (attention_query_q8.h) without deq, vectorised for
  // blocks of 32: the same scale, products and rounding (to nearest even),
  // so the same bytes.
  static void quantize_q8(const float* x, int64_t hd, QueryQ8* out) {
    if (query_q8_block(hd) != 32) return quantize_query_q8(x, hd, out, nullptr);
    const __m512 lim = _mm512_set1_ps(127.0f);
    for (int64_t b = 0; b < hd / 32; ++b) {
      const __m512 x0 = _mm512_loadu_ps(x + 32 * b), x1 = _mm512_loadu_ps(x + 32 * b + 16);
      const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
      float d, id;
      query_q8_scale(amax, &d, &id);
      const __m512 vid = _mm512_set1_ps(id);
      __m512i v[2];
      for (int h = 0; h < 2; ++h) {
        const __m512 r = _mm512_roundscale_ps(_mm512_mul_ps(h == 0 ? x0 : x1, vid),
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        v[h] = _mm512_cvtps_epi32(_mm512_min_ps(lim, _mm512_max_ps(_mm512_sub_ps(_mm512_setzero_ps(), lim), r)));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out->qs + 32 * b + 16 * h), _mm512_cvtepi32_epi8(v[h]));
      }
      out->d[b] = d;
      out->corr[b] = 128 * _mm512_reduce_add_epi32(_mm512_add_epi32(v[0], v[1]));
    }
  }

  // pr[g][c] = scale * q8[g] · K row c (Q8_0; c < n, the rest 0 x garbage:
  // masked by the caller) for nr rows, K at element offsets offs[c] (head
  // starts, multiples of 32), head_dim hd a multiple of 32. Per block of 32
  // the 16 rows' int8 are transposed into 8 vectors whose lane c holds bytes
  // 4d .. 4d + 3 of row c (shared by all nr rows), so that each vpdpbusd
  // adds 4 products of all 16 positions: 8 a block per row, no horizontal
  // sums. vpdpbusd multiplies unsigned by signed bytes: K is offset by 128
  // (k ^ 0x80) and q's 128 * sum subtracted (QueryQ8::corr). The int sums
  // are exact; the two scales are applied per position in float.
  static void score_q8(const QueryQ8* const* q8, int nr, const void* k_cache, const int64_t* offs, int n, int64_t hd,
                       float (*pr)[16], float scale) {
    for (int64_t b = 0; b < hd / 32; ++b) {
      __m512i t[8];
      __m512 dk;
      transpose_q8_block(static_cast<const uint8_t*>(k_cache), offs, n, b, t, &dk);
      score_q8_block(t, dk, q8, nr, b, pr, scale);
    }
  }
  // score_q8 in two parts, for a prefill tile whose row groups share each
  // chunk: transpose_q8 once a chunk (n positions) into kt, then score_q8_t
  // per group from it — the same integer sums and float epilogue, so the
  // same scores (lanes past a group's own positions hold the chunk's other
  // positions instead of zeros: masked by the softmax, as score_gemm's).
  struct KtQ8Block {
    __m512i t[8];
    __m512 dk;
  };
  static constexpr int64_t kKtQ8Bytes = kMaxHeadDim / 32 * sizeof(KtQ8Block);
  static void transpose_q8(const void* k_cache, const int64_t* offs, int n, int64_t hd, void* kt) {
    auto* blocks = static_cast<KtQ8Block*>(kt);
    for (int64_t b = 0; b < hd / 32; ++b) {
      transpose_q8_block(static_cast<const uint8_t*>(k_cache), offs, n, b, blocks[b].t, &blocks[b].dk);
    }
  }
  static void score_q8_t(const QueryQ8* const* q8, int nr, const void* kt, int64_t hd, float (*pr)[16], float scale) {
    const auto* blocks = static_cast<const KtQ8Block*>(kt);
    for (int64_t b = 0; b < hd / 32; ++b) score_q8_block(blocks[b].t, blocks[b].dk, q8, nr, b, pr, scale);
  }
  // Block b of the 16 K rows at offs (zeros past n), transposed: t[d]'s lane
  // c holds bytes 4d .. 4d + 3 of row c, offset by 128; dk the rows' scales.
  static void transpose_q8_block(const uint8_t* kb, const int64_t* offs, int n, int64_t b, __m512i* t, __m512* dk) {
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    const __m512i lo_idx = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
    const __m512i hi_idx = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
    alignas(32) uint16_t ds[16];
    __m256i rows[16];
    for (int c = 0; c < 16; ++c) {
      if (c < n) {
        const uint8_t* blk = kb + (static_cast<uint64_t>(offs[c]) / 32 + b) * 34;
        __builtin_memcpy(&ds[c], blk, 2);
        rows[c] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
      } else {
        ds[c] = 0;
        rows[c] = _mm256_setzero_si256();
      }
    }
    // z[j] = rows j and j + 8; an 8x8 transpose of dwords in each half.
    __m512i z[8], a[8];
    for (int j = 0; j < 8; ++j) {
      z[j] = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(rows[j]), rows[j + 8], 1), flip);
    }
    for (int j = 0; j < 4; ++j) {
      a[2 * j] = _mm512_unpacklo_epi32(z[2 * j], z[2 * j + 1]);
      a[2 * j + 1] = _mm512_unpackhi_epi32(z[2 * j], z[2 * j + 1]);
    }
    // bm[m]: per 128-bit lane k of each half, dword 4k + m of rows 0-3
    // (m < 4) or 4-7 (m >= 4) of the half.
    const __m512i bm[8] = {_mm512_unpacklo_epi64(a[0], a[2]), _mm512_unpackhi_epi64(a[0], a[2]),
                           _mm512_unpacklo_epi64(a[1], a[3]), _mm512_unpackhi_epi64(a[1], a[3]),
                           _mm512_unpacklo_epi64(a[4], a[6]), _mm512_unpackhi_epi64(a[4], a[6]),
                           _mm512_unpacklo_epi64(a[5], a[7]), _mm512_unpackhi_epi64(a[5], a[7])};
    for (int m = 0; m < 4; ++m) {
      t[m] = _mm512_permutex2var_epi64(bm[m], lo_idx, bm[4 + m]);
      t[4 + m] = _mm512_permutex2var_epi64(bm[m], hi_idx, bm[4 + m]);
    }
    *dk = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(ds)));
  }
  // Block b's scores of nr rows from its transposed K (transpose_q8_block).
  static void score_q8_block(const __m512i* t_in, __m512 dk, const QueryQ8* const* q8, int nr, int64_t b,
                             float (*pr)[16], float scale) {
    __m512i t[8];  // in registers for all rows (from memory, GCC reloads them per row: pr may alias)
#pragma GCC unroll 8
    for (int d = 0; d < 8; ++d) t[d] = t_in[d];
    for (int g = 0; g < nr; ++g) {
      const QueryQ8& qg = *q8[g];
      __m512i acc = _mm512_set1_epi32(-qg.corr[b]);
#pragma GCC unroll 8
      for (int d = 0; d < 8; ++d) acc = dpbusd_bcast(acc, t[d], qg.qs + 32 * b + 4 * d);
      const __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), _mm512_mul_ps(dk, _mm512_set1_ps(qg.d[b] * scale)));
      _mm512_store_ps(pr[g], b == 0 ? f : _mm512_add_ps(f, _mm512_load_ps(pr[g])));
    }
  }
  static T zero() { return _mm512_setzero_ps(); }
  static T load(const float* p) { return _mm512_loadu_ps(p); }
  static T load_f16(const uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  // d (f16 bits) times the 16 int8 at p.
  static T load_q8(const int8_t* p, uint16_t d) {
    return _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(d)),
                         _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))));
  }
  // The 16 int8 at p as floats (unscaled), and an f16 broadcast.
  static T load_i8(const int8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static T set1_f16(uint16_t d) { return _mm512_set1_ps(_cvtsh_ss(d)); }
  static void store(float* p, T v) { _mm512_storeu_ps(p, v); }
  static T set1(float x) { return _mm512_set1_ps(x); }
  static T fmadd(T a, T b, T c) { return _mm512_fmadd_ps(a, b, c); }
  static T mul(T a, T b) { return _mm512_mul_ps(a, b); }
  static T add(T a, T b) { return _mm512_add_ps(a, b); }
  static T sub(T a, T b) { return _mm512_sub_ps(a, b); }
  static T exp(T x) { return exp512(x); }
  // x on the lanes whose index c0 + lane lies in [lo, hi), 0 elsewhere.
  static T keep_lanes(T x, int c0, int lo, int hi) {
    const int a = std::clamp(lo - c0, 0, 16), b = std::clamp(hi - c0, 0, 16);
    const unsigned mask = ((1u << b) - 1u) & ~((1u << a) - 1u);
    return _mm512_maskz_mov_ps(static_cast<__mmask16>(mask), x);
  }
  // The largest of p[0, valid) (valid >= 1) and the sum of p[0, 16) (a
  // chunk of kChunk = 16 softmax weights, zero past the valid ones).
  static float chunk_max(const float* p, int valid) {
    return _mm512_reduce_max_ps(
        _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), static_cast<__mmask16>((1u << valid) - 1), p));
  }
  static float chunk_sum(const float* p) { return row_sum(_mm512_loadu_ps(p)); }
  // The transposing sum tree of score_chunk (attention_impl.h). pair_sum:
  // per 128-bit quarter [a0 + a2, b0 + b2, a1 + a3, b1 + b3]; quad_sum of
  // pair_sum(a, b) and pair_sum(c, d): per quarter the sums of a, b, c, d
  // over that quarter; quarter_sum of z[0..3]: lane 4k + j = the sum over the
  // four quarters of z[k]'s lane j.
  static constexpr bool kTreeScores = true;
  static T pair_sum(T a, T b) { return _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b)); }
  static T quad_sum(T x, T y) {
    const __m512d xd = _mm512_castps_pd(x), yd = _mm512_castps_pd(y);
    return _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(xd, yd)), _mm512_castpd_ps(_mm512_unpackhi_pd(xd, yd)));
  }
  static T quarter_sum(const T* z) {
    const T s01 = _mm512_add_ps(_mm512_shuffle_f32x4(z[0], z[1], 0x44), _mm512_shuffle_f32x4(z[0], z[1], 0xEE));
    const T s23 = _mm512_add_ps(_mm512_shuffle_f32x4(z[2], z[3], 0x44), _mm512_shuffle_f32x4(z[2], z[3], 0xEE));
    return _mm512_add_ps(_mm512_shuffle_f32x4(s01, s23, 0x88), _mm512_shuffle_f32x4(s01, s23, 0xDD));
  }
  // Scores in GEMM form (score_gemm, attention_impl.h): a chunk's K
  // transposed once (transpose_chunk) for all the tile's rows.
  static constexpr bool kGemmScores = true;
  // x[c] lane e -> x[e] lane c (16 x 16): pairs, quads, then 128-bit
  // quarters twice; 64 shuffles.
  static void transpose16(T* x) {
    T t[16], u[16];
    for (int i = 0; i < 8; ++i) {
      t[2 * i] = _mm512_unpacklo_ps(x[2 * i], x[2 * i + 1]);  // quarter k: lanes 4k, 4k + 1 of rows 2i, 2i + 1
      t[2 * i + 1] = _mm512_unpackhi_ps(x[2 * i], x[2 * i + 1]);  // lanes 4k + 2, 4k + 3
    }
    for (int i = 0; i < 4; ++i) {  // u[4i + j], quarter k: lane 4k + j of rows 4i .. 4i + 3
      const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 2]);
      const __m512d c = _mm512_castps_pd(t[4 * i + 1]), d = _mm512_castps_pd(t[4 * i + 3]);
      u[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
      u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
      u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(c, d));
      u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(c, d));
    }
    for (int j = 0; j < 4; ++j) {  // x[4k + j] = quarter k of u[j], u[4 + j], u[8 + j], u[12 + j]
      const T w0 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x88), w1 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xDD);
      const T w2 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x88), w3 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xDD);
      x[j] = _mm512_shuffle_f32x4(w0, w2, 0x88);
      x[8 + j] = _mm512_shuffle_f32x4(w0, w2, 0xDD);
      x[4 + j] = _mm512_shuffle_f32x4(w1, w3, 0x88);
      x[12 + j] = _mm512_shuffle_f32x4(w1, w3, 0xDD);
    }
  }
  // The same transposing tree with max for sum: lane r of the result is the
  // largest lane of x[r] (exact in any order).
  static T quarter_max(const T* z) {
    const T s01 = _mm512_max_ps(_mm512_shuffle_f32x4(z[0], z[1], 0x44), _mm512_shuffle_f32x4(z[0], z[1], 0xEE));
    const T s23 = _mm512_max_ps(_mm512_shuffle_f32x4(z[2], z[3], 0x44), _mm512_shuffle_f32x4(z[2], z[3], 0xEE));
    return _mm512_max_ps(_mm512_shuffle_f32x4(s01, s23, 0x88), _mm512_shuffle_f32x4(s01, s23, 0xDD));
  }
  static T rows_max(const T* x) {
    T z[4];
    for (int k = 0; k < 4; ++k) {
      const T a = _mm512_max_ps(_mm512_unpacklo_ps(x[4 * k], x[4 * k + 1]), _mm512_unpackhi_ps(x[4 * k], x[4 * k + 1]));
      const T b = _mm512_max_ps(_mm512_unpacklo_ps(x[4 * k + 2], x[4 * k + 3]), _mm512_unpackhi_ps(x[4 * k + 2], x[4 * k + 3]));
      const __m512d ad = _mm512_castps_pd(a), bd = _mm512_castps_pd(b);
      z[k] = _mm512_max_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(ad, bd)), _mm512_castpd_ps(_mm512_unpackhi_pd(ad, bd)));
    }
    return quarter_max(z);
  }
  // Lane r: the sum of x[r]'s lanes, every row by the same tree (whatever
  // its lane r, so a row's sum does not depend on its neighbours).
  // Lane r: the sum of x[r]'s 16 lanes grouped as row_sum groups them, for
  // every row alike (so a row's sum does not depend on its lane or
  // neighbours). Stage by stage: e_i + e_(i+8), then + (e_(i+4) +
  // e_(i+12)), then lanes 0 + 2 and 1 + 3, then those two; the tree leaves
  // row 4p + q in lane 4q + p, so rows enter transposed.
  static T rows_sum(const T* x) {
    T s[8], u[4];
    for (int j = 0; j < 8; ++j) {
      const T a = x[(2 * j) % 4 * 4 + (2 * j) / 4], b = x[(2 * j + 1) % 4 * 4 + (2 * j + 1) / 4];
      s[j] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
    }
    for (int m = 0; m < 4; ++m) {
      u[m] = _mm512_add_ps(_mm512_shuffle_f32x4(s[2 * m], s[2 * m + 1], 0x88),
                           _mm512_shuffle_f32x4(s[2 * m], s[2 * m + 1], 0xDD));
    }
    T v[2];
    for (int h = 0; h < 2; ++h) {
      const __m512d a = _mm512_castps_pd(u[2 * h]), b = _mm512_castps_pd(u[2 * h + 1]);
      v[h] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
    }
    return _mm512_add_ps(_mm512_shuffle_ps(v[0], v[1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_ps(v[0], v[1], _MM_SHUFFLE(3, 1, 3, 1)));
  }
  // The sum of x's lanes: halves, quarters, then lanes 0 + 2 and 1 + 3, then
  // those two (the grouping of GCC's _mm512_reduce_add_ps, written out so
  // that rows_sum's lanes are bitwise chunk_sum).
  static float row_sum(T x) {
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(x), _mm512_extractf32x8_ps(x, 1));
    const __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    const __m128 t = _mm_add_ps(q, _mm_movehl_ps(q, q));
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
  }

  // One chunk's online-softmax step for nr <= 16 rows at once (lane r = row
  // r; chunk_rows_nv takes it for more than 4 rows, prefill's groups of 16):
  // row r's scores pr[r] count on positions [first[r], valid[r]) only (none
  // when valid <= first: the row's state stays, its weights are 0). m, l:
  // the rows' running max and sum, updated; pr becomes the weights
  // exp(score - m_new), 0 elsewhere; corr[r] the factor for row r's
  // accumulators (1 when its max holds; corr: 16 floats, 64-byte aligned);
  // returns the rows whose factor is not 1 as bits. One vector exp a row,
  // the maxima and sums of all rows by transposing trees (a horizontal max
  // and sum per row were a long dependent chain each). Each row's
  // arithmetic is chunk_rows_nv's row-at-a-time softmax's (the max exact in
  // any order, the sum grouped as chunk_sum groups it, std::exp for a moved
  // max, l * corr + sum fused), so prefill and split decode, which takes
  // its 4 rows a row at a time, agree bit for bit.
  static constexpr bool kRowsSoftmax = true;
  static unsigned softmax_rows(float (*pr)[16], int nr, const int* first, const int* valid, float* m, float* l,
                               float* corr) {
    const __m512 neg_inf = _mm512_set1_ps(-INFINITY);
    __m512 x[16];
    __mmask16 lanes[16];
    unsigned active = 0;
    for (int r = 0; r < 16; ++r) {
      lanes[r] = 0;
      if (r < nr && valid[r] > first[r]) {
        lanes[r] = static_cast<__mmask16>(((1u << valid[r]) - 1u) & ~((1u << first[r]) - 1u));
        active |= 1u << r;
      }
      x[r] = _mm512_mask_loadu_ps(neg_inf, lanes[r], pr[r]);
    }
    const auto act = static_cast<__mmask16>(active);
    const auto rows = static_cast<__mmask16>((1u << nr) - 1u);
    const __m512 m_old = _mm512_mask_loadu_ps(neg_inf, act, m);
    const __m512 m_new = _mm512_max_ps(m_old, rows_max(x));
    // exp(m_old - m_new): 1 where the max holds, 0 on a row's first chunk
    // (m_old = -inf; rows without positions keep 1: their state stays).
    const __mmask16 same = _mm512_cmp_ps_mask(m_old, m_new, _CMP_EQ_OQ);
    const __mmask16 first_chunk = _mm512_mask_cmp_ps_mask(act, m_old, neg_inf, _CMP_EQ_OQ);  // active rows only
    // The rows whose max moved (rare after a row's first chunks) take
    // std::exp one at a time, as the row-at-a-time softmax does.
    __m512 c = _mm512_maskz_mov_ps(static_cast<__mmask16>(~first_chunk), _mm512_set1_ps(1.0f));
    if (const unsigned moved = act & ~same & ~first_chunk; moved != 0) {
      alignas(64) float mo[16], mn[16], cs[16];
      _mm512_store_ps(mo, m_old);
      _mm512_store_ps(mn, m_new);
      _mm512_store_ps(cs, c);
      for (unsigned b = moved; b != 0; b &= b - 1) cs[__builtin_ctz(b)] = std::exp(mo[__builtin_ctz(b)] - mn[__builtin_ctz(b)]);
      c = _mm512_load_ps(cs);
    }
    for (int r = 0; r < 16; ++r) {
      if (r >= nr) {
        x[r] = _mm512_setzero_ps();
        continue;
      }
      // m_new's lane r in every lane (a permute: a store and reload stalls)
      const __m512 mr = _mm512_permutexvar_ps(_mm512_set1_epi32(r), m_new);
      x[r] = _mm512_maskz_mov_ps(lanes[r], exp512(_mm512_sub_ps(x[r], mr)));
      _mm512_storeu_ps(pr[r], x[r]);
    }
    const __m512 l_new = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(act, l), c, rows_sum(x));
    _mm512_mask_storeu_ps(m, act, m_new);
    _mm512_mask_storeu_ps(l, act, l_new);
    // All 16 lanes (a masked store does not forward to the reads of corr
    // that follow at once); the rows whose factor is not 1 as a bit mask.
    _mm512_store_ps(corr, c);
    return static_cast<unsigned>(_mm512_mask_cmp_ps_mask(rows, c, _mm512_set1_ps(1.0f), _CMP_NEQ_UQ));
  }

  // pr[g][c] = scale * (sum of d[g]'s lanes) for g < nh: the four vectors
  // are folded together (16 -> 8 -> 4 lanes each) before the last sums.
  static void hsum4(const T* d, int nh, int c, float (*pr)[16], float scale) {
    if (nh < 4) {
      for (int g = 0; g < nh; ++g) pr[g][c] = _mm512_reduce_add_ps(d[g]) * scale;
      return;
    }
    // 256-bit halves: [d0|d1] and [d2|d3] as pairs of 8-lane sums.
    const __m512 a = _mm512_add_ps(_mm512_shuffle_f32x4(d[0], d[1], 0x44), _mm512_shuffle_f32x4(d[0], d[1], 0xEE));
    const __m512 b = _mm512_add_ps(_mm512_shuffle_f32x4(d[2], d[3], 0x44), _mm512_shuffle_f32x4(d[2], d[3], 0xEE));
    // a = [d0 lo8+hi8 (8) | d1 (8)], b likewise; fold 128-bit lanes: -> 4 lanes per head.
    const __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x88), _mm512_shuffle_f32x4(a, b, 0xDD));
    // ab = [d0 (4) | d1 (4) | d2 (4) | d3 (4)]: sum each 128-bit lane.
    __m512 t = _mm512_add_ps(ab, _mm512_permute_ps(ab, 0x4E));
    t = _mm512_add_ps(t, _mm512_permute_ps(t, 0xB1));
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, t);
    for (int g = 0; g < 4; ++g) pr[g][c] = lanes[4 * g] * scale;
  }
};

}  // namespace
}  // namespace zl::kern

#include "kernels/attention_impl.h"

namespace zl::kern {

void avx512_attention(const AttentionShape& s, const float* q, int64_t n_q, const void* k_cache, const void* v_cache,
                    KvType kv_type, const int32_t* block_table, int64_t n_kv_first, float* out, int64_t kv_h0,
                    int64_t kv_h1) {
  attention_rows(s, q, n_q, k_cache, v_cache, kv_type, block_table, n_kv_first, out, kv_h0, kv_h1);
}

void avx512_attention_range(const AttentionShape& s, const float* q, const void* k_cache, const void* v_cache,
                        KvType kv_type, const int32_t* block_table, int64_t n_kv, int64_t range, float* partial) {
  attention_range_impl(s, q, k_cache, v_cache, kv_type, block_table, n_kv, range, partial);
}

void avx512_attention_merge(const AttentionShape& s, float* partials, int64_t n_ranges, float* out) {
  attention_merge_impl(s, partials, n_ranges, out);
}

}  // namespace zl::kern
