// Validate mode (DESIGN.md §3): a request with `X-Engine-Mode: validate` or
// `X-Anthropic-Engine-Mode: validate` goes through everything a real one
// goes through — parsing, authentication, the chat template, the tokenizer,
// the context and stream_options checks — and its prompt is prefilled by
// the engine (StopParams::prefill_only: no token is sampled), then the
// answer is, with status 200 and JSON even when the request asked to stream:
//
//   {"status":"validated","input_tokens":N,"engine_latency_ms":…,
//    "estimated_ttft_ms":…,"max_tokens_fit":…,"stream_options":{…}|null,
//    "template":"<name>"}
//
//   engine_latency_ms  the prefill the engine measured (scheduled -> prompt computed)
//   estimated_ttft_ms  queue + prefill as measured for this request now: what
//                      a real request sent at this moment would wait for its
//                      first token, less the client's network time
//   max_tokens_fit     tokens that could follow the prompt: the rest of the
//                      context window, and of the KV cache's free and
//                      evictable blocks (a snapshot taken when the request
//                      was prepared, before its own prefill)
//   also: cached_input_tokens (prompt tokens the prefix cache served) and
//   queue_ms (submit -> scheduled)
//   stream_options     the effective stream settings (null without stream)
//
// An invalid request gets the 4xx it would get without the header (the
// same code paths run). Validated requests count as requests in the metrics
// (status 200), never as generated tokens.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "api/chat.h"
#include "api/generation.h"
#include "http/message.h"

namespace zl::api {

// True when `req` carries X-Engine-Mode or X-Anthropic-Engine-Mode with the
// value "validate" (names and value case-insensitive).
bool is_validate_mode(const http::HttpRequest& req);

struct ValidateContext {
  int64_t n_ctx = 0;                 // 0: unknown
  int64_t n_kv_tokens_available = -1;  // free + evictable KV blocks x block size; < 0: unknown
  std::string template_name;
  // The request's stream settings: null when it did not ask to stream.
  bool stream = false;
  std::optional<http::StreamShape> shape;
  bool include_usage = false;        // OpenAI stream_options.include_usage
};

// The answer's formatter: complete() writes the validated JSON from the
// Completion's usage and timings; error() is `api_formatter`'s (the API's
// own envelope). Only for non-streaming sessions (stream_* are forwarded).
std::unique_ptr<EventFormatter> make_validate_formatter(ValidateContext ctx,
                                                        std::unique_ptr<EventFormatter> api_formatter);

// The body complete() writes (exposed for tests).
std::string validated_json(const ValidateContext& ctx, const Usage& usage, const Timings& timings);

}  // namespace zl::api
