// The attention kernel body, shared by attention_avx2.cc and
// attention_avx512.cc, which include it after defining `Vec`: a vector of
// Vec::kWidth floats with the operations used below. Internal linkage only
// (anonymous namespace), so each ISA file keeps its own copy.
//
// Per kv head, query rows — the heads sharing it, of one or more tokens —
// are processed Vec::kMaxRows at a time over chunks of kChunk positions:
// scores (one K row load serves kHeadBlock rows), online softmax with a
// vectorised exp, then each V row load accumulated into every row's
// registers.
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <type_traits>

#include "kernels/attention.h"
#include "kernels/attention_query_q8.h"

namespace zl::kern {
namespace {

constexpr int kChunk = 16;  // Vec::chunk_max / chunk_sum assume 16
constexpr int kHeadBlock = 4;
static_assert(kAttentionRange % kChunk == 0);

// Byte offset of element `off` of a cache (rows of whole Q8_0 blocks: kWidth
// consecutive elements from a multiple of kWidth lie in one block).
template <KvType kType>
inline int64_t kv_byte_offset(int64_t off) {
  if constexpr (kType == KvType::kF32) return 4 * off;
  if constexpr (kType == KvType::kF16) return 2 * off;
  // Offsets are never negative: unsigned, the divisions are a shift and a
  // mask (signed, ~12 instructions a V vector, a third of the kernel).
  const auto u = static_cast<uint64_t>(off);
  return static_cast<int64_t>(u / 32 * 34 + 2 + u % 32);
}

template <KvType kType>
inline typename Vec::T load_kv(const void* base, int64_t off) {
  if constexpr (kType == KvType::kF32) {
    return Vec::load(static_cast<const float*>(base) + off);
  } else if constexpr (kType == KvType::kF16) {
    return Vec::load_f16(static_cast<const uint16_t*>(base) + off);
  } else {  // the block's f16 scale times kWidth int8 values
    const auto* blk = static_cast<const uint8_t*>(base) + static_cast<uint64_t>(off) / 32 * 34;
    uint16_t d;
    __builtin_memcpy(&d, blk, 2);
    return Vec::load_q8(reinterpret_cast<const int8_t*>(blk + 2 + static_cast<uint64_t>(off) % 32), d);
  }
}

// Decode's prefetch of K/V (range_rows): the 64-byte lines of a chunk's
// K rows (V's rows sit at the same byte offsets of the V cache), runs of
// consecutive rows merged (a cache block's rows are contiguous), so that
// each line is prefetched once (not once per row that touches it).
struct ChunkLines {
  int64_t first[kChunk];  // byte offset of each run's first line
  int64_t count[kChunk];  // lines of each run
  int n_runs = 0;
  int64_t total = 0;      // lines, all runs
};

// The lines of the rows of positions [p0, p0 + n).
template <KvType kType>
inline void chunk_lines(const AttentionShape& s, const int32_t* block_table, int64_t p0, int n, ChunkLines* cl) {
  const int64_t bs = s.block_size, row_bytes = kv_row_bytes(kType, s.n_head_kv * s.head_dim);
  cl->n_runs = 0, cl->total = 0;
  int64_t blk = p0 / bs, slot = p0 % bs, run_row = 0, run_len = 0;
  const auto flush = [&] {
    if (run_len == 0) return;
    const int64_t l0 = (run_row * row_bytes) >> 6, l1 = ((run_row + run_len) * row_bytes - 1) >> 6;
    cl->first[cl->n_runs] = l0 << 6, cl->count[cl->n_runs] = l1 - l0 + 1;
    cl->total += l1 - l0 + 1, ++cl->n_runs;
  };
  for (int c = 0; c < n; ++c) {
    const int64_t row = static_cast<int64_t>(block_table[blk]) * bs + slot;
    if (run_len > 0 && row == run_row + run_len) {
      ++run_len;
    } else {
      flush();
      run_row = row, run_len = 1;
    }
    if (++slot == bs) slot = 0, ++blk;
  }
  flush();
}

// prefetcht0 of the line holding p. Written as asm: GCC deletes a loop whose
// only statements are __builtin_prefetch calls (with -ffinite-loops, C++'s
// default from -O2, such a loop "has no side effects") — the loops below
// compiled to nothing until they were written this way.
inline void prefetch_line(const char* p) { __asm__ volatile("prefetcht0 %0" : : "m"(*p)); }

// Lines [i0, i1) of cl (in run order), each in K and in V.
inline void prefetch_lines(const void* k_cache, const void* v_cache, const ChunkLines& cl, int64_t i0, int64_t i1) {
  const auto* k = static_cast<const char*>(k_cache);
  const auto* v = static_cast<const char*>(v_cache);
  int64_t at = 0;  // index of run r's first line
  for (int r = 0; r < cl.n_runs && at < i1; at += cl.count[r], ++r) {
    for (int64_t i = std::max(i0, at); i < std::min(i1, at + cl.count[r]); ++i) {
      prefetch_line(k + cl.first[r] + 64 * (i - at));
      prefetch_line(v + cl.first[r] + 64 * (i - at));
    }
  }
}

// Part j of n equal parts of cl's lines (K and V).
struct PrefetchPart {
  const void* k_cache;
  const void* v_cache;
  const ChunkLines* cl;
  int64_t j, n;
  void issue() const { prefetch_lines(k_cache, v_cache, *cl, cl->total * j / n, cl->total * (j + 1) / n); }
};

// scores pr[g][c] for NH rows (q[g]) against the K row at k_off. NH is a
// template parameter so that the accumulators live in registers.
template <KvType kType, int NH>
inline void score_rows(const float* const* q, int64_t nv, const void* k_cache, int64_t k_off, int c,
                       float (*pr)[kChunk], float scale) {
  using V = typename Vec::T;
  constexpr int W = Vec::kWidth;
  V d[kHeadBlock] = {Vec::zero(), Vec::zero(), Vec::zero(), Vec::zero()};
  for (int64_t v = 0; v < nv; ++v) {
    const V k = load_kv<kType>(k_cache, k_off + W * v);
#pragma GCC unroll 4
    for (int g = 0; g < NH; ++g) d[g] = Vec::fmadd(Vec::load(q[g] + W * v), k, d[g]);
  }
  Vec::hsum4(d, NH, c, pr, scale);
}

// Makes a name dependent on a template parameter, so that the Vec members
// used only by one ISA's path are looked up when that path is instantiated.
template <class T, KvType>
struct Dependent {
  using type = T;
};

// Whether the scores over a Q8_0 cache of head_dim hd multiply int8 by int8
// (Vec::score_q8: AVX-512 VNNI, blocks of 32 that never straddle heads);
// else the float kernels score with the dequantized query.
inline bool q8_int_scores(int64_t hd) { return Vec::kVnniQ8 && hd % 32 == 0; }

// Query rows quantized for a Q8_0 cache (attention_query_q8.h), up to N:
// the int8 rows, and the dequantized floats the float path scores with.
template <int N>
struct QueryRowsQ8 {
  QueryQ8 q8[N];
  const QueryQ8* q8r[N];
  alignas(64) float deq[N][kMaxHeadDim];

