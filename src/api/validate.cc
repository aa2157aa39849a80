#include "api/validate.h"

#include <algorithm>
#include <boost/beast/core/string.hpp>  // iequals
#include <cstdio>

#include "api/json_util.h"
#include "http/stream_shaper.h"

namespace zl::api {
namespace {

void append_ms(std::string& out, double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", std::max(0.0, ms));
  out += buf;
}

class ValidateFormatter final : public EventFormatter {
 public:
  ValidateFormatter(ValidateContext ctx, std::unique_ptr<EventFormatter> api)
      : ctx_(std::move(ctx)), api_(std::move(api)) {}

  void stream_start(const Usage& u, std::string& out) override { api_->stream_start(u, out); }
  void stream_text(std::string_view t, std::string& out) override { api_->stream_text(t, out); }
  void stream_tool_call_start(std::string_view n, std::string& out) override { api_->stream_tool_call_start(n, out); }
  void stream_tool_call_delta(std::string_view a, std::string& out) override { api_->stream_tool_call_delta(a, out); }
  void stream_tool_call_end(std::string& out) override { api_->stream_tool_call_end(out); }
  void stream_finish(const Completion& c, std::string& out) override { api_->stream_finish(c, out); }
  void stream_error(const ApiError& e, std::string& out) override { api_->stream_error(e, out); }
  void stream_ping(std::string& out) override { api_->stream_ping(out); }

  http::HttpResponse complete(const std::vector<AnswerPart>&, const Completion& c) override {
    return http::HttpResponse{.status = 200, .content_type = "application/json", .headers = {},
                              .body = validated_json(ctx_, c.usage, c.timings)};
  }
  http::HttpResponse error(const ApiError& e) override { return api_->error(e); }

 private:
  ValidateContext ctx_;
  std::unique_ptr<EventFormatter> api_;
};

}  // namespace

bool is_validate_mode(const http::HttpRequest& req) {
  for (std::string_view name : {"x-engine-mode", "x-anthropic-engine-mode"}) {
    if (boost::beast::iequals(req.header(name), "validate")) return true;
  }
  return false;
}

std::string validated_json(const ValidateContext& ctx, const Usage& usage, const Timings& timings) {
  const int64_t n_prompt = usage.n_prompt_tokens;
  int64_t fit = ctx.n_ctx > 0 ? std::max<int64_t>(0, ctx.n_ctx - n_prompt) : -1;
  if (ctx.n_kv_tokens_available >= 0) {
    const int64_t kv_fit = std::max<int64_t>(0, ctx.n_kv_tokens_available - n_prompt);
    fit = fit < 0 ? kv_fit : std::min(fit, kv_fit);
  }
  std::string d = "{\"status\":\"validated\",\"input_tokens\":" + std::to_string(n_prompt);
  d += ",\"cached_input_tokens\":" + std::to_string(usage.n_cached_tokens);
  d += ",\"engine_latency_ms\":";
  append_ms(d, timings.t_prefill_ms());
  d += ",\"queue_ms\":";
  append_ms(d, timings.t_queued_ms());
  d += ",\"estimated_ttft_ms\":";
  append_ms(d, timings.t_queued_ms() + timings.t_prefill_ms());
  d += ",\"max_tokens_fit\":";
  d += fit < 0 ? "null" : std::to_string(fit);
  d += ",\"stream_options\":";
  if (!ctx.stream) {
    d += "null";
  } else {
    const http::StreamShape shape = ctx.shape.value_or(http::StreamShape{});
    d += "{\"max_buffer_size\":" + std::to_string(shape.max_buffer_size);
    d += ",\"min_delay_ms\":" + std::to_string(shape.min_delay_ms);
    d += ",\"network_rtt_ms\":" + std::to_string(shape.network_rtt_ms);
    d += ",\"coalesce_window_ms\":" + std::to_string(http::StreamShaper(shape).window().count());
    d += ",\"include_usage\":";
    d += ctx.include_usage ? "true" : "false";
    d += '}';
  }
  d += ",\"template\":";
  append_json_string(d, ctx.template_name);
  d += '}';
  return d;
}

std::unique_ptr<EventFormatter> make_validate_formatter(ValidateContext ctx,
                                                        std::unique_ptr<EventFormatter> api_formatter) {
  return std::make_unique<ValidateFormatter>(std::move(ctx), std::move(api_formatter));
}

}  // namespace zl::api
