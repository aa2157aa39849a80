// The engine's families in a Registry, fed through the EngineSink interface,
// and ServerMetrics: one registry with them, as `zerolayer serve` builds it.
#pragma once

#include "obs/efficiency.h"
#include "obs/engine_sink.h"
#include "obs/metrics.h"

namespace zl::obs {

// engine_queue_time_seconds, engine_prefill_duration_seconds,
// engine_decode_latency_seconds, engine_inter_token_latency_seconds,
// engine_batch_size, engine_preemptions_total, engine_pause_preemptions_total,
// engine_guard_actions_total, engine_spec_draft_tokens_total, engine_spec_accepted_tokens_total,
// engine_spec_verify_passes_total, engine_spec_accepted_tokens_per_pass.
// Thread-safe, lock-free (guard actions: a family lookup under its lock).
class EngineMetrics final : public EngineSink {
 public:
  explicit EngineMetrics(Registry& registry);

  void on_decode_step(double t_step_s, int n_batch) override;
  void on_first_token(double t_queue_s, double t_prefill_s) override;
  void on_inter_token(double t_s) override;
  void on_preemptions(int n) override;
  void on_pause_preemptions(int n) override;
  void on_spec_verify(int n_draft, int n_accepted) override;
  void on_guard_action(std::string_view rule, std::string_view direction, std::string_view action) override;
  // engine_guard_actions_total{rule,direction,action}: series listed at 0
  // from the start (the rules of the loaded policy).
  Family& guard_actions() { return guard_actions_; }

 private:
  Histogram& queue_;
  Histogram& prefill_;
  Histogram& decode_;
  Histogram& inter_token_;
  Histogram& batch_size_;
  Counter& preemptions_;
  Counter& pause_preemptions_;
  Counter& spec_draft_;
  Counter& spec_accepted_;
  Counter& spec_passes_;
  Histogram& spec_per_pass_;
  Family& guard_actions_;
};

// The registry every layer of one server reports into. The engine's families
// are registered first; the API layer (api::ApiMetrics) adds its own.
struct ServerMetrics {
  Registry registry;
  EngineMetrics engine{registry};
  EfficiencyWindow efficiency;
};

}  // namespace zl::obs