  // Row i from the float query x; *x then points at what the float path
  // scores with (the dequantized row; x unchanged for the int path).
  void set(int i, const float** x, int64_t hd) {
    q8r[i] = &q8[i];
    if (q8_int_scores(hd)) {
      Vec::quantize_q8(*x, hd, &q8[i]);
    } else {
      quantize_query_q8(*x, hd, &q8[i], deq[i]);
      *x = deq[i];
    }
  }
};
struct NoQueryRows {};
// QueryRowsQ8<N> for a Q8_0 cache, else nothing (no stack).
template <KvType kType, int N>
using QueryRowsFor = std::conditional_t<kType == KvType::kQ8_0, QueryRowsQ8<N>, NoQueryRows>;

// The scores of a whole chunk (Vec::kTreeScores: kWidth == kChunk) for NH <=
// kHeadBlock rows: per row the 16 dot-product vectors (one per position,
// zero past n) are summed lane-wise by a transposing tree — pairs, quads,
// then the four 128-bit quarters — into one vector whose lane c is position
// c's score: ~3 operations a score instead of a horizontal sum each, and the
// scores stay in a register for the softmax. Every row takes the same tree
// whatever NH is (a row's result does not depend on its neighbours).
template <KvType kType, int NH>
inline void score_chunk(const float* const* q, int64_t nv, const void* k_cache, const int64_t* offs, int n,
                        float (*pr)[kChunk], float scale) {
  using VV = typename Dependent<Vec, kType>::type;
  using V = typename VV::T;
  constexpr int W = VV::kWidth;
  static_assert(W == kChunk);
  V z[NH][4];
#pragma GCC unroll 4
  for (int pg = 0; pg < 4; ++pg) {  // positions 4 pg .. 4 pg + 3
    V a[2][NH];
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      V d[2][NH];
#pragma GCC unroll 2
      for (int j = 0; j < 2; ++j) {
        const int c = 4 * pg + 2 * h + j;
#pragma GCC unroll 4
        for (int g = 0; g < NH; ++g) d[j][g] = VV::zero();
        if (c < n) {
          for (int64_t v = 0; v < nv; ++v) {
            const V k = load_kv<kType>(k_cache, offs[c] + W * v);
#pragma GCC unroll 4
            for (int g = 0; g < NH; ++g) d[j][g] = VV::fmadd(VV::load(q[g] + W * v), k, d[j][g]);
          }
        }
      }
#pragma GCC unroll 4
      for (int g = 0; g < NH; ++g) a[h][g] = VV::pair_sum(d[0][g], d[1][g]);
    }
#pragma GCC unroll 4
    for (int g = 0; g < NH; ++g) z[g][pg] = VV::quad_sum(a[0][g], a[1][g]);
  }
#pragma GCC unroll 4
  for (int g = 0; g < NH; ++g) VV::store(pr[g], VV::mul(VV::quarter_sum(z[g]), VV::set1(scale)));
}

// A chunk's K rows (n <= kChunk at element offsets offs[c]) transposed into
// kt[hd][kChunk] floats: kt + kChunk * e holds element e of every position
// (lane c = position c; 0 for c >= n). Built once per chunk for all the row
// groups of a prefill tile (head_rows), for score_gemm.
template <KvType kType>
inline void transpose_chunk(const void* k_cache, const int64_t* offs, int n, int64_t nv, float* kt) {
  using VV = typename Dependent<Vec, kType>::type;
  using V = typename VV::T;
  constexpr int W = VV::kWidth;
  static_assert(W == kChunk);
  for (int64_t v = 0; v < nv; ++v) {
    V x[kChunk];
#pragma GCC unroll 16
    for (int c = 0; c < kChunk; ++c) x[c] = c < n ? load_kv<kType>(k_cache, offs[c] + W * v) : VV::zero();
    VV::transpose16(x);
#pragma GCC unroll 16
    for (int e = 0; e < kChunk; ++e) VV::store(kt + kChunk * (W * v + e), x[e]);
  }
}

// The chunk's V rows (n positions, F16 or Q8_0) as floats: row c at vf + c
// * hd. The values accumulate_block would load (Q8_0: the block's scale
// times the int8, one rounding), so accumulating from vf is the same FMAs on
// the same numbers.
template <KvType kType>
inline void convert_chunk(const void* v_cache, const int64_t* offs, int n, int64_t nv, float* vf) {
  constexpr int W = Vec::kWidth;
  for (int c = 0; c < n; ++c) {
    for (int64_t v = 0; v < nv; ++v) Vec::store(vf + (c * nv + v) * W, load_kv<kType>(v_cache, offs[c] + W * v));
  }
}

// score_chunk's scores for NH <= kHeadBlock rows in GEMM form, positions in
// lanes: from the transposed chunk kt (transpose_chunk), E_l = the chain
// over v of fmadd(q[16v + l], kt[16v + l], E_l) from 0 — lane c the same
// FMAs, in the same order, as lane l of score_chunk's dot-product vector of
// position c — then score_chunk's tree as plain vector adds: Q_k =
// (E_4k + E_4k+2) + (E_4k+1 + E_4k+3), score = ((Q_0 + Q_2) + (Q_1 + Q_3))
// * scale. So every valid position's score is bitwise score_chunk's (lanes
// past the chunk's positions hold whatever kt gives them: masked by the
// softmax). No shuffles; each kt vector loaded serves NH rows, each q
// element a broadcast memory operand; per row 2 chains in flight and 3
// partial sums.
template <KvType kType, int NH, int NV>
inline void score_gemm(const float* const* q, int64_t nv_rt, const float* kt, float (*pr)[kChunk], float scale) {
  using VV = typename Dependent<Vec, kType>::type;
  using V = typename VV::T;
  constexpr int W = VV::kWidth;
  const int64_t nv = NV > 0 ? NV : nv_rt;
  V lo[NH], hi[NH];  // Q_0, then Q_0 + Q_2; Q_1, then Q_1 + Q_3
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    V p[2][NH];  // E_4k+a + E_4k+a+2
#pragma GCC unroll 2
    for (int a = 0; a < 2; ++a) {
      const int l = 4 * k + a;
      V e0[NH], e2[NH];
#pragma GCC unroll 4
      for (int g = 0; g < NH; ++g) e0[g] = VV::zero(), e2[g] = VV::zero();
#pragma GCC unroll 8
      for (int64_t v = 0; v < nv; ++v) {
        const V k0 = VV::load(kt + kChunk * (W * v + l)), k2 = VV::load(kt + kChunk * (W * v + l + 2));
#pragma GCC unroll 4
        for (int g = 0; g < NH; ++g) {
          e0[g] = VV::fmadd(VV::set1(q[g][W * v + l]), k0, e0[g]);
          e2[g] = VV::fmadd(VV::set1(q[g][W * v + l + 2]), k2, e2[g]);
        }
      }
#pragma GCC unroll 4
      for (int g = 0; g < NH; ++g) {
        p[a][g] = VV::add(e0[g], e2[g]);
        __asm__ volatile("" : "+v"(p[a][g]));  // keeps GCC to this order (else it spills)
      }
    }
#pragma GCC unroll 4
    for (int g = 0; g < NH; ++g) {
      const V qk = VV::add(p[0][g], p[1][g]);
      if (k == 0) lo[g] = qk;
      if (k == 1) hi[g] = qk;
      if (k == 2) lo[g] = VV::add(lo[g], qk);
      if (k == 3) hi[g] = VV::add(hi[g], qk);
    }
  }
#pragma GCC unroll 4
  for (int g = 0; g < NH; ++g) VV::store(pr[g], VV::mul(VV::add(lo[g], hi[g]), VV::set1(scale)));
}

