// KV-aware admission and degradation (issue 15; the seed's kv_cache_overflow).
//
// Two duties, both decided in the API layer before a request reaches the
// engine, with the engine's KV geometry (EngineStats):
//
// 1. Can it ever fit? A sequence holds at most min(n_ctx, n_prompt +
//    max_tokens) tokens of KV, in whole blocks. Scheduler::submit refuses one
//    that needs more blocks than the whole pool (kv_cache_overflow); the
//    same arithmetic here makes that a plain 400 before submission, with
//    max_tokens_fit, the largest max_tokens the scheduler would take:
//        capacity = n_blocks_total x block_size
//        capacity >= n_ctx: every max_tokens fits (the context clamp comes first)
//        else:              max_tokens_fit = max(0, capacity - n_prompt)
//    (min(n_ctx, n_prompt + m) <= capacity <=> n_prompt + m <= capacity when
//    capacity < n_ctx.) A request without an explicit max_tokens (the
//    window's rest) is lowered to max_tokens_fit silently, as the window
//    clamps it; one with max_tokens gets the 400 — or, with degrade on
//    (--degrade max-tokens), is admitted with max_tokens_fit (>= 1).
//
// 2. Decay under KV pressure (degrade on only). Pressure: n_blocks_used /
//    n_blocks_total > high_watermark (used = referenced by sequences; cached,
//    reclaimable blocks are free for this purpose). A tenant *triggers* when,
//    under pressure, its request overflows (1.) or the blocks its grant needs
//    exceed the free + reclaimable blocks at that moment. Each trigger halves
//    the tenant's grants once more (a shift k: grant = max(min_tokens, m >> k),
//    never more than m; at most max_halvings), this request included. The
//    tenant regains one doubling per restore_interval of time spent below
//    the watermark, counted from its last trigger; back at k = 0 it is
//    forgotten. Other tenants are never affected.
//    Time below the watermark is measured from the observations that each
//    decide() makes (the API sees every request): the span since the previous
//    observation counts as "below" when the current one is below. KV usage
//    moves with whole sequences, so a sample is representative; an idle
//    server (no request, so no observation) is below once the next request
//    sees it below.
//
// Thread-safety: every member function is safe from any thread (one mutex,
// held for O(1) work, O(tenants) only when the table is full). Memory:
// at most max_tenants entries, only for tenants whose grants are halved.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/status.h"
#include "engine/request.h"  // EngineStats

namespace zl::limits {

// The KV cache as one request's admission sees it.
struct KvSnapshot {
  int64_t n_ctx = 0;            // per-sequence window; <= 0: unknown
  int64_t n_blocks_total = 0;   // <= 0: unknown (no check, no pressure)
  int64_t block_size = 0;       // tokens per block; <= 0: unknown
  int64_t n_blocks_used = 0;    // referenced by sequences (reclaimable cached blocks not counted)

  bool known() const { return n_blocks_total > 0 && block_size > 0; }
  int64_t n_blocks_available() const { return n_blocks_total - n_blocks_used; }  // free + reclaimable
};
KvSnapshot kv_snapshot(const EngineStats& stats);

// The largest max_tokens that the scheduler admits after a prompt of
// n_prompt tokens (0: not even one token); nullopt when every max_tokens
// fits (the cache holds a whole context) or the geometry is unknown.
std::optional<int64_t> kv_max_tokens_fit(const KvSnapshot& kv, int64_t n_prompt);

// The KV blocks a sequence of n_prompt + max_tokens tokens (clamped to
// n_ctx when known) holds at most. 0 when the geometry is unknown.
int64_t kv_blocks_needed(const KvSnapshot& kv, int64_t n_prompt, int64_t max_tokens);

// Why a grant was lowered; the names are the metric label.
enum class KvDegrade { kNone, kKvCacheOverflow, kKvPressure };
std::string_view kv_degrade_name(KvDegrade degrade);  // "none", "kv_cache_overflow", "kv_pressure"

struct KvAdmissionConfig {
  bool degrade = false;           // --degrade max-tokens: lower max_tokens instead of the 400, and decay
  double high_watermark = 0.9;    // KV usage above this fraction is pressure
  int64_t min_tokens = 16;        // pressure never halves a grant below this (nor raises one)
  std::chrono::milliseconds restore_interval{10000};  // one doubling back per interval below the watermark
  int max_halvings = 16;
  size_t max_tenants = 4096;      // degraded tenants remembered at most
};

struct KvAdmissionRequest {
  std::string_view tenant;          // whose grants decay (the API key's identity)
  int64_t n_prompt = 0;
  int64_t max_tokens = 0;           // after the context clamp (Request::stop.max_tokens), >= 1
  std::optional<int64_t> requested; // the client's max_tokens; none: the window's rest
  bool dry_run = false;             // decide only: no tenant state changes (validate mode)
};

struct KvAdmissionDecision {
  // Not ok: refuse with this (reason kKvCacheOverflow; numbers n_prompt_tokens,
  // max_tokens when requested, max_tokens_fit). Its kind is invalid_argument.
  Status status;
  int64_t max_tokens = 0;                  // the grant (when ok)
  KvDegrade degraded = KvDegrade::kNone;   // lowered for this reason (x-engine-degraded)
  bool clamped = false;                    // no explicit max_tokens; lowered to the cache silently
};

class KvAdmission {
 public:
  using Clock = std::chrono::steady_clock;

  explicit KvAdmission(KvAdmissionConfig config);
  KvAdmission(const KvAdmission&) = delete;
  KvAdmission& operator=(const KvAdmission&) = delete;

  // Decides one request at `now` (see the design comment). O(1) amortized.
  KvAdmissionDecision decide(const KvAdmissionRequest& request, const KvSnapshot& kv, Clock::time_point now);

  // The tenant's halvings as of the latest decide() (0: not degraded).
  int halvings(std::string_view tenant) const;
  size_t n_tenants() const;
  const KvAdmissionConfig& config() const { return config_; }

 private:
  struct Tenant {
    int shift = 0;                 // halvings as of `anchor`
    Clock::duration anchor{};      // low_time_ at the last trigger or restored step
  };
  // Doublings the tenant has earned back since its anchor. mu_ held.
  int64_t restored_steps(const Tenant& t) const;
  // Advances the time below the watermark; mu_ held.
  void observe(bool pressure, Clock::time_point now);
  // The tenant's entry with its restored steps applied; erased (nullptr) when back to 0. mu_ held.
  Tenant* current(const std::string& tenant);
  // One more halving for `tenant`. mu_ held.
  void trigger(const std::string& tenant);
  // Room for one more entry: drops restored ones, then the least degraded. mu_ held.
  void make_room();
  int64_t halve(int64_t grant, int shift) const;

  const KvAdmissionConfig config_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Tenant> tenants_;
  bool observed_ = false;
  Clock::time_point t_last_{};
  Clock::duration low_time_{};     // time observed below the watermark, since start
};

}  // namespace zl::limits
