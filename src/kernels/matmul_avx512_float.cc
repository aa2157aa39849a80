// AVX-512 kernels for float weights (kernels/matmul_float.h), compiled with
// -mavx512f -mavx512bw -mavx512vl -mavx512dq; called only when CPUID reports
// them. Weights are read in the GGUF row layout (PackedMatrix holds them in
// huge-page memory).
//
// Numerics, the batch-invariance contract: one dot product is one 16-lane
// accumulator. Lane j sums w[i] * x[i] over i = j (mod 16), one FMA per 16
// values in order of i, the last n_in % 16 values in one masked FMA (or, in
// the packed layout, one FMA of zero-padded vectors: the same values); then
// reduce16's fixed tree. Every path below performs exactly these operations
// for each (row, token) — only how the dot products are interleaved differs
// — so a token's outputs do not depend on the batch around it.
//
// Up to kDirectMaxTokens tokens (decode, small batches): memory bound. Tiles
// of 8 rows x 1-2 tokens or 4 rows x 3-6 tokens read the GGUF rows directly,
// convert each weight vector once (vcvtph2ps, or a 16-bit shift for BF16)
// and use it for every token of the tile; the next tile is prefetched into
// L2 while this one runs, the next lines of each row into L1. 7-10 tokens
// take two passes over the (then cached) rows.
//
// More tokens (prefill, larger batches): compute bound. Per thread, the
// activations of a block of tokens (about 1 MiB, L2) are packed into tiles
// of 4 tokens interleaved by 16 values, and each 6-row tile's weights are
// converted into a float panel interleaved the same way. The micro-kernel
// multiplies a 6-row panel by a 4-token tile: 24 zmm accumulators, 10
// sequential loads for 24 FMAs. n_in is walked in blocks of kKBlock values
// so that the panel slice and the token tiles stay in L1; between blocks the
// accumulators are parked in a small buffer (a store and a load: the same
// values). Measured on 2 Sapphire Rapids cores: ~70% of the FMA peak at 128
// tokens, ~95% of the read bandwidth at 1 token (bench/kernel_bench).
// GCC 12 warns inside its own avx512fintrin.h (_mm512_undefined_*).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <memory>
#include <utility>

#include "kernels/matmul_float.h"

