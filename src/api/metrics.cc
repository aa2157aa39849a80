#include "api/metrics.h"

#include <cstdio>

#include "api/errors.h"  // error_reason_name

namespace zl::api {
namespace {

void append_number(std::string& out, double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  out += buf;
}

void gauge(std::string& out, const char* name, const char* help, const char* type, double v) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
  out += name;
  out += ' ';
  append_number(out, v);
  out += '\n';
}

}  // namespace

std::string_view api_kind_name(ApiKind api) { return api == ApiKind::kOpenAI ? "openai" : "anthropic"; }

void Histogram::observe(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t i = 0;
  while (i < kBounds.size() && seconds > kBounds[i]) ++i;
  ++counts_[i];
  sum_ += seconds;
  ++n_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
  std::lock_guard<std::mutex> lock(mu_);
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  uint64_t cum = 0;
  for (size_t i = 0; i < kBounds.size(); ++i) {
    cum += counts_[i];
    out += name + "_bucket{le=\"";
    append_number(out, kBounds[i]);
    out += "\"} " + std::to_string(cum) + "\n";
  }
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(n_) + "\n";
  out += name + "_sum ";
  append_number(out, sum_);
  out += "\n" + name + "_count " + std::to_string(n_) + "\n";
}

void ApiMetrics::on_request(const std::string& route, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{route, status}];
}

void ApiMetrics::on_generation(const Usage& usage, double t_first_ms, double t_total_ms) {
  n_prompt_tokens_.fetch_add(usage.n_prompt_tokens);
  n_generated_tokens_.fetch_add(usage.n_generated_tokens);
  if (t_first_ms >= 0) ttft_.observe(t_first_ms / 1000.0);
  e2e_.observe(t_total_ms / 1000.0);
}

void ApiMetrics::on_tool_calls(ApiKind api, int n_calls, const std::array<int, kNumToolFallbacks>& n_fallbacks) {
  const size_t a = static_cast<size_t>(api);
  n_tool_calls_[a].fetch_add(n_calls);
  for (size_t r = 0; r < n_fallbacks.size(); ++r) n_tool_fallbacks_[a][r].fetch_add(n_fallbacks[r]);
}

void ApiMetrics::on_error(ApiKind api, ErrorReason reason) {
  const size_t r = static_cast<size_t>(reason);
  if (r < kNumErrorReasons) n_errors_[static_cast<size_t>(api)][r].fetch_add(1, std::memory_order_relaxed);
}

std::string ApiMetrics::render(const EngineStats& e, const std::string& extra) const {
  std::string out;
  out.reserve(4096);
  out += "# HELP zerolayer_http_requests_total HTTP requests by route and status\n";
  out += "# TYPE zerolayer_http_requests_total counter\n";
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [key, n] : requests_) {
      out += "zerolayer_http_requests_total{route=\"" + key.first + "\",status=\"" + std::to_string(key.second) +
             "\"} " + std::to_string(n) + "\n";
    }
  }
  gauge(out, "zerolayer_prompt_tokens_total", "Prompt tokens of served requests", "counter",
        static_cast<double>(n_prompt_tokens_.load()));
  gauge(out, "zerolayer_generated_tokens_total", "Tokens generated for served requests", "counter",
        static_cast<double>(n_generated_tokens_.load()));
  // Every label pair from the start (0 until it happens), so that rate() and
  // alerts see a series before the first event.
  out += "# HELP zerolayer_tool_calls_total Tool calls in answers (tool_use blocks, tool_calls entries), by API\n";
  out += "# TYPE zerolayer_tool_calls_total counter\n";
  for (size_t a = 0; a < kNumApis; ++a) {
    out += "zerolayer_tool_calls_total{api=\"" + std::string(api_kind_name(static_cast<ApiKind>(a))) + "\"} " +
           std::to_string(n_tool_calls_[a].load()) + "\n";
  }
  out += "# HELP zerolayer_tool_call_fallbacks_total Model outputs that started like a tool call but were not a valid "
         "one and went out as text (a call whose arguments were already streaming: an error event), by API and reason\n";
  out += "# TYPE zerolayer_tool_call_fallbacks_total counter\n";
  for (size_t a = 0; a < kNumApis; ++a) {
    for (size_t r = 0; r < kNumToolFallbacks; ++r) {
      out += "zerolayer_tool_call_fallbacks_total{api=\"" + std::string(api_kind_name(static_cast<ApiKind>(a))) +
             "\",reason=\"" + std::string(tool_fallback_name(static_cast<ToolFallback>(r))) + "\"} " +
             std::to_string(n_tool_fallbacks_[a][r].load()) + "\n";
    }
  }
  const std::string rejected(kRejectedMetric);
  out += "# HELP " + rejected + " Error answers (HTTP errors, SSE error events after a 200, clients gone: "
         "client_gone), by API and reason\n";
  out += "# TYPE " + rejected + " counter\n";
  for (size_t a = 0; a < kNumApis; ++a) {
    // Every reason but kUnspecified (from_status always names one).
    for (size_t r = 1; r < kNumErrorReasons; ++r) {
      out += rejected + "{api=\"" + std::string(api_kind_name(static_cast<ApiKind>(a))) + "\",reason=\"" +
             std::string(error_reason_name(static_cast<ErrorReason>(r))) + "\"} " +
             std::to_string(n_errors_[a][r].load(std::memory_order_relaxed)) + "\n";
    }
  }
  ttft_.render(out, "zerolayer_time_to_first_token_seconds", "Time from request to first generated token");
  e2e_.render(out, "zerolayer_request_duration_seconds", "Time from request to the last byte of the answer");
  gauge(out, "engine_requests_running", "Requests in the running batch", "gauge", static_cast<double>(e.n_running));
  gauge(out, "engine_requests_waiting", "Requests waiting for admission", "gauge", static_cast<double>(e.n_waiting));
  gauge(out, "engine_kv_blocks_used", "KV cache blocks in use", "gauge", static_cast<double>(e.n_kv_blocks_used));
  gauge(out, "engine_kv_blocks_total", "KV cache blocks in all", "gauge", static_cast<double>(e.n_kv_blocks_total));
  gauge(out, "engine_steps_total", "Engine steps", "counter", static_cast<double>(e.n_steps));
  gauge(out, "engine_prompt_tokens_total", "Prompt tokens admitted by the engine", "counter",
        static_cast<double>(e.n_prompt_tokens_total));
  gauge(out, "engine_generated_tokens_total", "Tokens generated by the engine", "counter",
        static_cast<double>(e.n_generated_tokens_total));
  out += extra;
  return out;
}

}  // namespace zl::api
