#include "limits/failover_store.h"

#include <algorithm>

#include "core/log.h"
#include "obs/metrics.h"

namespace zl::limits {

std::string_view backend_failure_name(BackendFailure f) {
  switch (f) {
    case BackendFailure::kNone: return "none";
    case BackendFailure::kConnect: return "connect";
    case BackendFailure::kTimeout: return "timeout";
    case BackendFailure::kIo: return "io";
    case BackendFailure::kReply: return "reply";
  }
  return "none";
}

FailoverBucketStore::FailoverBucketStore(std::unique_ptr<SharedBucketStore> primary, FailoverOptions options)
    : primary_(std::move(primary)), options_(std::move(options)), local_(options_.local_clock) {
  CHECK(primary_ != nullptr);
  if (options_.registry) {
    obs::Family& errors = options_.registry->add(
        "zerolayer_quota_backend_errors_total",
        "Failed calls to the shared quota backend (--redis): takes and reconnect attempts, by kind (connect, "
        "timeout, io, reply)",
        obs::MetricType::kCounter, {"backend", "kind"});
    for (int k = 1; k < kNumBackendFailures; ++k) {
      error_counters_[k] = &errors.counter({options_.backend, std::string(backend_failure_name(BackendFailure(k)))});
    }
    up_gauge_ = &options_.registry
                     ->add("zerolayer_quota_backend_up",
                           "1 while the shared quota backend (--redis) answers, 0 while requests use the fallback "
                           "(--redis-fail open) or are refused (closed)",
                           obs::MetricType::kGauge, {"backend"})
                     .gauge({options_.backend});
  }
}

FailoverBucketStore::~FailoverBucketStore() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (reconnect_.joinable()) reconnect_.join();
}

bool FailoverBucketStore::start() {
  CHECK(!reconnect_.joinable()) << "FailoverBucketStore::start called twice";
  std::string error;
  const BackendFailure f = primary_->connect(&error);
  if (f == BackendFailure::kNone) {
    up_.store(true, std::memory_order_release);
    set_up_gauge(true);
    log::info("quota backend connected", {{"backend", primary_->describe()}});
  } else {
    count(f);
    set_up_gauge(false);
    log::warn("quota backend unreachable at start-up; reconnecting in the background",
              {{"backend", primary_->describe()},
               {"kind", backend_failure_name(f)},
               {"error", error},
               {"redis_fail", options_.mode == FailMode::kOpen ? "open" : "closed"}});
  }
  reconnect_ = std::thread([this] { reconnect_loop(); });
  return f == BackendFailure::kNone;
}

Result<TakeResult> FailoverBucketStore::take(std::span<const BucketOp> ops) {
  if (up_.load(std::memory_order_acquire)) {
    BackendFailure f = BackendFailure::kNone;
    auto r = primary_->take_shared(ops, &f);
    if (r.ok() && !served_.load(std::memory_order_relaxed)) served_.store(true, std::memory_order_relaxed);
    if (r.ok() || f == BackendFailure::kNone) return r;
    count(f);
    mark_down(f, r.status().message());
  }
  return fallback(ops);
}

Result<TakeResult> FailoverBucketStore::fallback(std::span<const BucketOp> ops) {
  if (options_.mode == FailMode::kOpen) return local_.take(ops);
  return Status(ErrorKind::kIo, "the quota backend (" + primary_->describe() + ") is unavailable",
                ErrorDetail{.reason = ErrorReason::kQuotaBackendUnavailable,
                            .numbers = {.retry_after_ms = options_.retry_after.count()}});
}

int64_t FailoverBucketStore::n_errors(BackendFailure f) const {
  return n_errors_[static_cast<size_t>(f)].load(std::memory_order_relaxed);
}

void FailoverBucketStore::count(BackendFailure f) {
  const auto k = static_cast<size_t>(f);
  if (k == 0 || k >= n_errors_.size()) return;
  n_errors_[k].fetch_add(1, std::memory_order_relaxed);
  if (error_counters_[k]) error_counters_[k]->add();
}

void FailoverBucketStore::set_up_gauge(bool up) {
  if (up_gauge_) up_gauge_->set(up ? 1.0 : 0.0);
}

// Under mu_, so that the reconnect thread (which tests up_ under mu_ before
// waiting) cannot miss the wake-up. Only the first of racing failures logs.
void FailoverBucketStore::mark_down(BackendFailure f, const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!up_.load(std::memory_order_relaxed)) return;
    up_.store(false, std::memory_order_release);
  }
  set_up_gauge(false);
  cv_.notify_all();
  log::warn(options_.mode == FailMode::kOpen ? "quota backend down; serving with local buckets until it is back"
                                             : "quota backend down; refusing requests (503) until it is back",
            {{"backend", primary_->describe()}, {"kind", backend_failure_name(f)}, {"error", message}});
}

// Waits until the backend is down, then connects with a doubling backoff
// until it is up again (or the store is destroyed). Failed attempts are
// counted, not logged: the down transition was logged once. A connection
// that served no take before it failed (a backend that accepts connections
// but fails every take: a wrong server, a script error) is not retried at
// once: the backoff keeps growing across such flaps, which bounds their
// round trips and log lines.
void FailoverBucketStore::reconnect_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  auto backoff = options_.backoff_min;
  auto wait_backoff = [&] {
    cv_.wait_for(lock, backoff, [this] { return stop_; });
    backoff = std::min(backoff * 2, options_.backoff_max);
  };
  while (!stop_) {
    cv_.wait(lock, [this] { return stop_ || !up_.load(std::memory_order_relaxed); });
    if (stop_) break;
    if (served_.exchange(false, std::memory_order_relaxed)) {
      backoff = options_.backoff_min;
    } else {
      wait_backoff();
    }
    while (!stop_) {
      lock.unlock();
      std::string error;
      const BackendFailure f = primary_->connect(&error);
      lock.lock();
      if (f == BackendFailure::kNone) {
        local_.forget_except({});  // the outage's buckets: stale now, and this bounds their memory
        up_.store(true, std::memory_order_release);
        set_up_gauge(true);
        log::info("quota backend reachable again; shared buckets in use", {{"backend", primary_->describe()}});
        break;
      }
      count(f);
      wait_backoff();
    }
  }
}

}  // namespace zl::limits