// acc row r (stride `stride`) += sum_c pr[r][c] * V row c, for NR rows held
// in registers, VB vectors of head_dim per row at a time (nv a multiple of
// VB): each V vector loaded serves NR rows, each weight broadcast serves VB
// vectors, and NR * VB independent FMA chains keep the FMA units busy (one
// chain per vector of 16 dependent FMAs would wait on their latency). Every
// element still sums its positions in order c = 0, 1, ..., so the blocking
// does not change the result.
// Q8_0 with head_dim a multiple of 32 (every head starts a block): a row's
// block address once per position, a block's scale once for its vectors.
template <KvType kType, int NR, int VB>
inline void accumulate_block(float* acc, int64_t stride, const float (*pr)[kChunk], int n, const int64_t* offs,
                             const void* v_cache, int64_t nv) {
  using V = typename Vec::T;
  constexpr int W = Vec::kWidth;
  constexpr int kPerBlock = 32 / W;  // Q8_0: vectors a block
  const bool q8_aligned = kType == KvType::kQ8_0 && (W * nv) % 32 == 0;
  for (int64_t v = 0; v < nv; v += VB) {
    V a[NR][VB];
#pragma GCC unroll 16
    for (int r = 0; r < NR; ++r) {
#pragma GCC unroll 8
      for (int b = 0; b < VB; ++b) a[r][b] = Vec::load(acc + r * stride + W * (v + b));
    }
    for (int c = 0; c < n; ++c) {
      V x[VB];
      if (kType == KvType::kQ8_0 && VB % kPerBlock == 0 && q8_aligned) {
        const uint8_t* row = static_cast<const uint8_t*>(v_cache) + static_cast<uint64_t>(offs[c]) / 32 * 34 + v / kPerBlock * 34;
#pragma GCC unroll 8
        for (int b = 0; b < VB; b += kPerBlock) {
          const uint8_t* blk = row + b / kPerBlock * 34;
          uint16_t d;
          __builtin_memcpy(&d, blk, 2);
          const V dv = Vec::set1_f16(d);
#pragma GCC unroll 8
          for (int j = 0; j < kPerBlock; ++j) x[b + j] = Vec::mul(dv, Vec::load_i8(reinterpret_cast<const int8_t*>(blk + 2 + W * j)));
        }
      } else {
#pragma GCC unroll 8
        for (int b = 0; b < VB; ++b) x[b] = load_kv<kType>(v_cache, offs[c] + W * (v + b));
      }
#pragma GCC unroll 16
      for (int r = 0; r < NR; ++r) {
        const V w = Vec::set1(pr[r][c]);
#pragma GCC unroll 8
        for (int b = 0; b < VB; ++b) a[r][b] = Vec::fmadd(w, x[b], a[r][b]);
      }
    }
#pragma GCC unroll 16
    for (int r = 0; r < NR; ++r) {
#pragma GCC unroll 8
      for (int b = 0; b < VB; ++b) Vec::store(acc + r * stride + W * (v + b), a[r][b]);
    }
  }
}

// accumulate_block with as many vectors per pass as Vec::kAccRegs
// accumulator registers allow for NR rows.
template <KvType kType, int NR>
inline void accumulate_rows(float* acc, int64_t stride, const float (*pr)[kChunk], int n, const int64_t* offs,
                            const void* v_cache, int64_t nv) {
  constexpr int kVb = Vec::kAccRegs / NR;
  if constexpr (kVb >= 4) {
    if (nv % 4 == 0) return accumulate_block<kType, NR, 4>(acc, stride, pr, n, offs, v_cache, nv);
  }
  if constexpr (kVb >= 2) {
    if (nv % 2 == 0) return accumulate_block<kType, NR, 2>(acc, stride, pr, n, offs, v_cache, nv);
  }
  accumulate_block<kType, NR, 1>(acc, stride, pr, n, offs, v_cache, nv);
}

// Online-softmax state of query rows: per row the running max m, the running
// sum l of exp(score - m), and acc (head_dim floats, not yet divided by l).
struct RowsState {
  float* acc;      // row r at acc + r * stride
  int64_t stride;
  float* m;
  float* l;
  RowsState rows_from(int r) const { return {acc + r * stride, stride, m + r, l + r}; }
};

