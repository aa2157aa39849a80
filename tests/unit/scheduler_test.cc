// engine/scheduler: grants, budget, decode-first, chunked prefill, admission, priority,
// preemption and recompute, cancellation; a property test over random schedules. No model.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "engine/scheduler.h"
#include "support/token_ids.h"

namespace zl {
namespace {

std::vector<int32_t> tokens(int32_t n, int32_t first) { return test::consecutive_tokens(n, first); }

// A fresh, distinct prompt for each call (no accidental prefix hits).
struct Fixture {
  BlockPool pool;
  Scheduler sched;
  int32_t next_token = 1000;

  Fixture(BlockPoolConfig pc, SchedulerConfig sc) : pool(pc), sched(sc, pool) {}

  // max_total -1: the whole pool.
  SeqId submit(int32_t n_prompt, int32_t max_total = -1, int32_t priority = 0) {
    if (max_total < 0) max_total = pool.n_blocks() * pool.block_size();
    auto id = sched.submit({.tenant = "t",
                            .prompt = tokens(n_prompt, next_token),
                            .max_total_tokens = max_total,
                            .priority = priority});
    next_token += 1000;
    CHECK(id.ok()) << id.status().to_string();
    return *id;
  }

  // Runs one step with a fake forward pass: every sampling item gets token 7.
  StepPlan step(std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now()) {
    StepPlan plan = sched.schedule(now);
    for (const ScheduledSeq& it : plan.items) {
      sched.on_step_done(it.id, it.samples ? std::optional<int32_t>(7) : std::nullopt);
    }
    return plan;
  }
};

// (id, pos, n_tokens, samples) of each item, for compact comparisons.
using Item = std::tuple<SeqId, int32_t, int32_t, bool>;
std::vector<Item> items(const StepPlan& plan) {
  std::vector<Item> out;
  for (const auto& it : plan.items) out.emplace_back(it.id, it.pos, it.n_tokens, it.samples);
  return out;
}

TEST(Scheduler, PrefillsThenDecodesOneTokenPerStep) {
  Fixture f({.block_size = 4, .n_blocks = 16}, {.max_step_tokens = 512});
  const SeqId a = f.submit(10);
  StepPlan p1 = f.step();
  EXPECT_EQ(items(p1), (std::vector<Item>{{a, 0, 10, true}}));
  EXPECT_EQ(p1.admitted, std::vector<SeqId>{a});
  EXPECT_EQ(p1.n_tokens, 10);
  const Sequence& s = f.sched.sequence(a);
  EXPECT_EQ(s.n_tokens(), 11);
  EXPECT_EQ(s.n_computed, 10);
  EXPECT_EQ(s.n_generated(), 1);
  EXPECT_EQ(s.blocks.table(), (std::vector<BlockId>{0, 1, 2}));
  EXPECT_EQ(items(f.step()), (std::vector<Item>{{a, 10, 1, true}}));
  EXPECT_EQ(items(f.step()), (std::vector<Item>{{a, 11, 1, true}}));
  EXPECT_EQ(items(f.step()), (std::vector<Item>{{a, 12, 1, true}}));  // position 12: block 3
  EXPECT_EQ(s.blocks.table(), (std::vector<BlockId>{0, 1, 2, 3}));
  f.sched.finish(a);
  EXPECT_FALSE(f.sched.has_work());
  EXPECT_EQ(f.pool.n_used(), 0);
}

TEST(Scheduler, ChunkedPrefillIsASmallerGrant) {
  Fixture f({.block_size = 4, .n_blocks = 16}, {.max_step_tokens = 4});
  const SeqId a = f.submit(10);
  EXPECT_EQ(items(f.step()), (std::vector<Item>{{a, 0, 4, false}}));
  EXPECT_EQ(f.sched.sequence(a).blocks.n_blocks(), 1);  // blocks only for what is granted
  EXPECT_EQ(items(f.step()), (std::vector<Item>{{a, 4, 4, false}}));
  EXPECT_EQ(items(f.step()), (std::vector<Item>{{a, 8, 2, true}}));
  EXPECT_EQ(items(f.step()), (std::vector<Item>{{a, 10, 1, true}}));

  Fixture g({.block_size = 4, .n_blocks = 16}, {.max_step_tokens = 100, .max_prefill_chunk = 3});
  const SeqId b = g.submit(7);
  EXPECT_EQ(items(g.step()), (std::vector<Item>{{b, 0, 3, false}}));
  EXPECT_EQ(items(g.step()), (std::vector<Item>{{b, 3, 3, false}}));
  EXPECT_EQ(items(g.step()), (std::vector<Item>{{b, 6, 1, true}}));
}

// SequenceSpec::max_chunk caps that sequence's grants under both policies (others keep the
// budget); reuse_prefix false computes a cached prompt whole.
TEST(Scheduler, ASequencesMaxChunkAndNoPrefixReuse) {
  for (const SchedulePolicy policy : {SchedulePolicy::kThroughput, SchedulePolicy::kLatency}) {
    SCOPED_TRACE(static_cast<int>(policy));
    Fixture f({.block_size = 4, .n_blocks = 32}, {.policy = policy, .max_step_tokens = 100});
    auto id = f.sched.submit({.tenant = "t", .prompt = tokens(10, 1), .max_total_tokens = 40, .max_chunk = 4});
    ASSERT_TRUE(id.ok());
    EXPECT_EQ(items(f.step()), (std::vector<Item>{{*id, 0, 4, false}}));
    EXPECT_EQ(items(f.step()), (std::vector<Item>{{*id, 4, 4, false}}));
    EXPECT_EQ(items(f.step()), (std::vector<Item>{{*id, 8, 2, true}}));
    f.sched.finish(*id);
    // The same prompt again: from the prefix cache (8 of 10 positions), or whole.
    for (const bool reuse : {true, false}) {
      auto again = f.sched.submit({.tenant = "t", .prompt = tokens(10, 1), .max_total_tokens = 40, .reuse_prefix = reuse});
      ASSERT_TRUE(again.ok());
      EXPECT_EQ(items(f.step()), (std::vector<Item>{{*again, reuse ? 8 : 0, reuse ? 2 : 10, true}})) << reuse;
      EXPECT_EQ(f.sched.sequence(*again).n_cached_prompt, reuse ? 8 : 0);
      f.sched.finish(*again);
    }
  }
}

TEST(Scheduler, DecodesGoFirstAndAreNeverStarvedByALongPrefill) {
  Fixture f({.block_size = 4, .n_blocks = 64}, {.max_step_tokens = 5, .max_prefill_chunk = 4});
  const SeqId old_long = f.submit(40);
  const SeqId young_short = f.submit(1);
  EXPECT_EQ(items(f.step()), (std::vector<Item>{{old_long, 0, 4, false}, {young_short, 0, 1, true}}));
  // The younger sequence decodes ahead of the older one's prefill, every step.
  for (int32_t i = 0; i < 9; ++i) {
    StepPlan p = f.step();
    ASSERT_EQ(p.items.size(), 2u);
    EXPECT_EQ(items(p)[0], (Item{young_short, 1 + i, 1, true}));
    EXPECT_EQ(items(p)[1], (Item{old_long, 4 + 4 * i, 4, i == 8}));
  }
  // Decodes fill the budget before a prefill gets anything.
  Fixture g({.block_size = 4, .n_blocks = 64}, {.max_step_tokens = 2});
  const SeqId d1 = g.submit(1), d2 = g.submit(1);
  g.step();
  const SeqId p = g.submit(30);
  EXPECT_EQ(items(g.step()), (std::vector<Item>{{d1, 1, 1, true}, {d2, 1, 1, true}}));
  g.sched.finish(d2);
  EXPECT_EQ(items(g.step()), (std::vector<Item>{{d1, 2, 1, true}, {p, 0, 1, false}}));
}

TEST(Scheduler, StepsRespectTheTokenBudgetAndMaxRunning) {
  Fixture f({.block_size = 4, .n_blocks = 64}, {.max_step_tokens = 10, .max_running = 2});
  const SeqId a = f.submit(6), b = f.submit(6), c = f.submit(6);
  StepPlan p1 = f.step();
  EXPECT_EQ(items(p1), (std::vector<Item>{{a, 0, 6, true}, {b, 0, 4, false}}));
  EXPECT_EQ(p1.n_tokens, 10);
  StepPlan p2 = f.step();  // a decodes, b finishes its prompt; c waits for a running slot
  EXPECT_EQ(items(p2), (std::vector<Item>{{a, 6, 1, true}, {b, 4, 2, true}}));
  EXPECT_EQ(f.sched.stats().n_waiting, 1);
  f.sched.finish(a);
  EXPECT_EQ(items(f.step()), (std::vector<Item>{{b, 6, 1, true}, {c, 0, 6, true}}));
}

TEST(Scheduler, PriorityFirstThenArrivalOrder) {
  Fixture f({.block_size = 4, .n_blocks = 64}, {.max_step_tokens = 512, .max_running = 1});
  const SeqId low = f.submit(2, 100, /*priority=*/0);
  const SeqId high1 = f.submit(2, 100, /*priority=*/5);
  const SeqId mid = f.submit(2, 100, /*priority=*/1);
  const SeqId high2 = f.submit(2, 100, /*priority=*/5);
  std::vector<SeqId> order;
  for (auto* s : f.sched.waiting()) order.push_back(s->id);
  EXPECT_EQ(order, (std::vector<SeqId>{high1, high2, mid, low}));
  std::vector<SeqId> admitted;
  while (f.sched.has_work()) {
    StepPlan p = f.step();
    ASSERT_EQ(p.items.size(), 1u);
    admitted.insert(admitted.end(), p.admitted.begin(), p.admitted.end());
    f.sched.finish(p.items[0].id);
  }
  EXPECT_EQ(admitted, (std::vector<SeqId>{high1, high2, mid, low}));
}

TEST(Scheduler, AdmissionWaitsForBlocksWithoutLettingLaterRequestsPass) {
  Fixture f({.block_size = 4, .n_blocks = 4}, {.max_step_tokens = 512});
  const SeqId a = f.submit(12, 16);  // 3 blocks
  EXPECT_EQ(items(f.step()), (std::vector<Item>{{a, 0, 12, true}}));
  const SeqId b = f.submit(8, 12);   // needs 2 blocks, 1 is left
  const SeqId c = f.submit(2, 4);    // would fit, but comes after b
  StepPlan p = f.step();
  EXPECT_EQ(items(p), (std::vector<Item>{{a, 12, 1, true}}));
  EXPECT_TRUE(p.admitted.empty());
  EXPECT_EQ(f.sched.stats().n_waiting, 2);
  f.sched.finish(a);
  EXPECT_EQ(items(f.step()), (std::vector<Item>{{b, 0, 8, true}, {c, 0, 2, true}}));
}

TEST(Scheduler, SubmitRejectsWhatCouldNeverRun) {
  Fixture f({.block_size = 4, .n_blocks = 4}, {});
  auto empty = f.sched.submit({.tenant = "t", .prompt = {}, .max_total_tokens = 8});
  EXPECT_EQ(empty.status().kind(), ErrorKind::kInvalidArgument);
  auto short_max = f.sched.submit({.tenant = "t", .prompt = tokens(5, 0), .max_total_tokens = 4});
  EXPECT_EQ(short_max.status().kind(), ErrorKind::kInvalidArgument);
  auto too_big = f.sched.submit({.tenant = "t", .prompt = tokens(5, 0), .max_total_tokens = 17});
  EXPECT_EQ(too_big.status().kind(), ErrorKind::kResourceExhausted);
  EXPECT_EQ(too_big.status().reason(), ErrorReason::kKvCacheOverflow);
  ASSERT_NE(too_big.status().detail(), nullptr);
  EXPECT_EQ(too_big.status().detail()->numbers.n_prompt_tokens, 5);
  EXPECT_EQ(too_big.status().detail()->numbers.max_tokens_fit, 16 - 5);  // 4 blocks of 4 tokens
  EXPECT_EQ(too_big.status().detail()->numbers.max_tokens, 17 - 5);
  // A prompt that alone needs more than the pool: nothing fits.
  auto huge_prompt = f.sched.submit({.tenant = "t", .prompt = tokens(17, 0), .max_total_tokens = 18});
  EXPECT_EQ(huge_prompt.status().reason(), ErrorReason::kKvCacheOverflow);
  ASSERT_NE(huge_prompt.status().detail(), nullptr);
  EXPECT_EQ(huge_prompt.status().detail()->numbers.n_prompt_tokens, 17);
  EXPECT_EQ(huge_prompt.status().detail()->numbers.max_tokens_fit, 0);
  EXPECT_EQ(huge_prompt.status().detail()->numbers.max_tokens, 1);
  EXPECT_TRUE(f.sched.submit({.tenant = "t", .prompt = tokens(5, 0), .max_total_tokens = 16}).ok());
}

TEST(Scheduler, PreemptsTheYoungestAndRecomputesItsGeneratedTokensLater) {
  Fixture f({.block_size = 2, .n_blocks = 4}, {.max_step_tokens = 512});
  const SeqId a = f.submit(2, 8), b = f.submit(2, 8), c = f.submit(2, 8);
  EXPECT_EQ(items(f.step()), (std::vector<Item>{{a, 0, 2, true}, {b, 0, 2, true}, {c, 0, 2, true}}));
  EXPECT_EQ(f.pool.n_used(), 3);
  // Each needs a second block for position 2; one block is free: a takes it, b preempts c.
  StepPlan p = f.step();
  EXPECT_EQ(items(p), (std::vector<Item>{{a, 2, 1, true}, {b, 2, 1, true}}));
  EXPECT_EQ(p.preempted, std::vector<SeqId>{c});
  EXPECT_TRUE(p.admitted.empty());  // no admission in a step that preempted
  const Sequence& sc = f.sched.sequence(c);
  EXPECT_EQ(sc.state, SeqState::kWaiting);
  EXPECT_EQ(sc.n_computed, 0);
  EXPECT_EQ(sc.n_tokens(), 3);  // its generated token is kept
  EXPECT_EQ(sc.n_preemptions, 1);
  EXPECT_TRUE(sc.blocks.table().empty());
  EXPECT_EQ(f.sched.stats().n_preemptions, 1);
  f.sched.finish(a);
  // c comes back and recomputes prompt + generated token, then samples its second token.
  p = f.step();
  EXPECT_EQ(items(p), (std::vector<Item>{{b, 3, 1, true}, {c, 0, 3, true}}));
  EXPECT_EQ(p.admitted, std::vector<SeqId>{c});
  EXPECT_EQ(sc.n_tokens(), 4);
  EXPECT_EQ(sc.n_generated(), 2);
}

TEST(Scheduler, APreemptedSequenceHitsItsOwnCachedBlocksOnReturn) {
  Fixture f({.block_size = 2, .n_blocks = 8}, {.max_step_tokens = 512});
  const SeqId a = f.submit(3, 16), b = f.submit(5, 16);  // blocks {0, 1} and {2, 3, 4}
  f.step();
  const SeqId c = f.submit(6, 16);
  f.step();  // a, b decode within their blocks; c prefills into {5, 6, 7}
  EXPECT_EQ(f.sched.sequence(c).blocks.table(), (std::vector<BlockId>{5, 6, 7}));
  EXPECT_EQ(f.pool.n_free(), 0);
  // a's position 4 needs a block: the youngest, c, is preempted. Its 3 full blocks were
  // committed, so they go to the cache (deepest first) and a, then b, evict one each.
  StepPlan p = f.step();
  EXPECT_EQ(p.preempted, std::vector<SeqId>{c});
  EXPECT_EQ(items(p), (std::vector<Item>{{a, 4, 1, true}, {b, 6, 1, true}}));
  EXPECT_EQ(f.sched.sequence(a).blocks.table().back(), 7);
  EXPECT_EQ(f.sched.sequence(b).blocks.table().back(), 6);
  EXPECT_EQ(f.pool.lru_order(), std::vector<BlockId>{5});
  f.sched.finish(a);
  f.sched.finish(b);
  p = f.step();
  ASSERT_EQ(p.admitted, std::vector<SeqId>{c});
  // Its first block is still cached: 2 of its 7 tokens are reused.
  EXPECT_EQ(items(p), (std::vector<Item>{{c, 2, 5, true}}));
  EXPECT_EQ(f.sched.sequence(c).blocks.table()[0], 5);
}

TEST(Scheduler, PreemptingAnAlreadyScheduledDecodeTakesItsGrantBack) {
  Fixture f({.block_size = 2, .n_blocks = 4}, {.max_step_tokens = 3, .max_prefill_chunk = 2});
  const SeqId old_long = f.submit(7, 8);
  const SeqId young = f.submit(1, 8);
  EXPECT_EQ(items(f.step()), (std::vector<Item>{{old_long, 0, 2, false}, {young, 0, 1, true}}));
  EXPECT_EQ(items(f.step()), (std::vector<Item>{{young, 1, 1, true}, {old_long, 2, 2, false}}));
  // Pool: old_long 2 blocks, young 1 block, 1 free. young decodes (position 2) first and takes
  // the last block; then old_long needs a block for positions 4-5: young, already granted, is
  // preempted and its grant returned to the budget.
  StepPlan p = f.step();
  EXPECT_EQ(items(p), (std::vector<Item>{{old_long, 4, 2, false}}));
  EXPECT_EQ(p.preempted, std::vector<SeqId>{young});
  EXPECT_EQ(p.n_tokens, 2);
}

TEST(Scheduler, TheVictimIsTheLowestPriorityEvenIfItIsTheOldest) {
  Fixture f({.block_size = 2, .n_blocks = 4}, {.max_step_tokens = 512});
  const SeqId low = f.submit(2, 8, /*priority=*/0);
  f.step();  // low: 1 block, 3 tokens
  const SeqId high = f.submit(2, 8, /*priority=*/3);
  f.step();  // low takes a 2nd block for position 2; high admitted into a 3rd
  f.step();  // low decodes within its block; high takes the last block for position 2
  EXPECT_EQ(f.pool.n_free(), 0);
  // low (admitted first) needs a block for position 4: it is the lowest priority, so it is
  // preempted itself rather than the younger high-priority sequence.
  StepPlan p = f.step();
  EXPECT_EQ(p.preempted, std::vector<SeqId>{low});
  EXPECT_EQ(items(p), (std::vector<Item>{{high, 3, 1, true}}));
}

TEST(Scheduler, CancelledSequencesLeaveAtTheNextStepWithTheirBlocks) {
  Fixture f({.block_size = 4, .n_blocks = 8}, {.max_step_tokens = 512, .max_running = 1});
  const SeqId a = f.submit(10), b = f.submit(3);
  f.step();
  EXPECT_EQ(f.pool.n_used(), 3);
  f.sched.cancel(a);
  f.sched.cancel(b);                 // waiting
  f.sched.cancel(a);                 // twice: reported once
  f.sched.cancel(12345);             // unknown: ignored
  EXPECT_EQ(f.pool.n_used(), 3);     // nothing happens before the next step
  StepPlan p = f.step();
  EXPECT_EQ(p.cancelled, (std::vector<SeqId>{a, b}));
  EXPECT_TRUE(p.items.empty());
  EXPECT_EQ(f.pool.n_used(), 0);
  EXPECT_EQ(f.sched.find(a), nullptr);
  EXPECT_FALSE(f.sched.has_work());

  // Cancelled between schedule() and on_step_done(): the step is still reported.
  const SeqId c = f.submit(4);
  StepPlan p2 = f.sched.schedule();
  f.sched.cancel(c);
  f.sched.on_step_done(c, 7);
  EXPECT_EQ(f.step().cancelled, std::vector<SeqId>{c});
  EXPECT_EQ(f.pool.n_used(), 0);
  (void)p2;
}

TEST(Scheduler, PausedSequencesKeepTheirBlocksButGetNoGrants) {
  Fixture f({.block_size = 4, .n_blocks = 8}, {.max_step_tokens = 512});
  const SeqId a = f.submit(3), b = f.submit(3);
  f.step();
  f.sched.set_paused(a, true);
  EXPECT_EQ(items(f.step()), (std::vector<Item>{{b, 3, 1, true}}));
  EXPECT_EQ(f.sched.sequence(a).blocks.n_blocks(), 1);
  const SeqId c = f.submit(2);
  f.sched.set_paused(c, true);  // a paused waiting sequence does not block admission
  const SeqId d = f.submit(2);
  StepPlan p = f.step();
  EXPECT_EQ(p.admitted, std::vector<SeqId>{d});
  f.sched.set_paused(a, false);
  f.sched.set_paused(c, false);
  EXPECT_EQ(items(f.step()),
            (std::vector<Item>{{a, 3, 1, true}, {b, 5, 1, true}, {d, 2, 1, true}, {c, 0, 2, true}}));
}

TEST(Scheduler, APausedSequenceIsPreemptedAfterMaxPauseAndResumesFromItsCachedBlocks) {
  using namespace std::chrono_literals;
  Fixture f({.block_size = 4, .n_blocks = 8}, {.max_step_tokens = 512, .max_running = 1, .max_pause = 100ms});
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  const SeqId a = f.submit(9, 32);
  f.step(t0);                                    // prefill: 9 computed, 10 tokens
  for (int i = 0; i < 3; ++i) f.step(t0);        // decodes: 12 computed, 13 tokens
  const Sequence& sa = f.sched.sequence(a);
  ASSERT_EQ(sa.n_computed, 12);
  ASSERT_EQ(sa.n_tokens(), 13);
  const std::vector<int32_t> tokens_before = sa.tokens;
  const std::vector<BlockId> table_before = sa.blocks.table();  // 3 full blocks, committed
  ASSERT_EQ(table_before.size(), 3u);
  const SeqId b = f.submit(3, 8);                // no slot: waits
  f.sched.set_paused(a, true, t0);
  StepPlan p = f.step(t0 + 99ms);
  EXPECT_TRUE(p.empty());
  EXPECT_TRUE(p.pause_preempted.empty());
  f.sched.set_paused(a, true, t0 + 99ms);        // still paused: the clock is not restarted
  p = f.step(t0 + 100ms);
  // a leaves the batch; its slot goes to b in the same step.
  EXPECT_EQ(p.pause_preempted, std::vector<SeqId>{a});
  EXPECT_TRUE(p.preempted.empty());
  EXPECT_EQ(items(p), (std::vector<Item>{{b, 0, 3, true}}));
  EXPECT_EQ(sa.state, SeqState::kWaiting);
  EXPECT_EQ(sa.n_computed, 0);
  EXPECT_EQ(sa.blocks.n_blocks(), 0);
  EXPECT_EQ(sa.tokens, tokens_before);           // nothing generated is lost
  EXPECT_EQ(sa.n_pause_preemptions, 1);
  EXPECT_EQ(f.pool.n_cached(), 3);               // its full blocks stay findable
  EXPECT_EQ(f.sched.stats().n_pause_preemptions, 1);
  EXPECT_EQ(f.sched.stats().n_preemptions, 0);
  f.sched.finish(b);
  // A free slot, but its client is still behind: not readmitted.
  p = f.step(t0 + 200ms);
  EXPECT_TRUE(p.admitted.empty());
  EXPECT_TRUE(p.empty());
  // The client caught up: back with its 12 cached tokens; only the 13th is recomputed.
  f.sched.set_paused(a, false, t0 + 300ms);
  p = f.step(t0 + 300ms);
  EXPECT_EQ(p.admitted, std::vector<SeqId>{a});
  EXPECT_EQ(items(p), (std::vector<Item>{{a, 12, 1, true}}));
  EXPECT_EQ(std::vector<BlockId>(sa.blocks.table().begin(), sa.blocks.table().begin() + 3), table_before);
  EXPECT_EQ(sa.n_tokens(), 14);
  EXPECT_EQ(sa.n_cached_prompt, 0) << "the first admission's count, not the resume's";
}

TEST(Scheduler, UnpausingRestartsThePauseClockAndZeroMaxPauseNeverPreempts) {
  using namespace std::chrono_literals;
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  Fixture f({.block_size = 4, .n_blocks = 8}, {.max_step_tokens = 512, .max_pause = 100ms});
  const SeqId a = f.submit(3);
  f.step(t0);
  f.sched.set_paused(a, true, t0);
  f.sched.set_paused(a, false, t0 + 50ms);
  f.step(t0 + 50ms);
  f.sched.set_paused(a, true, t0 + 60ms);
  EXPECT_TRUE(f.step(t0 + 159ms).pause_preempted.empty());
  EXPECT_EQ(f.step(t0 + 160ms).pause_preempted, std::vector<SeqId>{a});

  Fixture never({.block_size = 4, .n_blocks = 8}, {.max_step_tokens = 512});
  const SeqId c = never.submit(3);
  never.step(t0);
  never.sched.set_paused(c, true, t0);
  EXPECT_TRUE(never.step(t0 + 24h).pause_preempted.empty());
  EXPECT_EQ(never.sched.sequence(c).state, SeqState::kRunning);
  EXPECT_EQ(never.sched.sequence(c).blocks.n_blocks(), 1);
}

TEST(Scheduler, PrefixCacheHitsSkipComputedTokensAndCountAsCached) {
  Fixture f({.block_size = 4, .n_blocks = 16}, {.max_step_tokens = 512});
  const std::vector<int32_t> prompt = tokens(9, 1);
  auto a = f.sched.submit({.tenant = "k1", .prompt = prompt, .max_total_tokens = 20});
  ASSERT_TRUE(a.ok());
  f.step();
  f.sched.finish(*a);
  auto b = f.sched.submit({.tenant = "k1", .prompt = prompt, .max_total_tokens = 20});
  auto other = f.sched.submit({.tenant = "k2", .prompt = prompt, .max_total_tokens = 20});
  StepPlan p = f.step();
  EXPECT_EQ(items(p), (std::vector<Item>{{*b, 8, 1, true}, {*other, 0, 9, true}}));
  EXPECT_EQ(f.sched.sequence(*b).n_cached_prompt, 8);
  EXPECT_EQ(f.sched.sequence(*other).n_cached_prompt, 0);
  EXPECT_EQ(f.sched.stats().n_cached_prompt_tokens, 8);
}

TEST(Scheduler, AbandonedStepsDoNotAdvance) {
  Fixture f({.block_size = 4, .n_blocks = 8}, {.max_step_tokens = 512});
  const SeqId a = f.submit(5);
  StepPlan p = f.sched.schedule();
  ASSERT_EQ(p.items.size(), 1u);
  f.sched.abandon_step();
  EXPECT_EQ(f.sched.sequence(a).n_computed, 0);
  EXPECT_EQ(items(f.step()), (std::vector<Item>{{a, 0, 5, true}}));
  f.sched.finish(a);
  EXPECT_EQ(f.pool.n_used(), 0);
}

TEST(SchedulerDeathTest, ContractViolationsAreCaught) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Fixture f({.block_size = 4, .n_blocks = 8}, {.max_step_tokens = 512});
  const SeqId a = f.submit(5);
  f.sched.schedule();
  EXPECT_DEATH(f.sched.schedule(), "not reported");
  EXPECT_DEATH(f.sched.finish(a), "before on_step_done");
  EXPECT_DEATH(f.sched.on_step_done(a, std::nullopt), "needs its token");
}

// ---------------------------------------------------------------------------------------------
// Property test: random submit / step / cancel / pause / finish, invariants after every step.

struct FakeSeq {
  std::string tenant;
  int32_t n_target_generated = 1;   // the fake engine finishes it after this many tokens
  std::vector<uint64_t> prefix_hash;  // what "KV" at position p must be: H(tenant, tokens[0..p])
};

uint64_t extend(uint64_t h, int32_t token) {
  h ^= static_cast<uint64_t>(static_cast<uint32_t>(token)) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdULL;
}

void check_pool_against_tables(const Scheduler& sched, const BlockPool& pool) {
  pool.check_invariants();
  ASSERT_EQ(pool.n_used() + pool.n_free() + pool.n_cached(), pool.n_blocks());
  std::vector<int32_t> holders(pool.n_blocks(), 0);
  for (const Sequence* s : sched.running()) {
    for (BlockId b : s->blocks.table()) holders[b]++;
    ASSERT_GE(s->blocks.capacity(), s->n_computed);
    ASSERT_LE(s->n_tokens(), s->max_total_tokens);
  }
  for (const Sequence* s : sched.waiting()) {
    ASSERT_TRUE(s->blocks.table().empty()) << "waiting sequence " << s->id << " holds blocks";
    ASSERT_EQ(s->n_computed, 0);
  }
  for (BlockId b = 0; b < pool.n_blocks(); ++b) {
    ASSERT_EQ(pool.refcount(b), holders[b]) << "block " << b;
  }
}

// What the random schedules exercised, summed over seeds (so the test cannot pass vacuously).
struct Coverage {
  int64_t n_steps = 0, n_preemptions = 0, n_hit_blocks = 0, n_evictions = 0, n_cancelled = 0,
          n_partial_chunks = 0, n_rejected = 0, n_pause_preemptions = 0;
};

void run_random_schedules(uint32_t seed, Coverage& cov) {
  std::mt19937 rng(seed);
  auto uniform = [&](int32_t lo, int32_t hi) {
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
  };
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };

