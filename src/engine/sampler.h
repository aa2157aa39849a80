// Sampling: one token from a vector of logits, per sequence.
//
// Order of operations (fixed, and the same for every request):
//   1. logit bias          logit[id] += bias (a -inf bias bans the token)
//   2. penalties           over the last penalty_last_n tokens of the sequence (prompt included):
//                            repetition (llama.cpp/CTRL): for every token present in the window,
//                              logit = logit > 0 ? logit / r : logit * r
//                            frequency / presence (OpenAI): for every token, c = its count among
//                              the *generated* tokens in the window,
//                              logit -= c * frequency + (c > 0 ? presence : 0)
//   3. mask                forbidden ids (TokenMask: guard rules, grammars) become -inf
//   4. temperature == 0    greedy: argmax, lowest id on ties; steps 5-9 are skipped
//   5. temperature         logit / T, softmax over the finite logits
//   6. top-k               keep the k most likely (ties: lower id first)
//   7. top-p               keep the smallest most-likely-first prefix whose probability
//                          reaches top_p (the token that crosses it is kept)
//   8. min-p               keep tokens with p >= min_p * p_max
//   9. sample              one draw u in [0, 1) from the sequence's RNG, walking the kept
//                          tokens in order (most likely first when 6 or 7 sorted them, else id
//                          order) until the cumulative probability exceeds u
// Each truncation renormalizes. penalty_last_n: 0 turns the penalties off, -1 means the whole
// sequence.
//
// Determinism: each Sampler (one per sequence) owns an mt19937_64 seeded from
// SamplingParams::seed (or, when absent, a fresh seed from core/random_id.h's random_u64()), draws exactly one number per
// non-greedy sample, and converts it to a double without std::uniform_real_distribution (whose
// output differs across standard libraries). So the same seed gives the same tokens whatever
// else is in the batch, and across builds.
//
// Costs: sample() is O(vocab) plus, with top-k, O(vocab log k), and with top-p a partial sort
// of a growing prefix (usually O(vocab log 64)). It modifies the logits in place (they are the
// step's scratch) and allocates one candidate vector only when not greedy.
// Thread-safety: a Sampler is used by one thread at a time; different Samplers are independent.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <random>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "engine/request.h"  // SamplingParams

namespace zl {

// The ids forbidden at one step: a bitset over the vocabulary. Cost O(vocab / 64) to build or
// clear; forbidden() is O(1).
class TokenMask {
 public:
  explicit TokenMask(int32_t n_vocab);

  int32_t n_vocab() const { return n_vocab_; }
  void forbid(int32_t id);                          // ids outside the vocabulary are ignored
  void forbid(std::span<const int32_t> ids);
  void allow_only(std::span<const int32_t> ids);    // forbids every id not listed
  void clear();                                     // nothing forbidden
  // The bits (1: forbidden), 64 ids a word, for masks computed elsewhere
  // (grammars); bits past n_vocab must stay 0.
  std::span<uint64_t> words() { return bits_; }
  bool forbidden(int32_t id) const {
    return id >= 0 && id < n_vocab_ && ((bits_[id >> 6] >> (id & 63)) & 1);
  }

 private:
  int32_t n_vocab_;
  std::vector<uint64_t> bits_;
};

// A token with its (transformed) logit and its probability among the kept candidates.
struct TokenProb {
  int32_t id = 0;
  float logit = 0;
  float p = 0;
};

// The stages, exposed for tests. Candidate vectors hold finite logits only.
namespace sampling {
void apply_logit_bias(std::span<float> logits, const std::map<int32_t, float>& bias);
void apply_mask(std::span<float> logits, const TokenMask& mask);
// Lowest id among the maxima; -1 when no logit is finite (NaN counts as -inf).
int32_t argmax(std::span<const float> logits);
// The finite logits divided by temperature (> 0), with softmax probabilities, in id order.
std::vector<TokenProb> softmax(std::span<const float> logits, float temperature);
// Truncations: each keeps at least one candidate and renormalizes p.
void top_k(std::vector<TokenProb>& c, int32_t k);       // k <= 0: no-op; leaves c sorted
void top_p(std::vector<TokenProb>& c, float p);         // p >= 1: no-op; leaves c sorted
void min_p(std::vector<TokenProb>& c, float p);         // p <= 0: no-op; keeps the order
// The candidate at which the cumulative probability first exceeds u * (sum of p).
int32_t draw(const std::vector<TokenProb>& c, double u);
// Log-softmax of `logits` (request.h TokenLogprobs) for `chosen` and the `n_top` most likely ids,
// most likely first (ties: lower id), -inf ones left out; pieces are left empty. The
// log-sum-exp is taken in double after a shift by the maximum; NaN counts as -inf; +inf logits
// share the whole probability. O(vocab) plus O(n_top) per id that enters the top (no sort).
void logprobs(std::span<const float> logits, int32_t chosen, int32_t n_top, TokenLogprobs* out);
}  // namespace sampling

// One sequence's sampling state: its parameters, RNG and penalty window.
class Sampler {
 public:
  // `context`: the tokens before the first generated one (the prompt); the last
  // penalty_last_n of them enter the penalty window (repetition penalty only).
  explicit Sampler(SamplingParams params, std::span<const int32_t> context = {});

