// Speculative decoding without a model: the n-gram drafter (spec/ngram_draft.h), the adaptive
// draft length, Sampler::verify's distribution, and the scheduler's draft grants (budget,
// rollback of n_computed, blocks returned, nothing rejected in the prefix cache).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "cli/serve_config.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "spec/ngram_draft.h"

namespace zl {
namespace {

using spec::DraftLength;
using spec::NgramConfig;
using spec::NgramIndex;

std::vector<int32_t> draft_of(NgramIndex& index, const std::vector<int32_t>& tokens, int32_t k) {
  std::vector<int32_t> out;
  index.draft(tokens, k, &out);
  return out;
}

TEST(NgramIndex, ProposesWhatFollowedTheLatestEarlierOccurrence) {
  NgramIndex index(NgramConfig{.n_min = 2, .n_max = 4});
  //                               0  1  2  3  4  5  6  7  8  9 10
  const std::vector<int32_t> seq = {1, 2, 3, 4, 5, 9, 2, 3, 7, 8, 2, 3};
  // The last 2-gram (2 3) occurred at 1..2 (followed by 4 5 9) and at 6..7 (followed by 7 8):
  // the latest one wins.
  EXPECT_EQ(draft_of(index, seq, 2), (std::vector<int32_t>{7, 8}));
  // A longer match beats a more recent shorter one: (4 2 3)? no; (8 2 3) occurred nowhere
  // earlier, (2 3) did.
  EXPECT_EQ(draft_of(index, seq, 3), (std::vector<int32_t>{7, 8, 2}));
}

TEST(NgramIndex, LongestNgramFirst) {
  NgramIndex index(NgramConfig{.n_min = 1, .n_max = 3});
  // (5 6 7) occurred at 0..2 followed by 100; (7) alone occurred later at 5, followed by 200.
  std::vector<int32_t> seq = {5, 6, 7, 100, 1, 7, 200, 5, 6, 7};
  EXPECT_EQ(draft_of(index, seq, 1), (std::vector<int32_t>{100}));
}

TEST(NgramIndex, NothingWithoutAnEarlierOccurrence) {
  NgramIndex index(NgramConfig{.n_min = 2, .n_max = 4});
  std::vector<int32_t> seq(50);
  std::iota(seq.begin(), seq.end(), 0);
  EXPECT_TRUE(draft_of(index, seq, 8).empty());
  NgramIndex one(NgramConfig{.n_min = 1, .n_max = 4}), two(NgramConfig{.n_min = 1, .n_max = 4});
  EXPECT_TRUE(draft_of(one, {3}, 8).empty());
  EXPECT_TRUE(draft_of(two, {3, 3}, 0).empty());
}

TEST(NgramIndex, ALoopContinuesWithItsPeriod) {
  NgramIndex index(NgramConfig{.n_min = 2, .n_max = 4});
  // Period 3: ... 1 2 3 1 2 3 1 2 -> next come 3 1 2 3 1 2 ...
  const std::vector<int32_t> seq = {9, 1, 2, 3, 1, 2, 3, 1, 2};
  EXPECT_EQ(draft_of(index, seq, 7), (std::vector<int32_t>{3, 1, 2, 3, 1, 2, 3}));
  // Period 1 (a repeated token).
  NgramIndex one(NgramConfig{.n_min = 1, .n_max = 2});
  EXPECT_EQ(draft_of(one, {4, 5, 5}, 4), (std::vector<int32_t>{5, 5, 5, 5}));
}

TEST(NgramIndex, IncrementalEqualsFromScratch) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> tok(0, 5);  // a small alphabet: many matches
  std::vector<int32_t> seq;
  NgramIndex incremental(NgramConfig{.n_min = 1, .n_max = 4});
  for (int i = 0; i < 400; ++i) {
    seq.push_back(tok(rng));
    const std::vector<int32_t> a = draft_of(incremental, seq, 6);
    NgramIndex fresh(NgramConfig{.n_min = 1, .n_max = 4});
    EXPECT_EQ(a, draft_of(fresh, seq, 6)) << "at length " << seq.size();
    // The draft really continues an earlier occurrence of the last n tokens, for some n.
    if (!a.empty()) {
      bool found = false;
      const int n = static_cast<int>(seq.size());
      for (int g = 1; g <= 4 && g < n && !found; ++g) {
        for (int e = n - 1; e >= g && !found; --e) {
          if (!std::equal(seq.end() - g, seq.end(), seq.begin() + (e - g))) continue;
          found = seq[e] == a[0];
        }
      }
      EXPECT_TRUE(found) << "at length " << seq.size();
    }
  }
  // One entry per n-gram that has a successor, per level, at most.
  EXPECT_LE(incremental.n_entries(), 4 * seq.size());
}

TEST(NgramIndex, BoundedByMaxTokens) {
  NgramIndex index(NgramConfig{.n_min = 1, .n_max = 2, .max_tokens = 100});
  std::vector<int32_t> seq(10000);
  std::iota(seq.begin(), seq.end(), 0);
  index.extend(seq);
  EXPECT_LE(index.n_entries(), 200u);
}

TEST(DraftLength, HalvesOnMissesBacksOffAndRecovers) {
  DraftLength d(8);
  EXPECT_EQ(d.next(), 8);
  d.on_verified(8, 8);  // full acceptance keeps the maximum
  EXPECT_EQ(d.next(), 8);
  d.on_verified(8, 2);  // partial: accepted + 1
  EXPECT_EQ(d.next(), 3);
  d.on_verified(3, 3);  // full: doubles
  EXPECT_EQ(d.next(), 6);
  d.on_verified(6, 0);
  EXPECT_EQ(d.next(), 3);
  d.on_verified(3, 0);
  EXPECT_EQ(d.next(), 1);
  d.on_verified(1, 0);  // third miss in a row: back off
  int n_off = 0;
  while (d.next() == 0) ++n_off;
  EXPECT_EQ(n_off, DraftLength::kMinBackOff);
  // Another run of misses backs off twice as long.
  for (int i = 0; i < DraftLength::kMissesToBackOff; ++i) d.on_verified(1, 0);
  n_off = 0;
  while (d.next() == 0) ++n_off;
  EXPECT_EQ(n_off, 2 * DraftLength::kMinBackOff);
  d.on_verified(1, 1);
  EXPECT_EQ(d.next(), 2);
}

// ---- Sampler::verify: rejection sampling against a deterministic draft ----

std::vector<float> logits_of(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)));
  return l;
}

