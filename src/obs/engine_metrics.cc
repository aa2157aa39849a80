#include "obs/engine_metrics.h"

namespace zl::obs {

EngineMetrics::EngineMetrics(Registry& r)
    : queue_(r.add("engine_queue_time_seconds", "Time a request waited from submission to its first admission to the batch",
                   MetricType::kHistogram, {}, latency_buckets())
                 .histogram()),
      prefill_(r.add("engine_prefill_duration_seconds",
                     "Time from a request's first admission to its first token (the prompt's prefill)",
                     MetricType::kHistogram, {}, latency_buckets())
                   .histogram()),
      decode_(r.add("engine_decode_latency_seconds",
                    "Duration of one engine step that sampled tokens (forward pass of the batch plus sampling)",
                    MetricType::kHistogram, {}, latency_buckets())
                  .histogram()),
      inter_token_(r.add("engine_inter_token_latency_seconds", "Time between two consecutive tokens of one sequence",
                         MetricType::kHistogram, {}, latency_buckets())
                       .histogram()),
      batch_size_(r.add("engine_batch_size", "Sequences in the batch of one decode step", MetricType::kHistogram, {},
                        batch_size_buckets())
                      .histogram()),
      preemptions_(r.add("engine_preemptions_total",
                         "Sequences preempted (KV blocks freed, recomputed later) to make room for others",
                         MetricType::kCounter)
                       .counter()),
      pause_preemptions_(r.add("engine_pause_preemptions_total",
                               "Sequences preempted because their client stopped reading for --max-pause-ms "
                               "(resumed when it catches up)",
                               MetricType::kCounter)
                             .counter()),
      spec_draft_(r.add("engine_spec_draft_tokens_total",
                        "Speculative draft tokens proposed and verified (n-gram or draft-model drafts, --speculative)",
                        MetricType::kCounter)
                      .counter()),
      spec_accepted_(r.add("engine_spec_accepted_tokens_total",
                           "Speculative draft tokens accepted (each saves one decode pass)", MetricType::kCounter)
                         .counter()),
      spec_passes_(r.add("engine_spec_verify_passes_total",
                         "Decode passes of one sequence that verified a speculative draft", MetricType::kCounter)
                       .counter()),
      spec_per_pass_(r.add("engine_spec_accepted_tokens_per_pass",
                           "Draft tokens accepted per verify pass (the pass yields one more token)",
                           MetricType::kHistogram, {}, {0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32})
                         .histogram()),
      guard_actions_(r.add("engine_guard_actions_total",
                           "Guard actions by rule, direction (input, output) and action (block, redact, mask, stop)",
                           MetricType::kCounter, {"rule", "direction", "action"})) {}

void EngineMetrics::on_decode_step(double t_step_s, int n_batch) {
  decode_.observe(t_step_s);
  batch_size_.observe(n_batch);
}

void EngineMetrics::on_first_token(double t_queue_s, double t_prefill_s) {
  queue_.observe(t_queue_s);
  prefill_.observe(t_prefill_s);
}

void EngineMetrics::on_inter_token(double t_s) { inter_token_.observe(t_s); }

void EngineMetrics::on_preemptions(int n) { preemptions_.add(n); }

void EngineMetrics::on_pause_preemptions(int n) { pause_preemptions_.add(n); }
void EngineMetrics::on_spec_verify(int n_draft, int n_accepted) {
  spec_draft_.add(n_draft);
  spec_accepted_.add(n_accepted);
  spec_passes_.add();
  spec_per_pass_.observe(n_accepted);
}

void EngineMetrics::on_guard_action(std::string_view rule, std::string_view direction, std::string_view action) {
  guard_actions_.counter({std::string(rule), std::string(direction), std::string(action)}).add();
}

}  // namespace zl::obs
