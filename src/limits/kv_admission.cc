#include "limits/kv_admission.h"

#include <algorithm>

namespace zl::limits {
namespace {

Status overflow_error(const KvSnapshot& kv, const KvAdmissionRequest& r, int64_t fit) {
  const int64_t capacity = kv.n_blocks_total * kv.block_size;
  std::string message =
      fit <= 0 ? "the prompt (" + std::to_string(r.n_prompt) + " tokens) leaves no room for output in the KV cache (" +
                     std::to_string(capacity) + " tokens for one sequence)"
               : "prompt (" + std::to_string(r.n_prompt) + " tokens) + max_tokens (" +
                     std::to_string(r.requested.value_or(r.max_tokens)) + ") cannot fit the KV cache (" +
                     std::to_string(capacity) + " tokens for one sequence): max_tokens must be at most " +
                     std::to_string(fit);
  return invalid_argument(std::move(message), {.reason = ErrorReason::kKvCacheOverflow,
                                               .numbers = {.n_prompt_tokens = r.n_prompt,
                                                           .max_tokens_fit = std::max<int64_t>(0, fit),
                                                           .max_tokens = r.requested}});
}

}  // namespace

KvSnapshot kv_snapshot(const EngineStats& stats) {
  return {.n_ctx = stats.n_ctx,
          .n_blocks_total = stats.n_kv_blocks_total,
          .block_size = stats.kv_block_size,
          .n_blocks_used = stats.n_kv_blocks_used};
}

std::optional<int64_t> kv_max_tokens_fit(const KvSnapshot& kv, int64_t n_prompt) {
  if (!kv.known()) return std::nullopt;
  const int64_t capacity = kv.n_blocks_total * kv.block_size;
  if (kv.n_ctx > 0 && capacity >= kv.n_ctx) return std::nullopt;
  return std::max<int64_t>(0, capacity - n_prompt);
}

int64_t kv_blocks_needed(const KvSnapshot& kv, int64_t n_prompt, int64_t max_tokens) {
  if (!kv.known()) return 0;
  int64_t total = n_prompt + std::max<int64_t>(0, max_tokens);
  if (kv.n_ctx > 0) total = std::min(total, kv.n_ctx);
  return (total + kv.block_size - 1) / kv.block_size;
}

std::string_view kv_degrade_name(KvDegrade degrade) {
  switch (degrade) {
    case KvDegrade::kNone: return "none";
    case KvDegrade::kKvCacheOverflow: return "kv_cache_overflow";
    case KvDegrade::kKvPressure: return "kv_pressure";
  }
  return "none";
}

KvAdmission::KvAdmission(KvAdmissionConfig config) : config_(config) {}

KvAdmissionDecision KvAdmission::decide(const KvAdmissionRequest& r, const KvSnapshot& kv, Clock::time_point now) {
  KvAdmissionDecision d{.max_tokens = r.max_tokens};
  // 1. Can it ever fit?
  bool overflow = false;
  if (const std::optional<int64_t> fit = kv_max_tokens_fit(kv, r.n_prompt); fit && r.max_tokens > *fit) {
    overflow = true;
    if (*fit >= 1 && !r.requested) {
      d.max_tokens = *fit;
      d.clamped = true;
      overflow = false;  // nothing was asked that could not be given
    } else if (*fit >= 1 && config_.degrade) {
      d.max_tokens = *fit;
      d.degraded = KvDegrade::kKvCacheOverflow;
    } else {
      d.status = overflow_error(kv, r, *fit);
    }
  }
  if (!config_.degrade || !kv.known()) return d;

  // 2. Decay under pressure.
  const bool pressure = static_cast<double>(kv.n_blocks_used) >
                        config_.high_watermark * static_cast<double>(kv.n_blocks_total);
  const std::string tenant(r.tenant);
  std::lock_guard<std::mutex> lock(mu_);
  if (!r.dry_run) observe(pressure, now);
  const Tenant* t = current(tenant);
  int shift = t ? t->shift : 0;
  const int64_t base = d.max_tokens;
  const bool triggered =
      pressure && (overflow || kv_blocks_needed(kv, r.n_prompt, halve(base, shift)) > kv.n_blocks_available());
  if (triggered) {
    shift = std::min(shift + 1, config_.max_halvings);
    if (!r.dry_run) trigger(tenant);
  }
  if (!d.status.ok()) return d;
  const int64_t grant = halve(base, shift);
  if (grant < d.max_tokens) {
    d.max_tokens = grant;
    d.degraded = KvDegrade::kKvPressure;
  }
  return d;
}

int64_t KvAdmission::halve(int64_t grant, int shift) const {
  if (shift <= 0 || grant <= config_.min_tokens) return grant;
  return std::max(config_.min_tokens, grant >> std::min(shift, 62));
}

int64_t KvAdmission::restored_steps(const Tenant& t) const {
  if (config_.restore_interval.count() <= 0) return t.shift;
  return (low_time_ - t.anchor) / config_.restore_interval;
}

void KvAdmission::observe(bool pressure, Clock::time_point now) {
  if (observed_ && !pressure && now > t_last_) low_time_ += now - t_last_;
  if (!observed_ || now > t_last_) t_last_ = now;
  observed_ = true;
}

KvAdmission::Tenant* KvAdmission::current(const std::string& tenant) {
  auto it = tenants_.find(tenant);
  if (it == tenants_.end()) return nullptr;
  Tenant& t = it->second;
  const int64_t steps = restored_steps(t);
  if (steps >= t.shift) {
    tenants_.erase(it);
    return nullptr;
  }
  if (steps > 0) {
    t.shift -= static_cast<int>(steps);
    t.anchor += steps * std::chrono::duration_cast<Clock::duration>(config_.restore_interval);
  }
  return &t;
}

void KvAdmission::trigger(const std::string& tenant) {
  auto it = tenants_.find(tenant);
  if (it == tenants_.end()) {
    if (tenants_.size() >= config_.max_tenants) make_room();
    if (tenants_.size() >= config_.max_tenants) return;  // max_tenants 0: remember no one
    it = tenants_.emplace(tenant, Tenant{}).first;
  }
  it->second.shift = std::min(it->second.shift + 1, config_.max_halvings);
  it->second.anchor = low_time_;  // a full interval below the watermark before the first step back
}

int KvAdmission::halvings(std::string_view tenant) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tenants_.find(std::string(tenant));
  if (it == tenants_.end()) return 0;
  return static_cast<int>(std::max<int64_t>(0, it->second.shift - restored_steps(it->second)));
}

size_t KvAdmission::n_tenants() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tenants_.size();
}

void KvAdmission::make_room() {
  // Restored tenants first (O(tenants), only when the table is full).
  std::erase_if(tenants_, [this](const auto& kv) { return restored_steps(kv.second) >= kv.second.shift; });
  if (tenants_.size() < config_.max_tenants || tenants_.empty()) return;
  // Then the least degraded (the oldest trigger among equals): the one that loses least.
  auto victim = std::min_element(tenants_.begin(), tenants_.end(), [](const auto& a, const auto& b) {
    return a.second.shift != b.second.shift ? a.second.shift < b.second.shift : a.second.anchor < b.second.anchor;
  });
  tenants_.erase(victim);
}

}  // namespace zl::limits
