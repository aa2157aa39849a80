// engine/scheduler, the latency policy: ordering (shortest remaining first), the fairness bound,
// grant sizing, decodes never starved, the batch planner and the step cost model; and, on a
// simulated engine with injected time (a step costs overhead + tokens), that no request's time
// to first token grows by more than its own prefill time because of later arrivals. No model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <vector>

#include "engine/engine.h"  // default_max_seqs
#include "engine/scheduler.h"
#include "support/token_ids.h"

namespace zl {
namespace {

std::vector<int32_t> tokens(int32_t n, int32_t first) { return test::consecutive_tokens(n, first); }

SchedulerConfig latency(int32_t budget = 512, int32_t max_running = 64, double overhead = 16) {
  return {.policy = SchedulePolicy::kLatency,
          .max_step_tokens = budget,
          .max_running = max_running,
          .step_overhead_tokens = overhead};
}

struct Fixture {
  BlockPool pool;
  Scheduler sched;
  int32_t next_token = 1000;

  explicit Fixture(SchedulerConfig sc, int32_t n_blocks = 4096)
      : pool(BlockPoolConfig{.block_size = 16, .n_blocks = n_blocks}), sched(sc, pool) {}

  SeqId submit(int32_t n_prompt, int32_t n_gen = 64, int32_t priority = 0) {
    auto id = sched.submit({.tenant = "t", .prompt = tokens(n_prompt, next_token),
                            .max_total_tokens = n_prompt + n_gen, .priority = priority});
    next_token += 10000;
    CHECK(id.ok()) << id.status().to_string();
    return *id;
  }

