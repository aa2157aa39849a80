// FailoverBucketStore against a scripted SharedBucketStore (no Redis): the
// open and closed policies, the down/up transitions, the background
// reconnect with backoff, and the metrics. redis_store_test.cc runs the same
// wrapper over a real redis-server.
#include "limits/failover_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <thread>
#include <vector>

#include "obs/metrics.h"
#include "support/prom_text.h"
#include "support/wait.h"

namespace zl::limits {
namespace {

// A shared store whose health the test sets: while `healthy`, takes go to an
// inner LocalBucketStore (its buckets are "the shared ones"); otherwise each
// take fails with `failure`. connect() succeeds once `reachable`.
class ScriptedStore final : public SharedBucketStore {
 public:
  std::atomic<bool> healthy{true};
  std::atomic<bool> reachable{true};
  std::atomic<bool> heal_on_connect{true};  // false: connects succeed, takes keep failing
  std::atomic<BackendFailure> failure{BackendFailure::kIo};
  std::atomic<int> n_connects{0};
  std::atomic<int> n_takes{0};
  LocalBucketStore inner{[] { return 0.0; }};  // frozen clock: no refill

  BackendFailure connect(std::string* error) override {
    ++n_connects;
    if (!reachable) {
      *error = "connection refused";
      return BackendFailure::kConnect;
    }
    if (heal_on_connect) healthy = true;
    return BackendFailure::kNone;
  }
  Result<TakeResult> take_shared(std::span<const BucketOp> ops, BackendFailure* f) override {
    ++n_takes;
    *f = BackendFailure::kNone;
    if (!healthy) {
      *f = failure;
      return io_error("scripted failure");
    }
    return inner.take(ops);
  }
  std::string describe() const override { return "scripted"; }
};

struct Fixture {
  explicit Fixture(FailMode mode) {
    auto s = std::make_unique<ScriptedStore>();
    shared = s.get();
    store = std::make_unique<FailoverBucketStore>(
        std::move(s), FailoverOptions{.mode = mode,
                                      .backoff_min = std::chrono::milliseconds(1),
                                      .backoff_max = std::chrono::milliseconds(4),
                                      .registry = &registry,
                                      .local_clock = [] { return 0.0; }});
  }
  double metric(const std::string& name, const std::map<std::string, std::string>& labels) const {
    const test::PromText t = test::parse_prom_text(registry.render());
    EXPECT_TRUE(t.errors.empty());
    return t.value(name, labels);
  }
  obs::Registry registry;
  ScriptedStore* shared = nullptr;
  std::unique_ptr<FailoverBucketStore> store;
};

const BucketOp kOne{.key = "a:requests", .limit_per_minute = 2, .need = 1, .amount = 1};

TEST(FailoverBucketStore, OpenModeFallsBackToLocalBucketsAndReturns) {
  Fixture fx(FailMode::kOpen);
  ASSERT_TRUE(fx.store->start());
  fx.shared->reachable = false;  // the reconnect thread must not win before we look
  EXPECT_EQ(fx.metric("zerolayer_quota_backend_up", {{"backend", "redis"}}), 1);
  ASSERT_TRUE(fx.store->take(std::span(&kOne, 1))->admitted);  // shared bucket: 2 -> 1

  fx.shared->healthy = false;
  fx.shared->failure = BackendFailure::kTimeout;
  auto r = fx.store->take(std::span(&kOne, 1));  // fails on the backend, served locally (fresh: 2 -> 1)
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->admitted);
  EXPECT_DOUBLE_EQ(r->buckets[0].level, 1);
  EXPECT_FALSE(fx.store->up());
  const int takes = fx.shared->n_takes;
  EXPECT_TRUE(fx.store->take(std::span(&kOne, 1))->admitted);   // local 1 -> 0, backend not asked
  EXPECT_FALSE(fx.store->take(std::span(&kOne, 1))->admitted);  // local buckets enforce the limit
  EXPECT_EQ(fx.shared->n_takes, takes);
  EXPECT_EQ(fx.store->n_errors(BackendFailure::kTimeout), 1);
  EXPECT_EQ(fx.metric("zerolayer_quota_backend_errors_total", {{"backend", "redis"}, {"kind", "timeout"}}), 1);
  EXPECT_EQ(fx.metric("zerolayer_quota_backend_up", {{"backend", "redis"}}), 0);
  // Reconnect attempts fail (counted as connect errors, backoff 1 -> 4 ms) until reachable.
  ASSERT_TRUE(test::wait_until([&] { return fx.store->n_errors(BackendFailure::kConnect) >= 3; }));
  fx.shared->reachable = true;
  ASSERT_TRUE(test::wait_until([&] { return fx.store->up(); }));
  EXPECT_EQ(fx.metric("zerolayer_quota_backend_up", {{"backend", "redis"}}), 1);
  r = fx.store->take(std::span(&kOne, 1));  // the shared bucket again: 1 -> 0
  EXPECT_TRUE(r->admitted);
  EXPECT_DOUBLE_EQ(r->buckets[0].level, 0);
}

TEST(FailoverBucketStore, ClosedModeRefusesWithTheTypedReason) {
  Fixture fx(FailMode::kClosed);
  ASSERT_TRUE(fx.store->start());
  fx.shared->reachable = false;
  fx.shared->healthy = false;
  for (int i = 0; i < 3; ++i) {
    auto r = fx.store->take(std::span(&kOne, 1));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().reason(), ErrorReason::kQuotaBackendUnavailable);
    ASSERT_NE(r.status().detail(), nullptr);
    EXPECT_EQ(r.status().detail()->numbers.retry_after_ms, 1000);
  }
  EXPECT_EQ(fx.store->n_errors(BackendFailure::kIo), 1);  // one backend failure; the rest never reached it
  fx.shared->reachable = true;
  ASSERT_TRUE(test::wait_until([&] { return fx.store->up(); }));
  EXPECT_TRUE(fx.store->take(std::span(&kOne, 1))->admitted);
}

