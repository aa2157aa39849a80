// ErrorReason and ErrorDetail: the fine-grained, typed cause of an error and
// the numbers a client needs to act on it.
//
// Whoever detects a problem (engine, scheduler, tokenizer, API parser, HTTP
// layer) names its reason here as a value; it travels in a Status
// (Status::detail()) or an api::ApiError to exactly one table
// (api/errors.cc) that gives each reason its wire name (`error.detail.reason`,
// OpenAI `code`, the `reason` metric label), its error type and HTTP status.
// No code outside that table spells a reason as text.
//
// Adding a reason: add it to the enum (before kClientGone keeps
// kNumErrorReasons right) and give it a row in api/errors.cc's table (a
// static_assert there fails until it has one).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace zl {

enum class ErrorReason : uint8_t {
  kUnspecified,            // none given: the API layer derives one from the ErrorKind
  // 400 invalid_request_error
  kInvalidRequest,         // generic bad request
  kInvalidJson,            // the body is not a JSON object
  kMissingField,
  kInvalidType,
  kInvalidValue,
  kOutOfRange,             // a field's value outside its range (not the context)
  kUnsupportedValue,
  kUnsupportedContent,     // image/document parts on a text-only model
  kInvalidRole,
  kEmptyMessages,
  kInvalidPrompt,          // the prompt cannot be rendered or tokenized
  kBadHttpRequest,         // malformed HTTP/1.1
  kContextLengthExceeded,  // numbers: n_prompt_tokens, n_ctx, max_tokens_fit
  kSafetyViolation,        // the guard refused the input; labels: rule
  // 401 authentication_error
  kMissingApiKey,
  kInvalidApiKey,
  // 404 not_found_error
  kNotFound,
  kRouteNotFound,
  kModelNotFound,
  // 405
  kMethodNotAllowed,
  // 413 request_too_large
  kRequestTooLarge,
  kHeadersTooLarge,
  // 429 rate_limit_error
  kRateLimitExceeded,      // numbers: retry_after_ms; labels: limit
  // 503 (both APIs): a backend the server depends on is unreachable
  kQuotaBackendUnavailable,  // --redis-fail closed and Redis is unreachable; numbers: retry_after_ms
  // 500 api_error
  kInternalServerError,
  kInvalidToolCall,        // a streamed tool call broke off (api/generation.h)
  // 529 overloaded_error
  kOverloaded,             // load shedding (the queue is full); numbers: retry_after_ms
  kQueueTimeout,           // waited in the queue past --queue-timeout-ms; numbers: retry_after_ms
  kKvCacheOverflow,        // 400 invalid_request_error (not 529): prompt + max_tokens can never fit the KV cache
                           // for one sequence; numbers: n_prompt_tokens, max_tokens, max_tokens_fit
  kEngineShuttingDown,     // submitted to, or still running in, an engine that is stopping
  kCancelled,              // the server cancelled the request while its client was there
  // Not sent: the client left before the answer (HTTP 499 in logs and metrics).
  kClientGone,
};
inline constexpr int kNumErrorReasons = static_cast<int>(ErrorReason::kClientGone) + 1;

// The numbers that go with a reason, each present only when it applies. They
// appear under the same names in `error.detail` (Anthropic) / `error`
// (OpenAI); retry_after_ms also sets the retry-after headers.
struct ErrorNumbers {
  std::optional<int64_t> n_prompt_tokens;
  std::optional<int64_t> n_ctx;           // the context window, tokens
  std::optional<int64_t> max_tokens_fit;  // the most tokens that could still be generated
  std::optional<int64_t> retry_after_ms;
  std::optional<int64_t> max_tokens;      // the max_tokens the request asked for

  bool empty() const { return !n_prompt_tokens && !n_ctx && !max_tokens_fit && !retry_after_ms && !max_tokens; }
};

// The names that go with a reason, each present only when it applies: they
// appear as strings under the same names as the numbers.
struct ErrorLabels {
  std::string limit;  // kRateLimitExceeded: which limit ("requests", "input_tokens", "output_tokens", "concurrent")
  std::string rule;   // kSafetyViolation: the guard rule's name
  // The request field at fault, by the engine's name for it (Request's
  // logit_bias, stop_token_ids): the API names it as the error's param.
  std::string field;

  bool empty() const { return limit.empty() && rule.empty() && field.empty(); }
};

// What a Status may carry besides its kind and message.
struct ErrorDetail {
  ErrorReason reason = ErrorReason::kUnspecified;
  ErrorNumbers numbers;
  ErrorLabels labels;

  bool empty() const { return reason == ErrorReason::kUnspecified && numbers.empty() && labels.empty(); }
};

}  // namespace zl