namespace zl::kern {
namespace {

constexpr int kLanes = 16;
// Direct path (tuned with bench/kernel_bench; 10 tokens is where the packed
// path overtakes it).
constexpr int kDirectMaxTokens = 10;
constexpr int kDirectTileTokens = 6;  // at most, with 4 rows
constexpr int64_t kNearBytes = 512;   // L1 prefetch distance within a row
constexpr int64_t kFarBytes = 16384;  // minimum L2 prefetch distance
// Packed path.
constexpr int kPanelRows = 6;
constexpr int kTileTokens = 4;
constexpr int64_t kKBlock = 512;       // values: panel slice 12 KiB, token tile 8 KiB
constexpr int64_t kSubBlock = 24;      // tokens sharing a panel slice (park: 9 KiB)
constexpr int64_t kActBytes = 1 << 20;  // packed activations per token block

// Rows per direct tile for n_tokens (<= kDirectMaxTokens) and the token
// tiles' width: equal widths (7 tokens: 4 + 3, not 6 + 1).
struct DirectShape {
  int64_t rows, width;
};
DirectShape direct_shape(int64_t n_tokens) {
  const int64_t n_tiles = (n_tokens + kDirectTileTokens - 1) / kDirectTileTokens;
  const int64_t width = (n_tokens + n_tiles - 1) / n_tiles;
  return {.rows = width <= 2 ? 8 : 4, .width = width};
}

// Weight formats: 16 values at p as floats (exact conversions).
struct F32 {
  using Elem = float;
  static __m512 load(const float* p) { return _mm512_loadu_ps(p); }
  static __m512 load_tail(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};
struct F16 {
  using Elem = uint16_t;
  static __m512 load(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static __m512 load_tail(const uint16_t* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
};
struct BF16 {  // the value is the high half of a float
  using Elem = uint16_t;
  static __m512 widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  static __m512 load(const uint16_t* p) { return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static __m512 load_tail(const uint16_t* p, __mmask16 m) { return widen(_mm256_maskz_loadu_epi16(m, p)); }
};

// The fixed reduction tree: halves, quarters, pairs, lanes.
inline float reduce16(__m512 v) {
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  q = _mm_add_ps(q, _mm_movehl_ps(q, q));
  q = _mm_add_ss(q, _mm_movehdup_ps(q));
  return _mm_cvtss_f32(q);
}

// v, kept in a register: GCC would otherwise fold a load used several times
// into each FMA as a memory operand, loading it again for every use.
inline __m512 pinned(__m512 v) {
  __asm__("" : "+v"(v));
  return v;
}

// out[k] = reduce16(v[k]) for k < N <= 16, the same tree on 16 vectors at
// once (15 adds and 30 shuffles rather than 16 x 7 operations): each level
// adds the same lane pairs as reduce16, for two vectors per instruction.
template <int N>
inline void reduce16_many(const __m512* v, float* out) {
  static_assert(N >= 1 && N <= 16);
  auto in = [&](int k) { return k < N ? v[k] : _mm512_setzero_ps(); };
  __m512 h[8], q[4], p[2];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {  // lanes i + 8: [v[2i] | v[2i + 1]] by halves
    const __m512 a = in(2 * i), b = in(2 * i + 1);
    h[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {  // lanes i + 4: quarter j = v[4i + j]
    q[i] = _mm512_add_ps(_mm512_shuffle_f32x4(h[2 * i], h[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(h[2 * i], h[2 * i + 1], 0xDD));
  }
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i) {  // lanes i + 2: quarter j = pairs of v[8i + j], v[8i + 4 + j]
    p[i] = _mm512_add_ps(_mm512_shuffle_ps(q[2 * i], q[2 * i + 1], 0x44),
                         _mm512_shuffle_ps(q[2 * i], q[2 * i + 1], 0xEE));
  }
  // Lane 4j + m = v[4m + j].
  alignas(64) float sums[16];
  _mm512_store_ps(sums, _mm512_add_ps(_mm512_shuffle_ps(p[0], p[1], 0x88), _mm512_shuffle_ps(p[0], p[1], 0xDD)));
#pragma GCC unroll 16
  for (int k = 0; k < N; ++k) out[k] = sums[(k % 4) * 4 + k / 4];
}

inline __mmask16 tail_mask(int64_t n_in) { return static_cast<__mmask16>((1u << (n_in % kLanes)) - 1); }

// ---------------------------------------------------------------------------
// Decode: tiles of all tokens straight from the rows.

struct DirectTile {
  const void* w;      // the first row's weights (W::Elem); rows n_in apart
  const float* x;     // the first token's activations; tokens n_in apart
  int64_t n_in;
  float* y;           // output of (first row, first token); token t at y + t * n_out
  int64_t n_out;
  int64_t pf_far;     // L2 prefetch distance in bytes; 0: no prefetching
};

template <class W, int R, int T>
void tile_direct(const DirectTile& k) {
  using E = typename W::Elem;
  constexpr int kChunksPerLine = 64 / (kLanes * static_cast<int>(sizeof(E)));
  const E* w = static_cast<const E*>(k.w);
  const int64_t n_in = k.n_in, n_full = n_in / kLanes;
  __m512 acc[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  }
  // 16 values of every row, each used by every token.
  auto chunk = [&](int64_t i, __mmask16 m) __attribute__((always_inline)) {
    __m512 wv[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      wv[r] = pinned(m == 0xFFFF ? W::load(w + r * n_in + i) : W::load_tail(w + r * n_in + i, m));
    }
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m512 xv =
          pinned(m == 0xFFFF ? _mm512_loadu_ps(k.x + t * n_in + i) : _mm512_maskz_loadu_ps(m, k.x + t * n_in + i));
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
    }
  };
  // A cache line of every row per step: the next lines into L1, and, rows
  // being contiguous, pf_far >= R rows ahead covers the next tile(s) once.
  int64_t c = 0;
  for (; k.pf_far != 0 && c + kChunksPerLine <= n_full; c += kChunksPerLine) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const char* p = reinterpret_cast<const char*>(w + r * n_in + c * kLanes);
      _mm_prefetch(p + kNearBytes, _MM_HINT_T0);
      _mm_prefetch(p + k.pf_far, _MM_HINT_T1);
    }
#pragma GCC unroll 2
    for (int s = 0; s < kChunksPerLine; ++s) chunk((c + s) * kLanes, 0xFFFF);
  }
  for (; c < n_full; ++c) chunk(c * kLanes, 0xFFFF);
  if (n_in % kLanes != 0) chunk(n_full * kLanes, tail_mask(n_in));
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) k.y[t * k.n_out + r] = reduce16(acc[r][t]);
  }
}

using DirectFn = void (*)(const DirectTile&);
template <class W, int R, int... Ts>
constexpr std::array<DirectFn, sizeof...(Ts)> direct_row(std::integer_sequence<int, Ts...>) {
  return {tile_direct<W, R, Ts + 1>...};
}
// tile_direct<W, R, T> at [R - 1][T - 1] for R <= sizeof...(Rs), T <= kT.
template <class W, int kT, int... Rs>
constexpr auto direct_table(std::integer_sequence<int, Rs...>) {
  return std::array<std::array<DirectFn, kT>, sizeof...(Rs)>{
      direct_row<W, Rs + 1>(std::make_integer_sequence<int, kT>())...};
}

template <class W>
void rows_direct(const PackedMatrix& m, const Acts& a, float* y, int64_t r0, int64_t r1) {
  // Registers: R * T accumulators + R weights + 1 activation <= 32.
  static constexpr auto kNarrow = direct_table<W, 2>(std::make_integer_sequence<int, 8>());  // 8 rows x 1-2 tokens
  static constexpr auto kWide = direct_table<W, kDirectTileTokens>(std::make_integer_sequence<int, 4>());
  const int64_t n_in = m.n_in(), n_out = m.n_out(), n_tokens = a.n_tokens;
  const auto [rows_per_tile, width] = direct_shape(n_tokens);
  const auto* base = reinterpret_cast<const typename W::Elem*>(m.data());
  const int64_t row_bytes = n_in * static_cast<int64_t>(sizeof(typename W::Elem));
  for (int64_t r = r0; r < r1; r += rows_per_tile) {
    const int64_t nr = std::min(rows_per_tile, r1 - r);
    for (int64_t t = 0; t < n_tokens; t += width) {
      const int64_t nt = std::min(width, n_tokens - t);
      // The first pass over the rows prefetches; later ones find them in L1/L2.
      const DirectTile k{.w = base + r * n_in, .x = a.f + t * n_in, .n_in = n_in, .y = y + t * n_out + r,
                         .n_out = n_out, .pf_far = t == 0 ? std::max(rows_per_tile * row_bytes, kFarBytes) : 0};
      (rows_per_tile == 8 ? kNarrow[nr - 1][nt - 1] : kWide[nr - 1][nt - 1])(k);
    }
  }
}

// ---------------------------------------------------------------------------
// Prefill and batches: packed float panels x packed token tiles.
//
// Per-thread scratch, n_in padded with zeros to nc = ceil(n_in / 16) chunks
// (a zero pair adds +0 to a lane: the same as the decode tile's masked FMA):
//   panel  [chunk][row < n_rows][16]                 one row tile's weights
//   acts   [tile][chunk][token < kTileTokens][16]    one token block
// so that each micro-kernel reads two sequential streams.

struct PackedTile {
  const float* w;     // panel at the first chunk
  const float* x;     // token tile at the first chunk
  int64_t n_chunks;
  float* park;        // [R][T][16]: read unless `first`, written unless `last`
  bool first, last;   // `last`: reduce into y
  float* y;           // output of (first row, first token); token t at y + t * n_out
  int64_t n_out;
  // Bytes [*pf, pf_end) still to prefetch into L2 (the next row tile's
  // weights), two lines per chunk; *pf advances.
  const char** pf;
  const char* pf_end;
};

template <int R, int T>
void tile_packed(const PackedTile& k) {
  __m512 acc[R][T];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      acc[r][t] = k.first ? _mm512_setzero_ps() : _mm512_load_ps(k.park + (r * T + t) * kLanes);
    }
  }
  const float* w = k.w;
  const float* x = k.x;
  const char* pf = *k.pf;
  for (int64_t c = 0; c < k.n_chunks; ++c, w += R * kLanes, x += kTileTokens * kLanes) {
    if (pf < k.pf_end) {
      _mm_prefetch(pf, _MM_HINT_T1);
      _mm_prefetch(pf + 64, _MM_HINT_T1);
      pf += 128;
    }
    // The smaller side stays in registers (R + R * T + 1 <= 32 or T + R * T + 1).
    if constexpr (R <= T) {
      __m512 wv[R];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) wv[r] = pinned(_mm512_load_ps(w + r * kLanes));
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) {
        const __m512 xv = _mm512_load_ps(x + t * kLanes);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], xv, acc[r][t]);
      }
    } else {
      __m512 xv[T];
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) xv[t] = pinned(_mm512_load_ps(x + t * kLanes));
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m512 wv = pinned(_mm512_load_ps(w + r * kLanes));
#pragma GCC unroll 16
        for (int t = 0; t < T; ++t) acc[r][t] = _mm512_fmadd_ps(wv, xv[t], acc[r][t]);
      }
    }
  }
  *k.pf = pf;
  if (k.last) {
    constexpr int kN = R * T;
    float sums[kN];
    reduce16_many<std::min(kN, 16)>(&acc[0][0], sums);
    if constexpr (kN > 16) reduce16_many<kN - 16>(&acc[0][0] + 16, sums + 16);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) k.y[t * k.n_out + r] = sums[r * T + t];
    }
  } else {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) _mm512_store_ps(k.park + (r * T + t) * kLanes, acc[r][t]);
    }
  }
}

