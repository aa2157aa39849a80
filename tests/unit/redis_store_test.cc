// RedisBucketStore and FailoverBucketStore against a real redis-server
// (tests/support/redis_server.h starts one per test on a free loopback port;
// the tests print SKIPPED without the binary). The Redis store must behave as
// LocalBucketStore does: the comparison runs random op sequences through
// both, the local one on a frozen clock, with amounts chosen so that the
// little refill Redis's real clock adds during the test cannot change a
// decision (see MatchesTheLocalStoreOnRandomSequences).
//
// RedisBench.TakeRoundTrip prints the cost of a take (µs/op) on loopback.
#include "limits/redis_store.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <thread>

#include "obs/metrics.h"
#include "support/prom_text.h"
#include "support/redis_server.h"
#include "support/wait.h"

namespace zl::limits {
namespace {

using test::RedisServer;
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::unique_ptr<RedisBucketStore> connected_store(const RedisServer& redis, int db = -1) {
  auto url = parse_redis_url(redis.url(db));
  EXPECT_TRUE(url.ok()) << url.status().to_string();
  auto store = std::make_unique<RedisBucketStore>(RedisOptions{.url = *url});
  std::string error;
  EXPECT_EQ(store->connect(&error), BackendFailure::kNone) << error;
  return store;
}

#define START_REDIS_OR_SKIP(redis)                                  \
  RedisServer redis;                                                \
  if (!RedisServer::available()) GTEST_SKIP() << RedisServer::skip_reason(); \
  ASSERT_TRUE(redis.start()) << "redis-server did not start"

// ---------------------------------------------------------------- URL

TEST(RedisUrl, ParsesHostPortAndDatabase) {
  auto u = parse_redis_url("redis://127.0.0.1:6380/3");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 6380);
  EXPECT_EQ(u->db, 3);
  u = parse_redis_url("redis://cache.internal");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "cache.internal");
  EXPECT_EQ(u->port, 6379);
  EXPECT_EQ(u->db, 0);
  u = parse_redis_url("redis://[::1]:7000/");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, 7000);
}

TEST(RedisUrl, RejectsWhatItCannotUseWithTheExpectedForm) {
  for (const char* bad : {"", "127.0.0.1:6379", "http://h:1", "redis://", "redis://:6379", "redis://h:", "redis://h:0",
                          "redis://h:70000", "redis://h:12x", "redis://h:1/db", "redis://h:1/-1", "redis://u:p@h:1",
                          "redis://h:1?x=1", "redis://::1:6379", "redis://[::1", "redis://[::1]x"}) {
    auto u = parse_redis_url(bad);
    ASSERT_FALSE(u.ok()) << bad;
    EXPECT_EQ(u.status().kind(), ErrorKind::kInvalidArgument);
    EXPECT_NE(u.status().message().find("expected redis://HOST:PORT[/DB]"), std::string::npos) << u.status().message();
  }
}

TEST(OpenRedisBucketStore, ChecksItsArgumentsAndStartsWhileRedisIsDown) {
  obs::Registry registry;
  EXPECT_EQ(open_redis_bucket_store("redis://h:0", "open", &registry).status().kind(), ErrorKind::kInvalidArgument);
  EXPECT_EQ(open_redis_bucket_store("redis://h:1", "maybe", &registry).status().kind(), ErrorKind::kInvalidArgument);
  // Nothing listens there: the store starts anyway, down, and serves open from local buckets.
  const std::string url = "redis://127.0.0.1:" + std::to_string(RedisServer::free_port());
  auto store = open_redis_bucket_store(url, "open", &registry);
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  EXPECT_FALSE((*store)->up());
  EXPECT_EQ((*store)->mode(), FailMode::kOpen);
  const BucketOp req{.key = "x:requests", .limit_per_minute = 1, .need = 1, .amount = 1};
  EXPECT_TRUE((*store)->take(std::span(&req, 1))->admitted);
  EXPECT_FALSE((*store)->take(std::span(&req, 1))->admitted);
  const test::PromText t = test::parse_prom_text(registry.render());
  EXPECT_EQ(t.value("zerolayer_quota_backend_up", {{"backend", "redis"}}), 0);
  EXPECT_GE(t.value("zerolayer_quota_backend_errors_total", {{"backend", "redis"}, {"kind", "connect"}}), 1);
}

