// Mixture-of-experts routing and grouping (ModelRunner's MoE FFN).
//
// route_token turns one token's router logits into its n_expert_used
// (expert, weight) choices; group_by_expert lists, for each expert, the
// (token, slot) pairs routed to it, so that the runner multiplies each
// expert's matrices once by all its tokens (one matmul over a gathered
// block of rows) instead of token by token. Both are deterministic: ties
// between equal scores go to the lower expert id, and a group lists its
// tokens in batch order.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/model.h"

namespace zl {

struct ExpertChoice {
  int32_t expert = 0;
  float weight = 0;
};

// `logits`: the n_expert router logits of one token (bias included). Writes
// k choices to `out`, by decreasing score (ties: lower expert id first):
//   kSoftmaxTopkNorm: p = softmax(logits); the k largest p; weight p_e / sum.
//   kTopkSoftmax:     the k largest logits; weights softmax over those k.
// CHECKs 0 < k <= n_expert.
void route_token(MoeGating gating, const float* logits, int64_t n_expert, int64_t k, ExpertChoice* out);

// Tokens per expert: rows[offsets[e] .. offsets[e + 1]) are the indices
// t * k + j (token t's j-th choice) routed to expert e, in increasing order.
struct ExpertGroups {
  std::vector<int32_t> offsets;  // n_expert + 1
  std::vector<int32_t> rows;     // n_tokens * k
  int64_t size(int64_t e) const { return offsets[e + 1] - offsets[e]; }
};
// `choices`: n_tokens * k entries, token-major. Expert ids must be < n_expert.
void group_by_expert(std::span<const ExpertChoice> choices, int64_t n_expert, ExpertGroups* groups);

// The work of a mixture-of-experts layer as one parallel region per step
// (the [gate; up] matmuls of all the experts in use, then their down
// matmuls) rather than one per expert: each job (one expert matrix times the
// tokens routed to it) is cut into pieces of rows of about equal cost, and
// the pieces of all jobs, in job order, go to one ThreadPool::parallel_for,
// which gives each thread a contiguous run of them (a sequential weight
// stream) and balances the end by stealing. A row costs one pass over its
// weights plus its arithmetic per token: kWeightPassCost + n_tokens, in
// units of one token's arithmetic (a quantized weight row is streamed from
// memory in about the time the int8 kernels take for 8 tokens of it).
inline constexpr int64_t kWeightPassCost = 8;

struct RowJob {
  int64_t n_rows = 0;    // output rows of the matrix
  int64_t n_tokens = 0;  // tokens it multiplies (> 0)
  int64_t grain = 1;     // pieces start at multiples of it (MatmulInput::grain)
};
struct RowPiece {
  int32_t job = 0;
  int64_t r0 = 0, r1 = 0;  // rows [r0, r1) of job `job`
};
// Writes the pieces of `jobs` to `out`: about `n_pieces` in all (at least
// one per job with rows, at most one per grain of rows), each job's rows
// covered exactly once, in order, by pieces of about
// total cost / n_pieces whose bounds are multiples of the job's grain (but
// for its last end, n_rows). Pure; cost O(jobs + pieces).
void split_row_jobs(std::span<const RowJob> jobs, int64_t n_pieces, std::vector<RowPiece>* out);

// gpt-oss's expert activation: g = min(gate + bg, limit),
// u = clamp(up + bu, -limit, limit), out = g * sigmoid(alpha * g) * (u + 1).
void swiglu_clamped(const float* gate, const float* bg, const float* up, const float* bu, float alpha, float limit,
                    float* out, int64_t n);

}  // namespace zl
