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

#include "kernels/attention.h"

namespace zl::kern {
namespace {

constexpr int kChunk = 16;
constexpr int kHeadBlock = 4;

template <KvType kType>
inline typename Vec::T load_kv(const void* base, int64_t off) {
  if constexpr (kType == KvType::kF32) {
    return Vec::load(static_cast<const float*>(base) + off);
  } else {
    return Vec::load_f16(static_cast<const uint16_t*>(base) + off);
  }
}

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

// acc[r] += sum_c pr[r][c] * V row c, for NR rows held in registers.
template <KvType kType, int NR>
inline void accumulate_rows(float (*acc)[kMaxHeadDim], const float (*pr)[kChunk], int n, const int64_t* offs,
                            const void* v_cache, int64_t nv) {
  using V = typename Vec::T;
  constexpr int W = Vec::kWidth;
  for (int64_t v = 0; v < nv; ++v) {
    V a[NR];
#pragma GCC unroll 16
    for (int r = 0; r < NR; ++r) a[r] = Vec::load(acc[r] + W * v);
    for (int c = 0; c < n; ++c) {
      const V x = load_kv<kType>(v_cache, offs[c] + W * v);
#pragma GCC unroll 16
      for (int r = 0; r < NR; ++r) a[r] = Vec::fmadd(Vec::set1(pr[r][c]), x, a[r]);
    }
#pragma GCC unroll 16
    for (int r = 0; r < NR; ++r) Vec::store(acc[r] + W * v, a[r]);
  }
}

// Up to Vec::kMaxRows query rows against one kv head whose rows start at
// kv_off within each cache row. Row r (a query head of one token) attends
// positions [0, limit[r]); positions beyond a row's limit get weight 0.
template <KvType kType>
void head_rows(const AttentionShape& s, const float* const* q, float* const* out, const int64_t* limit, int nr,
               const void* k_cache, const void* v_cache, const int32_t* block_table, int64_t kv_off) {
  using V = typename Vec::T;
  constexpr int W = Vec::kWidth, R = Vec::kMaxRows;
  const int64_t hd = s.head_dim, nv = hd / W, kv_dim = s.n_head_kv * hd, bs = s.block_size;
  alignas(64) float acc[R][kMaxHeadDim];
  alignas(64) float pr[R][kChunk];
  float m[R], l[R];
  int64_t n_kv = 0;
  for (int r = 0; r < nr; ++r) {
    m[r] = -INFINITY, l[r] = 0.0f, n_kv = std::max(n_kv, limit[r]);
    std::fill(acc[r], acc[r] + hd, 0.0f);
  }
  // Cache row offsets (elements) of the chunk at p0, and a prefetch of its K
  // and V rows: decode streams the weights between two attention calls, so
  // the K/V rows come from memory, and a chunk's compute hides the next
  // chunk's fetch.
  constexpr int64_t kElem = kType == KvType::kF32 ? 4 : 2;
  const int64_t lines = (hd * kElem + 63) / 64;
  auto chunk_offs = [&](int64_t p0, int64_t* o) {
    const int n = static_cast<int>(std::min<int64_t>(kChunk, n_kv - p0));
    int64_t blk = p0 / bs, slot = p0 % bs;
    for (int c = 0; c < n; ++c) {
      o[c] = (block_table[blk] * bs + slot) * kv_dim + kv_off;
      if (++slot == bs) slot = 0, ++blk;
    }
    for (int c = 0; c < n; ++c) {
      const char* kr = static_cast<const char*>(k_cache) + o[c] * kElem;
      const char* vr = static_cast<const char*>(v_cache) + o[c] * kElem;
      for (int64_t i = 0; i < lines; ++i) {
        __builtin_prefetch(kr + 64 * i, 0, 3);
        __builtin_prefetch(vr + 64 * i, 0, 3);
      }
    }
  };
  int64_t offs[kChunk], offs_next[kChunk];
  if (n_kv > 0) chunk_offs(0, offs_next);
  for (int64_t p0 = 0; p0 < n_kv; p0 += kChunk) {
    const int n = static_cast<int>(std::min<int64_t>(kChunk, n_kv - p0));
    std::copy(offs_next, offs_next + n, offs);
    if (p0 + kChunk < n_kv) chunk_offs(p0 + kChunk, offs_next);
    for (int c = 0; c < n; ++c) {  // scores, kHeadBlock rows per K load
      for (int r0 = 0; r0 < nr; r0 += kHeadBlock) {
        if (nr - r0 >= kHeadBlock) {
          score_rows<kType, kHeadBlock>(q + r0, nv, k_cache, offs[c], c, pr + r0, s.scale);
        } else {
          for (int r = r0; r < nr; ++r) score_rows<kType, 1>(q + r, nv, k_cache, offs[c], c, pr + r, s.scale);
        }
      }
    }
    for (int r = 0; r < nr; ++r) {  // online softmax: rescale to the new running max
      const int valid = static_cast<int>(std::clamp<int64_t>(limit[r] - p0, 0, n));
      if (valid == 0) {
        std::fill(pr[r], pr[r] + kChunk, 0.0f);
        continue;
      }
      const float m_new = std::max(m[r], *std::max_element(pr[r], pr[r] + valid));
      const float corr = std::exp(m[r] - m_new);  // 0 on the first chunk
      for (int c = 0; c < kChunk; c += W) Vec::store(pr[r] + c, Vec::exp(Vec::sub(Vec::load(pr[r] + c), Vec::set1(m_new))));
      std::fill(pr[r] + valid, pr[r] + kChunk, 0.0f);
      float sum = 0.0f;
      for (int c = 0; c < valid; ++c) sum += pr[r][c];
      l[r] = l[r] * corr + sum;
      m[r] = m_new;
      if (corr != 1.0f) {
        for (int64_t v = 0; v < nv; ++v) Vec::store(acc[r] + W * v, Vec::mul(Vec::load(acc[r] + W * v), Vec::set1(corr)));
      }
    }
    // Weighted V rows, accumulators in registers: all R rows at once when
    // full, else in blocks of kHeadBlock and singles.
    if (nr == R) {
      accumulate_rows<kType, R>(acc, pr, n, offs, v_cache, nv);
    } else {
      int r = 0;
      for (; r + kHeadBlock <= nr; r += kHeadBlock) accumulate_rows<kType, kHeadBlock>(acc + r, pr + r, n, offs, v_cache, nv);
      for (; r < nr; ++r) accumulate_rows<kType, 1>(acc + r, pr + r, n, offs, v_cache, nv);
    }
  }
  for (int r = 0; r < nr; ++r) {
    const V inv = Vec::set1(1.0f / l[r]);
    for (int64_t v = 0; v < nv; ++v) Vec::store(out[r] + W * v, Vec::mul(Vec::load(acc[r] + W * v), inv));
  }
}

// The kernel entry (attention.h's attention_chunk): n_q query tokens, token i
// attending positions [0, n_kv_first + i), kv heads [kv_h0, kv_h1); head_dim
// a multiple of kWidth. Rows are (token, head of the group) pairs, taken
// Vec::kMaxRows at a time so that each K/V row load serves all of them.
inline void attention_rows(const AttentionShape& s, const float* q, int64_t n_q, const void* k_cache,
                           const void* v_cache, KvType kv_type, const int32_t* block_table, int64_t n_kv_first,
                           float* out, int64_t kv_h0, int64_t kv_h1) {
  constexpr int R = Vec::kMaxRows;
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
      if (kv_type == KvType::kF32) {
        head_rows<KvType::kF32>(s, qr, outr, limit, nr, k_cache, v_cache, block_table, kvh * hd);
      } else {
        head_rows<KvType::kF16>(s, qr, outr, limit, nr, k_cache, v_cache, block_table, kvh * hd);
      }
    }
  }
}

}  // namespace
}  // namespace zl::kern
