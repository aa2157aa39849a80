// Token buckets for per-key quotas, behind one interface so that the buckets
// can live in this process (LocalBucketStore) or in Redis, shared by every
// replica (RedisBucketStore, limits/redis_store.h).
//
// A bucket holds up to `capacity` = limit_per_minute units and refills
// continuously at limit_per_minute / 60 units a second, from the time it was
// last touched; a bucket never seen before is full. Its level may go below
// zero (output tokens are charged as they are generated, after admission):
// it then refills from below zero.
//
// take() is the one operation, atomic over all its ops (one Lua script in
// Redis): refill every named bucket to now; if every op's bucket holds at
// least `need`, subtract every op's `amount` and report admitted; otherwise
// subtract nothing. How the quota layer uses it:
//   admission:   requests {need 1, amount 1}, input tokens {need n, amount n},
//                output tokens {need 1, amount 0} (room left, nothing charged yet)
//   generation:  output tokens {need -inf, amount k} (always taken)
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace zl::limits {

struct BucketOp {
  std::string key;              // names the bucket: "<tenant>:<limit>", e.g. "team-a:input_tokens"
  double limit_per_minute = 0;  // > 0: the capacity, and 1/60 of it refills each second
  double need = 0;              // the level required for the take to succeed
  double amount = 0;            // subtracted when every op's need is met
};

// A bucket's state after take(), for the rate-limit headers and retry-after.
struct BucketState {
  double level = 0;             // after the take (or unchanged, when refused)
  double seconds_to_full = 0;   // until level reaches capacity again (the "reset" headers)
  double seconds_to_need = 0;   // until level reaches this op's need; 0 when it already does
};

struct TakeResult {
  bool admitted = false;
  std::vector<BucketState> buckets;  // one per op, in order
};

class BucketStore {
 public:
  virtual ~BucketStore() = default;
  // Atomic over `ops` (see the header comment). Errors: the store is
  // unreachable (Redis down, timeout): kIo / kResourceExhausted, the caller
  // decides (fail open or closed). Thread-safe.
  virtual Result<TakeResult> take(std::span<const BucketOp> ops) = 0;
};

// Buckets in this process. The clock is injected (seconds, monotonic) so
// tests drive time; by default steady_clock. Thread-safe (one mutex: a take
// is a few hash lookups). Memory: one entry per bucket key ever taken;
// forget_except() drops the buckets of keys no longer configured.
class LocalBucketStore final : public BucketStore {
 public:
  using Now = std::function<double()>;
  explicit LocalBucketStore(Now now = {});
  Result<TakeResult> take(std::span<const BucketOp> ops) override;
  // Drops every bucket whose key does not start with one of `prefixes`.
  void forget_except(std::span<const std::string> prefixes);

 private:
  struct Bucket {
    double level = 0;
    double t_last = 0;  // the clock's seconds at the last refill
  };
  Now now_;
  std::mutex mu_;
  std::unordered_map<std::string, Bucket> buckets_;
};

}  // namespace zl::limits
