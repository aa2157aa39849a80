#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/check.h"
#include "core/random_id.h"
#include "kernels/fused.h"

namespace zl {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The largest of x[0, n) that is not NaN (-inf when none): eight independent maxima, so that
// the loop is vector maxima rather than one serial chain (the vocabulary at each logprobs call).
float max_not_nan(const float* x, size_t n) {
  float m[8];
  std::fill(m, m + 8, kNegInf);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (size_t k = 0; k < 8; ++k) m[k] = m[k] < x[i + k] ? x[i + k] : m[k];  // NaN: kept out
  }
  for (; i < n; ++i) m[0] = m[0] < x[i] ? x[i] : m[0];
  return *std::max_element(m, m + 8);
}

// sampling::logprobs: up to this many alternatives are kept by insertion, more by selection.
constexpr size_t kInsertionTop = 32;

// Most likely first; equal logits: lower id first.
bool more_likely(const TokenProb& a, const TokenProb& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

Status no_token() {
  return invalid_argument("no token can be sampled: all are banned, masked or not finite");
}

void renormalize(std::vector<TokenProb>& c) {
  double sum = 0;
  for (const TokenProb& t : c) sum += t.p;
  if (sum <= 0) return;
  for (TokenProb& t : c) t.p = static_cast<float>(t.p / sum);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// TokenMask

TokenMask::TokenMask(int32_t n_vocab) : n_vocab_(n_vocab), bits_((std::max(n_vocab, 0) + 63) / 64) {
  CHECK(n_vocab >= 0) << "n_vocab " << n_vocab;
}

void TokenMask::forbid(int32_t id) {
  if (id < 0 || id >= n_vocab_) return;
  bits_[id >> 6] |= uint64_t{1} << (id & 63);
}

void TokenMask::forbid(std::span<const int32_t> ids) {
  for (int32_t id : ids) forbid(id);
}

void TokenMask::allow_only(std::span<const int32_t> ids) {
  std::fill(bits_.begin(), bits_.end(), ~uint64_t{0});
  for (int32_t id : ids) {
    if (id >= 0 && id < n_vocab_) bits_[id >> 6] &= ~(uint64_t{1} << (id & 63));
  }
}

void TokenMask::clear() { std::fill(bits_.begin(), bits_.end(), 0); }

// ---------------------------------------------------------------------------------------------
// Stages

namespace sampling {

void apply_logit_bias(std::span<float> logits, const std::map<int32_t, float>& bias) {
  const auto n = static_cast<int32_t>(logits.size());
  for (const auto& [id, b] : bias) {
    if (id >= 0 && id < n) logits[id] += b;
  }
}

void apply_mask(std::span<float> logits, const TokenMask& mask) {
  const auto n = static_cast<int32_t>(std::min<size_t>(logits.size(), mask.n_vocab()));
  for (int32_t id = 0; id < n; ++id) {
    if (mask.forbidden(id)) logits[id] = kNegInf;
  }
}

int32_t argmax(std::span<const float> logits) {
  int32_t best = -1;
  float best_logit = kNegInf;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > best_logit) {  // strict: the lowest id wins ties; NaN never wins
      best_logit = logits[i];
      best = static_cast<int32_t>(i);
    }
  }
  return best;
}

std::vector<TokenProb> softmax(std::span<const float> logits, float temperature) {
  CHECK(temperature > 0) << "temperature " << temperature;
  std::vector<TokenProb> c;
  bool any_pos_inf = false;
  for (float l : logits) any_pos_inf |= (l == std::numeric_limits<float>::infinity());
  for (size_t i = 0; i < logits.size(); ++i) {
    const float l = logits[i];
    if (any_pos_inf ? l == std::numeric_limits<float>::infinity() : std::isfinite(l)) {
      c.push_back({.id = static_cast<int32_t>(i), .logit = any_pos_inf ? 0.0f : l / temperature});
    }
  }
  if (c.empty()) return c;
  float max_logit = kNegInf;
  for (const TokenProb& t : c) max_logit = std::max(max_logit, t.logit);
  for (TokenProb& t : c) t.p = std::exp(t.logit - max_logit);
  renormalize(c);
  return c;
}

void top_k(std::vector<TokenProb>& c, int32_t k) {
  if (k <= 0) return;
  if (static_cast<size_t>(k) < c.size()) {
    std::nth_element(c.begin(), c.begin() + k, c.end(), more_likely);
    c.resize(k);
  }
  std::sort(c.begin(), c.end(), more_likely);
  renormalize(c);
}

void top_p(std::vector<TokenProb>& c, float p) {
  if (p >= 1.0f || c.empty()) return;
  double total = 0;
  for (const TokenProb& t : c) total += t.p;
  const double target = static_cast<double>(p) * total;
  // Sort a growing most-likely prefix until it holds enough probability: usually a few dozen
  // tokens out of a vocabulary of ~10^5.
  size_t m = std::min<size_t>(c.size(), 64);
  for (;;) {
    std::partial_sort(c.begin(), c.begin() + m, c.end(), more_likely);
    double cum = 0;
    for (size_t i = 0; i < m; ++i) {
      cum += c[i].p;
      if (cum >= target) {
        c.resize(i + 1);
        renormalize(c);
        return;
      }
    }
    if (m == c.size()) return;  // rounding: everything is needed
    m = std::min(c.size(), m * 4);
  }
}

void min_p(std::vector<TokenProb>& c, float p) {
  if (p <= 0.0f || c.empty()) return;
  float p_max = 0;
  for (const TokenProb& t : c) p_max = std::max(p_max, t.p);
  const float threshold = std::min(p, 1.0f) * p_max;
  std::erase_if(c, [&](const TokenProb& t) { return t.p < threshold; });
  renormalize(c);
}

int32_t draw(const std::vector<TokenProb>& c, double u) {
  CHECK(!c.empty());
  double total = 0;
  for (const TokenProb& t : c) total += t.p;
  const double target = u * total;
  double cum = 0;
  for (const TokenProb& t : c) {
    cum += t.p;
    if (target < cum) return t.id;
  }
  return c.back().id;  // u * total rounded up to the sum
}

void logprobs(std::span<const float> logits, int32_t chosen, int32_t n_top, TokenLogprobs* out) {
  constexpr float kPosInf = std::numeric_limits<float>::infinity();
  const size_t n = logits.size();
  // log Z with the largest logit as the shift; +inf logits, if any, hold all the mass.
  float max_logit = max_not_nan(logits.data(), n);
  size_t n_pos_inf = 0;
  if (max_logit == kPosInf) {  // (a masked or biased vocabulary: rare)
    max_logit = kNegInf;
    for (float l : logits) {
      if (l == kPosInf) {
        ++n_pos_inf;
      } else if (l > max_logit) {
        max_logit = l;
      }
    }
  }
  double log_z = -std::numeric_limits<double>::infinity();
  if (n_pos_inf > 0) {
    log_z = std::log(static_cast<double>(n_pos_inf));
  } else if (max_logit > kNegInf) {
    // Each term in float (every l - max <= 0: no overflow; -inf and NaN give 0), vectorised,
    // the sum in double: ~1e-7 relative per term (kernels/fused.h).
    log_z = static_cast<double>(max_logit) + std::log(sum_exp(logits.data(), static_cast<int64_t>(n), max_logit));
  }
  auto logprob = [&](float l) -> float {
    if (!(l > kNegInf)) return kNegInf;  // -inf and NaN
    if (n_pos_inf > 0) return l == kPosInf ? static_cast<float>(-log_z) : kNegInf;
    return static_cast<float>(static_cast<double>(l) - log_z);
  };
  out->chosen.id = chosen;
  out->chosen.logprob = chosen >= 0 && static_cast<size_t>(chosen) < n ? logprob(logits[chosen]) : kNegInf;
  out->top.clear();
  const auto k = static_cast<size_t>(std::clamp<int64_t>(n_top, 0, static_cast<int64_t>(n)));
  if (k == 0) return;
  // Ids with a logprob of -inf never enter the top (with +inf logits: every finite one).
  const float above = n_pos_inf > 0 ? std::numeric_limits<float>::max() : kNegInf;
  std::vector<TokenProb> best;  // most likely first (more_likely)
  if (k <= kInsertionTop) {
    // A sorted run kept by insertion: ids come in ascending order, so an equal logit never
    // displaces (a lower id wins ties); past the first few ids almost none enter it.
    best.reserve(k + 1);
    // Blocks whose largest logit cannot enter are skipped on their maximum (vector maxima):
    // past the first blocks almost all of them.
    constexpr size_t kBlock = 64;
    for (size_t b = 0; b < n; b += kBlock) {
      const size_t e = std::min(n, b + kBlock);
      const float enter = best.size() == k ? best.back().logit : above;  // a logit must exceed it
      if (!(max_not_nan(logits.data() + b, e - b) > enter)) continue;
      for (size_t i = b; i < e; ++i) {
        const float l = logits[i];
        if (!(l > above) || (best.size() == k && !(l > best.back().logit))) continue;
        const TokenProb t{.id = static_cast<int32_t>(i), .logit = l};
        best.insert(std::upper_bound(best.begin(), best.end(), t, more_likely), t);
        if (best.size() > k) best.pop_back();
      }
    }
  } else {
    for (size_t i = 0; i < n; ++i) {
      if (logits[i] > above) best.push_back({.id = static_cast<int32_t>(i), .logit = logits[i]});
    }
    if (best.size() > k) {
      std::nth_element(best.begin(), best.begin() + k, best.end(), more_likely);
      best.resize(k);
    }
    std::sort(best.begin(), best.end(), more_likely);
  }
  for (const TokenProb& t : best) out->top.push_back(TokenLogprob{.id = t.id, .logprob = logprob(t.logit)});
}

}  // namespace sampling