  const BlockPoolConfig pc{.block_size = std::vector<int32_t>{1, 2, 4, 8}[uniform(0, 3)],
                           .n_blocks = uniform(4, 40),
                           .prefix_caching = chance(0.8)};
  const SchedulerConfig sc{.max_step_tokens = uniform(1, 48),
                           .max_running = uniform(1, 8),
                           .max_prefill_chunk = chance(0.5) ? 0 : uniform(1, 16),
                           .max_pause = std::chrono::milliseconds(chance(0.5) ? 0 : uniform(1, 6))};
  SCOPED_TRACE(testing::Message() << "seed " << seed << " block_size " << pc.block_size
                                  << " n_blocks " << pc.n_blocks << " budget "
                                  << sc.max_step_tokens << " max_running " << sc.max_running
                                  << " chunk " << sc.max_prefill_chunk << " max_pause_ms "
                                  << std::chrono::duration_cast<std::chrono::milliseconds>(sc.max_pause).count());
  BlockPool pool(pc);
  Scheduler sched(sc, pool);
  const int32_t capacity = pc.block_size * pc.n_blocks;
  // The fake KV storage: position hashes per block slot.
  std::vector<uint64_t> kv(static_cast<size_t>(capacity), 0);
  // Shared "documents" so that prompts share prefixes.
  std::vector<std::vector<int32_t>> docs(3);
  for (auto& d : docs) {
    for (int32_t i = 0; i < 64; ++i) d.push_back(uniform(0, 50));
  }
  std::map<SeqId, FakeSeq> live;
  std::set<SeqId> cancelled;
  // A fake clock: each step takes 1 ms.
  auto now = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  int64_t n_finished = 0, n_submitted = 0;

