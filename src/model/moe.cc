#include "model/moe.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace zl {
namespace {

// The indices of the k largest of v[0..n), largest first, ties to the lower index.
void top_k(const float* v, int64_t n, int64_t k, int32_t* idx) {
  for (int64_t j = 0; j < k; ++j) {
    int32_t best = -1;
    for (int64_t e = 0; e < n; ++e) {
      bool taken = false;
      for (int64_t i = 0; i < j; ++i) taken |= idx[i] == e;
      if (taken) continue;
      // NaN never wins over a number; among equals the first (lowest id) stays.
      if (best < 0 || v[e] > v[best] || (std::isnan(v[best]) && !std::isnan(v[e]))) best = static_cast<int32_t>(e);
    }
    idx[j] = best;
  }
}

}  // namespace

void route_token(MoeGating gating, const float* logits, int64_t n_expert, int64_t k, ExpertChoice* out) {
  CHECK(k > 0 && k <= n_expert && n_expert <= 4096);
  int32_t idx[4096];
  float buf[4096];
  if (gating == MoeGating::kSoftmaxTopkNorm) {
    // As ggml: softmax in float with the sum in double, selection on the
    // probabilities, then the selected ones divided by their float sum.
    float mx = logits[0];
    for (int64_t e = 1; e < n_expert; ++e) mx = std::max(mx, logits[e]);
    double sum = 0;
    for (int64_t e = 0; e < n_expert; ++e) {
      buf[e] = std::exp(logits[e] - mx);
      sum += buf[e];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t e = 0; e < n_expert; ++e) buf[e] *= inv;
    top_k(buf, n_expert, k, idx);
    float wsum = 0;
    for (int64_t j = 0; j < k; ++j) wsum += buf[idx[j]];
    wsum = std::max(wsum, 6.103515625e-5f);
    for (int64_t j = 0; j < k; ++j) out[j] = {idx[j], buf[idx[j]] / wsum};
    return;
  }
  // kTopkSoftmax: selection on the logits, softmax over the selected.
  top_k(logits, n_expert, k, idx);
  const float mx = logits[idx[0]];
  double sum = 0;
  for (int64_t j = 0; j < k; ++j) {
    buf[j] = std::exp(logits[idx[j]] - mx);
    sum += buf[j];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < k; ++j) out[j] = {idx[j], buf[j] * inv};
}

void swiglu_clamped(const float* gate, const float* bg, const float* up, const float* bu, float alpha, float limit,
                    float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i] + bg[i], limit);
    const float u = std::clamp(up[i] + bu[i], -limit, limit);
    out[i] = g / (1.0f + std::exp(-alpha * g)) * (u + 1.0f);
  }
}

void group_by_expert(std::span<const ExpertChoice> choices, int64_t n_expert, ExpertGroups* g) {
  g->offsets.assign(n_expert + 1, 0);
  for (const ExpertChoice& c : choices) {
    DCHECK(c.expert >= 0 && c.expert < n_expert);
    ++g->offsets[c.expert + 1];
  }
  for (int64_t e = 0; e < n_expert; ++e) g->offsets[e + 1] += g->offsets[e];
  g->rows.resize(choices.size());
  std::vector<int32_t> fill(g->offsets.begin(), g->offsets.end() - 1);
  for (size_t i = 0; i < choices.size(); ++i) g->rows[fill[choices[i].expert]++] = static_cast<int32_t>(i);
}

void split_row_jobs(std::span<const RowJob> jobs, int64_t n_pieces, std::vector<RowPiece>* out) {
  out->clear();
  double total = 0;
  auto cost_of = [](const RowJob& j) {
    return static_cast<double>(std::max<int64_t>(j.n_rows, 0)) * static_cast<double>(kWeightPassCost + j.n_tokens);
  };
  for (const RowJob& j : jobs) total += cost_of(j);
  const double per_piece = total / static_cast<double>(std::max<int64_t>(n_pieces, 1));
  for (size_t ji = 0; ji < jobs.size(); ++ji) {
    const RowJob& j = jobs[ji];
    if (j.n_rows <= 0) continue;
    const int64_t grain = std::max<int64_t>(j.grain, 1);
    const int64_t units = (j.n_rows + grain - 1) / grain;
    const int64_t n = std::clamp<int64_t>(std::llround(cost_of(j) / per_piece), 1, units);
    // Piece i: units [i * units / n, (i + 1) * units / n), sizes differing by at most one unit.
    for (int64_t i = 0; i < n; ++i) {
      const int64_t u0 = i * units / n, u1 = (i + 1) * units / n;
      out->push_back({.job = static_cast<int32_t>(ji), .r0 = u0 * grain, .r1 = std::min(j.n_rows, u1 * grain)});
    }
  }
}

}  // namespace zl
