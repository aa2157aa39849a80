// engine/sampler: every knob on hand-written 4-token vectors. No model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "engine/sampler.h"

namespace zl {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// Logits whose softmax at temperature 1 is exactly `probs`.
std::vector<float> logits_of(std::vector<float> probs) {
  std::vector<float> l;
  for (float p : probs) l.push_back(std::log(p));
  return l;
}

// (id, p) pairs of a distribution, for compact comparisons.
using Pairs = std::vector<std::pair<int32_t, float>>;
Pairs pairs(const std::vector<TokenProb>& c) {
  Pairs out;
  for (const auto& t : c) out.emplace_back(t.id, t.p);
  return out;
}
void expect_near(const Pairs& got, const Pairs& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].first, want[i].first) << "at " << i;
    EXPECT_NEAR(got[i].second, want[i].second, 1e-6) << "at " << i;
  }
}

Pairs dist(SamplingParams sp, std::vector<float> logits, const TokenMask* mask = nullptr) {
  Sampler s(std::move(sp));
  auto d = s.distribution(logits, mask);
  EXPECT_TRUE(d.ok()) << d.status().to_string();
  return d.ok() ? pairs(*d) : Pairs{};
}

SamplingParams greedy() { return {.temperature = 0.0f}; }

TEST(Sampler, GreedyTakesTheArgmaxAndTheLowestIdOnTies) {
  Sampler s(greedy());
  std::vector<float> l = {1, 3, 3, 2};
  EXPECT_EQ(*s.sample(l), 1);
  std::vector<float> neg = {-5, -1, -3, -1};
  EXPECT_EQ(*s.sample(neg), 1);
  std::vector<float> nan = {std::nanf(""), 0.5f, 2.0f, std::nanf("")};
  EXPECT_EQ(*s.sample(nan), 2);
  expect_near(dist(greedy(), {1, 3, 3, 2}), {{1, 1.0f}});
}

// hold_end: the ids are banned until that many tokens were accepted (sampled, verified or
// accepted as forced), then allowed again.
TEST(Sampler, HoldEndBansTheEndIdsUntilEnoughTokens) {
  Sampler s(greedy());
  s.hold_end({1, 3}, 3);
  std::vector<float> l = {1, 9, 2, 8};
  EXPECT_EQ(*s.sample(l), 2);  // 1 and 3 banned: the best left
  s.accept(0);                 // a forced token counts
  l = {1, 9, 2, 8};
  auto v = s.verify(l, 1);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->token, 2);
  EXPECT_FALSE(v->accepted);  // a draft of a banned id is rejected
  l = {1, 9, 2, 8};
  EXPECT_EQ(*s.sample(l), 1);  // 3 accepted: free again
  // Everything else masked: no token at all while the hold lasts.
  Sampler t(greedy());
  t.hold_end({0, 1}, 1);
  std::vector<float> only = {5, 4, -INFINITY};
  EXPECT_FALSE(t.sample(only).ok());
}

TEST(Sampler, TemperatureSharpensOrFlattens) {
  expect_near(dist({.temperature = 1.0f}, logits_of({0.1f, 0.2f, 0.3f, 0.4f})),
              {{0, 0.1f}, {1, 0.2f}, {2, 0.3f}, {3, 0.4f}});
  // T = 0.5: p_i^2 / sum p^2 = {1, 4, 9, 16} / 30.
  expect_near(dist({.temperature = 0.5f}, logits_of({0.1f, 0.2f, 0.3f, 0.4f})),
              {{0, 1 / 30.0f}, {1, 4 / 30.0f}, {2, 9 / 30.0f}, {3, 16 / 30.0f}});
  // T = 2: sqrt(p_i) / sum sqrt(p).
  const float z = std::sqrt(0.1f) + std::sqrt(0.2f) + std::sqrt(0.3f) + std::sqrt(0.4f);
  expect_near(dist({.temperature = 2.0f}, logits_of({0.1f, 0.2f, 0.3f, 0.4f})),
              {{0, std::sqrt(0.1f) / z}, {1, std::sqrt(0.2f) / z}, {2, std::sqrt(0.3f) / z},
               {3, std::sqrt(0.4f) / z}});
}

