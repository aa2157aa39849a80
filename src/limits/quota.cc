#include "limits/quota.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace zl::limits {
namespace {

constexpr double kAlways = -std::numeric_limits<double>::infinity();  // a need every level meets
constexpr int64_t kConcurrentRetryMs = 1000;  // a slot frees when a request ends: unknown, so an estimate

int64_t limit_of(const KeyLimits& l, Limit limit) {
  switch (limit) {
    case Limit::kRequests: return l.requests_per_minute;
    case Limit::kInputTokens: return l.input_tokens_per_minute;
    case Limit::kOutputTokens: return l.output_tokens_per_minute;
    case Limit::kConcurrent: return l.max_concurrent;
  }
  return 0;
}

// The ops of one take over a key's set limits, and which Limit each is.
struct TakePlan {
  BucketOp ops[kNumBucketLimits];
  Limit limits[kNumBucketLimits];
  size_t n = 0;

  void add(std::string_view name, const KeyLimits& l, Limit limit, double need, double amount) {
    const int64_t per_minute = limit_of(l, limit);
    if (per_minute <= 0) return;
    ops[n] = BucketOp{.key = QuotaManager::bucket_key(name, limit),
                      .limit_per_minute = static_cast<double>(per_minute),
                      .need = std::min(need, static_cast<double>(per_minute)),
                      .amount = amount};
    limits[n++] = limit;
  }
  std::span<const BucketOp> span() const { return {ops, n}; }
};

QuotaSnapshot snapshot_of(const TakePlan& plan, const TakeResult& r) {
  QuotaSnapshot s;
  for (size_t i = 0; i < plan.n && i < r.buckets.size(); ++i) {
    s.buckets[static_cast<size_t>(plan.limits[i])] =
        BucketReport{.limit_per_minute = static_cast<int64_t>(plan.ops[i].limit_per_minute),
                     .level = r.buckets[i].level,
                     .seconds_to_full = r.buckets[i].seconds_to_full};
  }
  return s;
}

Status refusal(Limit limit, int64_t retry_after_ms, std::string_view key_name) {
  const std::string what(limit_name(limit));
  return resource_exhausted(
      "rate limit exceeded: key '" + std::string(key_name) + "' is over its " +
          (limit == Limit::kConcurrent ? std::string("max_concurrent") : what + "_per_minute") +
          " limit; retry after " + std::to_string(retry_after_ms) + " ms",
      ErrorDetail{.reason = ErrorReason::kRateLimitExceeded,
                  .numbers = {.retry_after_ms = retry_after_ms},
                  .labels = {.limit = what}});
}

// The refusal of a take that was not admitted: the refused bucket that
// needs the longest wait names the limit.
Status bucket_refusal(const TakePlan& plan, const TakeResult& r, std::string_view key_name) {
  double wait_s = 0;
  Limit limit = Limit::kRequests;
  for (size_t i = 0; i < plan.n && i < r.buckets.size(); ++i) {
    if (r.buckets[i].seconds_to_need > wait_s) {
      wait_s = r.buckets[i].seconds_to_need;
      limit = plan.limits[i];
    }
  }
  // (- 1e-6: not 1 ms more for a rounding error)
  const int64_t ms = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(wait_s * 1000 - 1e-6)));
  return refusal(limit, ms, key_name);
}

}  // namespace

std::string_view limit_name(Limit limit) {
  switch (limit) {
    case Limit::kRequests: return "requests";
    case Limit::kInputTokens: return "input_tokens";
    case Limit::kOutputTokens: return "output_tokens";
    case Limit::kConcurrent: return "concurrent";
  }
  return "requests";
}

int64_t BucketReport::remaining() const {
  if (level <= 0) return 0;
  return std::min(limit_per_minute, static_cast<int64_t>(std::floor(level)));
}

bool QuotaSnapshot::empty() const {
  return std::none_of(buckets.begin(), buckets.end(), [](const BucketReport& b) { return b.set(); });
}

// ---- Lease ----

Lease::Lease(Lease&& other) noexcept { *this = std::move(other); }

Lease& Lease::operator=(Lease&& other) noexcept {
  if (this == &other) return *this;
  release();
  store_ = other.store_;
  name_ = std::move(other.name_);
  limits_ = other.limits_;
  in_flight_ = std::move(other.in_flight_);
  n_slots_ = other.n_slots_;
  n_input_tokens_ = other.n_input_tokens_;
  n_output_charged_ = other.n_output_charged_;
  charge_tokens_ = other.charge_tokens_;
  charged_ = other.charged_;
  refunded_ = other.refunded_;
  snapshot_ = other.snapshot_;
  other.in_flight_ = nullptr;
  other.charged_ = true;  // a moved-from lease charges nothing
  other.refunded_ = true;  // and refunds nothing
  return *this;
}

void Lease::release() {
  if (in_flight_) in_flight_->fetch_sub(n_slots_, std::memory_order_relaxed);
  in_flight_ = nullptr;
}

Status Lease::charge_output(int64_t n_output_tokens) {
  if (charged_) return {};
  charged_ = true;
  if (!charge_tokens_ || store_ == nullptr) return {};
  n_output_charged_ = std::max<int64_t>(0, n_output_tokens);
  TakePlan plan;
  plan.add(name_, limits_, Limit::kOutputTokens, kAlways, static_cast<double>(n_output_charged_));
  if (plan.n == 0) return {};
  Result<TakeResult> r = store_->take(plan.span());
  if (!r.ok()) return r.status();
  const size_t out = static_cast<size_t>(Limit::kOutputTokens);
  snapshot_.buckets[out] = snapshot_of(plan, *r).buckets[out];
  return {};
}