TEST(SamplerVerify, AcceptsWithProbabilityPAndRejectsToTheRest) {
  const std::vector<double> p = {0.5, 0.2, 0.15, 0.1, 0.05};
  const int32_t draft = 1;
  Sampler sampler(SamplingParams{.temperature = 1.0f, .penalty_last_n = 0, .seed = 1234});
  constexpr int kTrials = 40000;
  int n_accepted = 0;
  std::vector<int> counts(p.size(), 0), rejected_counts(p.size(), 0);
  for (int i = 0; i < kTrials; ++i) {
    std::vector<float> l = logits_of(p);
    auto v = sampler.verify(l, draft);
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(v->accepted, v->token == draft);
    ++counts[v->token];
    if (v->accepted) {
      ++n_accepted;
    } else {
      ++rejected_counts[v->token];
    }
  }
  // 5 sigma of a binomial proportion over kTrials: deterministic with the seed, and far from flaky.
  auto bound = [](double q, int n) { return 5 * std::sqrt(q * (1 - q) / n) + 1e-9; };
  EXPECT_NEAR(static_cast<double>(n_accepted) / kTrials, p[draft], bound(p[draft], kTrials));
  const int n_rejected = kTrials - n_accepted;
  EXPECT_EQ(rejected_counts[draft], 0);
  for (size_t t = 0; t < p.size(); ++t) {
    EXPECT_NEAR(static_cast<double>(counts[t]) / kTrials, p[t], bound(p[t], kTrials)) << "token " << t;
    if (t == static_cast<size_t>(draft)) continue;
    const double q = p[t] / (1 - p[draft]);  // p without the draft, renormalised
    EXPECT_NEAR(static_cast<double>(rejected_counts[t]) / n_rejected, q, bound(q, n_rejected)) << "token " << t;
  }
}