using PackedFn = void (*)(const PackedTile&);
template <int R, int... Ts>
constexpr std::array<PackedFn, kTileTokens> packed_row(std::integer_sequence<int, Ts...>) {
  return {tile_packed<R, Ts + 1>...};
}
// tile_packed<R, T> at [R - 1][T - 1].
template <int... Rs>
constexpr auto packed_table(std::integer_sequence<int, Rs...>) {
  return std::array<std::array<PackedFn, kTileTokens>, sizeof...(Rs)>{
      packed_row<Rs + 1>(std::make_integer_sequence<int, kTileTokens>())...};
}

// Per-thread buffers of the packed path, 64-byte aligned, grown on demand.
struct PanelScratch {
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> panel, acts, park;
  int64_t panel_floats = 0, act_floats = 0, park_floats = 0;

  static void grow(std::unique_ptr<float, Free>& buf, int64_t& have, int64_t n) {
    if (n <= have) return;
    buf.reset(static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>(n) * sizeof(float))));
    have = n;
  }
};

PanelScratch& panel_scratch() {
  thread_local PanelScratch s;
  return s;
}

// Chunks [c0, c1) of n_rows rows of n_in values at w (rows n_in apart) ->
// panel layout from `panel` on, written in order (rows read side by side).
// `prefetch`: the same chunks of the next n_rows rows into L2 meanwhile.
template <class W>
void pack_panel(const typename W::Elem* w, int64_t n_rows, int64_t n_in, int64_t c0, int64_t c1, float* panel,
                bool prefetch) {
  const int64_t n_full = std::min(c1, n_in / kLanes);
  for (int64_t c = c0; c < n_full; ++c, panel += n_rows * kLanes) {
    for (int64_t r = 0; r < n_rows; ++r) {
      if (prefetch) _mm_prefetch(reinterpret_cast<const char*>(w + (r + n_rows) * n_in + c * kLanes), _MM_HINT_T1);
      _mm512_store_ps(panel + r * kLanes, W::load(w + r * n_in + c * kLanes));
    }
  }
  if (n_full < c1) {  // the partial last chunk
    for (int64_t r = 0; r < n_rows; ++r) {
      _mm512_store_ps(panel + r * kLanes, W::load_tail(w + r * n_in + n_full * kLanes, tail_mask(n_in)));
    }
  }
}