inline void init_rows(const RowsState& st, int nr, int64_t hd) {
  for (int r = 0; r < nr; ++r) {
    st.m[r] = -INFINITY, st.l[r] = 0.0f;
    std::fill(st.acc + r * st.stride, st.acc + r * st.stride + hd, 0.0f);
  }
}

// Every position run through the kernels goes through these two functions
// (never inlined, so that all callers execute the same instructions): a
// row's result depends only on its own query, its positions and the fixed
// range/chunk grid, never on which rows, tokens or threads shared the work.
// That makes prefill (attention_rows) and split decode (range_rows + merge)
// agree bit for bit. (A prefill tile's scores take score_gemm, decode's
// score_chunk: different instructions, the same arithmetic per score.)

// One chunk of n <= kChunk positions (K/V rows at element offsets offs[c])
// for nr <= Vec::kMaxRows rows; row r counts positions in [start[r],
// limit[r]) only (start: the sliding window's first position, else 0).
// NV: head_dim / kWidth when known at compile time (the common head sizes:
// loops over a head's vectors unrolled), else 0. kt: the chunk's K rows
// transposed (transpose_chunk, at least n positions; a prefill tile's), the
// scores then in GEMM form — over a Q8_0 cache with int8 scores, the chunk's
// K as Vec::transpose_q8 leaves it; else nullptr. Either way the same
// scores. vf: an F16 or Q8_0 cache's V rows of the chunk as floats
// (convert_chunk), or nullptr.
template <KvType kType, int NV>
__attribute__((noinline)) void chunk_rows_nv(const AttentionShape& s, const float* const* q,
                                             const QueryQ8* const* q8, const int64_t* start, const int64_t* limit,
                                             int nr, const void* k_cache, const void* v_cache, const int64_t* offs,
                                             int64_t p0, int n, const RowsState& st, const PrefetchPart* pf,
                                             const void* kt, const float* vf) {
  constexpr int W = Vec::kWidth, R = Vec::kMaxRows;
  const int64_t nv = NV > 0 ? NV : s.head_dim / W;
  alignas(64) float pr[R][kChunk];
  using VV = typename Dependent<Vec, kType>::type;
  if (kType == KvType::kQ8_0 && q8_int_scores(s.head_dim)) {  // int8 q·k (q8 set by the caller)
    if constexpr (kType == KvType::kQ8_0 && VV::kVnniQ8) {
      if (kt != nullptr) {
        VV::score_q8_t(q8, nr, kt, s.head_dim, pr, s.scale);
      } else {
        VV::score_q8(q8, nr, k_cache, offs, n, s.head_dim, pr, s.scale);
      }
    }
  } else if (VV::kGemmScores && kt != nullptr) {  // the chunk transposed (prefill tiles)
    if constexpr (VV::kGemmScores) {
      for (int r0 = 0; r0 < nr; r0 += kHeadBlock) {
        // Opaque to GCC: else it hoists kt's loads out of this loop, all
        // hd of them, into stack spills.
        const float* ktr = static_cast<const float*>(kt);
        __asm__("" : "+r"(ktr));
        switch (std::min(kHeadBlock, nr - r0)) {
          case 4: score_gemm<kType, 4, NV>(q + r0, nv, ktr, pr + r0, s.scale); break;
          case 3: score_gemm<kType, 3, NV>(q + r0, nv, ktr, pr + r0, s.scale); break;
          case 2: score_gemm<kType, 2, NV>(q + r0, nv, ktr, pr + r0, s.scale); break;
          default: score_gemm<kType, 1, NV>(q + r0, nv, ktr, pr + r0, s.scale); break;
        }
      }
    }
  } else if constexpr (Vec::kTreeScores) {  // kHeadBlock rows per K load, a chunk at a time
    for (int r0 = 0; r0 < nr; r0 += kHeadBlock) {
      switch (std::min(kHeadBlock, nr - r0)) {
        case 4: score_chunk<kType, 4>(q + r0, nv, k_cache, offs, n, pr + r0, s.scale); break;
        case 3: score_chunk<kType, 3>(q + r0, nv, k_cache, offs, n, pr + r0, s.scale); break;
        case 2: score_chunk<kType, 2>(q + r0, nv, k_cache, offs, n, pr + r0, s.scale); break;
        default: score_chunk<kType, 1>(q + r0, nv, k_cache, offs, n, pr + r0, s.scale); break;
      }
    }
  } else {
    for (int c = 0; c < n; ++c) {  // scores, kHeadBlock rows per K load
      for (int r0 = 0; r0 < nr; r0 += kHeadBlock) {
        if (nr - r0 >= kHeadBlock) {
          score_rows<kType, kHeadBlock>(q + r0, nv, k_cache, offs[c], c, pr + r0, s.scale);
        } else {
          for (int r = r0; r < nr; ++r) score_rows<kType, 1>(q + r, nv, k_cache, offs[c], c, pr + r, s.scale);
        }
      }
    }
  }
  if (pf != nullptr) pf->issue();  // range_rows: the rest of this head's share of the next chunk
  if (VV::kRowsSoftmax && nr > 4) {  // all rows at once (lane r = row r); decode's 4 a row at a time
    int first[R], valid[R];
    for (int r = 0; r < nr; ++r) {
      valid[r] = static_cast<int>(std::clamp<int64_t>(limit[r] - p0, 0, n));
      first[r] = static_cast<int>(std::clamp<int64_t>(start[r] - p0, 0, n));
    }
    alignas(64) float corr[R];
    unsigned rescale = 0;
    if constexpr (VV::kRowsSoftmax) rescale = VV::softmax_rows(pr, nr, first, valid, st.m, st.l, corr);
    for (; rescale != 0; rescale &= rescale - 1) {
      const int r = __builtin_ctz(rescale);
      float* a = st.acc + r * st.stride;
      for (int64_t v = 0; v < nv; ++v) Vec::store(a + W * v, Vec::mul(Vec::load(a + W * v), Vec::set1(corr[r])));
    }
  } else {
    for (int r = 0; r < nr; ++r) {  // online softmax: rescale to the new running max
      const int valid = static_cast<int>(std::clamp<int64_t>(limit[r] - p0, 0, n));
      const int first = static_cast<int>(std::clamp<int64_t>(start[r] - p0, 0, n));  // positions below: masked
      if (valid <= first) {
        std::fill(pr[r], pr[r] + kChunk, 0.0f);
        continue;
      }
      if (first > 0) std::fill(pr[r], pr[r] + first, -INFINITY);
      float& m = st.m[r];
      const float m_new = std::max(m, Vec::chunk_max(pr[r], valid));
      // 0 on the first chunk; exp(0) = 1 exactly, so the call is skipped
      // while the max holds (most chunks of a long context).
      const float corr = m_new == m ? 1.0f : std::exp(m - m_new);
      // exp(score - m_new) on positions [first, valid), 0 elsewhere: masked in
      // registers (two variable-length fills per row and chunk were memset
      // calls, ~10% of the kernel).
      for (int c = 0; c < kChunk; c += W) {
        const typename Vec::T e = Vec::exp(Vec::sub(Vec::load(pr[r] + c), Vec::set1(m_new)));
        Vec::store(pr[r] + c, Vec::keep_lanes(e, c, first, valid));
      }
      st.l[r] = std::fma(st.l[r], corr, Vec::chunk_sum(pr[r]));  // fused: Vec::softmax_rows's arithmetic
      m = m_new;
      if (corr != 1.0f) {
        float* a = st.acc + r * st.stride;
        for (int64_t v = 0; v < nv; ++v) Vec::store(a + W * v, Vec::mul(Vec::load(a + W * v), Vec::set1(corr)));
      }
    }
  }
  // Weighted V rows, accumulators in registers: Vec::kAccRows rows at a
  // time, then blocks of kHeadBlock and singles.
  // From vf (the chunk's V rows as floats, row c at c * head_dim) when
  // given: the same values, without a conversion per pass.
  int64_t vf_offs[kChunk];
  if (vf != nullptr) {
    for (int c = 0; c < n; ++c) vf_offs[c] = c * nv * W;
  }
  const auto accumulate = [&]<int NR>(int r) {
    if (kType != KvType::kF32 && vf != nullptr) {
      accumulate_rows<KvType::kF32, NR>(st.acc + r * st.stride, st.stride, pr + r, n, vf_offs, vf, nv);
    } else {
      accumulate_rows<kType, NR>(st.acc + r * st.stride, st.stride, pr + r, n, offs, v_cache, nv);
    }
  };
  constexpr int kA = Vec::kAccRows;
  int r = 0;
  for (; r + kA <= nr; r += kA) accumulate.template operator()<kA>(r);
  for (; r + kHeadBlock <= nr; r += kHeadBlock) accumulate.template operator()<kHeadBlock>(r);
  for (; r < nr; ++r) accumulate.template operator()<1>(r);
}