TEST(Sampler, TopKKeepsTheKMostLikely) {
  const auto l = logits_of({0.1f, 0.2f, 0.3f, 0.4f});
  expect_near(dist({.top_k = 2}, l), {{3, 0.4f / 0.7f}, {2, 0.3f / 0.7f}});
  expect_near(dist({.top_k = 1}, l), {{3, 1.0f}});
  expect_near(dist({.top_k = 4}, l), {{3, 0.4f}, {2, 0.3f}, {1, 0.2f}, {0, 0.1f}});
  expect_near(dist({.top_k = 9}, l), {{3, 0.4f}, {2, 0.3f}, {1, 0.2f}, {0, 0.1f}});
  // Ties at the cut: the lower id stays.
  expect_near(dist({.top_k = 1}, logits_of({0.2f, 0.3f, 0.3f, 0.2f})), {{1, 1.0f}});
  expect_near(dist({.top_k = 3}, logits_of({0.2f, 0.3f, 0.3f, 0.2f})),
              {{1, 0.375f}, {2, 0.375f}, {0, 0.25f}});
}

TEST(Sampler, TopPKeepsTheSmallestPrefixThatReachesP) {
  const auto l = logits_of({0.1f, 0.2f, 0.3f, 0.4f});
  expect_near(dist({.top_p = 0.35f}, l), {{3, 1.0f}});                           // 0.4
  expect_near(dist({.top_p = 0.6f}, l), {{3, 0.4f / 0.7f}, {2, 0.3f / 0.7f}});    // 0.7
  expect_near(dist({.top_p = 0.75f}, l), {{3, 0.4f / 0.9f}, {2, 0.3f / 0.9f}, {1, 0.2f / 0.9f}});
  expect_near(dist({.top_p = 0.95f}, l), {{3, 0.4f}, {2, 0.3f}, {1, 0.2f}, {0, 0.1f}});
  expect_near(dist({.top_p = 0.0f}, l), {{3, 1.0f}});  // always at least one token
  // After top-k, top-p works on the renormalized distribution: {0.4, 0.3} / 0.7 = {.571, .429}.
  expect_near(dist({.top_k = 2, .top_p = 0.5f}, l), {{3, 1.0f}});
  expect_near(dist({.top_k = 2, .top_p = 0.6f}, l), {{3, 0.4f / 0.7f}, {2, 0.3f / 0.7f}});
}

TEST(Sampler, TopPOnALargeVocabularyMatchesAFullSort) {
  // More candidates than the first partial-sort window, and a p that needs several widenings.
  std::vector<float> l(5000);
  for (size_t i = 0; i < l.size(); ++i) l[i] = static_cast<float>((i * 7919) % 5000) / 1000.0f;
  Sampler s({.top_p = 0.9f});
  auto d = s.distribution(l);
  ASSERT_TRUE(d.ok());
  // Reference: sort everything.
  std::vector<TokenProb> all = sampling::softmax(l, 1.0f);
  std::sort(all.begin(), all.end(), [](auto& a, auto& b) { return a.logit > b.logit; });
  double cum = 0;
  size_t n = 0;
  while (cum < 0.9) cum += all[n++].p;
  ASSERT_EQ(d->size(), n);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ((*d)[i].id, all[i].id);
}

TEST(Sampler, MinPKeepsTokensAboveAFractionOfTheBest) {
  const auto l = logits_of({0.1f, 0.2f, 0.3f, 0.4f});
  // min_p 0.45: threshold 0.18, keeps {0.2, 0.3, 0.4} in id order.
  expect_near(dist({.min_p = 0.45f}, l), {{1, 0.2f / 0.9f}, {2, 0.3f / 0.9f}, {3, 0.4f / 0.9f}});
  // min_p 0.6: threshold 0.24.
  expect_near(dist({.min_p = 0.6f}, l), {{2, 0.3f / 0.7f}, {3, 0.4f / 0.7f}});
  expect_near(dist({.min_p = 1.0f}, l), {{3, 1.0f}});
  // After top-p (sorted), min-p keeps that order.
  expect_near(dist({.top_p = 0.75f, .min_p = 0.6f}, l), {{3, 0.4f / 0.7f}, {2, 0.3f / 0.7f}});
}