// n_tokens tokens of n_in floats (n_in apart) -> acts layout.
void pack_acts(const float* x, int64_t n_tokens, int64_t n_in, float* acts) {
  const int64_t nc = (n_in + kLanes - 1) / kLanes;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* src = x + t * n_in;
    float* dst = acts + (t / kTileTokens) * nc * kTileTokens * kLanes + (t % kTileTokens) * kLanes;
    for (int64_t c = 0; c < nc; ++c) {
      const __mmask16 m = (c + 1) * kLanes <= n_in ? __mmask16{0xFFFF} : tail_mask(n_in);
      _mm512_store_ps(dst + c * kTileTokens * kLanes, _mm512_maskz_loadu_ps(m, src + c * kLanes));
    }
  }
}

template <class W>
void rows_packed(const PackedMatrix& m, const Acts& a, float* y, int64_t r0, int64_t r1) {
  static constexpr auto kFns = packed_table(std::make_integer_sequence<int, kPanelRows>());
  const int64_t n_in = m.n_in(), n_out = m.n_out(), n_tokens = a.n_tokens;
  const int64_t nc = (n_in + kLanes - 1) / kLanes;
  const int64_t row_bytes = n_in * static_cast<int64_t>(sizeof(typename W::Elem));
  const auto* base = reinterpret_cast<const typename W::Elem*>(m.data());
  // Tokens per block: activations of about kActBytes, whole tiles.
  const int64_t tb = std::max<int64_t>(kTileTokens, kActBytes / (nc * kLanes * 4) / kTileTokens * kTileTokens);
  PanelScratch& s = panel_scratch();
  PanelScratch::grow(s.panel, s.panel_floats, kPanelRows * nc * kLanes);
  const int64_t n_tiles = (n_tokens + kTileTokens - 1) / kTileTokens;
  PanelScratch::grow(s.acts, s.act_floats, std::min(tb, n_tiles * kTileTokens) * nc * kLanes);
  PanelScratch::grow(s.park, s.park_floats, kPanelRows * kSubBlock * kLanes);
  float* panel = s.panel.get();
  float* acts = s.acts.get();
  for (int64_t tb0 = 0; tb0 < n_tokens; tb0 += tb) {
    const int64_t tb1 = std::min(n_tokens, tb0 + tb);
    pack_acts(a.f + tb0 * n_in, tb1 - tb0, n_in, acts);
    for (int64_t rt = r0; rt < r1; rt += kPanelRows) {
      const int64_t nr = std::min<int64_t>(kPanelRows, r1 - rt);
      // Many tokens: the whole panel once, and the next row tile streams
      // into L2 while the tiles compute. Few: a slice per n_in block, which
      // stays in L1 (packing is then cheap, and done once anyway), prefetching
      // the next row tile's slice as it goes.
      const bool whole = tb1 - tb0 > kSubBlock;
      const bool more = rt + nr < r1;
      if (whole) pack_panel<W>(base + rt * n_in, nr, n_in, 0, nc, panel, /*prefetch=*/false);
      const char* pf = reinterpret_cast<const char*>(base + (rt + nr) * n_in);
      const char* pf_end = whole ? pf + std::clamp<int64_t>(r1 - rt - nr, 0, kPanelRows) * row_bytes : pf;
      for (int64_t sb0 = tb0; sb0 < tb1; sb0 += kSubBlock) {
        const int64_t sb1 = std::min(tb1, sb0 + kSubBlock);
        for (int64_t c0 = 0; c0 < nc; c0 += kKBlock / kLanes) {
          const int64_t c1 = std::min(nc, c0 + kKBlock / kLanes);
          if (!whole) pack_panel<W>(base + rt * n_in, nr, n_in, c0, c1, panel, /*prefetch=*/more);
          for (int64_t tt = sb0; tt < sb1; tt += kTileTokens) {
            const int64_t nt = std::min<int64_t>(kTileTokens, sb1 - tt);
            const PackedTile k{.w = whole ? panel + c0 * nr * kLanes : panel,
                               .x = acts + ((tt - tb0) / kTileTokens * nc + c0) * kTileTokens * kLanes,
                               .n_chunks = c1 - c0,
                               .park = s.park.get() + (tt - sb0) * kPanelRows * kLanes,
                               .first = c0 == 0,
                               .last = c1 == nc,
                               .y = y + tt * n_out + rt,
                               .n_out = n_out,
                               .pf = &pf,
                               .pf_end = pf_end};
            kFns[nr - 1][nt - 1](k);
          }
        }
      }
    }
  }
}

