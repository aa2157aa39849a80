// Attention of one query token over a paged KV cache: fused q·K, online
// softmax and ·V, GQA-aware (each K/V row is read once per group of query
// heads that share it).
//
// Cache layout, per layer: blocks [n_blocks][block_size][n_head_kv * head_dim]
// of F16 (uint16_t bits), F32, or Q8_0 (each row of n_head_kv * head_dim
// values stored as blocks of 32: an F16 scale and 32 int8, 34 bytes; element
// e of a row lies in block e / 32); position p of a sequence lives in block
// block_table[p / block_size], row p % block_size. A contiguous cache
// [n_ctx][kv_dim] is the special case of one block (block_table = {0},
// block_size >= n_kv).
//
//   out[h * head_dim + i] = sum_p softmax_p(scale * q_h · k_p) * v_p[i]
// for query head h, kv head h / (n_head / n_head_kv), positions p < n_kv
// (and p >= n_kv - window with a sliding window, AttentionShape::window).
// Pure and thread-safe; no allocation for head_dim <= kMaxHeadDim.
#pragma once

#include <cstdint>

namespace zl {

enum class KvType { kF32, kF16, kQ8_0 };

// "f32", "f16", "q8_0".
const char* kv_type_name(KvType t);
// The KvType of a name kv_type_name gives; false for anything else.
bool parse_kv_type(const char* name, KvType* out);
// Bytes of a row of n values (n a multiple of 32 for Q8_0).
inline int64_t kv_row_bytes(KvType t, int64_t n) {
  return t == KvType::kF32 ? 4 * n : t == KvType::kF16 ? 2 * n : (n + 31) / 32 * 34;
}
// Whether rows of kv_dim values can be stored as t (Q8_0: a multiple of 32).
inline bool kv_type_fits(KvType t, int64_t kv_dim) { return t != KvType::kQ8_0 || kv_dim % 32 == 0; }
// Stores n floats (a whole cache row) as t.
void store_kv_row(KvType t, const float* src, void* dst, int64_t n);

struct AttentionShape {
  int64_t n_head = 0;      // query heads
  int64_t n_head_kv = 0;   // key/value heads (divides n_head)
  int64_t head_dim = 0;
  int64_t block_size = 0;  // positions per cache block
  float scale = 1.0f;      // usually 1/sqrt(head_dim)
  // > 0: sliding-window attention, a query whose causal limit is n_kv (it
  // sits at position n_kv - 1) sees positions [max(0, n_kv - window), n_kv)
  // only; 0: every position below its limit.
  int64_t window = 0;
};

// The first position a query with causal limit n_kv attends under s.window.
inline int64_t attention_first_position(const AttentionShape& s, int64_t n_kv) {
  return s.window > 0 && n_kv > s.window ? n_kv - s.window : 0;
}

inline constexpr int64_t kMaxHeadDim = 256;

// Whether the SIMD attention kernels take heads of head_dim at all: a
// multiple of 8 (the AVX2 width; AVX-512 wants 16 and otherwise falls back
// to AVX2) up to kMaxHeadDim. The head sizes that attention sinks (gpt-oss),
// which only those kernels compute, can run with; the active ISA decides
// the rest (attention_range_supported). make-model refuses other sizes for
// gpt-oss shapes by this same rule.
constexpr bool attention_simd_head_dim(int64_t head_dim) {
  return head_dim > 0 && head_dim <= kMaxHeadDim && head_dim % 8 == 0;
}

// q: [n_head * head_dim]; out: [n_head * head_dim]. Computes the query heads
// of kv heads [kv_h0, kv_h1) only (callers split heads over threads); the
// overload without a range does all of them. n_kv >= 1.
void attention(const AttentionShape& s, const float* q, const void* k_cache, const void* v_cache, KvType kv_type,
               const int32_t* block_table, int64_t n_kv, float* out, int64_t kv_h0, int64_t kv_h1);
void attention(const AttentionShape& s, const float* q, const void* k_cache, const void* v_cache, KvType kv_type,
               const int32_t* block_table, int64_t n_kv, float* out);

// A causal chunk of n_q query tokens (prefill): token i (q and out rows i of
// n_head * head_dim) attends positions [0, n_kv_first + i). Each K/V row read
// serves several tokens and heads, so this is much cheaper than n_q calls.
void attention_chunk(const AttentionShape& s, const float* q, int64_t n_q, const void* k_cache, const void* v_cache,
                     KvType kv_type, const int32_t* block_table, int64_t n_kv_first, float* out, int64_t kv_h0,
                     int64_t kv_h1);

// Query rows (tokens x the query heads of one kv head) that attention_chunk
// walks the context with at once: each chunk of K/V is read, transposed and
// converted once for all of them. A caller that splits a long prefill into
// items of tokens per kv head fills a tile with kAttentionTileRows / (n_head
// / n_head_kv) tokens an item.
inline constexpr int64_t kAttentionTileRows = 256;

// Split decode, for one query token over a long context: the positions
// [0, n_kv) in ranges of kAttentionRange, each range's partial softmax state
// computed on its own (any thread, any order: attention_range), then merged
// in range order (attention_merge). Every other path runs the same range grid
// (attention_chunk folds its ranges in order too), so the result is bitwise
// what attention_chunk gives for that token: prefill and decode of a
// position agree exactly (preemption recompute, prefix caching). Per chunk
// of positions a range reads the whole K/V rows (all kv heads) in order,
// which is what makes it fast on long contexts.
inline constexpr int64_t kAttentionRange = 256;
// Whether the split path is available (a SIMD ISA, head_dim a multiple of
// its width and <= kMaxHeadDim); otherwise use attention_chunk.
bool attention_range_supported(const AttentionShape& s);
// Floats of one range's partial state: n_head * (head_dim + 2).
inline int64_t attention_partial_floats(const AttentionShape& s) { return s.n_head * (s.head_dim + 2); }
// The partial state of query token q ([n_head * head_dim]) over positions
// [range * kAttentionRange, min((range + 1) * kAttentionRange, n_kv)) into
// `partial` (attention_partial_floats floats).
void attention_range(const AttentionShape& s, const float* q, const void* k_cache, const void* v_cache,
                     KvType kv_type, const int32_t* block_table, int64_t n_kv, int64_t range, float* partial);
// Merges the partials of ranges 0 .. n_ranges - 1 (consecutive, each
// attention_partial_floats floats; the first is overwritten) into out
// ([n_head * head_dim]).
void attention_merge(const AttentionShape& s, float* partials, int64_t n_ranges, float* out);

// The scalar twin (two passes: scores, then softmax in double and ·V, as the
// reference forward pass computes it), for tests. Over a Q8_0 cache every
// path scores with the query quantized to Q8_0 blocks (as llama.cpp does for
// a q8_0 cache; kernels/attention_query_q8.h): the AVX-512 kernel multiplies
// int8 by int8 (VNNI), the others the dequantized values.
void attention_scalar(const AttentionShape& s, const float* q, const void* k_cache, const void* v_cache,
                      KvType kv_type, const int32_t* block_table, int64_t n_kv, float* out, int64_t kv_h0,
                      int64_t kv_h1);

}  // namespace zl