Status Lease::refund_admission() {
  if (refunded_ || n_output_charged_ > 0 || !charge_tokens_ || store_ == nullptr) return {};
  refunded_ = true;
  charged_ = true;  // nothing to charge after a refund
  TakePlan plan;
  plan.add(name_, limits_, Limit::kRequests, kAlways, -1);
  plan.add(name_, limits_, Limit::kInputTokens, kAlways, -static_cast<double>(n_input_tokens_));
  if (plan.n == 0) return {};
  Result<TakeResult> r = store_->take(plan.span());
  return r.ok() ? Status() : r.status();
}

// ---- QuotaManager ----

QuotaManager::QuotaManager(BucketStore& store) : store_(store) {}

std::string QuotaManager::bucket_key(std::string_view name, Limit limit) {
  std::string k;
  k.reserve(name.size() + 16);
  k.append(name).append(1, ':').append(limit_name(limit));
  return k;
}

std::shared_ptr<std::atomic<int64_t>> QuotaManager::counter(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& c = in_flight_[name];
  if (!c) c = std::make_shared<std::atomic<int64_t>>(0);
  return c;
}

Admission QuotaManager::admit(const KeyEntry& key, int64_t n_input_tokens, AdmitOptions options) {
  Admission a;
  const KeyLimits& l = key.limits;
  const bool tokens = options.charge_tokens;
  const bool charge = !options.dry_run;
  // The concurrency slot first: a key at its limit costs no store call.
  std::shared_ptr<std::atomic<int64_t>> slot;
  const int64_t n_slots = std::clamp<int64_t>(options.slots, 1, std::max<int64_t>(1, l.max_concurrent));
  bool over_concurrency = false;
  if (l.max_concurrent > 0 && tokens) {
    slot = counter(key.name);
    if (charge) {
      over_concurrency = slot->fetch_add(n_slots, std::memory_order_relaxed) + n_slots > l.max_concurrent;
      if (over_concurrency) slot->fetch_sub(n_slots, std::memory_order_relaxed);
    } else {
      over_concurrency = slot->load(std::memory_order_relaxed) + n_slots > l.max_concurrent;
    }
    if (over_concurrency || !charge) slot = nullptr;
  }
  const double n_in = static_cast<double>(std::max<int64_t>(0, n_input_tokens));
  TakePlan plan;
  if (over_concurrency) {
    // Refused already; the buckets are read for the 429's headers.
    plan.add(key.name, l, Limit::kRequests, kAlways, 0);
    plan.add(key.name, l, Limit::kInputTokens, kAlways, 0);
    plan.add(key.name, l, Limit::kOutputTokens, kAlways, 0);
  } else {
    plan.add(key.name, l, Limit::kRequests, 1, charge ? 1 : 0);
    plan.add(key.name, l, Limit::kInputTokens, tokens ? n_in : kAlways, tokens && charge ? n_in : 0);
    plan.add(key.name, l, Limit::kOutputTokens, tokens ? 1 : kAlways, 0);
  }
  if (plan.n > 0) {
    Result<TakeResult> r = store_.take(plan.span());
    if (!r.ok()) {
      if (slot) slot->fetch_sub(n_slots, std::memory_order_relaxed);
      a.status = r.status();
      return a;
    }
    a.snapshot = snapshot_of(plan, *r);
    if (!over_concurrency && !r->admitted) {
      if (slot) slot->fetch_sub(n_slots, std::memory_order_relaxed);
      a.status = bucket_refusal(plan, *r, key.name);
      return a;
    }
  }
  if (over_concurrency) {
    a.status = refusal(Limit::kConcurrent, kConcurrentRetryMs, key.name);
    return a;
  }
  a.lease.store_ = &store_;
  a.lease.name_ = key.name;
  a.lease.limits_ = l;
  a.lease.in_flight_ = std::move(slot);
  a.lease.n_slots_ = n_slots;
  a.lease.n_input_tokens_ = static_cast<int64_t>(n_in);
  a.lease.charge_tokens_ = tokens && charge;
  a.lease.charged_ = !a.lease.charge_tokens_;
  a.lease.snapshot_ = a.snapshot;
  return a;
}

void QuotaManager::retain(const KeyTable& table) {
  std::vector<std::string> prefixes;
  prefixes.reserve(table.entries().size());
  for (const KeyEntry& e : table.entries()) prefixes.push_back(e.name + ":");
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::erase_if(in_flight_, [&](const auto& kv) { return table.by_name(kv.first) == nullptr; });
  }
  if (auto* local = dynamic_cast<LocalBucketStore*>(&store_)) local->forget_except(prefixes);
}

int64_t QuotaManager::in_flight(std::string_view name) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = in_flight_.find(std::string(name));
  return it == in_flight_.end() ? 0 : it->second->load(std::memory_order_relaxed);
}

Result<KeyReload> reload_keys(KeyStore& keys, QuotaManager& quota) {
  ASSIGN_OR_RETURN(KeyReload r, keys.reload());
  quota.retain(*keys.current());
  return r;
}

}  // namespace zl::limits