TEST(SamplerVerify, FollowsTheFinalDistributionAfterTruncation) {
  // top_k 2 keeps tokens 0 and 1 (p 0.4 / 0.3 -> 4/7 and 3/7): a draft outside is never
  // accepted, a draft inside with its renormalised probability.
  const std::vector<double> p = {0.4, 0.3, 0.2, 0.1};
  Sampler sampler(SamplingParams{.temperature = 1.0f, .top_k = 2, .penalty_last_n = 0, .seed = 99});
  constexpr int kTrials = 20000;
  int n_accepted_inside = 0, n_accepted_outside = 0;
  for (int i = 0; i < kTrials; ++i) {
    std::vector<float> l = logits_of(p);
    n_accepted_inside += sampler.verify(l, 1)->accepted;
    std::vector<float> l2 = logits_of(p);
    n_accepted_outside += sampler.verify(l2, 3)->accepted;
  }
  EXPECT_EQ(n_accepted_outside, 0);
  EXPECT_NEAR(static_cast<double>(n_accepted_inside) / kTrials, 3.0 / 7, 5 * std::sqrt(0.245 / kTrials));
}

TEST(SamplerVerify, SameTokensAsSampleWithTheSameSeedAndPenalties) {
  // Verify consumes the RNG and the penalty window exactly as sample(): a seeded request gets
  // the same tokens with and without speculation, whatever the drafts.
  const SamplingParams params{.temperature = 0.9f, .top_p = 0.9f, .repetition_penalty = 1.3f,
                              .presence_penalty = 0.5f, .penalty_last_n = 8, .seed = 5};
  Sampler a(params, std::vector<int32_t>{1, 2}), b(params, std::vector<int32_t>{1, 2});
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> logit(-2, 2);
  for (int i = 0; i < 500; ++i) {
    std::vector<float> l(16);
    for (float& x : l) x = logit(rng);
    std::vector<float> l2 = l;
    auto t = a.sample(l);
    auto v = b.verify(l2, static_cast<int32_t>(i % 16));
    ASSERT_TRUE(t.ok() && v.ok());
    ASSERT_EQ(*t, v->token) << "step " << i;
  }
}

TEST(SamplerVerify, GreedyAcceptsOnlyTheArgmax) {
  Sampler s(SamplingParams{.temperature = 0.0f});
  std::vector<float> l = {0.1f, 2.0f, 1.0f};
  EXPECT_TRUE(s.verify(l, 1)->accepted);
  std::vector<float> l2 = {0.1f, 2.0f, 1.0f};
  auto v = s.verify(l2, 2);
  EXPECT_FALSE(v->accepted);
  EXPECT_EQ(v->token, 1);
}

// ---- Scheduler with drafts ----

struct DraftFixture {
  BlockPool pool;
  Scheduler sched;
  DraftFixture(int32_t n_blocks, int32_t budget, int32_t max_drafts)
      : pool(BlockPoolConfig{.block_size = 4, .n_blocks = n_blocks}),
        sched(SchedulerConfig{.max_step_tokens = budget, .max_running = 8, .max_step_drafts = max_drafts}, pool) {}

  SeqId submit(std::vector<int32_t> prompt, int32_t max_total) {
    auto id = sched.submit({.tenant = "t", .prompt = std::move(prompt), .max_total_tokens = max_total});
    EXPECT_TRUE(id.ok());
    return *id;
  }
  // Until every sequence decodes: prefill with token 7 sampled.
  void prefill() {
    for (int i = 0; i < 10; ++i) {
      bool all_decode = true;
      for (const Sequence* s : sched.running()) all_decode &= s->n_uncomputed() == 1;
      if (all_decode && sched.waiting().empty() && !sched.running().empty()) return;
      StepPlan plan = sched.schedule();
      for (const ScheduledSeq& it : plan.items) {
        sched.on_step_done(it.id, it.samples ? std::optional<int32_t>(7) : std::nullopt);
      }
    }
  }
};

