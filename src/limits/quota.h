// Per-key quotas: admission against a key's token buckets and its
// concurrency limit, and the lease that a request holds while it runs.
//
// Buckets (limits/bucket_store.h), one per set limit, named
// "<key name>:<limit>" ("team-a:input_tokens"), capacity = the per-minute
// limit, refilled continuously. One admission is ONE atomic BucketStore::take:
//   requests       {need 1, amount 1}
//   input_tokens   {need min(n, capacity), amount n}   n: the exact prompt count
//   output_tokens  {need min(1, capacity), amount 0}   room left; charged later
// A prompt larger than the whole per-minute budget is admitted when the
// bucket is full and leaves it in debt (it refills from below zero), rather
// than being refused forever. Output tokens are charged once, when the
// request ends (Lease::charge_output: {need -inf, amount k}, always taken),
// so a request is only ever refused before it starts.
//
// max_concurrent is counted in this process (an atomic per key name), not in
// the bucket store: with several replicas each enforces it on its own.
//
// Refusal: kResourceExhausted with ErrorDetail{kRateLimitExceeded,
// labels.limit = "requests" | "input_tokens" | "output_tokens" |
// "concurrent", numbers.retry_after_ms = when every refused bucket has room
// again (>= 1 ms; the concurrency limit: 1000 ms, an estimate)}. Nothing is
// charged and no slot is held after a refusal. A key's buckets are its own:
// a key over quota never changes another key's figures.
//
// Store errors (Redis unreachable, limits/redis_store.h) come back as the
// store's Status, unchanged and without a lease: whoever wired the store
// decides whether that means 503 (fail closed) or serving on (fail open,
// e.g. a store that falls back to local buckets itself).
//
// Thread-safe: admit() from any thread; a Lease belongs to one request
// (one thread at a time).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/status.h"
#include "limits/bucket_store.h"
#include "limits/keys.h"

namespace zl::limits {

enum class Limit : uint8_t { kRequests, kInputTokens, kOutputTokens, kConcurrent };
inline constexpr int kNumBucketLimits = 3;  // the first three have buckets
// "requests", "input_tokens", "output_tokens", "concurrent": error.detail.limit,
// the bucket key's suffix and the metric label.
std::string_view limit_name(Limit limit);

// One bucket's figures, for the rate-limit headers.
struct BucketReport {
  int64_t limit_per_minute = 0;  // 0: the limit is not set (no bucket, no headers)
  double level = 0;              // what the bucket holds after the take (may be < 0)
  double seconds_to_full = 0;    // until it is full again (the headers' reset)

  bool set() const { return limit_per_minute > 0; }
  // The headers' `remaining`: whole units, from zero to the limit.
  int64_t remaining() const;
};

// The buckets of one key after a take, indexed by Limit (the first three).
struct QuotaSnapshot {
  std::array<BucketReport, kNumBucketLimits> buckets{};
  const BucketReport& operator[](Limit limit) const { return buckets[static_cast<size_t>(limit)]; }
  bool empty() const;  // no limit set, or nothing known (a store error)
};

struct AdmitOptions {
  // false: the answer costs no tokens (a response-cache hit): the request is
  // charged ONE request and no input or output tokens, takes no concurrency
  // slot (the engine does no work), and is refused only by the requests
  // limit; charge_output() then charges nothing.
  bool charge_tokens = true;
  // true: validate mode (X-Engine-Mode: validate): every limit is checked as
  // for a real request, nothing is charged and no slot is taken.
  bool dry_run = false;
  // Concurrency slots the request holds: the generations it runs at once
  // (OpenAI n, several prompts). Capped at the key's max_concurrent, so a
  // request asking for more runs when the key is otherwise idle, never
  // refused for good, and then runs that many at once (Lease::slots). Still
  // ONE request for the requests limit.
  int64_t slots = 1;
};

// A running request's hold on its key: the concurrency slots (released when
// the lease is released, destroyed or moved from) and the output charge
// (charge_output, exactly once). Movable, not copyable. The QuotaManager's
// store must outlive its leases.
class Lease {
 public:
  Lease() = default;  // empty: holds nothing
  Lease(Lease&& other) noexcept;
  Lease& operator=(Lease&& other) noexcept;
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease() { release(); }

