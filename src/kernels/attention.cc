#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "kernels/attention_query_q8.h"
#include "kernels/fused.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"

namespace zl {
namespace kern {
// attention_avx2.cc / attention_avx512.cc: attention_chunk's contract,
// head_dim a multiple of 8 (16) and <= kMaxHeadDim.
void avx2_attention(const AttentionShape& s, const float* q, int64_t n_q, const void* k_cache, const void* v_cache,
                    KvType kv_type, const int32_t* block_table, int64_t n_kv_first, float* out, int64_t kv_h0,
                    int64_t kv_h1);
void avx512_attention(const AttentionShape& s, const float* q, int64_t n_q, const void* k_cache,
                      const void* v_cache, KvType kv_type, const int32_t* block_table, int64_t n_kv_first,
                      float* out, int64_t kv_h0, int64_t kv_h1);
void avx2_attention_range(const AttentionShape& s, const float* q, const void* k_cache, const void* v_cache,
                          KvType kv_type, const int32_t* block_table, int64_t n_kv, int64_t range, float* partial);
void avx512_attention_range(const AttentionShape& s, const float* q, const void* k_cache, const void* v_cache,
                            KvType kv_type, const int32_t* block_table, int64_t n_kv, int64_t range, float* partial);
void avx2_attention_merge(const AttentionShape& s, float* partials, int64_t n_ranges, float* out);
void avx512_attention_merge(const AttentionShape& s, float* partials, int64_t n_ranges, float* out);
}  // namespace kern

namespace {

// The SIMD attention kernel for this shape: 2 = AVX-512, 1 = AVX2, 0 = none.
int simd_path(const AttentionShape& s) {
  if (!attention_simd_head_dim(s.head_dim) || active_isa() == KernelIsa::kScalar) return 0;
  return active_isa() == KernelIsa::kAvx512 && s.head_dim % 16 == 0 ? 2 : 1;
}

// Row of position p, kv head h, as floats into dst.
void load_row(const AttentionShape& s, const void* cache, KvType kv_type, const int32_t* block_table, int64_t p,
              int64_t h, float* dst) {
  const int64_t kv_dim = s.n_head_kv * s.head_dim;
  const int64_t row = block_table[p / s.block_size] * s.block_size + p % s.block_size;
  const int64_t off = row * kv_dim + h * s.head_dim;
  if (kv_type == KvType::kF32) {
    std::copy_n(static_cast<const float*>(cache) + off, s.head_dim, dst);
  } else if (kv_type == KvType::kF16) {
    const uint16_t* src = static_cast<const uint16_t*>(cache) + off;
    for (int64_t i = 0; i < s.head_dim; ++i) dst[i] = fp16_to_fp32(src[i]);
  } else {  // Q8_0: element e of the row in block e / 32
    const auto* base = static_cast<const uint8_t*>(cache) + row * kv_row_bytes(kv_type, kv_dim);
    for (int64_t i = 0; i < s.head_dim; ++i) {
      const int64_t e = h * s.head_dim + i;
      const auto* blk = reinterpret_cast<const BlockQ8_0*>(base) + e / kQk32;
      dst[i] = fp16_to_fp32(blk->d) * static_cast<float>(blk->qs[e % kQk32]);
    }
  }
}

}  // namespace

const char* kv_type_name(KvType t) {
  switch (t) {
    case KvType::kF32: return "f32";
    case KvType::kF16: return "f16";
    case KvType::kQ8_0: return "q8_0";
  }
  return "?";
}

bool parse_kv_type(const char* name, KvType* out) {
  for (KvType t : {KvType::kF32, KvType::kF16, KvType::kQ8_0}) {
    if (std::strcmp(name, kv_type_name(t)) == 0) {
      *out = t;
      return true;
    }
  }
  return false;
}

void store_kv_row(KvType t, const float* src, void* dst, int64_t n) {
  switch (t) {
    case KvType::kF32: std::memcpy(dst, src, n * sizeof(float)); return;
    case KvType::kF16: fp32_to_fp16_row(src, static_cast<uint16_t*>(dst), n); return;
    case KvType::kQ8_0: quantize_row(GgmlType::kQ8_0, src, dst, n); return;
  }
}

void attention_scalar(const AttentionShape& s, const float* q, const void* k_cache, const void* v_cache,
                      KvType kv_type, const int32_t* block_table, int64_t n_kv, float* out, int64_t kv_h0,
                      int64_t kv_h1) {
  const int64_t hd = s.head_dim, group = s.n_head / s.n_head_kv;
  const int64_t lo = attention_first_position(s, n_kv);
  std::vector<float> scores(n_kv), row(hd), q_deq(hd);
  for (int64_t h = kv_h0 * group; h < kv_h1 * group; ++h) {
    const int64_t kvh = h / group;
    const float* qh = q + h * hd;
    if (kv_type == KvType::kQ8_0) {  // q·k with q quantized (attention_query_q8.h)
      kern::QueryQ8 unused;
      kern::quantize_query_q8(qh, hd, &unused, q_deq.data());
      qh = q_deq.data();
    }
    float max_s = -INFINITY;
    for (int64_t p = lo; p < n_kv; ++p) {
      load_row(s, k_cache, kv_type, block_table, p, kvh, row.data());
      float dot = 0.0f;
      for (int64_t i = 0; i < hd; ++i) dot += qh[i] * row[i];
      scores[p] = dot * s.scale;
      max_s = std::max(max_s, scores[p]);
    }
    double sum = 0.0;
    for (int64_t p = lo; p < n_kv; ++p) {
      scores[p] = std::exp(scores[p] - max_s);
      sum += scores[p];
    }
    const float inv = static_cast<float>(1.0 / sum);
    float* o = out + h * hd;
    std::fill(o, o + hd, 0.0f);
    for (int64_t p = lo; p < n_kv; ++p) {
      load_row(s, v_cache, kv_type, block_table, p, kvh, row.data());
      const float w = scores[p] * inv;
      for (int64_t i = 0; i < hd; ++i) o[i] += w * row[i];
    }
  }
}

void attention_chunk(const AttentionShape& s, const float* q, int64_t n_q, const void* k_cache, const void* v_cache,
                     KvType kv_type, const int32_t* block_table, int64_t n_kv_first, float* out, int64_t kv_h0,
                     int64_t kv_h1) {
  DCHECK(s.n_head_kv > 0 && s.n_head % s.n_head_kv == 0 && n_kv_first >= 1 && s.block_size > 0);
  switch (simd_path(s)) {
    case 2: return kern::avx512_attention(s, q, n_q, k_cache, v_cache, kv_type, block_table, n_kv_first, out, kv_h0, kv_h1);
    case 1: return kern::avx2_attention(s, q, n_q, k_cache, v_cache, kv_type, block_table, n_kv_first, out, kv_h0, kv_h1);
    default: break;
  }
  const int64_t q_dim = s.n_head * s.head_dim;
  for (int64_t i = 0; i < n_q; ++i) {
    attention_scalar(s, q + i * q_dim, k_cache, v_cache, kv_type, block_table, n_kv_first + i, out + i * q_dim,
                     kv_h0, kv_h1);
  }
}

void attention(const AttentionShape& s, const float* q, const void* k_cache, const void* v_cache, KvType kv_type,
               const int32_t* block_table, int64_t n_kv, float* out, int64_t kv_h0, int64_t kv_h1) {
  attention_chunk(s, q, 1, k_cache, v_cache, kv_type, block_table, n_kv, out, kv_h0, kv_h1);
}

void attention(const AttentionShape& s, const float* q, const void* k_cache, const void* v_cache, KvType kv_type,
               const int32_t* block_table, int64_t n_kv, float* out) {
  attention(s, q, k_cache, v_cache, kv_type, block_table, n_kv, out, 0, s.n_head_kv);
}

bool attention_range_supported(const AttentionShape& s) { return simd_path(s) != 0; }

void attention_range(const AttentionShape& s, const float* q, const void* k_cache, const void* v_cache,
                     KvType kv_type, const int32_t* block_table, int64_t n_kv, int64_t range, float* partial) {
  DCHECK(s.n_head_kv > 0 && s.n_head % s.n_head_kv == 0 && s.block_size > 0 && range >= 0);
  const int path = simd_path(s);
  CHECK(path != 0) << "attention_range: no SIMD path for head_dim " << s.head_dim;
  if (path == 2) return kern::avx512_attention_range(s, q, k_cache, v_cache, kv_type, block_table, n_kv, range, partial);
  kern::avx2_attention_range(s, q, k_cache, v_cache, kv_type, block_table, n_kv, range, partial);
}

void attention_merge(const AttentionShape& s, float* partials, int64_t n_ranges, float* out) {
  const int path = simd_path(s);
  CHECK(path != 0 && n_ranges >= 1) << "attention_merge: no SIMD path or no range";
  if (path == 2) return kern::avx512_attention_merge(s, partials, n_ranges, out);
  kern::avx2_attention_merge(s, partials, n_ranges, out);
}

}  // namespace zl