// ---------------------------------------------------------------- the store

// Each bucket's limit is 6 granules and every need and amount a whole number
// of granules: the local levels stay whole granules, and Redis's extra refill
// (at most limit/60 per second of test time, < 1 granule in 10 s) changes no
// decision. Levels and times then agree within that refill.
TEST(RedisBucketStore, MatchesTheLocalStoreOnRandomSequences) {
  START_REDIS_OR_SKIP(redis);
  auto shared = connected_store(redis);
  LocalBucketStore local([] { return 5000.0; });
  struct Key {
    std::string name;
    double granule;
  };
  const Key keys[] = {{"t:requests", 1}, {"t:input_tokens", 1000}, {"u:output_tokens", 10}};
  std::mt19937 rng(15);
  int n_admitted = 0, n_refused = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int step = 0; step < 400; ++step) {
    std::vector<BucketOp> ops(1 + rng() % 3);  // may name one key twice, like the local store allows
    for (BucketOp& op : ops) {
      const Key& k = keys[rng() % 3];
      const double units = k.granule * static_cast<double>(rng() % 4);
      op = {.key = k.name, .limit_per_minute = 6 * k.granule};
      switch (rng() % 3) {
        case 0: op.need = units, op.amount = units; break;      // admission
        case 1: op.need = k.granule, op.amount = 0; break;      // room check
        default: op.need = kNegInf, op.amount = units; break;  // a charge, may go negative
      }
    }
    auto want = local.take(ops);
    auto got = shared->take(ops);
    ASSERT_TRUE(want.ok());
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    const double elapsed = seconds_since(t0);
    ASSERT_LT(elapsed, 10.0) << "too slow for the granule argument";
    ASSERT_EQ(got->admitted, want->admitted) << "step " << step;
    (want->admitted ? n_admitted : n_refused)++;
    for (size_t i = 0; i < ops.size(); ++i) {
      const double rate = ops[i].limit_per_minute / 60;
      const BucketState& w = want->buckets[i];
      const BucketState& g = got->buckets[i];
      SCOPED_TRACE("step " + std::to_string(step) + " op " + std::to_string(i) + " " + ops[i].key);
      EXPECT_GE(g.level, w.level - 1e-9);
      EXPECT_LE(g.level, w.level + rate * elapsed + 1e-9);
      EXPECT_LE(g.seconds_to_full, w.seconds_to_full + 1e-9);
      EXPECT_GE(g.seconds_to_full, w.seconds_to_full - elapsed - 1e-9);
      EXPECT_EQ(g.seconds_to_need == 0, w.seconds_to_need == 0);
      EXPECT_LE(g.seconds_to_need, w.seconds_to_need + 1e-9);
      EXPECT_GE(g.seconds_to_need, w.seconds_to_need - elapsed - 1e-9);
    }
  }
  EXPECT_GT(n_admitted, 50);  // both outcomes exercised
  EXPECT_GT(n_refused, 50);
}

TEST(RedisBucketStore, AFreshBucketIsFullAndATakeIsAllOrNothing) {
  START_REDIS_OR_SKIP(redis);
  auto store = connected_store(redis);
  const BucketOp ops[] = {{.key = "a:requests", .limit_per_minute = 10, .need = 1, .amount = 1},
                          {.key = "a:input_tokens", .limit_per_minute = 100, .need = 150, .amount = 150}};
  auto r = store->take(ops);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->admitted);
  EXPECT_DOUBLE_EQ(r->buckets[0].level, 10);  // nothing taken from the bucket that had room
  EXPECT_DOUBLE_EQ(r->buckets[1].level, 100);
  EXPECT_NEAR(r->buckets[1].seconds_to_need, 30, 1e-9);  // 50 missing at 100/60 a second
  r = store->take(std::span(ops, 1));
  ASSERT_TRUE(r->admitted);
  // Real time passed between the two takes: at 10/60 a second, a loaded
  // machine's second at most.
  EXPECT_GE(r->buckets[0].level, 9);
  EXPECT_LE(r->buckets[0].level, 9 + 10.0 / 60);
  EXPECT_LE(r->buckets[0].seconds_to_full, 6);
  EXPECT_GE(r->buckets[0].seconds_to_full, 5);
}

