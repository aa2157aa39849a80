// RedisBucketStore: the token buckets of limits/bucket_store.h kept in Redis,
// so that every replica pointed at one Redis (`--redis`) enforces one budget
// per key.
//
// One take() is one EVALSHA of a Lua script (kTakeScript in redis_store.cc)
// that does exactly what LocalBucketStore::take does, atomically inside
// Redis: refill every named bucket from its last touch at limit/60 per second
// (capped at the capacity; a bucket never seen is full), check every op's
// need, subtract every amount or none. The clock is Redis's own
// (`redis.call('TIME')`), so replicas whose clocks differ still agree. Each
// bucket is a hash `<prefix><key>` with fields `l` (level) and `t` (last
// touch, seconds), with PEXPIRE set to when it would be full again: a full
// bucket and a missing one behave the same, so Redis holds only buckets that
// are in use. Levels cross the wire as %.17g strings (exact doubles; a Lua
// number returned to Redis would be truncated to an integer).
//
// Timeouts: connect 100 ms, each command 50 ms by default (RedisOptions); a
// host name is resolved at each connect (getaddrinfo, which the connect
// timeout does not bound: use an address where that matters). A
// timed-out or broken connection is dropped at once and take() then fails
// fast (no reconnect inside take(): requests never wait on a connect);
// connect() builds a new connection, called at start-up and by the failover
// wrapper's reconnect thread (limits/failover_store.h).
//
// Thread-safety and cost: take() and connect() may be called from any
// thread. One connection per store; a take costs one loopback round trip
// (tens of µs, see RedisBench in tests/unit/redis_store_test.cc), during
// which the calling (I/O) thread waits. Takes that arrive while a round trip
// is in flight are pipelined: the next caller sends all of them in one write
// and reads their replies in order (leader/follower, no extra thread), so
// concurrent takes share round trips. connect() does its slow part outside
// the connection's mutex. A timed-out take may still have been applied by
// Redis (the reply was lost, not the script): it is then both charged there
// and, with --redis-fail open, admitted against the local fallback.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "limits/failover_store.h"

struct redisContext;

namespace zl::limits {

// The parts of `redis://HOST:PORT[/DB]`.
struct RedisUrl {
  std::string host;  // a name, an IPv4 address, or an IPv6 address (given in [brackets])
  int port = 6379;
  int db = 0;
};

// Parses `redis://HOST[:PORT][/DB]` (port 1..65535, default 6379; db 0..
// 1000000, default 0). Errors (kInvalidArgument) say what is wrong and show
// the expected form; the caller prefixes the setting's origin (--redis).
// No user name, password or query: this server does not send AUTH.
Result<RedisUrl> parse_redis_url(std::string_view url);

struct RedisOptions {
  RedisUrl url;
  std::chrono::milliseconds connect_timeout{100};
  std::chrono::milliseconds command_timeout{50};
  std::string key_prefix = "zl:bucket:";  // every bucket's hash is <prefix><BucketOp::key>
};

class RedisBucketStore final : public SharedBucketStore {
 public:
  explicit RedisBucketStore(RedisOptions options);
  ~RedisBucketStore() override;
  RedisBucketStore(const RedisBucketStore&) = delete;
  RedisBucketStore& operator=(const RedisBucketStore&) = delete;

  // Connects (replacing any connection), SELECTs the db and loads the script.
  // Blocks up to about connect_timeout + 3 command timeouts. Thread-safe.
  BackendFailure connect(std::string* error) override;
  // One EVALSHA (and, after NOSCRIPT, one SCRIPT LOAD and one retry). Without
  // a connection it fails at once with kConnect. Thread-safe.
  Result<TakeResult> take_shared(std::span<const BucketOp> ops, BackendFailure* failure) override;
  std::string describe() const override;
  // Takes sent and round trips (batches) made so far: their ratio is the
  // pipelining's gain (the benchmark prints it).
  int64_t n_takes() const { return n_takes_.load(std::memory_order_relaxed); }
  int64_t n_round_trips() const { return n_round_trips_.load(std::memory_order_relaxed); }

 private:
  struct ContextDeleter {
    void operator()(redisContext* c) const;
  };
  using Context = std::unique_ptr<redisContext, ContextDeleter>;

  // One queued take (see take_shared): answered by whichever caller leads its batch.
  struct Pending {
    std::span<const BucketOp> ops;
    std::optional<Result<TakeResult>> result;
    BackendFailure failure = BackendFailure::kNone;
    bool done = false;  // under queue_mu_
  };
  std::vector<std::string> take_args(std::span<const BucketOp> ops) const;  // EVALSHA sha n keys... args... (mu_ held)
  void run_batch(std::vector<Pending*>& batch);
  void retry_after_noscript(std::vector<Pending*>& takes);

  const RedisOptions options_;
  std::mutex mu_;    // the connection: held by a batch's leader and by connect()'s swap
  Context ctx_;      // null while disconnected
  std::string sha_;  // the script's SHA1, as SCRIPT LOAD answered
  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::vector<Pending*> queue_;   // takes waiting for the next batch
  bool batch_in_flight_ = false;  // a leader is sending or reading a batch
  std::atomic<int64_t> n_takes_{0};
  std::atomic<int64_t> n_round_trips_{0};
};

// The bucket store of `serve --redis URL --redis-fail open|closed`: a
// FailoverBucketStore over a RedisBucketStore, started (one connect attempt,
// at most ~250 ms; a failure is logged and retried in the background),
// reporting its metrics into `registry`. Errors: a bad URL or mode
// (kInvalidArgument; resolve_serve_config has checked both already).
Result<std::unique_ptr<FailoverBucketStore>> open_redis_bucket_store(std::string_view url, std::string_view fail_mode,
                                                                     obs::Registry* registry);

}  // namespace zl::limits