// chunk_rows_nv for s.head_dim: the same instructions for every caller of a
// shape.
template <KvType kType>
inline void chunk_rows(const AttentionShape& s, const float* const* q, const QueryQ8* const* q8, const int64_t* start,
                       const int64_t* limit, int nr, const void* k_cache, const void* v_cache, const int64_t* offs,
                       int64_t p0, int n, const RowsState& st, const PrefetchPart* pf = nullptr,
                       const void* kt = nullptr, const float* vf = nullptr) {
  switch (s.head_dim / Vec::kWidth) {
    case 4: return chunk_rows_nv<kType, 4>(s, q, q8, start, limit, nr, k_cache, v_cache, offs, p0, n, st, pf, kt, vf);
    case 8: return chunk_rows_nv<kType, 8>(s, q, q8, start, limit, nr, k_cache, v_cache, offs, p0, n, st, pf, kt, vf);
    default: return chunk_rows_nv<kType, 0>(s, q, q8, start, limit, nr, k_cache, v_cache, offs, p0, n, st, pf, kt, vf);
  }
}

// Folds the state of a later position range (b) into row state (a); a row of
// b without positions (l = 0) changes nothing.
__attribute__((noinline)) inline void merge_rows(const RowsState& a, const RowsState& b, int nr, int64_t hd) {
  constexpr int W = Vec::kWidth;
  for (int r = 0; r < nr; ++r) {
    if (b.l[r] == 0.0f) continue;
    const float m_new = std::max(a.m[r], b.m[r]);
    const float ca = std::exp(a.m[r] - m_new), cb = std::exp(b.m[r] - m_new);
    a.l[r] = a.l[r] * ca + b.l[r] * cb;
    a.m[r] = m_new;
    float* x = a.acc + r * a.stride;
    const float* y = b.acc + r * b.stride;
    for (int64_t v = 0; v < hd / W; ++v) {
      Vec::store(x + W * v, Vec::fmadd(Vec::load(y + W * v), Vec::set1(cb), Vec::mul(Vec::load(x + W * v), Vec::set1(ca))));
    }
  }
}

inline void finish_rows(const RowsState& st, int nr, int64_t hd, float* const* out) {
  constexpr int W = Vec::kWidth;
  for (int r = 0; r < nr; ++r) {
    const typename Vec::T inv = Vec::set1(1.0f / st.l[r]);
    for (int64_t v = 0; v < hd / W; ++v) Vec::store(out[r] + W * v, Vec::mul(Vec::load(st.acc + r * st.stride + W * v), inv));
  }
}

// Element offsets of the K/V rows of positions [p0, p0 + n) (kv head offset
// kv_off within each row), and a prefetch of `prefetch_bytes` from each
// row's start at kv_off: decode streams the weights between two attention
// calls, so the rows come from memory, and a chunk's compute hides the next
// chunk's fetch.
template <KvType kType>
inline void chunk_offsets(const AttentionShape& s, const int32_t* block_table, int64_t p0, int n, int64_t kv_off,
                          const void* k_cache, const void* v_cache, int64_t prefetch_bytes, int64_t* o) {
  const int64_t kv_dim = s.n_head_kv * s.head_dim, bs = s.block_size;
  int64_t blk = p0 / bs, slot = p0 % bs;
  for (int c = 0; c < n; ++c) {
    o[c] = (block_table[blk] * bs + slot) * kv_dim + kv_off;
    if (++slot == bs) slot = 0, ++blk;
  }
  for (int c = 0; c < n; ++c) {
    const int64_t b = kv_byte_offset<kType>(o[c]) & ~int64_t{63};  // from the cache line holding the start
    const char* kr = static_cast<const char*>(k_cache) + b;
    const char* vr = static_cast<const char*>(v_cache) + b;
    for (int64_t i = 0; i < prefetch_bytes; i += 64) {
      __builtin_prefetch(kr + i, 0, 3);
      __builtin_prefetch(vr + i, 0, 3);
    }
  }
}