TEST(RedisBucketStore, TheLevelIsCappedAtTheCapacityLikeTheLocalStore) {
  START_REDIS_OR_SKIP(redis);
  auto store = connected_store(redis);
  LocalBucketStore local([] { return 0.0; });
  // A lowered limit (keys file reloaded) caps a fuller bucket at once.
  const BucketOp before{.key = "cap:requests", .limit_per_minute = 120, .need = 10, .amount = 10};
  const BucketOp after{.key = "cap:requests", .limit_per_minute = 60, .need = 0, .amount = 0};
  for (BucketStore* s : {static_cast<BucketStore*>(store.get()), static_cast<BucketStore*>(&local)}) {
    ASSERT_TRUE(s->take(std::span(&before, 1))->admitted);
    auto r = s->take(std::span(&after, 1));
    ASSERT_TRUE(r.ok());
    EXPECT_DOUBLE_EQ(r->buckets[0].level, 60);
    EXPECT_DOUBLE_EQ(r->buckets[0].seconds_to_full, 0);
  }
}

TEST(RedisBucketStore, ChargesGoNegativeAndRefillOnRedisTime) {
  START_REDIS_OR_SKIP(redis);
  auto store = connected_store(redis);
  // 60000 a minute: 1000 a second, so the refill is visible within milliseconds.
  const BucketOp charge{.key = "a:output_tokens", .limit_per_minute = 60000, .need = kNegInf, .amount = 60100};
  auto r = store->take(std::span(&charge, 1));
  ASSERT_TRUE(r->admitted);
  EXPECT_LT(r->buckets[0].level, -99);
  const BucketOp room{.key = "a:output_tokens", .limit_per_minute = 60000, .need = 1, .amount = 0};
  r = store->take(std::span(&room, 1));
  ASSERT_TRUE(r.ok());
  if (!r->admitted) {
    EXPECT_GT(r->buckets[0].seconds_to_need, 0);
    EXPECT_LE(r->buckets[0].seconds_to_need, 0.101 + 1e-9);  // at most 101 units at 1000/s
  }
  EXPECT_TRUE(test::wait_until([&] { return store->take(std::span(&room, 1))->admitted; }));
}

TEST(RedisBucketStore, AnAbsurdDebtIsStillATakeWithAnExpiry) {
  START_REDIS_OR_SKIP(redis);
  auto store = connected_store(redis);
  const BucketOp charge{.key = "d:output_tokens", .limit_per_minute = 1, .need = kNegInf, .amount = 1e15};
  auto r = store->take(std::span(&charge, 1));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_DOUBLE_EQ(r->buckets[0].level, 1 - 1e15);
  const std::string pttl = RedisServer::command(redis.client().get(), "PTTL zl:bucket:d:output_tokens");
  EXPECT_GT(std::stoll(pttl), 0) << pttl;  // capped (31,000 years), but set
}

TEST(RedisBucketStore, BucketsExpireWhenTheyWouldBeFullAgain) {
  START_REDIS_OR_SKIP(redis);
  auto store = connected_store(redis);
  auto client = redis.client();
  ASSERT_TRUE(client);
  const BucketOp slow{.key = "k:requests", .limit_per_minute = 6, .need = 1, .amount = 3};  // full in 30 s
  ASSERT_TRUE(store->take(std::span(&slow, 1))->admitted);
  const int pttl = std::stoi(RedisServer::command(client.get(), "PTTL zl:bucket:k:requests"));
  EXPECT_GT(pttl, 29000);
  EXPECT_LE(pttl, 30002);
  EXPECT_EQ(RedisServer::command(client.get(), "HGET zl:bucket:k:requests l"), "3");
  const BucketOp fast{.key = "k:input_tokens", .limit_per_minute = 60000, .need = 1, .amount = 20};  // 20 ms
  ASSERT_TRUE(store->take(std::span(&fast, 1))->admitted);
  EXPECT_TRUE(test::wait_until(
      [&] { return RedisServer::command(client.get(), "EXISTS zl:bucket:k:input_tokens") == "0"; }));
}