  // Samples the next token and accepts it. `logits` has one entry per vocabulary id and is
  // modified in place; `mask` (optional) forbids ids at this step. Error invalid_argument when
  // every token is banned, masked or non-finite.
  Result<int32_t> sample(std::span<float> logits, const TokenMask* mask = nullptr);

  // Refuses a drawn candidate (the guard's phrase mask, guard/token_mask.h): true forbids the
  // id at this step. Must be a pure function of the id during one sample() call.
  using Veto = std::function<bool(int32_t id)>;
  // After this many refusals in one step, every remaining candidate is checked at once.
  static constexpr int kMaxVetoRetries = 8;
  // sample() with a veto: steps 1-3 once, then steps 4-9 are repeated with each refused id's
  // logit at -inf (the answer goes on with the best allowed token: greedy stays deterministic,
  // a seeded draw stays reproducible). After kMaxVetoRetries refusals the veto is asked about
  // every finite id once (O(vocab) calls) before the last draw. Only the accepted token enters
  // the penalty window. Error invalid_argument when every token is refused, banned or masked.
  // A null veto is sample(logits, mask).
  Result<int32_t> sample(std::span<float> logits, const TokenMask* mask, const Veto& veto);

  // The transformed, truncated distribution sample() would draw from (steps 1-8), without
  // drawing or accepting. Greedy parameters give the single argmax with p = 1.
  Result<std::vector<TokenProb>> distribution(std::span<float> logits,
                                              const TokenMask* mask = nullptr);

  // Speculative decoding (engine.cc): judges one draft token against these logits. The token
  // of this step is drawn exactly as sample(logits, mask) draws it (one uniform when not
  // greedy, the same penalty window, accepted into it) and the draft is accepted iff it is
  // that token. For a deterministic draft (q one-hot at `draft`) this is the standard
  // rejection rule: the draft is accepted with probability p(draft) under the final
  // distribution (distribution()), and when rejected the token is distributed as p with the
  // draft removed and renormalised. As it consumes the RNG as sample() does, a seeded request
  // gets the same tokens with and without speculation; greedy: accepted iff the draft is the
  // argmax. Error as sample().
  struct Verdict {
    int32_t token = 0;
    bool accepted = false;  // token == draft
  };
  Result<Verdict> verify(std::span<float> logits, int32_t draft, const TokenMask* mask = nullptr);

  // Adds a generated token to the penalty window (sample() does this itself; use it for
  // tokens chosen elsewhere, e.g. forced by a grammar).
  void accept(int32_t token);

  // Until n_tokens tokens have been accepted, `ids` are banned at every step (logit -inf,
  // after the bias and penalties): a minimum output length (StopParams::min_tokens) whose
  // end tokens cannot be drawn early, verify() included. Logprobs, taken from the raw
  // logits, do not see the ban.
  void hold_end(std::vector<int32_t> ids, int32_t n_tokens);

  uint64_t seed() const { return seed_; }                 // the seed in use (drawn if absent)
  const SamplingParams& params() const { return params_; }

 private:
  struct Counts {
    int32_t n_all = 0;        // occurrences in the window
    int32_t n_generated = 0;  // of which generated
  };
  void push(int32_t token, bool generated);
  bool penalties_active() const;
  void apply_penalties(std::span<float> logits) const;
  // Steps 1-3 in place.
  void transform(std::span<float> logits, const TokenMask* mask) const;
  // Steps 4-8 on transformed logits.
  Result<std::vector<TokenProb>> truncated(std::span<float> logits) const;
  // Step 9 on a truncated distribution (greedy: its only candidate).
  int32_t choose(const std::vector<TokenProb>& c);
  double next_uniform();

  SamplingParams params_;
  uint64_t seed_;
  std::mt19937_64 rng_;
  std::deque<std::pair<int32_t, bool>> window_;   // (token, generated), oldest first
  std::unordered_map<int32_t, Counts> counts_;     // over window_
  int64_t n_accepted_ = 0;                         // generated tokens accepted
  std::vector<int32_t> hold_ids_;                  // hold_end
  int64_t hold_n_ = 0;
};

}  // namespace zl
