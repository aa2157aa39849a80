// FailoverBucketStore: a shared bucket store (Redis) with a policy for when
// it is unreachable, a background reconnect, and the backend's metrics.
//
//   --redis-fail open (default): a take that finds the backend down is served
//     by a LocalBucketStore in this process. Each replica then enforces every
//     limit on its own (N replicas admit up to N budgets) until the backend
//     is back; the shared buckets resume where Redis left them, and the
//     local ones are dropped (the next outage starts with full buckets; their
//     memory is bounded by the keys used during one outage).
//   --redis-fail closed: such a take fails with ErrorReason::
//     kQuotaBackendUnavailable (HTTP 503 on both APIs, retry-after 1 s).
//
// A failed take marks the backend down and wakes the reconnect thread, which
// calls connect() with a backoff doubling from 100 ms to 2 s until it
// succeeds. Requests never wait on a reconnect: while the backend is down a
// take does not touch it at all (one atomic load decides). State changes are
// logged once each (warn when down, info when back), not per request.
//
// Metrics (registered in FailoverOptions::registry when given):
//   zerolayer_quota_backend_errors_total{backend,kind}  kind: connect, timeout, io, reply
//     (failed takes, and failed reconnect attempts as kind=connect or what failed)
//   zerolayer_quota_backend_up{backend}  1 while the backend answers, else 0
//
// Thread-safety: take() from any thread; the hot path (backend up) adds one
// relaxed atomic load to the backend's own take.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "limits/bucket_store.h"

namespace zl::obs {
class Counter;
class Gauge;
class Registry;
}  // namespace zl::obs

namespace zl::limits {

// Why a call to a shared store failed; its name is the metric's `kind` label.
enum class BackendFailure {
  kNone,     // it did not (or the error is the caller's: a bad op)
  kConnect,  // no connection: refused, unresolvable, or dropped earlier
  kTimeout,  // connect or command timeout
  kIo,       // the connection broke mid-command
  kReply,    // the backend answered with an error or an unexpected reply
};
inline constexpr int kNumBackendFailures = 5;
std::string_view backend_failure_name(BackendFailure f);  // "none", "connect", "timeout", "io", "reply"

// A BucketStore in another process, that can fail and reconnect.
class SharedBucketStore : public BucketStore {
 public:
  // (Re)connects; kNone on success, else why not (`*error`: a message for
  // the log). May block up to the backend's connect timeout. Thread-safe.
  virtual BackendFailure connect(std::string* error) = 0;
  // take(), reporting why it failed: `*failure` is kNone on success and for
  // errors that are the caller's (a non-positive limit). Thread-safe.
  virtual Result<TakeResult> take_shared(std::span<const BucketOp> ops, BackendFailure* failure) = 0;
  // "redis 127.0.0.1:6379/0": for logs.
  virtual std::string describe() const = 0;

  Result<TakeResult> take(std::span<const BucketOp> ops) override {
    BackendFailure f = BackendFailure::kNone;
    return take_shared(ops, &f);
  }
};

enum class FailMode { kOpen, kClosed };

struct FailoverOptions {
  FailMode mode = FailMode::kOpen;
  std::string backend = "redis";  // the metrics' `backend` label
  std::chrono::milliseconds backoff_min{100};
  std::chrono::milliseconds backoff_max{2000};
  std::chrono::milliseconds retry_after{1000};  // closed mode: the 503's retry-after
  obs::Registry* registry = nullptr;            // where the metrics go; null: not exported
  LocalBucketStore::Now local_clock;            // the fallback's clock (tests); default steady_clock
};

class FailoverBucketStore final : public BucketStore {
 public:
  FailoverBucketStore(std::unique_ptr<SharedBucketStore> primary, FailoverOptions options);
  // Stops and joins the reconnect thread.
  ~FailoverBucketStore() override;
  FailoverBucketStore(const FailoverBucketStore&) = delete;
  FailoverBucketStore& operator=(const FailoverBucketStore&) = delete;

  // Connects once, synchronously (start-up: up to the backend's connect
  // timeout), then starts the reconnect thread. A failure is logged and left
  // to that thread; returns whether the backend is up. Call once.
  bool start();
  // The primary's take while it is up; when it is not (or this take finds
  // it failing): the local buckets (open) or kQuotaBackendUnavailable
  // (closed). A bad op's error passes through. Thread-safe.
  Result<TakeResult> take(std::span<const BucketOp> ops) override;

  bool up() const { return up_.load(std::memory_order_acquire); }
  FailMode mode() const { return options_.mode; }
  // The fallback buckets (open mode), e.g. for forget_except().
  LocalBucketStore& local() { return local_; }
  // Backend errors counted so far, by kind (also when no registry was given).
  int64_t n_errors(BackendFailure f) const;

 private:
  void mark_down(BackendFailure f, const std::string& message);
  void count(BackendFailure f);
  void set_up_gauge(bool up);
  void reconnect_loop();
  Result<TakeResult> fallback(std::span<const BucketOp> ops);

  const std::unique_ptr<SharedBucketStore> primary_;
  const FailoverOptions options_;
  LocalBucketStore local_;
  std::array<std::atomic<int64_t>, kNumBackendFailures> n_errors_{};
  std::array<obs::Counter*, kNumBackendFailures> error_counters_{};
  obs::Gauge* up_gauge_ = nullptr;

  std::atomic<bool> up_{false};
  std::atomic<bool> served_{false};  // a take succeeded on the current connection
  std::mutex mu_;  // guards the up -> down transition, stop_, and the thread's waits
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread reconnect_;
};

}  // namespace zl::limits