TEST(RedisBucketStore, TwoReplicasShareOneBudget) {
  START_REDIS_OR_SKIP(redis);
  auto a = connected_store(redis);
  auto b = connected_store(redis);
  const BucketOp req{.key = "team:requests", .limit_per_minute = 3, .need = 1, .amount = 1};
  EXPECT_TRUE(a->take(std::span(&req, 1))->admitted);
  EXPECT_TRUE(a->take(std::span(&req, 1))->admitted);
  EXPECT_TRUE(b->take(std::span(&req, 1))->admitted);
  auto r = b->take(std::span(&req, 1));
  EXPECT_FALSE(r->admitted);
  EXPECT_GT(r->buckets[0].seconds_to_need, 19);  // 1 unit at 3/min: ~20 s
  EXPECT_FALSE(a->take(std::span(&req, 1))->admitted);
}

TEST(RedisBucketStore, ConcurrentTakesArePipelinedWithoutLosingOrDoublingAny) {
  START_REDIS_OR_SKIP(redis);
  auto store = connected_store(redis);
  const BucketOp req{.key = "p:requests", .limit_per_minute = 200, .need = 1, .amount = 1};
  std::atomic<int> n_admitted{0}, n_failed{0};
  std::vector<std::thread> threads;
  const auto t0 = std::chrono::steady_clock::now();
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        auto r = store->take(std::span(&req, 1));
        if (!r.ok()) ++n_failed;
        else if (r->admitted) ++n_admitted;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(n_failed, 0);
  // 400 takes of a 200 bucket: 200 admitted, plus what refilled meanwhile (200/60 a second).
  EXPECT_GE(n_admitted, 200);
  EXPECT_LE(n_admitted, 200 + static_cast<int>(std::ceil(200.0 / 60 * seconds_since(t0))));
}

TEST(RedisBucketStore, SelectsTheDatabaseOfTheUrl) {
  START_REDIS_OR_SKIP(redis);
  auto store = connected_store(redis, 5);
  const BucketOp req{.key = "db:requests", .limit_per_minute = 3, .need = 1, .amount = 1};
  ASSERT_TRUE(store->take(std::span(&req, 1))->admitted);
  EXPECT_EQ(RedisServer::command(redis.client(5).get(), "EXISTS zl:bucket:db:requests"), "1");
  EXPECT_EQ(RedisServer::command(redis.client(0).get(), "EXISTS zl:bucket:db:requests"), "0");
}

TEST(RedisBucketStore, LoadsTheScriptAgainAfterTheServerForgetsIt) {
  START_REDIS_OR_SKIP(redis);
  auto store = connected_store(redis);
  const BucketOp req{.key = "s:requests", .limit_per_minute = 3, .need = 1, .amount = 1};
  ASSERT_TRUE(store->take(std::span(&req, 1))->admitted);
  ASSERT_EQ(RedisServer::command(redis.client().get(), "SCRIPT FLUSH"), "OK");
  BackendFailure f = BackendFailure::kReply;
  auto r = store->take_shared(std::span(&req, 1), &f);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(f, BackendFailure::kNone);
  EXPECT_GE(r->buckets[0].level, 1);  // 3 - 2, plus at most a second's refill at 3/60 a second
  EXPECT_LE(r->buckets[0].level, 1.05);
}

TEST(RedisBucketStore, FailsFastAndTypedWhenTheServerIsGoneOrFrozen) {
  START_REDIS_OR_SKIP(redis);
  auto store = connected_store(redis);
  const BucketOp req{.key = "f:requests", .limit_per_minute = 3, .need = 1, .amount = 1};
  const BucketOp bad{.key = "f:requests", .limit_per_minute = -1, .need = 1, .amount = 1};
  BackendFailure f = BackendFailure::kNone;
  EXPECT_EQ(store->take_shared(std::span(&bad, 1), &f).status().kind(), ErrorKind::kInvalidArgument);
  EXPECT_EQ(f, BackendFailure::kNone);  // the caller's error, not the backend's

  redis.pause();  // the command times out (50 ms) and the connection is dropped
  auto r = store->take_shared(std::span(&req, 1), &f);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(f, BackendFailure::kTimeout) << r.status().to_string();
  redis.resume();
  r = store->take_shared(std::span(&req, 1), &f);  // no reconnect inside take
  EXPECT_EQ(f, BackendFailure::kConnect) << r.status().to_string();
  std::string error;
  ASSERT_EQ(store->connect(&error), BackendFailure::kNone) << error;
  ASSERT_TRUE(store->take(std::span(&req, 1)).ok());

  redis.kill();
  r = store->take_shared(std::span(&req, 1), &f);
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(f == BackendFailure::kIo || f == BackendFailure::kConnect) << backend_failure_name(f);
  EXPECT_EQ(store->connect(&error), BackendFailure::kConnect);
  EXPECT_NE(error.find("connect"), std::string::npos) << error;
}