TEST(Sampler, LogitBiasAddsAndMinusInfinityBans) {
  Sampler s({.temperature = 0.0f, .logit_bias = {{0, 2.5f}, {3, -kInf}, {99, 5.0f}}});
  std::vector<float> l = {1, 3, 2, 4};  // id 99 is outside the vocabulary: ignored
  EXPECT_EQ(*s.sample(l), 0);           // 1 + 2.5 = 3.5 beats 3; 4 is banned
  EXPECT_EQ(l, (std::vector<float>{3.5f, 3, 2, -kInf}));
  // A +inf bias forces the token.
  Sampler force({.logit_bias = {{2, kInf}}});
  for (int i = 0; i < 10; ++i) {
    std::vector<float> x = {5, 5, 0, 5};
    EXPECT_EQ(*force.sample(x), 2);
  }
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  const std::vector<int32_t> prompt = {0, 1};
  SamplingParams sp{.temperature = 0.0f, .repetition_penalty = 2.0f};
  Sampler s(sp, prompt);
  std::vector<float> l = {2, -2, 1, 0.5f};
  EXPECT_EQ(*s.sample(l), 0);  // {1, -4, 1, 0.5}: ids 0 and 2 tie, the lower id wins
  EXPECT_EQ(l, (std::vector<float>{1, -4, 1, 0.5f}));
}

TEST(Sampler, RepetitionPenaltyWindowCoversTheLastNTokens) {
  SamplingParams sp{.temperature = 0.0f, .repetition_penalty = 2.0f, .penalty_last_n = 1};
  const std::vector<int32_t> prompt = {0, 1};
  Sampler s(sp, prompt);  // window: {1}
  std::vector<float> l = {2, -2, 1, 0.5f};
  (void)s.sample(l);
  EXPECT_EQ(l, (std::vector<float>{2, -4, 1, 0.5f}));
  // The sampled token (0) entered the window and pushed 1 out.
  std::vector<float> l2 = {2, -2, 1, 0.5f};
  (void)s.sample(l2);
  EXPECT_EQ(l2, (std::vector<float>{1, -2, 1, 0.5f}));

  SamplingParams off = sp;
  off.penalty_last_n = 0;
  Sampler s_off(off, prompt);
  std::vector<float> l3 = {2, -2, 1, 0.5f};
  (void)s_off.sample(l3);
  EXPECT_EQ(l3, (std::vector<float>{2, -2, 1, 0.5f}));

  SamplingParams all = sp;
  all.penalty_last_n = -1;
  const std::vector<int32_t> long_prompt = {0, 1, 2, 3, 3, 3, 3, 3, 3, 3};
  Sampler s_all(all, long_prompt);
  std::vector<float> l4 = {2, -2, 1, 0.5f};
  (void)s_all.sample(l4);
  EXPECT_EQ(l4, (std::vector<float>{1, -4, 0.5f, 0.25f}));
}

TEST(Sampler, PresenceAndFrequencyPenaltiesCountGeneratedTokensOnly) {
  SamplingParams sp{.temperature = 0.0f, .presence_penalty = 1.0f, .frequency_penalty = 0.5f};
  const std::vector<int32_t> prompt = {1, 1, 1};  // prompt tokens do not count
  Sampler s(sp, prompt);
  s.accept(2);
  s.accept(2);
  s.accept(3);
  std::vector<float> l = {0, 5, 5, 5};
  (void)s.sample(l);
  // id 2: 5 - (2 * 0.5 + 1) = 3; id 3: 5 - (0.5 + 1) = 3.5; id 1 untouched.
  EXPECT_EQ(l, (std::vector<float>{0, 5, 3, 3.5f}));
  // The sampled token (1) now counts once.
  std::vector<float> l2 = {0, 5, 5, 5};
  (void)s.sample(l2);
  EXPECT_EQ(l2, (std::vector<float>{0, 3.5f, 3, 3.5f}));
}

TEST(Sampler, PenaltiesApplyInOrderRepetitionThenFrequencyPresence) {
  SamplingParams sp{.temperature = 0.0f, .repetition_penalty = 2.0f, .presence_penalty = 1.0f,
                    .frequency_penalty = 0.25f};
  Sampler s(sp);
  s.accept(3);
  s.accept(3);
  std::vector<float> l = {0, 0, 0, 4};
  (void)s.sample(l);
  EXPECT_EQ(l[3], 4 / 2.0f - (2 * 0.25f + 1));  // 0.5
}

