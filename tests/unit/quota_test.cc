// QuotaManager (limits/quota.h) over a LocalBucketStore with an injected
// clock: each limit, retry_after, concurrency release, the output charge
// exactly once, cache hits, dry runs, isolation between keys, reloads, and a
// store error reaching the caller.
#include "limits/quota.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace zl::limits {
namespace {

struct Clock {
  double t = 5000;
  LocalBucketStore::Now fn() {
    return [this] { return t; };
  }
};

KeyEntry key(std::string name, KeyLimits limits) {
  KeyEntry e;
  e.name = std::move(name);
  e.limits = limits;
  return e;
}

std::string refused_limit(const Admission& a) {
  if (a.status.ok() || !a.status.detail()) return "";
  EXPECT_EQ(a.status.reason(), ErrorReason::kRateLimitExceeded);
  return a.status.detail()->labels.limit;
}

int64_t retry_ms(const Admission& a) { return a.status.detail()->numbers.retry_after_ms.value_or(-1); }

TEST(Quota, RequestsPerMinute) {
  Clock clock;
  LocalBucketStore store(clock.fn());
  QuotaManager q(store);
  const KeyEntry k = key("a", {.requests_per_minute = 3});
  for (int i = 0; i < 3; ++i) {
    Admission a = q.admit(k, 10);
    ASSERT_TRUE(a.status.ok());
    EXPECT_EQ(a.snapshot[Limit::kRequests].remaining(), 2 - i);
    EXPECT_EQ(a.snapshot[Limit::kRequests].limit_per_minute, 3);
    EXPECT_FALSE(a.snapshot[Limit::kInputTokens].set());
  }
  Admission refused = q.admit(k, 10);
  EXPECT_EQ(refused.status.kind(), ErrorKind::kResourceExhausted);
  EXPECT_EQ(refused_limit(refused), "requests");
  EXPECT_EQ(retry_ms(refused), 20000);  // one request back every 20 s
  EXPECT_EQ(refused.snapshot[Limit::kRequests].remaining(), 0);
  EXPECT_DOUBLE_EQ(refused.snapshot[Limit::kRequests].seconds_to_full, 60);
  clock.t += 19.9991;  // 1 ms short (rounded up to 1 ms)
  EXPECT_EQ(retry_ms(q.admit(k, 10)), 1);
  clock.t += 0.001;
  EXPECT_TRUE(q.admit(k, 10).status.ok());
}

TEST(Quota, InputTokensAreChargedExactlyAndABigPromptRunsIntoDebt) {
  Clock clock;
  LocalBucketStore store(clock.fn());
  QuotaManager q(store);
  const KeyEntry k = key("a", {.input_tokens_per_minute = 600});  // 10 a second
  Admission a = q.admit(k, 250);
  ASSERT_TRUE(a.status.ok());
  EXPECT_EQ(a.snapshot[Limit::kInputTokens].remaining(), 350);
  EXPECT_DOUBLE_EQ(a.snapshot[Limit::kInputTokens].seconds_to_full, 25);
  Admission b = q.admit(k, 400);
  EXPECT_EQ(refused_limit(b), "input_tokens");
  EXPECT_EQ(retry_ms(b), 5000);  // 50 more tokens
  EXPECT_EQ(b.snapshot[Limit::kInputTokens].remaining(), 350);  // nothing taken
  // More than the whole budget: admitted once the bucket is full, in debt after.
  clock.t += 25;
  Admission big = q.admit(k, 1000);
  ASSERT_TRUE(big.status.ok());
  EXPECT_EQ(big.snapshot[Limit::kInputTokens].remaining(), 0);
  EXPECT_DOUBLE_EQ(big.snapshot[Limit::kInputTokens].level, -400);
  Admission after = q.admit(k, 1);
  EXPECT_EQ(refused_limit(after), "input_tokens");
  EXPECT_EQ(retry_ms(after), 40100);
}

TEST(Quota, OutputTokensNeedRoomAtAdmissionAndAreChargedOnceAtTheEnd) {
  Clock clock;
  LocalBucketStore store(clock.fn());
  QuotaManager q(store);
  const KeyEntry k = key("a", {.output_tokens_per_minute = 120});  // 2 a second
  Admission a = q.admit(k, 10);
  ASSERT_TRUE(a.status.ok());
  EXPECT_EQ(a.snapshot[Limit::kOutputTokens].remaining(), 120);  // nothing charged yet
  EXPECT_FALSE(a.lease.output_charged());
  ASSERT_TRUE(a.lease.charge_output(150).ok());
  EXPECT_TRUE(a.lease.output_charged());
  EXPECT_DOUBLE_EQ(a.lease.snapshot()[Limit::kOutputTokens].level, -30);
  EXPECT_DOUBLE_EQ(a.lease.snapshot()[Limit::kOutputTokens].seconds_to_full, 75);
  ASSERT_TRUE(a.lease.charge_output(150).ok());  // once only
  Admission b = q.admit(k, 10);
  EXPECT_EQ(refused_limit(b), "output_tokens");
  EXPECT_EQ(retry_ms(b), 15500);  // from -30 to 1 at 2 a second
  clock.t += 15.5;
  Admission c = q.admit(k, 10);
  ASSERT_TRUE(c.status.ok());
  EXPECT_EQ(c.snapshot[Limit::kOutputTokens].remaining(), 1);
}

TEST(Quota, TheChargeUpdatesTheOutputEntryOnly) {
  Clock clock;
  LocalBucketStore store(clock.fn());
  QuotaManager q(store);
  const KeyEntry k =
      key("a", {.requests_per_minute = 60, .input_tokens_per_minute = 60, .output_tokens_per_minute = 60});
  Admission a = q.admit(k, 30);
  clock.t += 10;  // the request runs 10 s: 10 requests, 10 input tokens come back meanwhile
  ASSERT_TRUE(a.lease.charge_output(45).ok());
  const QuotaSnapshot& s = a.lease.snapshot();
  EXPECT_DOUBLE_EQ(s[Limit::kRequests].level, 59);     // as admitted
  EXPECT_DOUBLE_EQ(s[Limit::kInputTokens].level, 30);  // as admitted
  EXPECT_DOUBLE_EQ(s[Limit::kOutputTokens].level, 15);
  EXPECT_DOUBLE_EQ(s[Limit::kOutputTokens].seconds_to_full, 45);
  // Without an output limit the charge costs no store call and changes nothing.
  Admission b = q.admit(key("b", {.requests_per_minute = 60}), 30);
  ASSERT_TRUE(b.lease.charge_output(45).ok());
  EXPECT_FALSE(b.lease.snapshot()[Limit::kOutputTokens].set());
  EXPECT_DOUBLE_EQ(b.lease.snapshot()[Limit::kRequests].level, 59);
}

TEST(Quota, ARequestTheEngineRefusedIsRefundedOnce) {
  Clock clock;
  LocalBucketStore store(clock.fn());
  QuotaManager q(store);
  const KeyEntry k = key("a", {.requests_per_minute = 10, .input_tokens_per_minute = 100,
                               .output_tokens_per_minute = 100});
  Admission a = q.admit(k, 40);
  ASSERT_TRUE(a.lease.charge_output(0).ok());  // the error answer's head came first
  ASSERT_TRUE(a.lease.refund_admission().ok());
  ASSERT_TRUE(a.lease.refund_admission().ok());  // once
  Admission b = q.admit(k, 40);
  EXPECT_EQ(b.snapshot[Limit::kRequests].remaining(), 9);
  EXPECT_EQ(b.snapshot[Limit::kInputTokens].remaining(), 60);
  // Not once output was charged, nor for what admission did not charge.
  ASSERT_TRUE(b.lease.charge_output(5).ok());
  ASSERT_TRUE(b.lease.refund_admission().ok());
  Admission hit = q.admit(k, 40, {.charge_tokens = false});
  ASSERT_TRUE(hit.lease.refund_admission().ok());
  Admission dry = q.admit(k, 40, {.dry_run = true});
  ASSERT_TRUE(dry.lease.refund_admission().ok());
  Admission c = q.admit(k, 0);
  EXPECT_EQ(c.snapshot[Limit::kRequests].remaining(), 7);  // b, hit and c
  EXPECT_EQ(c.snapshot[Limit::kInputTokens].remaining(), 60);
  EXPECT_EQ(c.snapshot[Limit::kOutputTokens].remaining(), 95);
  // A refund into a full bucket never reports more than the limit.
  clock.t += 600;
  Admission d = q.admit(k, 10);
  ASSERT_TRUE(d.lease.refund_admission().ok());
  EXPECT_EQ(q.admit(k, 0, {.dry_run = true}).snapshot[Limit::kInputTokens].remaining(), 100);
}

TEST(Quota, AMovedLeaseChargesOnceAndADestroyedOneChargesNothing) {
  Clock clock;
  LocalBucketStore store(clock.fn());
  QuotaManager q(store);
  const KeyEntry k = key("a", {.output_tokens_per_minute = 100});
  {
    Admission a = q.admit(k, 1);
    Lease moved = std::move(a.lease);
    ASSERT_TRUE(a.lease.charge_output(40).ok());  // the moved-from lease: nothing
    ASSERT_TRUE(moved.charge_output(30).ok());
    ASSERT_TRUE(moved.charge_output(30).ok());
  }
  { Admission dropped = q.admit(k, 1); }  // never charged: the caller's duty
  EXPECT_EQ(q.admit(k, 1).snapshot[Limit::kOutputTokens].remaining(), 70);
}

TEST(Quota, ConcurrencyIsReleasedByTheLease) {
  Clock clock;
  LocalBucketStore store(clock.fn());
  QuotaManager q(store);
  const KeyEntry k = key("a", {.max_concurrent = 2});
  Admission a = q.admit(k, 1);
  Admission b = q.admit(k, 1);
  ASSERT_TRUE(a.status.ok());
  ASSERT_TRUE(b.status.ok());
  EXPECT_EQ(q.in_flight("a"), 2);
  Admission c = q.admit(k, 1);
  EXPECT_EQ(refused_limit(c), "concurrent");
  EXPECT_EQ(retry_ms(c), 1000);
  EXPECT_EQ(q.in_flight("a"), 2);  // the refusal took no slot
  a.lease.release();
  a.lease.release();  // idempotent
  EXPECT_EQ(q.in_flight("a"), 1);
  {
    Admission d = q.admit(k, 1);
    ASSERT_TRUE(d.status.ok());
    Lease moved = std::move(d.lease);
    EXPECT_EQ(q.in_flight("a"), 2);
  }
  EXPECT_EQ(q.in_flight("a"), 1);  // released once, by the lease it moved into
  b.lease = Lease();
  EXPECT_EQ(q.in_flight("a"), 0);
}

// A request running several generations (OpenAI n) holds that many slots, up to the key's
// max_concurrent: more than that waits for an idle key instead of being refused for good, and
// then runs as many at once as it holds (Lease::slots).
TEST(Quota, ARequestHoldsOneSlotPerGeneration) {
  Clock clock;
  LocalBucketStore store(clock.fn());
  QuotaManager q(store);
  const KeyEntry k = key("a", {.max_concurrent = 4});
  Admission three = q.admit(k, 1, {.slots = 3});
  ASSERT_TRUE(three.status.ok());
  EXPECT_EQ(q.in_flight("a"), 3);
  EXPECT_EQ(three.lease.slots(), 3);
  EXPECT_EQ(refused_limit(q.admit(k, 1, {.slots = 2})), "concurrent");
  EXPECT_EQ(refused_limit(q.admit(k, 1, {.dry_run = true, .slots = 2})), "concurrent");
  EXPECT_EQ(q.in_flight("a"), 3);  // refusals took nothing
  {
    Admission one = q.admit(k, 1);
    ASSERT_TRUE(one.status.ok());
    EXPECT_EQ(q.in_flight("a"), 4);
  }
  three.lease.release();
  EXPECT_EQ(q.in_flight("a"), 0);
  Admission many = q.admit(k, 1, {.slots = 100});  // capped at max_concurrent
  ASSERT_TRUE(many.status.ok());
  EXPECT_EQ(q.in_flight("a"), 4);
  EXPECT_EQ(many.lease.slots(), 4);
  EXPECT_EQ(refused_limit(q.admit(k, 1)), "concurrent");
  Lease moved = std::move(many.lease);
  EXPECT_EQ(moved.slots(), 4);
  moved.release();
  EXPECT_EQ(moved.slots(), 0);
  EXPECT_EQ(q.in_flight("a"), 0);
  // No max_concurrent: no slot is held, and nothing bounds the generations.
  EXPECT_EQ(q.admit(key("free", {}), 1, {.slots = 100}).lease.slots(), 0);
  // A dry run holds nothing.
  EXPECT_EQ(q.admit(k, 1, {.dry_run = true, .slots = 2}).lease.slots(), 0);
}

TEST(Quota, ConcurrentAdmissionsNeverExceedMaxConcurrent) {
  LocalBucketStore store;  // the real clock
  QuotaManager q(store);
  const KeyEntry k = key("a", {.requests_per_minute = 1'000'000'000, .max_concurrent = 3});
  std::atomic<int> running{0}, peak{0}, n_admitted{0}, n_refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        Admission a = q.admit(k, 1);
        if (!a.status.ok()) {
          EXPECT_EQ(refused_limit(a), "concurrent");
          ++n_refused;
          continue;
        }
        const int now = ++running;
        int p = peak.load();
        while (now > p && !peak.compare_exchange_weak(p, now)) {
        }
        ++n_admitted;
        --running;  // before the slot goes back
        a.lease.release();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(peak.load(), 3);
  EXPECT_EQ(n_admitted + n_refused, 8000);
  EXPECT_GT(n_admitted.load(), 0);
  EXPECT_EQ(q.in_flight("a"), 0);
}

TEST(Quota, ARefusalByABucketGivesTheSlotBackAndChargesNothing) {
  Clock clock;
  LocalBucketStore store(clock.fn());
  QuotaManager q(store);
  const KeyEntry k = key("a", {.requests_per_minute = 10, .input_tokens_per_minute = 100, .max_concurrent = 1});
  Admission r = q.admit(k, 100);  // the whole input budget
  ASSERT_TRUE(r.status.ok());
  r.lease.release();
  Admission refused = q.admit(k, 50);
  EXPECT_EQ(refused_limit(refused), "input_tokens");
  EXPECT_EQ(q.in_flight("a"), 0);
  EXPECT_EQ(refused.snapshot[Limit::kRequests].remaining(), 9);  // the refused request was not counted
}

TEST(Quota, TheLongestWaitNamesTheLimit) {
  Clock clock;
  LocalBucketStore store(clock.fn());
  QuotaManager q(store);
  const KeyEntry k = key("a", {.requests_per_minute = 1, .input_tokens_per_minute = 60});
  ASSERT_TRUE(q.admit(k, 60).status.ok());
  // Both empty: requests back in 60 s, 30 input tokens in 30 s.
  Admission a = q.admit(k, 30);
  EXPECT_EQ(refused_limit(a), "requests");
  EXPECT_EQ(retry_ms(a), 60000);
}

TEST(Quota, ACacheHitIsChargedOneRequestOnly) {
  Clock clock;
  LocalBucketStore store(clock.fn());
  QuotaManager q(store);
  const KeyEntry k = key("a", {.requests_per_minute = 5, .input_tokens_per_minute = 100,
                               .output_tokens_per_minute = 100, .max_concurrent = 1});
  Admission running = q.admit(k, 100);  // input budget spent, the one slot taken
  ASSERT_TRUE(running.status.ok());
  ASSERT_TRUE(running.lease.charge_output(100).ok());  // output budget spent
  Admission hit = q.admit(k, 100, {.charge_tokens = false});
  ASSERT_TRUE(hit.status.ok()) << hit.status.to_string();
  EXPECT_EQ(hit.snapshot[Limit::kRequests].remaining(), 3);
  EXPECT_EQ(hit.snapshot[Limit::kInputTokens].remaining(), 0);  // reported, not charged
  ASSERT_TRUE(hit.lease.charge_output(50).ok());               // charges nothing
  EXPECT_EQ(q.in_flight("a"), 1);
  Admission hit2 = q.admit(k, 100, {.charge_tokens = false});
  ASSERT_TRUE(hit2.status.ok());
  EXPECT_DOUBLE_EQ(hit2.snapshot[Limit::kOutputTokens].level, 0);
  EXPECT_DOUBLE_EQ(hit2.snapshot[Limit::kInputTokens].level, 0);
}

TEST(Quota, ADryRunChecksEveryLimitAndChargesNothing) {
  Clock clock;
  LocalBucketStore store(clock.fn());
  QuotaManager q(store);
  const KeyEntry k = key("a", {.requests_per_minute = 1, .input_tokens_per_minute = 100, .max_concurrent = 1});
  for (int i = 0; i < 3; ++i) {
    Admission v = q.admit(k, 100, {.dry_run = true});
    ASSERT_TRUE(v.status.ok());
    ASSERT_TRUE(v.lease.charge_output(10).ok());
  }
  EXPECT_EQ(q.in_flight("a"), 0);
  EXPECT_EQ(refused_limit(q.admit(k, 101, {.dry_run = true})), "");  // capped need: a full bucket admits
  Admission real = q.admit(k, 100);
  ASSERT_TRUE(real.status.ok());
  EXPECT_EQ(refused_limit(q.admit(k, 1, {.dry_run = true})), "concurrent");
  real.lease.release();
  EXPECT_EQ(refused_limit(q.admit(k, 1, {.dry_run = true})), "requests");
}

TEST(Quota, AKeyOverQuotaNeverAffectsAnother) {
  Clock clock;
  LocalBucketStore store(clock.fn());
  QuotaManager q(store);
  const KeyLimits limits{.requests_per_minute = 2, .input_tokens_per_minute = 100,
                         .output_tokens_per_minute = 100, .max_concurrent = 1};
  const KeyEntry a = key("a", limits);
  const KeyEntry b = key("a-b", limits);  // a name with a's name as its prefix
  Admission held = q.admit(a, 100);
  ASSERT_TRUE(held.status.ok());
  ASSERT_TRUE(held.lease.charge_output(500).ok());
  EXPECT_FALSE(q.admit(a, 1).status.ok());
  for (int i = 0; i < 2; ++i) {
    Admission other = q.admit(b, 10);
    ASSERT_TRUE(other.status.ok()) << other.status.to_string();
    EXPECT_EQ(other.snapshot[Limit::kRequests].remaining(), 1 - i);
    EXPECT_EQ(other.snapshot[Limit::kInputTokens].remaining(), 90 - 10 * i);
    EXPECT_EQ(other.snapshot[Limit::kOutputTokens].remaining(), 100);
  }
}

TEST(Quota, AKeyWithoutLimitsTouchesNoBucket) {
  struct Failing : BucketStore {
    int n = 0;
    Result<TakeResult> take(std::span<const BucketOp>) override {
      ++n;
      return io_error("redis: connection refused");
    }
  } store;
  QuotaManager q(store);
  Admission a = q.admit(key("free", {}), 1000);
  EXPECT_TRUE(a.status.ok());
  EXPECT_TRUE(a.snapshot.empty());
  EXPECT_TRUE(a.lease.charge_output(10).ok());
  EXPECT_EQ(store.n, 0);
  // With a limit, the store's error reaches the caller as it is, and no slot stays taken.
  const KeyEntry limited = key("x", {.requests_per_minute = 5, .max_concurrent = 1});
  Admission e = q.admit(limited, 1);
  EXPECT_EQ(e.status.kind(), ErrorKind::kIo);
  EXPECT_EQ(e.status.message(), "redis: connection refused");
  EXPECT_TRUE(e.snapshot.empty());
  EXPECT_EQ(q.in_flight("x"), 0);
  EXPECT_EQ(store.n, 1);
}

TEST(Quota, RetainForgetsRemovedKeysOnly) {
  Clock clock;
  LocalBucketStore store(clock.fn());
  QuotaManager q(store);
  const KeyEntry a = key("a", {.requests_per_minute = 10, .max_concurrent = 5});
  const KeyEntry b = key("b", {.requests_per_minute = 10, .max_concurrent = 5});
  Admission held = q.admit(b, 1);  // an in-flight request of a key about to be removed
  ASSERT_TRUE(q.admit(a, 1).status.ok());
  auto table = KeyTable::parse("[[key]]\nname = \"a\"\nkey = \"ka\"\n", "k");
  ASSERT_TRUE(table.ok());
  q.retain(**table);
  EXPECT_EQ(q.admit(a, 1).snapshot[Limit::kRequests].remaining(), 8);  // a's bucket kept
  EXPECT_EQ(q.in_flight("b"), 0);                                       // b's counter forgotten
  held.lease.release();  // still safe: the lease holds its counter
  EXPECT_EQ(q.admit(b, 1).snapshot[Limit::kRequests].remaining(), 9);   // b starts afresh
}

}  // namespace
}  // namespace zl::limits