template <KvType kType>
inline void prefetch_rows(const void* k_cache, const void* v_cache, const int64_t* base, int n, int64_t bytes) {
  for (int c = 0; c < n; ++c) {
    const int64_t b = kv_byte_offset<kType>(base[c]) & ~int64_t{63};
    for (int64_t i = 0; i < bytes; i += 64) {
      __builtin_prefetch(static_cast<const char*>(k_cache) + b + i, 0, 3);
      __builtin_prefetch(static_cast<const char*>(v_cache) + b + i, 0, 3);
    }
  }
}

// Query rows of one kv head per tile: kTileRows rows (tokens x heads of
// the group) walk the context together, range by range, so that a range's
// K/V rows of the head (kAttentionRange x head_dim, 64 KB in F16 at
// head_dim 64) come from memory once and serve every row group of the tile
// (head_rows), and each chunk's K transposition and V conversion serve them
// all. Its state (TileScratch) is the calling thread's.
inline constexpr int kTileRows = static_cast<int>(kAttentionTileRows);

// head_rows' state of a tile: two online-softmax states (the range being
// walked and the ranges before it) and, over a Q8_0 cache, the quantized
// query rows; ~0.9 MB once per thread (heap, not stack; left uninitialized,
// so only the pages the rows use are ever touched).
template <KvType kType>
struct TileScratch {
  alignas(64) float acc[kTileRows * kMaxHeadDim];
  alignas(64) float acc_b[kTileRows * kMaxHeadDim];
  QueryRowsFor<kType, kTileRows> qrows;
};
template <KvType kType>
TileScratch<kType>& tile_scratch() {
  thread_local const std::unique_ptr<TileScratch<kType>> s = std::make_unique_for_overwrite<TileScratch<kType>>();
  return *s;
}
// Tiles of at least this many rows transpose each chunk's K once for GEMM
// form scores (score_gemm, or Vec::score_q8_t) and convert its V once to
// floats; fewer rows would not repay the transposition.
inline constexpr int kGemmMinRows = 8;

// Up to kTileRows query rows against one kv head whose rows start at
// kv_off within each cache row, taken Vec::kMaxRows at a time (a row group:
// its accumulators in registers). Row r (a query head of one token) attends
// positions [start, limit[r]) (start 0, or the sliding window's first
// position); other positions get weight 0. Positions run in ranges of
// kAttentionRange, each with a fresh state, the ranges folded in order
// (merge_rows): the grid that split decode uses. Ranges and chunks wholly
// before every row's window are skipped; a row's result does not depend on
// where the walk starts (a range without positions merges as nothing), nor
// on the other groups of its tile.
template <KvType kType>
void head_rows(const AttentionShape& s, const float* const* q_in, float* const* out, const int64_t* limit, int nr,
               const void* k_cache, const void* v_cache, const int32_t* block_table, int64_t kv_off) {
  constexpr int R = Vec::kMaxRows, kMaxGroups = (kTileRows + R - 1) / R;
  constexpr int kRangeChunks = kAttentionRange / kChunk;
  const int64_t hd = s.head_dim;
  const int n_groups = (nr + R - 1) / R;
  // Over a Q8_0 cache the rows are quantized once for the whole walk.
  const float* q[kTileRows];
  std::copy(q_in, q_in + nr, q);
  TileScratch<kType>& scratch = tile_scratch<kType>();
  const QueryQ8* const* q8 = nullptr;
  if constexpr (kType == KvType::kQ8_0) {
    for (int r = 0; r < nr; ++r) scratch.qrows.set(r, &q[r], hd);
    q8 = scratch.qrows.q8r;
  }
  float* const acc = scratch.acc;  // row r at r * hd
  float* const acc_b = scratch.acc_b;
  float m[kTileRows], l[kTileRows], m_b[kTileRows], l_b[kTileRows];
  int64_t n_kv = 0, lo = INT64_MAX, start[kTileRows];
  for (int r = 0; r < nr; ++r) {
    n_kv = std::max(n_kv, limit[r]);
    start[r] = attention_first_position(s, limit[r]);
    lo = std::min(lo, start[r]);
  }
  // Per group: its rows' walk starts at the range of its own earliest row.
  int64_t g_rb0[kMaxGroups], g_c0[kMaxGroups], g_n_kv[kMaxGroups];
  for (int g = 0; g < n_groups; ++g) {
    int64_t g_lo = INT64_MAX, g_hi = 0;
    for (int r = g * R; r < std::min(nr, (g + 1) * R); ++r) g_lo = std::min(g_lo, start[r]), g_hi = std::max(g_hi, limit[r]);
    g_rb0[g] = g_lo / kAttentionRange * kAttentionRange, g_c0[g] = g_lo / kChunk * kChunk, g_n_kv[g] = g_hi;
  }
  const auto state = [&](int g, bool b) {
    return b ? RowsState{acc_b + g * R * hd, hd, m_b + g * R, l_b + g * R}
             : RowsState{acc + g * R * hd, hd, m + g * R, l + g * R};
  };
  // The range's chunk offsets. The tile walks a range chunk by chunk, every
  // group of rows that counts the chunk in turn: the chunk's K/V rows come
  // from memory once (a chunk ahead prefetched, the next range's first
  // chunk at the range's end) and serve the later groups from L1, and with
  // enough rows its K is transposed once (kt) for all groups' scores in
  // GEMM form. A group's rows see the same chunks in the same order as a
  // walk of the group alone.
  const int64_t head_bytes = kv_row_bytes(kType, hd) + 64, c_lo = lo / kChunk * kChunk;
  int64_t offs[kRangeChunks][kChunk], next_offs[kChunk];
  // A tile's chunk, once for all its groups: K transposed for float scores
  // (kGemm) or int8 scores (kQ8Kt), V as floats (kVf).
  using VV = typename Dependent<Vec, kType>::type;
  constexpr bool kGemm = Vec::kGemmScores && kType != KvType::kQ8_0;
  constexpr bool kQ8Kt = kType == KvType::kQ8_0 && Vec::kVnniQ8;
  constexpr bool kVf = kType != KvType::kF32;
  const bool tile = nr >= kGemmMinRows;
  const bool q8_kt = kQ8Kt && tile && q8_int_scores(hd);
  alignas(64) float kt[kGemm ? kMaxHeadDim * kChunk : 1];
  alignas(64) unsigned char kt_q8[kQ8Kt ? VV::kKtQ8Bytes : 1];
  alignas(64) float vf[kVf ? kMaxHeadDim * kChunk : 1];
  const void* kt_arg = kGemm && tile ? static_cast<const void*>(kt) : q8_kt ? static_cast<const void*>(kt_q8) : nullptr;
  bool in_range[kMaxGroups];
  for (int64_t rb = lo / kAttentionRange * kAttentionRange; rb < n_kv; rb += kAttentionRange) {
    const int64_t re = std::min(rb + kAttentionRange, n_kv), p_first = std::max(rb, c_lo);
    const int n_chunks = static_cast<int>((re - p_first + kChunk - 1) / kChunk);
    for (int i = 0; i < n_chunks; ++i) {
      const int64_t p0 = p_first + i * kChunk;
      chunk_offsets<kType>(s, block_table, p0, static_cast<int>(std::min<int64_t>(kChunk, re - p0)), kv_off, k_cache,
                           v_cache, rb == p_first && i == 0 ? head_bytes : 0, offs[i]);
    }
    for (int g = 0; g < n_groups; ++g) {
      in_range[g] = rb >= g_rb0[g] && rb < g_n_kv[g];  // not before the group's walk, nor past all its rows
      if (in_range[g]) init_rows(state(g, rb > g_rb0[g]), std::min(R, nr - g * R), hd);
    }
    for (int i = 0; i < n_chunks; ++i) {
      const int64_t p0 = p_first + i * kChunk, p1 = p0 + kChunk;
      if (i + 1 < n_chunks) {
        prefetch_rows<kType>(k_cache, v_cache, offs[i + 1], static_cast<int>(std::min<int64_t>(kChunk, re - p1)),
                             head_bytes);
      } else if (p1 < n_kv) {
        chunk_offsets<kType>(s, block_table, p1, static_cast<int>(std::min<int64_t>(kChunk, n_kv - p1)), kv_off, k_cache,
                             v_cache, head_bytes, next_offs);
      }
      bool transposed = false;
      for (int g = 0; g < n_groups; ++g) {
        const int64_t g_re = std::min(re, g_n_kv[g]);
        if (!in_range[g] || p0 >= g_re || p0 < g_c0[g]) continue;
        if (tile && !transposed) {
          const int n = static_cast<int>(std::min<int64_t>(kChunk, re - p0));
          if constexpr (kGemm) transpose_chunk<kType>(k_cache, offs[i], n, hd / Vec::kWidth, kt);
          if constexpr (kQ8Kt) {
            if (q8_kt) VV::transpose_q8(k_cache, offs[i], n, hd, kt_q8);
          }
          if constexpr (kVf) convert_chunk<kType>(v_cache, offs[i], n, hd / Vec::kWidth, vf);
          transposed = true;
        }
        const int g0 = g * R;
        chunk_rows<kType>(s, q + g0, q8 != nullptr ? q8 + g0 : nullptr, start + g0, limit + g0, std::min(R, nr - g0),
                          k_cache, v_cache, offs[i], p0, static_cast<int>(std::min<int64_t>(kChunk, g_re - p0)),
                          state(g, rb > g_rb0[g]), nullptr, kt_arg, kVf && tile ? vf : nullptr);
      }
    }
    for (int g = 0; g < n_groups; ++g) {
      if (in_range[g] && rb > g_rb0[g]) merge_rows(state(g, false), state(g, true), std::min(R, nr - g * R), hd);
    }
  }
  for (int g = 0; g < n_groups; ++g) finish_rows(state(g, false), std::min(R, nr - g * R), hd, out + g * R);
}

