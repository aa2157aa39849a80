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

// gpt-oss's expert activation: g = min(gate + bg, limit),
// u = clamp(up + bu, -limit, limit), out = g * sigmoid(alpha * g) * (u + 1).
void swiglu_clamped(const float* gate, const float* bg, const float* up, const float* bu, float alpha, float limit,
                    float* out, int64_t n);

}  // namespace zl