// ---------------------------------------------------------------------------------------------
// Sampler

Sampler::Sampler(SamplingParams params, std::span<const int32_t> context)
    : params_(std::move(params)) {
  if (params_.seed) {
    seed_ = *params_.seed;
  } else {
    seed_ = random_u64();  // distinct per sampler, no random_device per call
  }
  rng_.seed(seed_);
  const int32_t last_n = params_.penalty_last_n;
  if (last_n == 0) return;
  size_t first = 0;
  if (last_n > 0 && context.size() > static_cast<size_t>(last_n)) first = context.size() - last_n;
  for (size_t i = first; i < context.size(); ++i) push(context[i], /*generated=*/false);
}

void Sampler::accept(int32_t token) {
  ++n_accepted_;
  push(token, /*generated=*/true);
}

void Sampler::hold_end(std::vector<int32_t> ids, int32_t n_tokens) {
  hold_ids_ = std::move(ids);
  hold_n_ = n_tokens;
}

void Sampler::push(int32_t token, bool generated) {
  const int32_t last_n = params_.penalty_last_n;
  if (last_n == 0) return;
  Counts& c = counts_[token];
  ++c.n_all;
  c.n_generated += generated;
  if (last_n < 0) return;  // the whole sequence: counts only, nothing leaves the window
  window_.emplace_back(token, generated);
  if (window_.size() <= static_cast<size_t>(last_n)) return;
  const auto [old, old_generated] = window_.front();
  window_.pop_front();
  auto it = counts_.find(old);
  it->second.n_all--;
  it->second.n_generated -= old_generated;
  if (it->second.n_all == 0) counts_.erase(it);
}