  auto submit_one = [&] {
    const auto& doc = docs[uniform(0, 2)];
    std::vector<int32_t> prompt(doc.begin(), doc.begin() + uniform(1, 24));
    for (int32_t i = uniform(0, 4); i > 0; --i) prompt.push_back(uniform(0, 50));
    const int32_t n_gen = uniform(1, 12);
    const int32_t max_total = static_cast<int32_t>(prompt.size()) + n_gen;
    const std::string tenant = chance(0.5) ? "a" : "b";
    auto id = sched.submit({.tenant = tenant, .prompt = prompt, .max_total_tokens = max_total,
                            .priority = uniform(0, 2)});
    if (max_total > capacity) {
      ASSERT_FALSE(id.ok());
      ++cov.n_rejected;
      return;
    }
    ASSERT_TRUE(id.ok()) << id.status().to_string();
    ++n_submitted;
    FakeSeq fs;
    fs.tenant = tenant;
    fs.n_target_generated = n_gen;
    uint64_t h = std::hash<std::string>{}(tenant);
    for (int32_t t : prompt) fs.prefix_hash.push_back(h = extend(h, t));
    live.emplace(*id, std::move(fs));
  };

  auto run_step = [&](bool allow_random_events) {
    now += std::chrono::milliseconds(1);
    StepPlan plan = sched.schedule(now);
    for (SeqId id : plan.cancelled) {
      ASSERT_TRUE(cancelled.contains(id));
      live.erase(id);
    }
    for (SeqId id : plan.pause_preempted) {
      const Sequence& s = sched.sequence(id);
      ASSERT_TRUE(s.paused);
      ASSERT_EQ(s.state, SeqState::kWaiting);
      ASSERT_EQ(s.blocks.n_blocks(), 0);
      ASSERT_GE(now - s.paused_since, sc.max_pause);
    }
    ASSERT_LE(plan.n_tokens, sc.max_step_tokens);
    ASSERT_LE(static_cast<int32_t>(plan.items.size()), sc.max_running);
    ASSERT_LE(static_cast<int32_t>(sched.running().size()), sc.max_running);
    int32_t sum = 0;
    std::set<SeqId> seen;
    for (const ScheduledSeq& it : plan.items) {
      ASSERT_TRUE(seen.insert(it.id).second) << "sequence scheduled twice";
      const Sequence& s = sched.sequence(it.id);
      const FakeSeq& fs = live.at(it.id);
      ASSERT_EQ(s.state, SeqState::kRunning);
      ASSERT_FALSE(s.paused);
      ASSERT_EQ(it.pos, s.n_computed);
      ASSERT_GE(it.n_tokens, 1);
      if (sc.max_prefill_chunk > 0) {
        ASSERT_LE(it.n_tokens, sc.max_prefill_chunk);
      }
      ASSERT_LE(it.pos + it.n_tokens, s.n_tokens());
      ASSERT_EQ(it.samples, it.pos + it.n_tokens == s.n_tokens());
      ASSERT_GE(s.blocks.capacity(), it.pos + it.n_tokens);
      sum += it.n_tokens;
      // Everything already computed (own or prefix-cached) holds this sequence's prefix.
      const auto& table = s.blocks.table();
      for (int32_t p = 0; p < it.pos; ++p) {
        const size_t slot = static_cast<size_t>(table[p / pc.block_size]) * pc.block_size + p % pc.block_size;
        ASSERT_EQ(kv[slot], fs.prefix_hash[p]) << "wrong KV at position " << p << " of " << it.id;
      }
      // The "forward pass" writes only into blocks nobody else holds (no copy-on-write).
      for (int32_t p = it.pos; p < it.pos + it.n_tokens; ++p) {
        const BlockId b = table[p / pc.block_size];
        ASSERT_EQ(pool.refcount(b), 1) << "write into shared block " << b;
        kv[static_cast<size_t>(b) * pc.block_size + p % pc.block_size] = fs.prefix_hash[p];
      }
    }
    ASSERT_EQ(sum, plan.n_tokens);
    ++cov.n_steps;
    cov.n_cancelled += static_cast<int64_t>(plan.cancelled.size());
    for (const ScheduledSeq& it : plan.items) cov.n_partial_chunks += !it.samples;
    for (const ScheduledSeq& it : plan.items) {
      std::optional<int32_t> tok;
      if (it.samples) tok = uniform(0, 50);
      sched.on_step_done(it.id, tok);
      if (!tok) continue;
      FakeSeq& fs = live.at(it.id);
      fs.prefix_hash.push_back(extend(fs.prefix_hash.back(), *tok));
      const Sequence& s = sched.sequence(it.id);
      if (s.n_generated() >= fs.n_target_generated || s.n_tokens() == s.max_total_tokens ||
          (allow_random_events && chance(0.03))) {
        sched.finish(it.id);
        live.erase(it.id);
        ++n_finished;
      }
    }
    check_pool_against_tables(sched, pool);
  };

