#include "api/shadow_glue.h"

#include <chrono>
#include <memory>
#include <string>

#include "api/anthropic/messages.h"
#include "api/openai/chat_completions.h"

namespace zl::api {

void mirror_to_shadow(rollout::Shadow& shadow, const http::HttpRequest& req, std::string_view route,
                      std::string_view user, ApiKind api, SessionOptions& opts) {
  if (req.has_header("x-engine-shadow") || !shadow.sampled(user)) return;
  std::shared_ptr<rollout::ShadowPair> pair = shadow.mirror(req.request_id, std::string(route), req.body);
  if (!pair) return;  // the shadow's queue is full (counted there)
  struct Tap {
    std::chrono::steady_clock::time_point t_start;
    double last_token_ms = -1;
    std::string text;
    size_t max_text = 0;
  };
  auto tap = std::make_shared<Tap>(Tap{.t_start = opts.t_start != std::chrono::steady_clock::time_point{}
                                                      ? opts.t_start
                                                      : std::chrono::steady_clock::now(),
                                       .max_text = shadow.config().max_text_bytes});
  opts.on_event = [tap, inner = std::move(opts.on_event)](const Event& e) {
    if (inner) inner(e);
    if (e.kind != EventKind::kText) return;
    tap->last_token_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - tap->t_start).count();
    if (tap->text.size() < tap->max_text) tap->text.append(e.text, 0, tap->max_text - tap->text.size());
  };
  opts.on_done = [tap, pair, api, clamped = opts.max_tokens_clamped,
                  inner = std::move(opts.on_done)](const SessionResult& r) {
    if (inner) inner(r);
    const Completion c{.finish = r.finish, .usage = r.usage, .max_tokens_clamped = clamped,
                       .n_tool_calls = r.n_tool_calls};
    const bool complete = r.status == 200 && !r.error_reason && r.finish != FinishReason::kNone &&
                          r.finish != FinishReason::kCancelled && r.finish != FinishReason::kError;
    pair->primary_done(rollout::PrimaryAnswer{
        .status = r.status,
        .complete = complete,
        .first_token_ms = r.t_first_ms,
        .last_token_ms = tap->last_token_ms,
        .total_tokens = r.usage.n_generated_tokens,
        .stop_reason = complete ? std::string(api == ApiKind::kOpenAI ? openai::finish_reason(c)
                                                                      : anthropic::stop_reason(c))
                                : std::string(),
        .text = std::move(tap->text)});
  };
}

}  // namespace zl::api