// ---------------------------------------------------------------- failover

struct FailoverFixture {
  FailoverFixture(const RedisServer& redis, FailMode mode) {
    auto url = parse_redis_url(redis.url());
    store = std::make_unique<FailoverBucketStore>(std::make_unique<RedisBucketStore>(RedisOptions{.url = *url}),
                                                  FailoverOptions{.mode = mode, .registry = &registry});
  }
  double metric(const std::string& name, const std::string& kind = "") const {
    const test::PromText t = test::parse_prom_text(registry.render());
    std::map<std::string, std::string> labels = {{"backend", "redis"}};
    if (!kind.empty()) labels["kind"] = kind;
    return t.value(name, labels);
  }
  double errors() const {
    double n = 0;
    for (const char* k : {"connect", "timeout", "io", "reply"}) n += metric("zerolayer_quota_backend_errors_total", k);
    return n;
  }
  obs::Registry registry;
  std::unique_ptr<FailoverBucketStore> store;
};

TEST(FailoverRedis, OpenModeServesThroughAnOutageAndReconnects) {
  START_REDIS_OR_SKIP(redis);
  FailoverFixture fx(redis, FailMode::kOpen);
  ASSERT_TRUE(fx.store->start());
  EXPECT_EQ(fx.metric("zerolayer_quota_backend_up"), 1);
  const BucketOp req{.key = "o:requests", .limit_per_minute = 2, .need = 1, .amount = 1};
  ASSERT_TRUE(fx.store->take(std::span(&req, 1))->admitted);
  ASSERT_TRUE(fx.store->take(std::span(&req, 1))->admitted);
  ASSERT_FALSE(fx.store->take(std::span(&req, 1))->admitted);  // the shared bucket is empty

  redis.kill();
  auto r = fx.store->take(std::span(&req, 1));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->admitted);  // a fresh local bucket
  EXPECT_FALSE(fx.store->up());
  EXPECT_EQ(fx.metric("zerolayer_quota_backend_up"), 0);
  EXPECT_GE(fx.errors(), 1);
  EXPECT_TRUE(fx.store->take(std::span(&req, 1))->admitted);
  EXPECT_FALSE(fx.store->take(std::span(&req, 1))->admitted);  // local buckets still enforce

  ASSERT_TRUE(redis.start());  // same port, empty (no persistence)
  ASSERT_TRUE(test::wait_until([&] { return fx.metric("zerolayer_quota_backend_up") == 1; }));
  r = fx.store->take(std::span(&req, 1));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->admitted);  // the new server's fresh bucket
  EXPECT_EQ(RedisServer::command(redis.client().get(), "EXISTS zl:bucket:o:requests"), "1");
}

TEST(FailoverRedis, ClosedModeRefusesDuringAnOutageAndReconnects) {
  START_REDIS_OR_SKIP(redis);
  FailoverFixture fx(redis, FailMode::kClosed);
  ASSERT_TRUE(fx.store->start());
  const BucketOp req{.key = "c:requests", .limit_per_minute = 5, .need = 1, .amount = 1};
  ASSERT_TRUE(fx.store->take(std::span(&req, 1))->admitted);
  redis.kill();
  for (int i = 0; i < 2; ++i) {
    auto r = fx.store->take(std::span(&req, 1));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().reason(), ErrorReason::kQuotaBackendUnavailable);
    EXPECT_EQ(r.status().detail()->numbers.retry_after_ms, 1000);
  }
  EXPECT_EQ(fx.metric("zerolayer_quota_backend_up"), 0);
  ASSERT_TRUE(test::wait_until([&] { return fx.metric("zerolayer_quota_backend_errors_total", "connect") >= 2; }));
  ASSERT_TRUE(redis.start());
  ASSERT_TRUE(test::wait_until([&] { return fx.store->up(); }));
  EXPECT_EQ(fx.metric("zerolayer_quota_backend_up"), 1);
  EXPECT_TRUE(fx.store->take(std::span(&req, 1))->admitted);
}