TEST(FailoverBucketStore, AnUnreachableBackendAtStartUpIsRetriedInTheBackground) {
  Fixture fx(FailMode::kOpen);
  fx.shared->reachable = false;
  EXPECT_FALSE(fx.store->start());
  EXPECT_EQ(fx.metric("zerolayer_quota_backend_up", {{"backend", "redis"}}), 0);
  EXPECT_TRUE(fx.store->take(std::span(&kOne, 1))->admitted);  // local
  EXPECT_EQ(fx.shared->n_takes, 0);
  fx.shared->reachable = true;
  ASSERT_TRUE(test::wait_until([&] { return fx.store->up(); }));
  EXPECT_GE(fx.metric("zerolayer_quota_backend_errors_total", {{"backend", "redis"}, {"kind", "connect"}}), 1);
}

TEST(FailoverBucketStore, TheCallersErrorsPassThroughWithoutMarkingTheBackendDown) {
  Fixture fx(FailMode::kClosed);
  ASSERT_TRUE(fx.store->start());
  const BucketOp bad{.key = "a:requests", .limit_per_minute = 0, .need = 1, .amount = 1};
  auto r = fx.store->take(std::span(&bad, 1));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().kind(), ErrorKind::kInvalidArgument);
  EXPECT_TRUE(fx.store->up());
  for (int k = 1; k < kNumBackendFailures; ++k) EXPECT_EQ(fx.store->n_errors(BackendFailure(k)), 0);
}

TEST(FailoverBucketStore, ConcurrentFailuresGoDownOnceAndComeBack) {
  Fixture fx(FailMode::kOpen);
  ASSERT_TRUE(fx.store->start());
  fx.shared->reachable = false;
  fx.shared->healthy = false;
  std::vector<std::thread> threads;
  std::atomic<int> n_ok{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      const BucketOp op{.key = "b:requests", .limit_per_minute = 1000, .need = 1, .amount = 1};
      for (int i = 0; i < 100; ++i) n_ok += fx.store->take(std::span(&op, 1)).ok();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(n_ok, 400);  // open: every take answered
  EXPECT_FALSE(fx.store->up());
  EXPECT_GE(fx.store->n_errors(BackendFailure::kIo), 1);
  EXPECT_LE(fx.store->n_errors(BackendFailure::kIo), 4);  // only takes that raced the down transition
  fx.shared->reachable = true;
  ASSERT_TRUE(test::wait_until([&] { return fx.store->up(); }));
}

// A backend that accepts every connection but fails every take: without
// the growing backoff each request would reconnect and fail again (and log
// twice). Not a timing assertion: a slow machine only makes fewer flaps.
TEST(FailoverBucketStore, ABackendThatFailsEveryTakeIsNotReconnectedPerRequest) {
  obs::Registry registry;
  auto s = std::make_unique<ScriptedStore>();
  ScriptedStore* shared = s.get();
  FailoverBucketStore store(std::move(s), FailoverOptions{.backoff_min = std::chrono::milliseconds(20),
                                                          .backoff_max = std::chrono::milliseconds(80),
                                                          .registry = &registry});
  ASSERT_TRUE(store.start());
  shared->failure = BackendFailure::kReply;
  shared->heal_on_connect = false;
  shared->healthy = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  int n = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    ASSERT_TRUE(store.take(std::span(&kOne, 1)).ok());  // open: always answered
    ++n;
  }
  // 300 ms of flaps at a backoff of 20, 40, 80, 80 ms: a handful of round trips, not one per take.
  EXPECT_GT(n, 100);
  EXPECT_LE(shared->n_takes, 12) << "takes " << n << ", connects " << shared->n_connects;
}

TEST(BackendFailure, NamesAreTheMetricLabels) {
  EXPECT_EQ(backend_failure_name(BackendFailure::kConnect), "connect");
  EXPECT_EQ(backend_failure_name(BackendFailure::kTimeout), "timeout");
  EXPECT_EQ(backend_failure_name(BackendFailure::kIo), "io");
  EXPECT_EQ(backend_failure_name(BackendFailure::kReply), "reply");
}

}  // namespace
}  // namespace zl::limits
