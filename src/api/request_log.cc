#include "api/request_log.h"

#include <algorithm>
#include <cstdio>

#include "api/json_util.h"
#include "core/log.h"

namespace zl::api {
namespace {

double ms_between(Timings::Clock::time_point a, Timings::Clock::time_point b) {
  if (a == Timings::Clock::time_point{} || b == Timings::Clock::time_point{}) return -1;
  return std::chrono::duration<double, std::milli>(b - a).count();
}

void add_ms(std::string& out, const char* key, double ms) {
  if (ms < 0) return;
  char buf[64];
  std::snprintf(buf, sizeof buf, ",\"%s\":%.3f", key, ms);
  out += buf;
}

}  // namespace

std::string format_request_log_json(const RequestLog& r) {
  std::string out = "{\"ts\":\"" + log::utc_timestamp() + "\",\"level\":\"" + (r.status >= 500 ? "error" : "info") + "\"";
  out += ",\"request_id\":";
  append_json_string(out, r.request_id);
  out += ",\"method\":";
  append_json_string(out, r.method);
  out += ",\"route\":";
  append_json_string(out, r.route);
  out += ",\"status\":" + std::to_string(r.status);
  if (!r.tenant.empty()) {
    out += ",\"tenant\":";
    append_json_string(out, r.tenant);
  }
  if (r.generation) {
    out += std::string(",\"stream\":") + (r.stream ? "true" : "false");
    out += ",\"n_prompt_tokens\":" + std::to_string(r.usage.n_prompt_tokens);
    out += ",\"n_cached_tokens\":" + std::to_string(r.usage.n_cached_tokens);
    out += ",\"n_generated_tokens\":" + std::to_string(r.usage.n_generated_tokens);
    if (r.finish != FinishReason::kNone) {
      out += ",\"finish\":";
      append_json_string(out, finish_reason_name(r.finish));
    }
    add_ms(out, "t_first_token_ms", r.t_first_token_ms);
    add_ms(out, "t_queued_ms", ms_between(r.engine.t_submit, r.engine.t_scheduled));
    add_ms(out, "t_prefill_ms", ms_between(r.engine.t_scheduled, r.engine.t_first_token));
    add_ms(out, "t_decode_ms", ms_between(r.engine.t_first_token, r.engine.t_last_token));
  }
  if (r.generation) add_ms(out, "t_total_ms", r.t_total_ms);
  if (!r.error_reason.empty()) {
    out += ",\"error_reason\":";
    append_json_string(out, r.error_reason);
  }
  out += '}';
  return out;
}

std::string format_request_log_human(const RequestLog& r) {
  char buf[512];
  int n = std::snprintf(buf, sizeof buf, "%d %s %s %s", r.status, r.method.c_str(), r.route.c_str(),
                        r.request_id.c_str());
  std::string out(buf, static_cast<size_t>(std::max(n, 0)));
  if (!r.tenant.empty()) out += " tenant=" + r.tenant;
  if (r.generation) {
    n = std::snprintf(buf, sizeof buf, " %lld+%lld tok", static_cast<long long>(r.usage.n_prompt_tokens),
                      static_cast<long long>(r.usage.n_generated_tokens));
    out.append(buf, static_cast<size_t>(std::max(n, 0)));
    if (r.t_first_token_ms >= 0) {
      n = std::snprintf(buf, sizeof buf, " first %.1f ms", r.t_first_token_ms);
      out.append(buf, static_cast<size_t>(std::max(n, 0)));
    }
  }
  if (r.generation) {
    n = std::snprintf(buf, sizeof buf, " total %.1f ms", r.t_total_ms);
    out.append(buf, static_cast<size_t>(std::max(n, 0)));
  }
  if (r.finish != FinishReason::kNone) out.append(" ").append(finish_reason_name(r.finish));
  if (!r.error_reason.empty()) out += " error=" + r.error_reason;
  return out;
}

RequestLogSink stderr_request_log() {
  return [](const RequestLog& r) {
    // The process-wide log format and writer (core/log.h): one write(2) a
    // line, so lines from concurrent I/O threads do not interleave.
    const bool human = log::format() == log::Format::kText;
    log::write_line(human ? format_request_log_human(r) : format_request_log_json(r));
  };
}

}  // namespace zl::api