TEST(SchedulerDrafts, ADecodeGrantGrowsByTheDraftAndRollsBackWhatWasRejected) {
  DraftFixture f(/*n_blocks=*/16, /*budget=*/64, /*max_drafts=*/64);
  const SeqId id = f.submit({1, 2, 3, 4, 5, 6}, 40);
  f.prefill();
  const Sequence& s = f.sched.sequence(id);
  ASSERT_EQ(s.n_tokens(), 7);
  ASSERT_EQ(s.n_computed, 6);
  const int32_t used_before = f.pool.n_used();
  f.sched.set_draft(id, 5);
  StepPlan plan = f.sched.schedule();
  ASSERT_EQ(plan.items.size(), 1u);
  EXPECT_EQ(plan.items[0].pos, 6);
  EXPECT_EQ(plan.items[0].n_tokens, 6);
  EXPECT_EQ(plan.items[0].n_draft, 5);
  EXPECT_TRUE(plan.items[0].samples);
  EXPECT_EQ(plan.n_tokens, 6);
  EXPECT_EQ(plan.n_draft_tokens, 5);
  EXPECT_GE(s.blocks.capacity(), 12);  // positions 6..11 reserved
  EXPECT_GT(f.pool.n_used(), used_before);
  // Two draft tokens matched, then a third token sampled: 3 tokens, n_computed + 3.
  const std::vector<int32_t> accepted = {11, 12, 13};
  f.sched.on_step_done(id, accepted);
  EXPECT_EQ(s.n_computed, 9);
  EXPECT_EQ(s.n_tokens(), 10);
  EXPECT_EQ(std::vector<int32_t>(s.tokens.end() - 3, s.tokens.end()), accepted);
  // Blocks past the token list (reserved for rejected positions) are back in the pool.
  EXPECT_EQ(s.blocks.capacity(), 12);  // ceil(10 / 4) blocks
  EXPECT_EQ(f.pool.n_used(), 3);
  // The wish was consumed: the next step is a plain decode.
  plan = f.sched.schedule();
  EXPECT_EQ(plan.items[0].n_tokens, 1);
  EXPECT_EQ(plan.items[0].n_draft, 0);
  f.sched.on_step_done(id, std::optional<int32_t>(14));
  f.pool.check_invariants();
  f.sched.finish(id);
  EXPECT_EQ(f.pool.n_used(), 0);
  f.pool.check_invariants();
}

TEST(SchedulerDrafts, RejectedPositionsNeverEnterThePrefixCache) {
  DraftFixture f(16, 64, 64);
  const SeqId id = f.submit({1, 2, 3, 4, 5, 6}, 40);
  f.prefill();  // tokens 1..6, 7; computed 6
  f.sched.set_draft(id, 6);  // positions 6..12: the draft would fill block [8, 12)
  StepPlan plan = f.sched.schedule();
  ASSERT_EQ(plan.items[0].n_draft, 6);
  // The first draft token matched, the second did not: positions 8..12 hold rejected KV.
  f.sched.on_step_done(id, std::vector<int32_t>{50, 51});
  const Sequence& s = f.sched.sequence(id);
  EXPECT_EQ(s.n_computed, 8);
  EXPECT_EQ(s.n_tokens(), 9);
  EXPECT_EQ(s.blocks.n_committed_blocks(), 2);  // [0, 8): full and computed; [8, 12) is not
  EXPECT_EQ(s.blocks.capacity(), 12);           // position 8 (the pending token) is kept
  f.sched.finish(id);
  // Cached afterwards: the accepted tokens' two blocks, nothing past them.
  SequenceBlocks probe(f.pool, "t");
  EXPECT_EQ(probe.find_prefix(std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 50, 51, 60, 61, 62, 63}).n_tokens, 8);
  EXPECT_EQ(f.pool.n_used(), 0);
  f.pool.check_invariants();
}

