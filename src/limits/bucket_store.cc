#include "limits/bucket_store.h"

#include <algorithm>
#include <cmath>

namespace zl::limits {
namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

LocalBucketStore::LocalBucketStore(Now now) : now_(now ? std::move(now) : Now(steady_seconds)) {}

Result<TakeResult> LocalBucketStore::take(std::span<const BucketOp> ops) {
  const double now = now_();
  TakeResult out;
  out.buckets.resize(ops.size());
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Bucket*> buckets(ops.size());
  out.admitted = true;
  for (size_t i = 0; i < ops.size(); ++i) {
    const BucketOp& op = ops[i];
    if (!(op.limit_per_minute > 0)) return invalid_argument("bucket '" + op.key + "': the limit must be positive");
    auto [it, fresh] = buckets_.try_emplace(op.key, Bucket{.level = op.limit_per_minute, .t_last = now});
    Bucket& b = it->second;
    // Refill; a clock that went backwards refills nothing. A lowered limit
    // caps the level at the new capacity.
    const double rate = op.limit_per_minute / 60.0;
    b.level = std::min(op.limit_per_minute, b.level + std::max(0.0, now - b.t_last) * rate);
    b.t_last = std::max(b.t_last, now);
    buckets[i] = &b;
    if (b.level < op.need) out.admitted = false;
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    const BucketOp& op = ops[i];
    Bucket& b = *buckets[i];
    if (out.admitted) b.level -= op.amount;
    const double rate = op.limit_per_minute / 60.0;
    out.buckets[i] = BucketState{.level = b.level,
                                 .seconds_to_full = std::max(0.0, (op.limit_per_minute - b.level) / rate),
                                 .seconds_to_need = b.level >= op.need ? 0.0 : (op.need - b.level) / rate};
  }
  return out;
}

void LocalBucketStore::forget_except(std::span<const std::string> prefixes) {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(buckets_, [&](const auto& kv) {
    return std::none_of(prefixes.begin(), prefixes.end(), [&](const std::string& p) { return kv.first.starts_with(p); });
  });
}

}  // namespace zl::limits