// Split decode: one query token (all n_head heads, q[n_head * head_dim])
// over the positions of range `range` of kAttentionRange, limited to n_kv:
// the partial state of every head into st (n_head rows). Per chunk every kv
// head is done before the next chunk, so the chunk's whole K/V rows are read
// once, in order (the next chunk's prefetched).
template <KvType kType>
void range_rows(const AttentionShape& s, const float* q, const void* k_cache, const void* v_cache,
                const int32_t* block_table, int64_t n_kv, int64_t range, const RowsState& st) {
  constexpr int R = Vec::kMaxRows;
  const int64_t group = s.n_head / s.n_head_kv, hd = s.head_dim;
  const int64_t row_bytes = kv_row_bytes(kType, s.n_head_kv * hd) + 64;
  const int64_t lo = attention_first_position(s, n_kv);
  const int64_t rb = std::max(range * kAttentionRange, lo / kChunk * kChunk);
  const int64_t re = std::min(range * kAttentionRange + kAttentionRange, n_kv);
  init_rows(st, static_cast<int>(s.n_head), hd);
  if (re <= rb) return;
  const float* qr[R];
  int64_t start[R], limit[R];
  for (int r = 0; r < R; ++r) start[r] = lo, limit[r] = n_kv;
  // Over a Q8_0 cache the heads are quantized once per range, kPassRows at
  // a time (one pass for every model with up to 64 query heads); other
  // types walk all heads in one pass.
  constexpr int kPassRows = 64;
  [[maybe_unused]] QueryRowsFor<kType, kPassRows> qrows;
  const QueryQ8* q8r[R];
  const int64_t pass_heads = kType == KvType::kQ8_0 ? kPassRows : s.n_head;
  int64_t base[kChunk], base_next[kChunk], offs[kChunk];
  for (int64_t h_lo = 0; h_lo < s.n_head; h_lo += pass_heads) {
    const int64_t h_hi = std::min(s.n_head, h_lo + pass_heads);
    const float* qp = q;  // the pass's rows: head h at qp + (h - h_lo) * hd
    if constexpr (kType == KvType::kQ8_0) {
      for (int64_t h = h_lo; h < h_hi; ++h) {
        const float* x = q + h * hd;
        qrows.set(static_cast<int>(h - h_lo), &x, hd);
      }
      qp = q8_int_scores(hd) ? q + h_lo * hd : &qrows.deq[0][0];
    }
    const int64_t q_stride = kType == KvType::kQ8_0 && !q8_int_scores(hd) ? kMaxHeadDim : hd;
    // The first chunk at once (a thread's first range; otherwise the range
    // before prefetched it already), then, while chunk i is computed, chunk
    // i + 1's lines (the next range's first chunk at the end: a thread
    // takes consecutive ranges) in 2 x the kv heads' parts: one before each
    // head's chunk_rows, one after its scores. Measured against coarser
    // bursts (a head's share at once, whole rows or F16 head segments),
    // longer distances (2-4 chunks ahead, into L2 with prefetcht1 up to a
    // range ahead) and K before V: bursts of prefetches stall the compute
    // (miss buffers full), more distance gained nothing (bench/README.md
    // "Attention at depth").
    chunk_offsets<kType>(s, block_table, rb, static_cast<int>(std::min<int64_t>(kChunk, re - rb)), 0, k_cache,
                         v_cache, row_bytes, base_next);
    const int64_t kvh_lo = h_lo / group, n_parts = 2 * ((h_hi - 1) / group - kvh_lo + 1);
    ChunkLines next;
    for (int64_t p0 = rb; p0 < re; p0 += kChunk) {
      const int n = static_cast<int>(std::min<int64_t>(kChunk, re - p0));
      std::copy(base_next, base_next + n, base);
      const int n_next = static_cast<int>(std::clamp<int64_t>(re - p0 - kChunk, 0, kChunk));
      if (n_next > 0) {
        chunk_offsets<kType>(s, block_table, p0 + kChunk, n_next, 0, k_cache, v_cache, /*prefetch_bytes=*/0, base_next);
      }
      chunk_lines<kType>(s, block_table, p0 + kChunk, static_cast<int>(std::clamp<int64_t>(n_kv - p0 - kChunk, 0, kChunk)),
                         &next);
      for (int64_t kvh = kvh_lo; kvh * group < h_hi; ++kvh) {
        const PrefetchPart before{k_cache, v_cache, &next, 2 * (kvh - kvh_lo), n_parts};
        const PrefetchPart after{k_cache, v_cache, &next, 2 * (kvh - kvh_lo) + 1, n_parts};
        before.issue();
        for (int c = 0; c < n; ++c) offs[c] = base[c] + kvh * hd;
        const int64_t j_lo = std::max<int64_t>(0, h_lo - kvh * group), j_hi = std::min(group, h_hi - kvh * group);
        for (int64_t j0 = j_lo; j0 < j_hi; j0 += R) {
          const int nr = static_cast<int>(std::min<int64_t>(R, j_hi - j0));
          const int64_t h0 = kvh * group + j0;
          for (int r = 0; r < nr; ++r) qr[r] = qp + (h0 + r - h_lo) * q_stride;
          if constexpr (kType == KvType::kQ8_0) {
            for (int r = 0; r < nr; ++r) q8r[r] = &qrows.q8[h0 + r - h_lo];
          }
          chunk_rows<kType>(s, qr, kType == KvType::kQ8_0 ? q8r : nullptr, start, limit, nr, k_cache, v_cache, offs,
                            p0, n, st.rows_from(static_cast<int>(h0)), j0 == j_lo ? &after : nullptr);
        }
      }
    }
  }
}