template <class W>
void rows_float(const PackedMatrix& m, const Acts& a, float* y, int64_t r0, int64_t r1) {
  if (a.n_tokens <= kDirectMaxTokens) {
    rows_direct<W>(m, a, y, r0, r1);
  } else {
    rows_packed<W>(m, a, y, r0, r1);
  }
}

}  // namespace

int64_t avx512_float_row_grain(int64_t n_tokens) {
  return n_tokens <= kDirectMaxTokens ? direct_shape(n_tokens).rows : kPanelRows;
}

RowsKernel avx512_float_rows_kernel(GgmlType type) {
  switch (type) {
    case GgmlType::kF32: return rows_float<F32>;
    case GgmlType::kF16: return rows_float<F16>;
    case GgmlType::kBF16: return rows_float<BF16>;
    default: return nullptr;
  }
}

void avx512_round_through(GgmlType type, const float* x, int64_t n, float* out) {
  const bool f16 = type == GgmlType::kF16;
  auto round = [f16](__m512 v) {
    if (f16) return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    // bf16: add 0x7FFF + (bit 16) and truncate (ties to even); a NaN keeps
    // its top half and gets the quiet bit (fp32_to_bf16).
    const __m512i u = _mm512_castps_si512(v);
    const __mmask16 nan =
        _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)), _mm512_set1_epi32(0x7F800000));
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF)));
    r = _mm512_mask_or_epi32(r, nan, u, _mm512_set1_epi32(0x00400000));
    return _mm512_castsi512_ps(_mm512_and_si512(r, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
  };
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) _mm512_storeu_ps(out + i, round(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = tail_mask(n);
    _mm512_mask_storeu_ps(out + i, m, round(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

}  // namespace zl::kern