TEST(SchedulerDrafts, DraftsTakeOnlyWhatTheBudgetLeavesAndTheirCap) {
  // Budget 8: three decodes take 3, drafts share the 5 left (and max_step_drafts 4 caps them).
  DraftFixture f(64, 8, 4);
  const SeqId a = f.submit({1, 2, 3}, 60), b = f.submit({4, 5, 6}, 60), c = f.submit({7, 8, 9}, 60);
  f.prefill();
  for (SeqId id : {a, b, c}) f.sched.set_draft(id, 3);
  StepPlan plan = f.sched.schedule();
  ASSERT_EQ(plan.items.size(), 3u);
  EXPECT_EQ(plan.items[0].n_draft, 3);
  EXPECT_EQ(plan.items[1].n_draft, 1);
  EXPECT_EQ(plan.items[2].n_draft, 0);  // every decode is granted, drafts or not
  EXPECT_EQ(plan.n_draft_tokens, 4);
  EXPECT_LE(plan.n_tokens, 8);
  for (const ScheduledSeq& it : plan.items) f.sched.on_step_done(it.id, std::optional<int32_t>(1));
  // A prefill in the same step comes before any draft.
  const SeqId d = f.submit({10, 11, 12, 13, 14, 15}, 60);
  for (SeqId id : {a, b, c}) f.sched.set_draft(id, 3);
  plan = f.sched.schedule();
  int32_t n_prefill = 0;
  for (const ScheduledSeq& it : plan.items) {
    if (it.id == d) n_prefill = it.n_tokens;
  }
  EXPECT_EQ(n_prefill, 5);  // 8 - 3 decodes: the draft gets nothing
  EXPECT_EQ(plan.n_draft_tokens, 0);
  for (const ScheduledSeq& it : plan.items) {
    f.sched.on_step_done(it.id, it.samples ? std::optional<int32_t>(1) : std::nullopt);
  }
}

TEST(SchedulerDrafts, NeverPastMaxTotalTokensNorPreempting) {
  DraftFixture f(4, 64, 64);  // 16 positions in all
  const SeqId a = f.submit({1, 2, 3}, 6);
  f.prefill();  // 4 tokens: room for 2 more
  f.sched.set_draft(a, 8);
  StepPlan plan = f.sched.schedule();
  EXPECT_EQ(plan.items[0].n_draft, 1);  // 4 + 1 accepted draft + 1 sampled = 6
  f.sched.on_step_done(a, std::vector<int32_t>{5, 6});
  EXPECT_EQ(f.sched.sequence(a).n_tokens(), 6);
  f.sched.finish(a);
  // A full pool: the draft is cut to the room the table already has, nobody is preempted.
  const SeqId b = f.submit({1, 2, 3, 4, 5, 6, 7}, 12), c = f.submit({9, 9, 9, 9, 9, 9, 9}, 12);
  f.prefill();
  ASSERT_EQ(f.pool.n_available(), 0);
  f.sched.set_draft(b, 8);
  plan = f.sched.schedule();
  EXPECT_TRUE(plan.preempted.empty());
  for (const ScheduledSeq& it : plan.items) {
    if (it.id == b) {
      EXPECT_EQ(it.n_draft, 0);  // 8 tokens fill its 2 blocks
    }
    f.sched.on_step_done(it.id, std::optional<int32_t>(1));
  }
  f.sched.finish(b);
  f.sched.finish(c);
  EXPECT_EQ(f.pool.n_used(), 0);
}

TEST(SchedulerDrafts, AbandonAndPreemptionWithADraftInFlight) {
  DraftFixture f(16, 64, 64);
  const SeqId a = f.submit({1, 2, 3, 4, 5}, 40);
  f.prefill();
  const int32_t n_computed = f.sched.sequence(a).n_computed;
  f.sched.set_draft(a, 4);
  StepPlan plan = f.sched.schedule();
  ASSERT_EQ(plan.items[0].n_draft, 4);
  f.sched.abandon_step();  // a failed pass: nothing advances
  EXPECT_EQ(f.sched.sequence(a).n_computed, n_computed);
  f.sched.cancel(a);
  plan = f.sched.schedule();
  EXPECT_EQ(plan.cancelled, std::vector<SeqId>{a});
  EXPECT_EQ(f.pool.n_used(), 0);
  f.pool.check_invariants();
}

TEST(SchedulerDrafts, ShrinkReturnsTrailingBlocksButNeverCommittedOnes) {
  BlockPool pool(BlockPoolConfig{.block_size = 4, .n_blocks = 8});
  SequenceBlocks b(pool, "t");
  const std::vector<int32_t> toks = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  ASSERT_TRUE(b.reserve(20));  // 5 blocks
  b.commit(toks, 8);           // [0, 8): 2 committed
  b.shrink(9);                 // 9 positions need 3
  EXPECT_EQ(b.n_blocks(), 3);
  EXPECT_EQ(pool.n_used(), 3);
  b.shrink(1);                 // the committed ones stay
  EXPECT_EQ(b.n_blocks(), 2);
  EXPECT_EQ(b.n_committed_blocks(), 2);
  pool.check_invariants();
  b.release();
  EXPECT_EQ(pool.n_used(), 0);
  EXPECT_EQ(pool.n_cached(), 2);
}