  for (int32_t op = 0; op < 150; ++op) {
    for (int32_t i = uniform(0, 2); i > 0; --i) submit_one();
    if (!live.empty() && chance(0.1)) {
      auto it = std::next(live.begin(), uniform(0, static_cast<int32_t>(live.size()) - 1));
      if (!cancelled.contains(it->first)) {
        sched.cancel(it->first);
        cancelled.insert(it->first);
      }
    }
    if (!live.empty() && chance(0.1)) {
      auto it = std::next(live.begin(), uniform(0, static_cast<int32_t>(live.size()) - 1));
      sched.set_paused(it->first, chance(0.5), now);
    }
    run_step(/*allow_random_events=*/true);
    if (testing::Test::HasFatalFailure()) return;
  }
  // Drain: no new work, nothing paused; everything must finish.
  for (const auto& [id, fs] : live) sched.set_paused(id, false);
  int32_t n_steps = 0;
  while (sched.has_work()) {
    ASSERT_LT(++n_steps, 20000) << "no progress: " << sched.stats().n_running << " running, "
                                << sched.stats().n_waiting << " waiting";
    run_step(/*allow_random_events=*/false);
    if (testing::Test::HasFatalFailure()) return;
  }
  EXPECT_TRUE(live.empty());
  EXPECT_EQ(pool.n_used(), 0);
  EXPECT_EQ(pool.n_free() + pool.n_cached(), pool.n_blocks());
  EXPECT_EQ(n_finished + static_cast<int64_t>(cancelled.size()), n_submitted);
  cov.n_preemptions += sched.stats().n_preemptions;
  cov.n_pause_preemptions += sched.stats().n_pause_preemptions;
  cov.n_hit_blocks += pool.stats().n_hit_blocks;
  cov.n_evictions += pool.stats().n_evictions;
}

TEST(SchedulerProperty, RandomSchedulesKeepEveryInvariantAndFinishEverything) {
  Coverage cov;
  for (uint32_t seed = 1; seed <= 400; ++seed) {
    run_random_schedules(seed, cov);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(cov.n_steps, 60000);
  EXPECT_GT(cov.n_preemptions, 1000);
  EXPECT_GT(cov.n_hit_blocks, 1000);
  EXPECT_GT(cov.n_evictions, 1000);
  EXPECT_GT(cov.n_cancelled, 1000);
  EXPECT_GT(cov.n_partial_chunks, 1000);
  EXPECT_GT(cov.n_rejected, 10);
  EXPECT_GT(cov.n_pause_preemptions, 100);
  std::printf("steps %ld preemptions %ld hit blocks %ld evictions %ld cancelled %ld partial %ld "
              "rejected %ld pause preemptions %ld\n", cov.n_steps, cov.n_preemptions, cov.n_hit_blocks,
              cov.n_evictions, cov.n_cancelled, cov.n_partial_chunks, cov.n_rejected, cov.n_pause_preemptions);
}

}  // namespace
}  // namespace zl
