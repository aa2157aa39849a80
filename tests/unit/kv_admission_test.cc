// KV-aware admission (limits/kv_admission.h): the arithmetic against the
// scheduler's own check, and the per-tenant decay under pressure with the
// time and the KV usage injected.
#include "limits/kv_admission.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "engine/kv_cache.h"
#include "engine/scheduler.h"

namespace zl::limits {
namespace {

using Clock = KvAdmission::Clock;
using std::chrono::milliseconds;

// 8 blocks of 16 tokens = 128 tokens of KV, a 256-token window.
KvSnapshot small_kv(int64_t n_used = 0) {
  return {.n_ctx = 256, .n_blocks_total = 8, .block_size = 16, .n_blocks_used = n_used};
}

TEST(KvAdmissionMath, MaxTokensFitIsTheCacheLessThePrompt) {
  EXPECT_EQ(kv_max_tokens_fit(small_kv(), 10), 118);
  EXPECT_EQ(kv_max_tokens_fit(small_kv(), 127), 1);
  EXPECT_EQ(kv_max_tokens_fit(small_kv(), 128), 0);  // the prompt fits, no token after it
  EXPECT_EQ(kv_max_tokens_fit(small_kv(), 200), 0);  // not even the prompt
  // A cache that holds a whole context: the window clamp decides, never the cache.
  EXPECT_EQ(kv_max_tokens_fit({.n_ctx = 128, .n_blocks_total = 8, .block_size = 16}, 10), std::nullopt);
  EXPECT_EQ(kv_max_tokens_fit({.n_ctx = 0, .n_blocks_total = 0, .block_size = 16}, 10), std::nullopt);  // unknown
}

TEST(KvAdmissionMath, BlocksNeededRoundUpAndStopAtTheWindow) {
  EXPECT_EQ(kv_blocks_needed(small_kv(), 10, 6), 1);   // 16 tokens: one block
  EXPECT_EQ(kv_blocks_needed(small_kv(), 10, 7), 2);   // 17 tokens: two
  EXPECT_EQ(kv_blocks_needed(small_kv(), 10, 10000), 16);  // clamped to the 256-token window
}

// The limit agrees with Scheduler::submit exactly, block rounding included,
// for every prompt and max_tokens around the edges (and an odd block size).
TEST(KvAdmissionMath, AgreesWithTheSchedulerOnEveryEdge) {
  for (int32_t block_size : {1, 3, 16}) {
    const int32_t n_blocks = 5;
    const KvSnapshot kv{.n_ctx = 64, .n_blocks_total = n_blocks, .block_size = block_size};
    BlockPool pool({.block_size = block_size, .n_blocks = n_blocks});
    Scheduler sched({.max_step_tokens = 64, .max_running = 4}, pool);
    for (int64_t n_prompt = 1; n_prompt < 64; ++n_prompt) {
      for (int64_t max_tokens = 1; max_tokens < 70; ++max_tokens) {
        const int64_t total = std::min<int64_t>(64, n_prompt + max_tokens);
        auto seq = sched.submit({.tenant = "t", .prompt = std::vector<int32_t>(n_prompt, 5),
                                 .max_total_tokens = static_cast<int32_t>(total)});
        const std::optional<int64_t> fit = kv_max_tokens_fit(kv, n_prompt);
        const bool fits = !fit || max_tokens <= *fit;
        ASSERT_EQ(seq.ok(), fits) << "block " << block_size << " prompt " << n_prompt << " max " << max_tokens;
        if (seq.ok()) {
          sched.cancel(*seq);
          sched.schedule();  // removes it
        } else {
          ASSERT_EQ(seq.status().detail()->numbers.max_tokens_fit, *fit);
        }
      }
    }
  }
}

TEST(KvAdmission, RefusesWhatCanNeverFitWithTheNumbers) {
  KvAdmission adm({});
  const Clock::time_point t0{};
  auto d = adm.decide({.tenant = "a", .n_prompt = 10, .max_tokens = 200, .requested = 200}, small_kv(), t0);
  ASSERT_FALSE(d.status.ok());
  EXPECT_EQ(d.status.kind(), ErrorKind::kInvalidArgument);
  EXPECT_EQ(d.status.reason(), ErrorReason::kKvCacheOverflow);
  const ErrorNumbers& n = d.status.detail()->numbers;
  EXPECT_EQ(n.n_prompt_tokens, 10);
  EXPECT_EQ(n.max_tokens, 200);
  EXPECT_EQ(n.max_tokens_fit, 118);
  // Exactly max_tokens_fit is admitted, unchanged.
  d = adm.decide({.tenant = "a", .n_prompt = 10, .max_tokens = 118, .requested = 118}, small_kv(), t0);
  EXPECT_TRUE(d.status.ok());
  EXPECT_EQ(d.max_tokens, 118);
  EXPECT_EQ(d.degraded, KvDegrade::kNone);
  // The client asked more than the window: the clamp happened first, the
  // error still names what was asked.
  d = adm.decide({.tenant = "a", .n_prompt = 10, .max_tokens = 246, .requested = 5000}, small_kv(), t0);
  EXPECT_EQ(d.status.detail()->numbers.max_tokens, 5000);
  EXPECT_EQ(d.status.detail()->numbers.max_tokens_fit, 118);
  // A prompt that leaves no room: 0, whatever max_tokens, even with degrade.
  KvAdmission degrading({.degrade = true});
  d = degrading.decide({.tenant = "a", .n_prompt = 128, .max_tokens = 1, .requested = 1}, small_kv(), t0);
  ASSERT_FALSE(d.status.ok());
  EXPECT_EQ(d.status.detail()->numbers.max_tokens_fit, 0);
  EXPECT_EQ(degrading.n_tenants(), 0u);  // no pressure: no decay
}

TEST(KvAdmission, WithoutAnExplicitMaxTokensTheCacheClampsSilently) {
  KvAdmission adm({});
  auto d = adm.decide({.tenant = "a", .n_prompt = 10, .max_tokens = 246}, small_kv(), {});
  EXPECT_TRUE(d.status.ok());
  EXPECT_EQ(d.max_tokens, 118);
  EXPECT_TRUE(d.clamped);
  EXPECT_EQ(d.degraded, KvDegrade::kNone);
  d = adm.decide({.tenant = "a", .n_prompt = 130, .max_tokens = 126}, small_kv(), {});
  ASSERT_FALSE(d.status.ok());
  EXPECT_FALSE(d.status.detail()->numbers.max_tokens.has_value());
}

TEST(KvAdmission, DegradeLowersToTheFit) {
  KvAdmission adm({.degrade = true});
  auto d = adm.decide({.tenant = "a", .n_prompt = 10, .max_tokens = 200, .requested = 200}, small_kv(), {});
  EXPECT_TRUE(d.status.ok());
  EXPECT_EQ(d.max_tokens, 118);
  EXPECT_EQ(d.degraded, KvDegrade::kKvCacheOverflow);
}

// 100 blocks; pressure above 90 used.
KvSnapshot big_kv(int64_t n_used) {
  return {.n_ctx = 4096, .n_blocks_total = 100, .block_size = 16, .n_blocks_used = n_used};
}

TEST(KvAdmissionDecay, HalvesStepByStepUnderPressureDownToTheFloor) {
  KvAdmission adm({.degrade = true, .high_watermark = 0.9, .min_tokens = 16, .restore_interval = milliseconds(1000)});
  Clock::time_point t{};
  // Not under pressure: a request that needs more than what is free is fine.
  auto d = adm.decide({.tenant = "a", .n_prompt = 16, .max_tokens = 1024, .requested = 1024}, big_kv(90), t);
  EXPECT_EQ(d.max_tokens, 1024);
  EXPECT_EQ(adm.halvings("a"), 0);
  // 99 of 100 used, 1 block available: 1024 does not fit now: halved.
  d = adm.decide({.tenant = "a", .n_prompt = 16, .max_tokens = 1024, .requested = 1024}, big_kv(99), t);
  EXPECT_EQ(d.max_tokens, 512);
  EXPECT_EQ(d.degraded, KvDegrade::kKvPressure);
  EXPECT_EQ(adm.halvings("a"), 1);
  const int64_t want[] = {256, 128, 64, 32, 16, 16, 16};
  for (int64_t w : want) {
    t += milliseconds(10);
    d = adm.decide({.tenant = "a", .n_prompt = 16, .max_tokens = 1024, .requested = 1024}, big_kv(99), t);
    EXPECT_EQ(d.max_tokens, w);
  }
  EXPECT_EQ(adm.halvings("a"), 8);
  // A request at or below the floor is never lowered.
  d = adm.decide({.tenant = "a", .n_prompt = 16, .max_tokens = 10, .requested = 10}, big_kv(99), t);
  EXPECT_EQ(d.max_tokens, 10);
  EXPECT_EQ(d.degraded, KvDegrade::kNone);
  // Another tenant whose request fits the free block is untouched.
  d = adm.decide({.tenant = "b", .n_prompt = 8, .max_tokens = 8, .requested = 8}, big_kv(99), t);
  EXPECT_EQ(d.max_tokens, 8);
  EXPECT_EQ(adm.halvings("b"), 0);
  d = adm.decide({.tenant = "b", .n_prompt = 8, .max_tokens = 1000, .requested = 1000}, big_kv(90), t);
  EXPECT_EQ(d.max_tokens, 1000);  // and its large one too, without pressure
  EXPECT_EQ(adm.halvings("a"), 9);
  // The shift is bounded.
  for (int i = 0; i < 100; ++i) {
    adm.decide({.tenant = "a", .n_prompt = 16, .max_tokens = 1024, .requested = 1024}, big_kv(99), t);
  }
  EXPECT_EQ(adm.halvings("a"), 16);
}

TEST(KvAdmissionDecay, ATriggerStopsOnceTheGrantFitsTheFreeBlocks) {
  KvAdmission adm({.degrade = true, .restore_interval = milliseconds(1000)});
  // 92 used, 8 available = 128 tokens: 16 + 512 needs 33 blocks.
  auto d = adm.decide({.tenant = "a", .n_prompt = 16, .max_tokens = 512, .requested = 512}, big_kv(92), {});
  EXPECT_EQ(d.max_tokens, 256);
  d = adm.decide({.tenant = "a", .n_prompt = 16, .max_tokens = 512, .requested = 512}, big_kv(92), {});
  EXPECT_EQ(d.max_tokens, 128);
  d = adm.decide({.tenant = "a", .n_prompt = 16, .max_tokens = 512, .requested = 512}, big_kv(92), {});
  EXPECT_EQ(d.max_tokens, 64);
  // 16 + 64 = 80 tokens = 5 blocks <= 8 available: granted as it is, no further halving.
  d = adm.decide({.tenant = "a", .n_prompt = 16, .max_tokens = 512, .requested = 512}, big_kv(92), {});
  EXPECT_EQ(d.max_tokens, 64);
  EXPECT_EQ(adm.halvings("a"), 3);
}

TEST(KvAdmissionDecay, RestoresOneDoublingPerIntervalBelowTheWatermark) {
  KvAdmission adm({.degrade = true, .restore_interval = milliseconds(1000)});
  Clock::time_point t{};
  for (int i = 0; i < 3; ++i) {
    adm.decide({.tenant = "a", .n_prompt = 16, .max_tokens = 1024, .requested = 1024}, big_kv(99), t);
  }
  ASSERT_EQ(adm.halvings("a"), 3);
  // Still under pressure: time passes, nothing comes back.
  t += milliseconds(5000);
  auto d = adm.decide({.tenant = "b", .n_prompt = 16, .max_tokens = 16, .requested = 16}, big_kv(95), t);
  EXPECT_EQ(adm.halvings("a"), 3);
  // Below the watermark: one doubling per second.
  t += milliseconds(999);
  adm.decide({.tenant = "b", .n_prompt = 16, .max_tokens = 16, .requested = 16}, big_kv(10), t);
  EXPECT_EQ(adm.halvings("a"), 3);
  t += milliseconds(1);
  adm.decide({.tenant = "b", .n_prompt = 16, .max_tokens = 16, .requested = 16}, big_kv(10), t);
  EXPECT_EQ(adm.halvings("a"), 2);
  t += milliseconds(1000);
  d = adm.decide({.tenant = "a", .n_prompt = 16, .max_tokens = 1024, .requested = 1024}, big_kv(10), t);
  EXPECT_EQ(d.max_tokens, 512);  // 1 halving left: still degraded, no new trigger without pressure
  EXPECT_EQ(d.degraded, KvDegrade::kKvPressure);
  // Pressure again in between stops the clock; a new trigger restarts it.
  t += milliseconds(500);
  d = adm.decide({.tenant = "a", .n_prompt = 16, .max_tokens = 1024, .requested = 1024}, big_kv(99), t);
  EXPECT_EQ(d.max_tokens, 256);
  EXPECT_EQ(adm.halvings("a"), 2);
  // An idle stretch with no request counts as below once the next request sees it below.
  t += milliseconds(10'000);
  d = adm.decide({.tenant = "a", .n_prompt = 16, .max_tokens = 1024, .requested = 1024}, big_kv(0), t);
  EXPECT_EQ(d.max_tokens, 1024);
  EXPECT_EQ(d.degraded, KvDegrade::kNone);
  // Fully restored tenants are forgotten.
  EXPECT_EQ(adm.n_tenants(), 0u);
}

TEST(KvAdmissionDecay, OnlyWithDegradeAndNeverInADryRun) {
  KvAdmission plain({});
  auto d = plain.decide({.tenant = "a", .n_prompt = 16, .max_tokens = 1024, .requested = 1024}, big_kv(99), {});
  EXPECT_EQ(d.max_tokens, 1024);
  EXPECT_EQ(plain.n_tenants(), 0u);
  KvAdmission adm({.degrade = true});
  d = adm.decide({.tenant = "a", .n_prompt = 16, .max_tokens = 1024, .requested = 1024, .dry_run = true},
                 big_kv(99), {});
  EXPECT_EQ(d.max_tokens, 512);  // what a real request would get
  EXPECT_EQ(adm.n_tenants(), 0u);
}

TEST(KvAdmissionDecay, AnOverflowUnderPressureTriggersToo) {
  KvAdmission adm({.degrade = true});
  // The small cache, 8 of 8 blocks used: refused (the prompt leaves no room) and halved.
  auto d = adm.decide({.tenant = "a", .n_prompt = 128, .max_tokens = 10, .requested = 10}, small_kv(8), {});
  EXPECT_FALSE(d.status.ok());
  EXPECT_EQ(adm.halvings("a"), 1);
  // Lowered to the fit, then halved.
  d = adm.decide({.tenant = "a", .n_prompt = 10, .max_tokens = 200, .requested = 200}, small_kv(8), {});
  EXPECT_EQ(d.max_tokens, 118 / 4);
  EXPECT_EQ(d.degraded, KvDegrade::kKvPressure);
}

TEST(KvAdmissionDecay, MemoryIsBoundedByMaxTenants) {
  KvAdmission adm({.degrade = true, .restore_interval = milliseconds(1000), .max_tenants = 8});
  for (int i = 0; i < 100; ++i) {
    adm.decide({.tenant = "t" + std::to_string(i), .n_prompt = 16, .max_tokens = 1024, .requested = 1024},
               big_kv(99), {});
  }
  EXPECT_EQ(adm.n_tenants(), 8u);
  EXPECT_EQ(adm.halvings("t99"), 1);  // the newest is remembered
  // A more degraded tenant outlives the least degraded ones.
  adm.decide({.tenant = "t99", .n_prompt = 16, .max_tokens = 1024, .requested = 1024}, big_kv(99), {});
  for (int i = 100; i < 120; ++i) {
    adm.decide({.tenant = "t" + std::to_string(i), .n_prompt = 16, .max_tokens = 1024, .requested = 1024},
               big_kv(99), {});
  }
  EXPECT_EQ(adm.n_tenants(), 8u);
  EXPECT_EQ(adm.halvings("t99"), 2);
}

// The cost of one decision on the request path, printed (never asserted):
// with degrade on, under pressure, 1000 degraded tenants in the table.
TEST(KvAdmissionCost, PrintsTheCostOfOneDecision) {
  KvAdmission adm({.degrade = true, .restore_interval = milliseconds(1000)});
  std::vector<std::string> tenants;
  for (int i = 0; i < 1000; ++i) tenants.push_back("key:" + std::to_string(i));
  const int n = 200'000;
  int64_t granted = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) {
    const KvSnapshot kv = big_kv(i % 2 ? 99 : 50);  // pressure on and off: the table fills and restores
    granted += adm.decide({.tenant = tenants[i % tenants.size()], .n_prompt = 100, .max_tokens = 1024,
                           .requested = 1024},
                          kv, Clock::time_point{} + milliseconds(i))
                   .max_tokens;
  }
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / n;
  std::printf("kv admission: %.0f ns per decision (%d decisions, %zu tenants remembered)\n", ns, n, adm.n_tenants());
  EXPECT_GT(granted, 0);
}

}  // namespace
}  // namespace zl::limits