bool Sampler::penalties_active() const {
  return params_.penalty_last_n != 0 &&
         (params_.repetition_penalty != 1.0f || params_.presence_penalty != 0.0f ||
          params_.frequency_penalty != 0.0f);
}

void Sampler::apply_penalties(std::span<float> logits) const {
  const auto n = static_cast<int32_t>(logits.size());
  const float rep = params_.repetition_penalty;
  for (const auto& [id, c] : counts_) {
    if (id < 0 || id >= n) continue;
    float& l = logits[id];
    if (rep != 1.0f) l = l > 0 ? l / rep : l * rep;
    l -= static_cast<float>(c.n_generated) * params_.frequency_penalty +
         (c.n_generated > 0 ? params_.presence_penalty : 0.0f);
  }
}

void Sampler::transform(std::span<float> logits, const TokenMask* mask) const {
  sampling::apply_logit_bias(logits, params_.logit_bias);
  if (penalties_active()) apply_penalties(logits);
  if (n_accepted_ < hold_n_) {
    for (int32_t id : hold_ids_) logits[id] = -INFINITY;
  }
  if (mask) sampling::apply_mask(logits, *mask);
}

Result<std::vector<TokenProb>> Sampler::truncated(std::span<float> logits) const {
  if (params_.temperature <= 0.0f) {
    const int32_t id = sampling::argmax(logits);
    if (id < 0) return no_token();
    return std::vector<TokenProb>{{.id = id, .logit = logits[id], .p = 1.0f}};
  }
  std::vector<TokenProb> c = sampling::softmax(logits, params_.temperature);
  if (c.empty()) return no_token();
  sampling::top_k(c, params_.top_k);
  sampling::top_p(c, params_.top_p);
  sampling::min_p(c, params_.min_p);
  return c;
}

Result<std::vector<TokenProb>> Sampler::distribution(std::span<float> logits,
                                                     const TokenMask* mask) {
  transform(logits, mask);
  return truncated(logits);
}

int32_t Sampler::choose(const std::vector<TokenProb>& c) {
  return params_.temperature <= 0.0f ? c[0].id : sampling::draw(c, next_uniform());
}

Result<int32_t> Sampler::sample(std::span<float> logits, const TokenMask* mask) {
  ASSIGN_OR_RETURN(std::vector<TokenProb> c, distribution(logits, mask));
  const int32_t id = choose(c);
  accept(id);
  return id;
}

Result<Sampler::Verdict> Sampler::verify(std::span<float> logits, int32_t draft, const TokenMask* mask) {
  // Drawing t ~ p and accepting iff t == draft couples the two steps of rejection sampling
  // (accept with probability p(draft), else draw from p without the draft) into one draw.
  ASSIGN_OR_RETURN(int32_t token, sample(logits, mask));
  return Verdict{.token = token, .accepted = token == draft};
}

Result<int32_t> Sampler::sample(std::span<float> logits, const TokenMask* mask, const Veto& veto) {
  if (!veto) return sample(logits, mask);
  transform(logits, mask);
  for (int n_refused = 0;; ++n_refused) {
    if (n_refused == kMaxVetoRetries) {
      // The model insists: settle every remaining candidate in one pass.
      for (size_t id = 0; id < logits.size(); ++id) {
        if (logits[id] > kNegInf && veto(static_cast<int32_t>(id))) logits[id] = kNegInf;
      }
    }
    ASSIGN_OR_RETURN(std::vector<TokenProb> c, truncated(logits));
    const int32_t id = choose(c);
    if (n_refused >= kMaxVetoRetries || !veto(id)) {
      accept(id);
      return id;
    }
    logits[id] = kNegInf;
  }
}

double Sampler::next_uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

}  // namespace zl