// ---- Settings ----

TEST(ServeConfigSpeculative, FlagEnvTomlAndBadValues) {
  const std::string path = ::testing::TempDir() + "serve_config_spec_test.toml";
  std::ofstream(path) << "speculative = \"ngram\"\nspec_draft_max = 12\n";
  std::map<std::string, std::string> env;
  auto getenv = [&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  auto def = cli::resolve_serve_config({}, {}, getenv);
  ASSERT_TRUE(def.ok());
  EXPECT_EQ(def->speculative, "off");
  EXPECT_EQ(def->spec_draft_max, 8);
  EXPECT_EQ(def->spec_ngram_min, 2);
  auto toml = cli::resolve_serve_config({{"config", path}}, {}, getenv);
  ASSERT_TRUE(toml.ok()) << toml.status().to_string();
  EXPECT_EQ(toml->speculative, "ngram");
  EXPECT_EQ(toml->spec_draft_max, 12);
  env["ZEROLAYER_SPEC_NGRAM_MIN"] = "3";
  auto flag = cli::resolve_serve_config({{"config", path}, {"speculative", "off"}}, {}, getenv);
  ASSERT_TRUE(flag.ok());
  EXPECT_EQ(flag->speculative, "off");
  EXPECT_EQ(flag->spec_ngram_min, 3);
  env.clear();
  // Booleans: TOML true / false, and the env var's true / false.
  for (const auto& [text, want] : std::vector<std::pair<std::string, std::string>>{
           {"speculative = true\n", "ngram"}, {"speculative = false\n", "off"}}) {
    std::ofstream(path) << text;
    auto b = cli::resolve_serve_config({{"config", path}}, {}, getenv);
    ASSERT_TRUE(b.ok()) << text << b.status().to_string();
    EXPECT_EQ(b->speculative, want) << text;
  }
  std::ofstream(path) << "ui = false\nrequest_log = false\n";  // other booleans still parse
  auto other = cli::resolve_serve_config({{"config", path}}, {}, getenv);
  ASSERT_TRUE(other.ok()) << other.status().to_string();
  EXPECT_FALSE(other->ui);
  EXPECT_FALSE(other->request_log);
  for (const auto& [value, want] : std::vector<std::pair<std::string, std::string>>{
           {"true", "ngram"}, {"false", "off"}, {"1", "ngram"}, {"0", "off"}, {"yes", "ngram"}, {"no", "off"}}) {
    env["ZEROLAYER_SPECULATIVE"] = value;
    auto e = cli::resolve_serve_config({}, {}, getenv);
    ASSERT_TRUE(e.ok()) << value;
    EXPECT_EQ(e->speculative, want) << value;
  }
  // Only the words the error lists (review 23 #2).
  for (const char* value : {"on", "2", "TRUE"}) {
    env["ZEROLAYER_SPECULATIVE"] = value;
    auto e = cli::resolve_serve_config({}, {}, getenv);
    ASSERT_FALSE(e.ok()) << value;
    EXPECT_NE(e.status().message().find("must be off, ngram, draft, true or false (or 1/0, yes/no)"), std::string::npos)
        << e.status().message();
  }
  env.clear();
  std::ofstream(path) << "speculative = 3\n";
  auto three = cli::resolve_serve_config({{"config", path}}, {}, getenv);
  ASSERT_FALSE(three.ok());
  EXPECT_NE(three.status().message().find("got '3'"), std::string::npos) << three.status().message();
  for (const auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"speculative", "eagle"}, {"spec-draft-max", "0"}, {"spec-draft-max", "33"}, {"spec-ngram-min", "17"}}) {
    auto bad = cli::resolve_serve_config({{name, value}}, {}, getenv);
    ASSERT_FALSE(bad.ok()) << name << " " << value;
    EXPECT_NE(bad.status().message().find("--" + name), std::string::npos) << bad.status().message();
  }
}

}  // namespace
}  // namespace zl