TEST(Sampler, BiasComesBeforePenalties) {
  // Bias turns token 0 positive; the repetition penalty then divides it.
  Sampler s({.temperature = 0.0f, .repetition_penalty = 2.0f, .logit_bias = {{0, 3.0f}}},
            std::vector<int32_t>{0});
  std::vector<float> l = {-1, 0, 0, 0};
  (void)s.sample(l);
  EXPECT_EQ(l[0], 1.0f);  // (-1 + 3) / 2, not -1 * 2 + 3
}

TEST(Sampler, MaskForbidsTokensAtThisStep) {
  TokenMask mask(4);
  mask.forbid(3);
  Sampler s(greedy());
  std::vector<float> l = {1, 3, 2, 4};
  EXPECT_EQ(*s.sample(l, &mask), 1);
  // Masking comes after bias: a bias cannot resurrect a masked token.
  Sampler b({.temperature = 0.0f, .logit_bias = {{3, 100.0f}}});
  std::vector<float> l2 = {1, 3, 2, 4};
  EXPECT_EQ(*b.sample(l2, &mask), 1);
  // allow_only: everything else is forbidden.
  TokenMask only(4);
  only.allow_only(std::vector<int32_t>{0, 2});
  EXPECT_TRUE(only.forbidden(1));
  EXPECT_FALSE(only.forbidden(2));
  expect_near(dist({}, logits_of({0.1f, 0.2f, 0.3f, 0.4f}), &only), {{0, 0.25f}, {2, 0.75f}});
  only.clear();
  EXPECT_FALSE(only.forbidden(1));
  EXPECT_FALSE(only.forbidden(-1));
  EXPECT_FALSE(only.forbidden(4));
}

TEST(Sampler, NothingSampleableIsAnError) {
  TokenMask all(4);
  all.allow_only({});
  for (float t : {0.0f, 1.0f}) {
    Sampler s({.temperature = t});
    std::vector<float> l = {1, 2, 3, 4};
    auto r = s.sample(l, &all);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().kind(), ErrorKind::kInvalidArgument);
  }
  Sampler s({});
  std::vector<float> l = {-kInf, -kInf, std::nanf(""), -kInf};
  EXPECT_FALSE(s.sample(l).ok());
}

TEST(Sampler, DrawWalksTheCumulativeDistribution) {
  const std::vector<TokenProb> c = {{0, 0, 0.1f}, {1, 0, 0.2f}, {2, 0, 0.3f}, {3, 0, 0.4f}};
  EXPECT_EQ(sampling::draw(c, 0.0), 0);
  EXPECT_EQ(sampling::draw(c, 0.05), 0);
  EXPECT_EQ(sampling::draw(c, 0.15), 1);
  EXPECT_EQ(sampling::draw(c, 0.55), 2);
  EXPECT_EQ(sampling::draw(c, 0.95), 3);
  EXPECT_EQ(sampling::draw(c, 0.9999999), 3);
}

TEST(Sampler, SampledFrequenciesFollowTheDistribution) {
  Sampler s({.seed = 1234});
  std::vector<int> counts(4, 0);
  const int n = 40000;
  for (int i = 0; i < n; ++i) {
    auto l = logits_of({0.1f, 0.2f, 0.3f, 0.4f});
    counts[*s.sample(l)]++;
  }
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(counts[i] / double(n), 0.1 * (i + 1), 0.01) << i;
}

std::vector<int32_t> run(Sampler& s, int n) {
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    std::vector<float> l = {0.1f, 0.2f, 0.3f, 0.25f};
    out.push_back(*s.sample(l));
  }
  return out;
}