  // The key's buckets after admission; the output bucket's entry is
  // replaced by its state after the charge once charge_output ran.
  const QuotaSnapshot& snapshot() const { return snapshot_; }
  bool output_charged() const { return charged_; }
  // Charges `n_output_tokens` to the output bucket (one take with need -inf:
  // never refused; no store call when the key has no output limit) and
  // updates the snapshot's output entry. Once: later calls charge nothing
  // and return OK. A lease admitted with charge_tokens = false or dry_run
  // charges nothing. On a store error the charge is lost (logged by the
  // caller) and the snapshot stays.
  Status charge_output(int64_t n_output_tokens);
  // Gives back what admission charged (the request and its input tokens),
  // for a request the engine refused before it generated anything (queue
  // full, shutting down): refused, it should cost nothing. Once, for a
  // lease that charged, and not once output tokens were charged (a charge
  // of 0 may come first: the head of the error answer). A bucket may then
  // briefly hold more than its limit (the next take caps it).
  Status refund_admission();
  // Gives the concurrency slots back now (idempotent).
  void release();
  // The concurrency slots held: the generations the request may run at
  // once (AdmitOptions::slots, capped at max_concurrent); 0 when the key has
  // no max_concurrent (or nothing is held: dry_run, released).
  int64_t slots() const { return in_flight_ ? n_slots_ : 0; }

 private:
  friend class QuotaManager;
  BucketStore* store_ = nullptr;
  std::string name_;
  KeyLimits limits_;
  std::shared_ptr<std::atomic<int64_t>> in_flight_;  // null: no slot held
  int64_t n_slots_ = 0;         // what it holds of in_flight_
  int64_t n_input_tokens_ = 0;  // charged at admission
  int64_t n_output_charged_ = 0;
  bool charge_tokens_ = false;
  bool charged_ = false;   // charge_output ran (or there is nothing to charge)
  bool refunded_ = false;
  QuotaSnapshot snapshot_;
};

struct Admission {
  // OK: admitted (`lease` holds the request's slot). kResourceExhausted with
  // reason kRateLimitExceeded: refused (see the file comment). Any other
  // error: the bucket store failed; nothing is known or charged.
  Status status;
  Lease lease;
  // The key's buckets after the take (refused: their unchanged levels), for
  // the headers of the answer or of the 429. Empty after a store error.
  QuotaSnapshot snapshot;
};

class QuotaManager {
 public:
  // `store` must outlive the manager and every lease it gives.
  explicit QuotaManager(BucketStore& store);

  // Admits one request of `key` with an exact prompt of `n_input_tokens`.
  // Cost: one BucketStore::take (a mutex and 3 hash lookups locally; one
  // round trip to Redis), plus a map lookup under a mutex when the key has
  // max_concurrent. A key without any limit takes no store call.
  Admission admit(const KeyEntry& key, int64_t n_input_tokens, AdmitOptions options = {});

  // After a reload: forgets the concurrency counters of names not in
  // `table` (in-flight leases keep theirs) and, on a LocalBucketStore, their
  // buckets (LocalBucketStore::forget_except); names still present keep
  // their buckets and counters.
  void retain(const KeyTable& table);

  // The requests of `name` now holding a concurrency slot (tests, metrics).
  int64_t in_flight(std::string_view name) const;

  // "<name>:<limit>": the store key of a bucket.
  static std::string bucket_key(std::string_view name, Limit limit);

 private:
  std::shared_ptr<std::atomic<int64_t>> counter(const std::string& name);

  BucketStore& store_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<std::atomic<int64_t>>> in_flight_;
};

// SIGHUP: re-reads the keys file; when it is good, the new table serves
// every later request and what belonged to removed names is forgotten
// (QuotaManager::retain). On error the old table stays and the error
// (naming file and line) is returned. Requests in flight keep their leases.
Result<KeyReload> reload_keys(KeyStore& keys, QuotaManager& quota);

}  // namespace zl::limits
