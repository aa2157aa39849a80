// Basic serving metrics in Prometheus text format (GET /metrics). The
// observability issue extends this; names follow DESIGN.md (`engine_*` for
// engine state, `zerolayer_http_*` for the server). Thread-safe.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "api/tool_calls.h"
#include "core/error_reason.h"
#include "engine/request.h"

namespace zl::api {

// The counter of error answers, {api, reason}. (A later issue renames the
// families to engine_*: the name lives here only.)
inline constexpr std::string_view kRejectedMetric = "zerolayer_requests_rejected_total";

// The wire API of a request: the `api` label ("anthropic", "openai").
enum class ApiKind { kAnthropic, kOpenAI };
std::string_view api_kind_name(ApiKind api);

class Histogram {
 public:
  static constexpr std::array<double, 14> kBounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                     1,     2.5,  5,     10,   30,  60,  120};
  void observe(double seconds);
  void render(std::string& out, const std::string& name, const std::string& help) const;

 private:
  mutable std::mutex mu_;
  std::array<uint64_t, kBounds.size() + 1> counts_{};
  double sum_ = 0;
  uint64_t n_ = 0;
};

class ApiMetrics {
 public:
  void on_request(const std::string& route, int status);
  void on_generation(const Usage& usage, double t_first_ms, double t_total_ms);
  // One answer's tool calls (those that reached the client) and the outputs
  // that started like a call but went out as text (ToolCallParser::n_fallbacks).
  void on_tool_calls(ApiKind api, int n_calls, const std::array<int, kNumToolFallbacks>& n_fallbacks);
  // One error answer (an HTTP error, or an SSE error event after a 200, or
  // a client that left: kClientGone), by API and reason.
  void on_error(ApiKind api, ErrorReason reason);
  // All metrics, with the engine's state and `extra` (more exposition text) appended.
  std::string render(const EngineStats& engine, const std::string& extra) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> requests_;
  std::atomic<int64_t> n_prompt_tokens_{0};
  std::atomic<int64_t> n_generated_tokens_{0};
  static constexpr int kNumApis = 2;
  std::array<std::atomic<int64_t>, kNumApis> n_tool_calls_{};
  std::array<std::array<std::atomic<int64_t>, kNumToolFallbacks>, kNumApis> n_tool_fallbacks_{};
  std::array<std::array<std::atomic<int64_t>, kNumErrorReasons>, kNumApis> n_errors_{};
  Histogram ttft_;
  Histogram e2e_;
};

}  // namespace zl::api