TEST(Sampler, SameSeedSameTokensWhateverElseIsInTheBatch) {
  const SamplingParams sp{.temperature = 1.5f, .top_k = 3, .seed = 42};
  Sampler alone(sp);
  const auto want = run(alone, 64);
  // Interleaved with other sequences sampling in the same "batch".
  Sampler a(sp), other1({.seed = 7}), other2({});
  std::vector<int32_t> got;
  for (int i = 0; i < 64; ++i) {
    (void)run(other1, 3);
    std::vector<float> l = {0.1f, 0.2f, 0.3f, 0.25f};
    got.push_back(*a.sample(l));
    (void)run(other2, 1);
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(a.seed(), 42u);
  // A different seed gives a different sequence; no seed draws one.
  Sampler b({.temperature = 1.5f, .top_k = 3, .seed = 43});
  EXPECT_NE(run(b, 64), want);
  Sampler r1({}), r2({});
  EXPECT_NE(r1.seed(), r2.seed());
}

TEST(Sampler, FixedSeedGivesAFixedStreamAcrossBuilds) {
  // mt19937_64 is fully specified, and so is the conversion to [0, 1): these values hold on
  // every standard library. (Computed independently with a Python MT19937-64, u = (x >> 11) *
  // 2^-53, walking softmax({0.1, 0.2, 0.3, 0.25}) in id order.)
  Sampler s({.seed = 5489});
  EXPECT_EQ(run(s, 12), (std::vector<int32_t>{3, 1, 2, 3, 0, 1, 1, 0, 2, 1, 1, 2}));
}

TEST(Sampler, VetoedGreedyTokenGivesTheNextBestDeterministically) {
  for (int i = 0; i < 2; ++i) {  // the same answer each time
    Sampler s(greedy());
    std::vector<float> l{1.0f, 4.0f, 3.0f, 2.0f};
    std::vector<int32_t> asked;
    auto token = s.sample(l, nullptr, [&](int32_t id) {
      asked.push_back(id);
      return id == 1 || id == 2;
    });
    ASSERT_TRUE(token.ok());
    EXPECT_EQ(*token, 3);
    EXPECT_EQ(asked, (std::vector<int32_t>{1, 2, 3}));
  }
}

TEST(Sampler, VetoedDrawsStayReproducibleAndNeverReturnARefusedId) {
  auto run_vetoed = [](uint64_t seed) {
    Sampler s({.temperature = 1.0f, .seed = seed});
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) {
      std::vector<float> l = logits_of({0.7f, 0.1f, 0.1f, 0.1f});
      auto t = s.sample(l, nullptr, [](int32_t id) { return id == 0; });
      EXPECT_TRUE(t.ok());
      out.push_back(t.ok() ? *t : -1);
    }
    return out;
  };
  const std::vector<int32_t> a = run_vetoed(7);
  EXPECT_EQ(a, run_vetoed(7));
  for (int32_t id : a) EXPECT_NE(id, 0);
}

TEST(Sampler, AVetoThatRefusesManySettlesEveryCandidateOnceThenErrsWhenNoneIsLeft) {
  Sampler s({.temperature = 1.0f, .seed = 1});
  std::vector<float> l(100, 0.0f);
  int n_asked = 0;
  auto t = s.sample(l, nullptr, [&](int32_t id) {
    ++n_asked;
    return id != 57;
  });
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, 57);
  EXPECT_LE(n_asked, Sampler::kMaxVetoRetries + 100);
  std::vector<float> l2(4, 0.0f);
  EXPECT_FALSE(s.sample(l2, nullptr, [](int32_t) { return true; }).ok());
}

TEST(Sampler, RefusedTokensDoNotEnterThePenaltyWindow) {
  Sampler s({.temperature = 0.0f, .presence_penalty = 10.0f});
  std::vector<float> l{5.0f, 4.0f, 0.0f, 0.0f};
  ASSERT_EQ(*s.sample(l, nullptr, [](int32_t id) { return id == 0; }), 1);
  std::vector<float> l2{5.0f, 4.0f, 0.0f, 0.0f};
  EXPECT_EQ(*s.sample(l2), 0);  // 0 was refused, not accepted: no penalty on it
}

// ---- logprobs (sampling::logprobs) ----