TEST(FailoverRedis, AFrozenServerCountsTimeouts) {
  START_REDIS_OR_SKIP(redis);
  FailoverFixture fx(redis, FailMode::kOpen);
  ASSERT_TRUE(fx.store->start());
  const BucketOp req{.key = "z:requests", .limit_per_minute = 5, .need = 1, .amount = 1};
  redis.pause();
  EXPECT_TRUE(fx.store->take(std::span(&req, 1))->admitted);  // timed out, served locally
  EXPECT_GE(fx.metric("zerolayer_quota_backend_errors_total", "timeout"), 1);  // reconnects may time out too
  redis.resume();
  ASSERT_TRUE(test::wait_until([&] { return fx.store->up(); }));
}

// ---------------------------------------------------------------- benchmark

// Not a timing assertion: prints what a take costs, local and on loopback
// Redis (one bucket, and the three an admission takes), single-threaded and
// from 4 and 16 threads sharing the one (pipelined) connection, with the
// takes each round trip carried.
TEST(RedisBench, TakeRoundTrip) {
  START_REDIS_OR_SKIP(redis);
  auto store = connected_store(redis);
  LocalBucketStore local;
  const BucketOp one[] = {{.key = "b:requests", .limit_per_minute = 1e9, .need = 1, .amount = 1}};
  const BucketOp three[] = {{.key = "b:requests", .limit_per_minute = 1e9, .need = 1, .amount = 1},
                            {.key = "b:input_tokens", .limit_per_minute = 1e12, .need = 500, .amount = 500},
                            {.key = "b:output_tokens", .limit_per_minute = 1e12, .need = 1, .amount = 0}};
  auto us_per_op = [](int n, auto&& fn) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) fn();
    return seconds_since(t0) * 1e6 / n;
  };
  const int n = 3000;
  const double local3 = us_per_op(n * 10, [&] { ASSERT_TRUE(local.take(three)->admitted); });
  const double redis1 = us_per_op(n, [&] { ASSERT_TRUE(store->take(one)->admitted); });
  const double redis3 = us_per_op(n, [&] { ASSERT_TRUE(store->take(three)->admitted); });
  auto threaded = [&](int n_threads) {
    std::vector<std::thread> threads;
    const auto t0 = std::chrono::steady_clock::now();
    for (int t = 0; t < n_threads; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < n / n_threads; ++i) EXPECT_TRUE(store->take(three)->admitted);
      });
    }
    for (auto& t : threads) t.join();
    return seconds_since(t0) * 1e6 / (n / n_threads * n_threads);
  };
  int64_t takes0 = store->n_takes(), trips0 = store->n_round_trips();
  const double redis3_t4 = threaded(4);
  const double per_trip4 = double(store->n_takes() - takes0) / double(store->n_round_trips() - trips0);
  takes0 = store->n_takes(), trips0 = store->n_round_trips();
  const double redis3_t16 = threaded(16);
  const double per_trip16 = double(store->n_takes() - takes0) / double(store->n_round_trips() - trips0);
  std::printf("bench: take, 3 buckets, local: %.2f us/op\n", local3);
  std::printf("bench: take, 1 bucket, redis loopback: %.1f us/op\n", redis1);
  std::printf("bench: take, 3 buckets, redis loopback: %.1f us/op (%.0fx local)\n", redis3, redis3 / local3);
  std::printf("bench: take, 3 buckets, redis loopback, from 4 / 16 threads: %.1f / %.1f us/op wall, "
              "%.1f / %.1f takes per round trip\n",
              redis3_t4, redis3_t16, per_trip4, per_trip16);
}

}  // namespace
}  // namespace zl::limits