// The kernel entry (attention.h's attention_chunk): n_q query tokens, token i
// attending positions [0, n_kv_first + i), kv heads [kv_h0, kv_h1); head_dim
// a multiple of kWidth. Rows are (token, head of the group) pairs, taken
// kTileRows at a time (head_rows: Vec::kMaxRows rows per K/V row load, a
// range of K/V rows per tile from memory).
inline void attention_rows(const AttentionShape& s, const float* q, int64_t n_q, const void* k_cache,
                           const void* v_cache, KvType kv_type, const int32_t* block_table, int64_t n_kv_first,
                           float* out, int64_t kv_h0, int64_t kv_h1) {
  constexpr int R = kTileRows;
  const int64_t group = s.n_head / s.n_head_kv, hd = s.head_dim, q_dim = s.n_head * hd;
  const float* qr[R];
  float* outr[R];
  int64_t limit[R];
  for (int64_t kvh = kv_h0; kvh < kv_h1; ++kvh) {
    const int64_t n_rows = n_q * group;
    for (int64_t j0 = 0; j0 < n_rows; j0 += R) {
      const int nr = static_cast<int>(std::min<int64_t>(R, n_rows - j0));
      for (int r = 0; r < nr; ++r) {
        const int64_t t = (j0 + r) / group, h = kvh * group + (j0 + r) % group;
        qr[r] = q + t * q_dim + h * hd;
        outr[r] = out + t * q_dim + h * hd;
        limit[r] = n_kv_first + t;
      }
      switch (kv_type) {
        case KvType::kF32: head_rows<KvType::kF32>(s, qr, outr, limit, nr, k_cache, v_cache, block_table, kvh * hd); break;
        case KvType::kF16: head_rows<KvType::kF16>(s, qr, outr, limit, nr, k_cache, v_cache, block_table, kvh * hd); break;
        case KvType::kQ8_0: head_rows<KvType::kQ8_0>(s, qr, outr, limit, nr, k_cache, v_cache, block_table, kvh * hd); break;
      }
    }
  }
}

// Split decode entries (attention.h's attention_range / attention_merge).
// A range's partial state: acc [n_head][head_dim], then m [n_head], l [n_head].
inline RowsState partial_state(const AttentionShape& s, float* partial) {
  const int64_t rows = s.n_head * s.head_dim;
  return {partial, s.head_dim, partial + rows, partial + rows + s.n_head};
}

inline void attention_range_impl(const AttentionShape& s, const float* q, const void* k_cache, const void* v_cache,
                                 KvType kv_type, const int32_t* block_table, int64_t n_kv, int64_t range,
                                 float* partial) {
  const RowsState st = partial_state(s, partial);
  switch (kv_type) {
    case KvType::kF32: range_rows<KvType::kF32>(s, q, k_cache, v_cache, block_table, n_kv, range, st); break;
    case KvType::kF16: range_rows<KvType::kF16>(s, q, k_cache, v_cache, block_table, n_kv, range, st); break;
    case KvType::kQ8_0: range_rows<KvType::kQ8_0>(s, q, k_cache, v_cache, block_table, n_kv, range, st); break;
  }
}

inline void attention_merge_impl(const AttentionShape& s, float* partials, int64_t n_ranges, float* out) {
  const int64_t stride = attention_partial_floats(s), hd = s.head_dim;
  const RowsState st = partial_state(s, partials);
  for (int64_t j = 1; j < n_ranges; ++j) merge_rows(st, partial_state(s, partials + j * stride), static_cast<int>(s.n_head), hd);
  for (int64_t h = 0; h < s.n_head; ++h) {
    float* o = out + h * hd;
    finish_rows(st.rows_from(static_cast<int>(h)), 1, hd, &o);
  }
}

}  // namespace
}  // namespace zl::kern
