// The API layer's metrics and /metrics' exposition, on the obs registry
// (obs/metrics.h). Names: `engine_*` for what the engine serves (issue 16),
// `zerolayer_http_*` for the HTTP server. README "Metrics" lists them all.
// Thread-safe; recording is lock-free except on_request's first use of a
// {route, status} pair (a family lookup under its mutex, once per request).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "api/chat.h"  // ContextPolicy
#include "api/tool_calls.h"
#include "core/error_reason.h"
#include "engine/request.h"
#include "limits/kv_admission.h"
#include "obs/engine_metrics.h"
#include "obs/metrics.h"

namespace zl::api {

// The counter of error answers, {api, reason} (every typed reason but
// kUnspecified, present at 0 from the start).
inline constexpr std::string_view kRejectedMetric = "engine_requests_rejected_total";

// The wire API of a request: the `api` label ("anthropic", "openai").
enum class ApiKind { kAnthropic, kOpenAI };
std::string_view api_kind_name(ApiKind api);

struct MetricsOptions {
  // vllm:num_requests_running, vllm:num_requests_waiting,
  // vllm:gpu_cache_usage_perc (0..1) for routers that read vLLM's names.
  bool vllm_compat = false;
  std::string model_name;  // the vLLM aliases' model_name label
};

class ApiMetrics {
 public:
  // Registers the API families in `metrics->registry` (the engine's are
  // there already). `metrics` must outlive this object.
  ApiMetrics(obs::ServerMetrics* metrics, MetricsOptions options);

  void on_request(const std::string& route, int status);
  void on_generation(const Usage& usage, double t_first_ms, double t_total_ms);
  // The efficiency ratio's sample of one answer (obs/efficiency.h):
  // the engine's first token and the first token byte written, both in ms
  // from the request's arrival, and the connection's RTT in µs (< 0: unknown,
  // counted as 0).
  void on_first_byte(double t_engine_first_ms, double t_first_byte_ms, int64_t rtt_us);
  // One answer's tool calls (those that reached the client) and the outputs
  // that started like a call but went out as text (ToolCallParser::n_fallbacks).
  void on_tool_calls(ApiKind api, int n_calls, const std::array<int, kNumToolFallbacks>& n_fallbacks);
  // One error answer (an HTTP error, or an SSE error event after a 200, or
  // a client that left: kClientGone), by API and reason.
  void on_error(ApiKind api, ErrorReason reason);
  // A request admitted with a lower max_tokens (engine_degraded_requests_total{reason}).
  void on_degraded(limits::KvDegrade reason);
  // A prompt truncated by a context policy (api/context_policy.h), by
  // n_tokens: engine_context_truncations_total{policy} and
  // engine_context_truncated_tokens_total{policy}.
  void on_truncation(ContextPolicy policy, int64_t n_tokens);
  // The exposition: the engine's state is copied into the gauges first.
  std::string render(const EngineStats& engine);

 private:
  static constexpr int kNumApis = 2;
  obs::ServerMetrics* m_;
  MetricsOptions options_;
  obs::Family& http_requests_;
  obs::Family& requests_;
  // Mirrored from EngineStats at render() (live totals of the engine thread).
  obs::Counter& prompt_tokens_;
  obs::Counter& generation_tokens_;
  obs::Counter& cached_tokens_;
  std::array<obs::Counter*, kNumApis> tool_calls_{};
  std::array<std::array<obs::Counter*, kNumToolFallbacks>, kNumApis> tool_fallbacks_{};
  std::array<std::array<obs::Counter*, kNumErrorReasons>, kNumApis> errors_{};
  std::array<obs::Counter*, 3> degraded_{};  // by limits::KvDegrade (kNone unused)
  std::array<obs::Counter*, 3> truncations_{};  // by ContextPolicy (kError unused)
  std::array<obs::Counter*, 3> truncated_tokens_{};
  obs::Histogram& ttft_;
  obs::Histogram& e2e_;
  // Gauges and mirrored counters set from EngineStats at render().
  obs::Gauge& running_;
  obs::Gauge& waiting_;
  obs::Gauge& paused_;
  obs::Gauge& kv_usage_;
  obs::Gauge& kv_used_;
  obs::Gauge& kv_cached_;
  obs::Gauge& kv_total_;
  obs::Gauge& efficiency_;
  obs::Counter& steps_;
  // Admission control (engine.h): the bounded queue.
  obs::Gauge& queue_requests_;
  obs::Gauge& queue_prompt_tokens_;
  obs::Gauge& queue_oldest_;
  obs::Gauge* vllm_running_ = nullptr;
  obs::Gauge* vllm_waiting_ = nullptr;
  obs::Gauge* vllm_cache_ = nullptr;
};

}  // namespace zl::api