  // One step; every sampling item gets token 7; a sequence at its max_total_tokens is finished.
  StepPlan step() {
    StepPlan plan = sched.schedule();
    for (const ScheduledSeq& it : plan.items) {
      sched.on_step_done(it.id, it.samples ? std::optional<int32_t>(7) : std::nullopt);
    }
    for (const ScheduledSeq& it : plan.items) {
      const Sequence& s = sched.sequence(it.id);
      if (s.n_tokens() >= s.max_total_tokens) sched.finish(it.id);
    }
    return plan;
  }
};

std::map<SeqId, int32_t> grants(const StepPlan& plan) {
  std::map<SeqId, int32_t> out;
  for (const auto& it : plan.items) out[it.id] = it.n_tokens;
  return out;
}

TEST(SchedulePolicy, NamesRoundTrip) {
  EXPECT_EQ(parse_schedule_policy("latency"), SchedulePolicy::kLatency);
  EXPECT_EQ(parse_schedule_policy("throughput"), SchedulePolicy::kThroughput);
  EXPECT_FALSE(parse_schedule_policy("fast").has_value());
  EXPECT_STREQ(schedule_policy_name(SchedulePolicy::kLatency), "latency");
  EXPECT_STREQ(schedule_policy_name(SchedulePolicy::kThroughput), "throughput");
}

TEST(DefaultMaxSeqs, FromTheKvBudgetAtATypicalSize) {
  EXPECT_EQ(default_max_seqs(16 * 4096, 4096), 64);   // 1B at ctx 4096: 65536 / 512 = 128, capped
  EXPECT_EQ(default_max_seqs(16 * 512, 512), 16);     // stories260K at ctx 512
  EXPECT_EQ(default_max_seqs(8192, 4096), 16);        // --kv-size 8192
  EXPECT_EQ(default_max_seqs(1000, 4096), kMinAutoSeqs);
  EXPECT_EQ(default_max_seqs(int64_t{1} << 40, 512), kMaxAutoSeqs);
  EXPECT_EQ(default_max_seqs(2048, 64), 32);  // a context below the typical size: whole contexts
}

TEST(PlanFirstBatch, EmptyAndSingle) {
  EXPECT_EQ(plan_first_batch({}, 0, 16, 512), 0);
  const std::vector<int32_t> one = {40};
  EXPECT_EQ(plan_first_batch(one, 0, 16, 512), 1);
}

TEST(PlanFirstBatch, ExpensiveStepsTakeEverythingThatFits) {
  const std::vector<int32_t> costs(16, 30);
  EXPECT_EQ(plan_first_batch(costs, 0, 4096, 512), 16);  // overhead dwarfs the prompts
  EXPECT_EQ(plan_first_batch(costs, 0, 4096, 100), 3);   // ... but a batch holds the budget at most
}

TEST(PlanFirstBatch, CheapStepsSplitABurst) {
  const std::vector<int32_t> costs(16, 30);
  const int32_t n = plan_first_batch(costs, 0, 8, 512);
  EXPECT_GE(n, 2);
  EXPECT_LE(n, 8);
  // Decodes that the first ones add to every later step keep the split coarser.
  EXPECT_GE(plan_first_batch(costs, 64, 8, 512), n);
}

TEST(PlanFirstBatch, LoneLongCandidateIsOneBatch) {
  const std::vector<int32_t> costs = {2000, 50};
  EXPECT_EQ(plan_first_batch(costs, 0, 16, 512), 1);
}

TEST(StepCostModel, FitsOverheadInTokens) {
  StepCostModel m;
  EXPECT_EQ(m.overhead_tokens(16), 16);  // nothing observed
  for (int i = 0; i < 50; ++i) m.observe(8, 0.010 + 8 * 0.001);  // one size: no slope
  EXPECT_EQ(m.overhead_tokens(16), 16);
  for (int i = 0; i < 50; ++i) m.observe(1 + (i * 37) % 500, 0.010 + (1 + (i * 37) % 500) * 0.001);
  EXPECT_NEAR(m.overhead_tokens(16), 10.0, 0.01);  // a = 10 ms, b = 1 ms per token
  m.observe(0, 1.0);                               // ignored
  m.observe(5, std::nan(""));
  EXPECT_NEAR(m.overhead_tokens(16), 10.0, 0.01);
}

TEST(SchedulerLatency, ShortestPromptFirst) {
  Fixture f(latency(/*budget=*/512, 64, /*overhead=*/4096));  // expensive steps: one batch
  const SeqId a = f.submit(300), b = f.submit(40), c = f.submit(100);
  StepPlan p = f.sched.schedule();
  ASSERT_EQ(p.items.size(), 3u);
  EXPECT_EQ(p.items[0].id, b);
  EXPECT_EQ(p.items[1].id, c);
  EXPECT_EQ(p.items[2].id, a);
  EXPECT_EQ(p.items[2].n_tokens, 300);
}

TEST(SchedulerLatency, ThroughputPolicyKeepsArrivalOrder) {
  Fixture f(SchedulerConfig{.policy = SchedulePolicy::kThroughput, .max_step_tokens = 512});
  const SeqId a = f.submit(300), b = f.submit(40), c = f.submit(100);
  StepPlan p = f.sched.schedule();
  ASSERT_EQ(p.items.size(), 3u);
  EXPECT_EQ(p.items[0].id, a);
  EXPECT_EQ(p.items[1].id, b);
  EXPECT_EQ(p.items[2].id, c);
}

TEST(SchedulerLatency, BurstOfShortPromptsIsSplitShortestFirst) {
  Fixture f(latency(512, 64, /*overhead=*/8));
  std::vector<SeqId> ids;
  for (int i = 0; i < 16; ++i) ids.push_back(f.submit(30 + (i % 4)));
  StepPlan first = f.step();
  // Not the whole burst at once (as the throughput policy would: 16 x ~31 < 512) ...
  EXPECT_LT(first.items.size(), 16u);
  EXPECT_GE(first.items.size(), 2u);
  // ... the shortest ones, each whole, so each samples its first token now.
  int32_t longest_taken = 0;
  for (const auto& it : first.items) {
    EXPECT_TRUE(it.samples);
    longest_taken = std::max(longest_taken, f.sched.sequence(it.id).n_prompt);
  }
  for (const Sequence* s : f.sched.running()) {
    if (s->n_generated() == 0) {
      EXPECT_GE(s->n_prompt, longest_taken) << "a longer prompt before a shorter one";
    }
  }
  for (const Sequence* s : f.sched.waiting()) EXPECT_GE(s->n_prompt, longest_taken) << "a longer prompt before a shorter one";
  // Every prompt is done within a few steps; the first ones decode meanwhile.
  int n_steps = 1;
  while (std::any_of(ids.begin(), ids.end(), [&](SeqId id) { return f.sched.sequence(id).n_generated() == 0; })) {
    StepPlan p = f.step();
    for (SeqId id : ids) {
      const Sequence& s = f.sched.sequence(id);
      if (s.n_generated() > 0 && s.n_uncomputed() == 1) {
        EXPECT_TRUE(grants(p).contains(id)) << "a decode was skipped";
      }
    }
    ++n_steps;
    ASSERT_LT(n_steps, 17);
  }
}

TEST(SchedulerLatency, SmallerGrantsWhenManyWait) {
  Fixture f(latency(512, 64, /*overhead=*/4096));
  const SeqId longer = f.submit(3000, 16);
  StepPlan alone = f.sched.schedule();
  EXPECT_EQ(grants(alone).at(longer), 512);  // alone: the whole budget

  Fixture g(latency(512, 64, /*overhead=*/4096));
  const SeqId head = g.submit(100, 16);
  for (int i = 0; i < 7; ++i) g.submit(3000, 16);
  StepPlan shared = g.sched.schedule();
  // The first (shortest) whole; the others, which cannot all fit, at most the water-filling
  // share max(kMinPrefillGrant, 512 / 8) = 64 each instead of the rest of the budget.
  EXPECT_EQ(grants(shared).at(head), 100);
  EXPECT_GE(shared.items.size(), 4u);
  for (const auto& it : shared.items) {
    if (it.id != head) {
      EXPECT_LE(it.n_tokens, std::max(kMinPrefillGrant, 512 / 8));
    }
  }
  // All fit: everyone whole.
  Fixture h(latency(512, 64, /*overhead=*/4096));
  for (int n : {100, 150, 200}) h.submit(n, 16);
  for (const auto& it : h.sched.schedule().items) EXPECT_TRUE(it.samples);
}

TEST(SchedulerLatency, DecodesAreNeverStarved) {
  Fixture f(latency(/*budget=*/64, /*max_running=*/16, 16));
  std::vector<SeqId> early;
  for (int i = 0; i < 4; ++i) early.push_back(f.submit(8, 200));
  for (int i = 0; i < 8; ++i) f.step();
  for (SeqId id : early) ASSERT_GT(f.sched.sequence(id).n_generated(), 0);
  // A flood of long prompts: every step still decodes each early sequence.
  for (int i = 0; i < 10; ++i) f.submit(1000, 4);
  for (int i = 0; i < 50; ++i) {
    StepPlan p = f.step();
    for (SeqId id : early) {
      ASSERT_TRUE(grants(p).contains(id)) << "step " << i;
      EXPECT_EQ(grants(p).at(id), 1);
    }
  }
}

TEST(SchedulerLatency, LongPromptIsNotStarvedByAStreamOfShortOnes) {
  Fixture f(latency(/*budget=*/128, /*max_running=*/64, 4));
  const SeqId big = f.submit(600, 4);
  int32_t n_short_prefill = 0;  // prefill tokens granted to later arrivals before big's first token
  for (int step = 0; f.sched.sequence(big).n_generated() == 0; ++step) {
    ASSERT_LT(step, 200) << "the long prompt starves";
    f.submit(20, 2);  // a new short request every step
    f.submit(20, 2);
    StepPlan p = f.step();
    for (const auto& it : p.items) {
      if (it.id != big) n_short_prefill += it.n_tokens;
    }
  }
  // Later arrivals got at most half the long prompt's size ahead of it, plus what they
  // decode while it is prefilled.
  EXPECT_LE(n_short_prefill, 600);
}

TEST(SchedulerLatency, OldLongPromptGoesFirstOnceItsAgeOutweighsItsSize) {
  Fixture f(latency(/*budget=*/64, 64, /*overhead=*/4));
  const SeqId old_long = f.submit(200, 4);
  const SeqId early_short = f.submit(16, 2);
  StepPlan first = f.step();
  ASSERT_FALSE(first.items.empty());
  EXPECT_EQ(first.items[0].id, early_short);  // arrived together: the shorter first
  // Later short arrivals pass it while the work since its arrival is below half its lead
  // (0.5 x (200 - 16) = 92 tokens); then it comes first.
  bool went_first = false;
  for (int i = 0; i < 20 && !went_first; ++i) {
    f.submit(16, 2);
    StepPlan p = f.step();
    const auto first_prefill = std::find_if(p.items.begin(), p.items.end(), [](const ScheduledSeq& it) {
      return it.n_tokens > 1 || it.pos == 0;
    });
    ASSERT_NE(first_prefill, p.items.end());
    went_first = first_prefill->id == old_long;
    if (!went_first) {
      EXPECT_LT(f.sched.stats().n_steps, 12) << "the long prompt waits too long";
    }
  }
  EXPECT_TRUE(went_first);
}

TEST(SchedulerLatency, PriorityBeforeShortestFirst) {
  Fixture g(latency(/*budget=*/64, 64, 4096));
  const SeqId low = g.submit(16, 4, /*priority=*/0);
  const SeqId high = g.submit(200, 4, /*priority=*/1);
  StepPlan q = g.sched.schedule();
  ASSERT_FALSE(q.items.empty());
  EXPECT_EQ(q.items[0].id, high);
  EXPECT_EQ(q.items[0].n_tokens, 64);  // the first candidate may take the whole budget
  EXPECT_FALSE(grants(q).contains(low));
}

TEST(SchedulerLatency, PreemptionAndAdmissionLimitsStillHold) {
  // A pool of 12 blocks (192 tokens): sequences that grow must preempt the youngest.
  Fixture f(latency(/*budget=*/64, /*max_running=*/3, 4), /*n_blocks=*/12);
  std::vector<SeqId> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(f.submit(40, 60));
  int64_t n_preempted = 0;
  for (int step = 0; step < 400 && f.sched.has_work(); ++step) {
    StepPlan p = f.step();
    EXPECT_LE(f.sched.stats().n_running, 3);
    EXPECT_LE(p.n_tokens, 64);
    n_preempted += static_cast<int64_t>(p.preempted.size());
    f.pool.check_invariants();
  }
  EXPECT_FALSE(f.sched.has_work()) << "every sequence finishes";
  EXPECT_GT(n_preempted, 0);
}

// ---- a simulated engine with injected time ----

struct Arrival {
  double t = 0;         // seconds
  int32_t n_prompt = 0;
  int32_t n_gen = 0;
};

struct SimCost {
  double overhead_s = 0.010;   // a step's fixed cost
  double per_token_s = 0.001;  // each computed token
  int32_t budget = 512;
  double step_s(int32_t n_tokens) const { return overhead_s + per_token_s * n_tokens; }
  // A prompt's prefill alone: its chunks of the budget, each a step.
  double prefill_alone_s(int32_t n_prompt) const {
    return overhead_s * std::ceil(static_cast<double>(n_prompt) / budget) + per_token_s * n_prompt;
  }
};

struct SimResult {
  std::vector<double> ttft;      // arrival -> first token
  std::vector<double> t_queued;  // when it reached the scheduler (the step boundary after its arrival)
};

// Runs `arrivals` (sorted by time) to completion: arrivals reach the scheduler between steps,
// each step takes cost.step_s(its tokens) of simulated time.
SimResult simulate(const std::vector<Arrival>& arrivals, SchedulePolicy policy, const SimCost& cost) {
  BlockPool pool(BlockPoolConfig{.block_size = 16, .n_blocks = 1 << 14});
  Scheduler sched({.policy = policy, .max_step_tokens = cost.budget, .max_running = 64,
                   .step_overhead_tokens = cost.overhead_s / cost.per_token_s},
                  pool);
  SimResult r{.ttft = std::vector<double>(arrivals.size(), -1), .t_queued = std::vector<double>(arrivals.size(), -1)};
  std::map<SeqId, size_t> index;
  double now = 0;
  size_t next = 0;
  int32_t first = 1;
  while (next < arrivals.size() || sched.has_work()) {
    if (!sched.has_work() && arrivals[next].t > now) now = arrivals[next].t;
    for (; next < arrivals.size() && arrivals[next].t <= now; ++next) {
      const Arrival& a = arrivals[next];
      auto id = sched.submit({.tenant = "t", .prompt = tokens(a.n_prompt, first),
                              .max_total_tokens = a.n_prompt + a.n_gen});
      first += a.n_prompt + 7;
      CHECK(id.ok());
      index[*id] = next;
      r.t_queued[next] = now;
    }
    StepPlan plan = sched.schedule();
    CHECK(!plan.empty()) << "work left but an empty step";
    now += cost.step_s(plan.n_tokens);
    for (const ScheduledSeq& it : plan.items) sched.on_step_done(it.id, it.samples ? std::optional<int32_t>(3) : std::nullopt);
    for (const ScheduledSeq& it : plan.items) {
      if (!it.samples) continue;
      const Sequence& s = sched.sequence(it.id);
      const size_t i = index.at(it.id);
      if (r.ttft[i] < 0) r.ttft[i] = now - arrivals[i].t;
      if (s.n_tokens() >= s.max_total_tokens) sched.finish(it.id);
    }
  }
  return r;
}

std::vector<Arrival> mixed_trace(uint32_t seed, int n, double spread_s) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> len(50, 2000), gen(4, 32);
  std::uniform_real_distribution<double> at(0, spread_s);
  std::vector<Arrival> a;
  for (int i = 0; i < n; ++i) a.push_back({.t = at(rng), .n_prompt = len(rng), .n_gen = gen(rng)});
  std::sort(a.begin(), a.end(), [](const Arrival& x, const Arrival& y) { return x.t < y.t; });
  return a;
}

// For each request: its TTFT with every arrival against its TTFT without the later arrivals
// (those that reached the scheduler after it: requests that arrive during the same step reach it
// together and cannot be told apart). Later arrivals may delay it by at most its own prefill time.
// `slack`: the bound in units of its own prefill time (1: the strict bound).
void expect_no_starvation(const std::vector<Arrival>& trace, const SimCost& cost, double slack = 1.0,
                          size_t strict_first = 0) {
  const SimResult full = simulate(trace, SchedulePolicy::kLatency, cost);
  for (size_t i = 0; i < trace.size(); ++i) {
    std::vector<Arrival> earlier;
    for (const Arrival& a : trace) {
      if (a.t <= full.t_queued[i]) earlier.push_back(a);
    }
    const SimResult base = simulate(earlier, SchedulePolicy::kLatency, cost);
    const double growth = full.ttft[i] - base.ttft[i];
    EXPECT_LE(growth, (i < strict_first ? 1.0 : slack) * cost.prefill_alone_s(trace[i].n_prompt) + 1e-9)
        << "request " << i << " (" << trace[i].n_prompt << " tokens at " << trace[i].t << " s): TTFT " << full.ttft[i]
        << " s with later arrivals, " << base.ttft[i] << " s without";
  }
}

TEST(SchedulerLatencySim, MixedPromptsNoStarvationFromLaterArrivals) {
  const SimCost cost;
  for (uint32_t seed : {1u, 2u, 3u}) expect_no_starvation(mixed_trace(seed, 24, 3.0), cost);
}

TEST(SchedulerLatencySim, BurstThenStreamOfShortOnes) {
  // A long prompt, then a short one every 20 ms for 2 s: shortest-first alone would starve it.
  // The long one keeps the strict bound. A short one queued behind it once it is overdue may
  // also wait for the decodes of later short ones admitted before (decodes are never held
  // back): up to 3x its own (60 ms) prefill time in this trace.
  const SimCost cost;
  std::vector<Arrival> trace = {{.t = 0, .n_prompt = 2000, .n_gen = 8}};
  for (int i = 1; i <= 100; ++i) trace.push_back({.t = 0.02 * i, .n_prompt = 50, .n_gen = 16});
  expect_no_starvation(trace, cost, /*slack=*/3.0, /*strict_first=*/1);
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5))];
}

TEST(SchedulerLatencySim, BurstFirstTokensEarlierThanThroughputPolicy) {
  // The policy's point, in the model: a burst of 16 short prompts at once.
  const SimCost cost{.overhead_s = 0.025, .per_token_s = 0.0027, .budget = 512};
  std::vector<Arrival> burst(16, Arrival{.t = 0, .n_prompt = 30, .n_gen = 64});
  const std::vector<double> lat = simulate(burst, SchedulePolicy::kLatency, cost).ttft;
  const std::vector<double> thr = simulate(burst, SchedulePolicy::kThroughput, cost).ttft;
  EXPECT_LE(percentile(lat, 0.5), 0.8 * percentile(thr, 0.5));
  // The last first token comes a little later (the split's overhead), not much.
  EXPECT_LE(percentile(lat, 1.0), 1.25 * percentile(thr, 1.0));
}

}  // namespace
}  // namespace zl