// The reference: log-softmax in double over the finite logits, ids ordered most likely first.
struct RefLogprobs {
  std::vector<double> lp;     // per id (-inf for non-finite)
  std::vector<int32_t> order; // finite ids, most likely first, ties: lower id
};
RefLogprobs ref_logprobs(const std::vector<float>& l) {
  RefLogprobs r;
  double m = -kInf;
  for (float x : l) if (std::isfinite(x)) m = std::max(m, static_cast<double>(x));
  double sum = 0;
  for (float x : l) if (std::isfinite(x)) sum += std::exp(static_cast<double>(x) - m);
  for (size_t i = 0; i < l.size(); ++i) {
    r.lp.push_back(std::isfinite(l[i]) ? static_cast<double>(l[i]) - m - std::log(sum) : -kInf);
    if (std::isfinite(l[i])) r.order.push_back(static_cast<int32_t>(i));
  }
  std::stable_sort(r.order.begin(), r.order.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
  return r;
}

TEST(SamplerLogprobs, MatchADoublePrecisionLogSoftmaxOnRandomLogits) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  for (int32_t n_vocab : {5, 1000, 50000}) {
    std::vector<float> l(n_vocab);
    for (float& x : l) x = normal(rng) + 30.0f;  // a large offset: the shift must be taken
    for (int i = 0; i < 20; ++i) l[rng() % n_vocab] = l[rng() % n_vocab];  // ties
    const RefLogprobs ref = ref_logprobs(l);
    for (int32_t n_top : {0, 1, 5, 20, 40}) {
      const int32_t chosen = static_cast<int32_t>(rng() % n_vocab);
      TokenLogprobs out;
      sampling::logprobs(l, chosen, n_top, &out);
      EXPECT_EQ(out.chosen.id, chosen);
      EXPECT_NEAR(out.chosen.logprob, ref.lp[chosen], 1e-5) << n_vocab;
      ASSERT_EQ(out.top.size(), static_cast<size_t>(std::min(n_top, n_vocab))) << n_vocab << " " << n_top;
      for (size_t j = 0; j < out.top.size(); ++j) {
        EXPECT_EQ(out.top[j].id, ref.order[j]) << n_vocab << " " << n_top << " rank " << j;
        EXPECT_NEAR(out.top[j].logprob, ref.lp[ref.order[j]], 1e-5);
        EXPECT_TRUE(out.top[j].piece.empty());
      }
    }
  }
}

TEST(SamplerLogprobs, TiesGoToTheLowerIdAndTheChosenNeedNotBeInTheTop) {
  const std::vector<float> l{1.0f, 3.0f, 3.0f, 2.0f, 3.0f};
  for (int32_t n_top : {2, 40}) {  // insertion and selection
    TokenLogprobs out;
    sampling::logprobs(l, /*chosen=*/0, n_top, &out);
    ASSERT_GE(out.top.size(), 2u);
    EXPECT_EQ(out.top[0].id, 1);
    EXPECT_EQ(out.top[1].id, 2);
    if (n_top == 40) {
      ASSERT_EQ(out.top.size(), 5u);
      EXPECT_EQ(out.top[2].id, 4);
      EXPECT_EQ(out.top[3].id, 3);
      EXPECT_EQ(out.top[4].id, 0);
    }
    const double z = std::log(std::exp(1.0) + 3 * std::exp(3.0) + std::exp(2.0));
    EXPECT_NEAR(out.chosen.logprob, 1.0 - z, 1e-6);  // chosen 0 is last: still reported
    EXPECT_NEAR(out.top[0].logprob, 3.0 - z, 1e-6);
  }
}

TEST(SamplerLogprobs, NonFiniteLogitsAreSkippedAndAChosenMinusInfIsMinusInf) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> l{-kInf, 0.0f, nan, std::log(3.0f), -kInf};
  for (int32_t n_top : {5, 40}) {
    TokenLogprobs out;
    sampling::logprobs(l, /*chosen=*/0, n_top, &out);
    EXPECT_EQ(out.chosen.logprob, -kInf);
    ASSERT_EQ(out.top.size(), 2u);  // only the finite ones
    EXPECT_EQ(out.top[0].id, 3);
    EXPECT_NEAR(out.top[0].logprob, std::log(0.75), 1e-6);
    EXPECT_EQ(out.top[1].id, 1);
    EXPECT_NEAR(out.top[1].logprob, std::log(0.25), 1e-6);
    sampling::logprobs(l, /*chosen=*/2, n_top, &out);  // NaN counts as -inf
    EXPECT_EQ(out.chosen.logprob, -kInf);
  }
  TokenLogprobs none;
  sampling::logprobs(std::vector<float>{-kInf, -kInf}, 1, 3, &none);
  EXPECT_EQ(none.chosen.logprob, -kInf);
  EXPECT_TRUE(none.top.empty());
  // +inf logits hold all the mass, shared.
  TokenLogprobs inf;
  sampling::logprobs(std::vector<float>{kInf, 5.0f, kInf}, 2, 3, &inf);
  EXPECT_NEAR(inf.chosen.logprob, -std::log(2.0), 1e-6);
  ASSERT_EQ(inf.top.size(), 2u);  // the finite one's logprob is -inf: left out
  EXPECT_EQ(inf.top[0].id, 0);
  EXPECT_EQ(inf.top[1].id, 2);
}

}  // namespace
}  // namespace zl
