// API errors: the typed error of a request, its HTTP status (mapped here and
// nowhere else) and its two wire envelopes.
//
//   Anthropic: {"type":"error","error":{"type","message","detail":{"reason",…}},"request_id"}
//     (detail: "reason", "param" when set, then the numbers that are set)
//   OpenAI:    {"error":{"message","type","param","code"}}   (code = reason; then the numbers)
// After a 200 the same bodies travel as an SSE `error` event (Anthropic) or a
// `data: {"error":…}` frame (OpenAI).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "core/error_reason.h"  // ErrorReason, ErrorNumbers
#include "core/status.h"
#include "http/message.h"

namespace zl::api {

enum class ErrorType {
  kInvalidRequest,    // 400 invalid_request_error
  kAuthentication,    // 401 authentication_error
  kPermission,        // 403 permission_error
  kNotFound,          // 404 not_found_error
  kMethodNotAllowed,  // 405 invalid_request_error
  kRequestTooLarge,   // 413 request_too_large
  kRateLimit,         // 429 rate_limit_error
  kApi,               // 500 api_error
  kUnavailable,       // 503 api_error (OpenAI server_error)
  kOverloaded,        // 529 overloaded_error (OpenAI routes: 503)
};

// An error answer. Its type, HTTP status and wire name all follow from
// `reason` through the one table in errors.cc. Create one with a designated
// initializer: ApiError{.reason = ErrorReason::kOverloaded, .message = "…",
// .numbers = {.retry_after_ms = 2000}}, or from a Status (from_status).
struct ApiError {
  ErrorReason reason = ErrorReason::kInternalServerError;
  std::string message;
  std::string param;     // the offending field, when one is to blame: "messages[2].role"
  ErrorNumbers numbers;  // n_prompt_tokens, n_ctx, max_tokens_fit, retry_after_ms, max_tokens (those set)
  ErrorLabels labels;    // limit, rule (those set)

  ErrorType type() const;
};

// The table: each reason's error type and its stable snake_case wire name
// ("context_length_exceeded"), which is also its `reason` metric label.
ErrorType error_type(ErrorReason reason);
std::string_view error_reason_name(ErrorReason reason);

// The one mapping from error type to HTTP status.
int http_status(ErrorType type);
inline int http_status(const ApiError& e) { return http_status(e.type()); }
// The status on OpenAI routes: the same, except 503 for 529 (overloaded).
int openai_http_status(const ApiError& e);
std::string_view anthropic_type_name(ErrorType type);
std::string_view openai_type_name(ErrorType type);

// A 400 naming `param`.
ApiError invalid_request(std::string param, std::string message,
                         ErrorReason reason = ErrorReason::kInvalidRequest);
// From a core Status (engine or tokenizer failure): its detail's reason and
// numbers when it has one, else a reason derived from its kind
// (kInvalidArgument/kUnsupported/kOutOfRange: invalid_request, kNotFound:
// not_found, kResourceExhausted: overloaded, anything else:
// internal_server_error).
ApiError from_status(const Status& status);
// From an error that the HTTP layer detected.
ApiError from_http_error(http::HttpError error, const http::HttpRequest& request);

// The envelopes (built with Boost.JSON; strings made valid UTF-8).
std::string anthropic_error_json(const ApiError& e, std::string_view request_id);
std::string openai_error_json(const ApiError& e);
// As a response: the status (openai_http_status on OpenAI routes), and
// retry-after / retry-after-ms for 429, 503 and 529 (numbers.retry_after_ms,
// else 1 s); Allow for 405.
http::HttpResponse anthropic_error_response(const ApiError& e, std::string_view request_id);
http::HttpResponse openai_error_response(const ApiError& e);

// A value or an ApiError.
template <typename T>
class [[nodiscard]] ApiResult {
 public:
  ApiResult(T value) : v_(std::move(value)) {}      // NOLINT: implicit by design
  ApiResult(ApiError error) : v_(std::move(error)) {}  // NOLINT: implicit by design
  bool ok() const { return v_.index() == 0; }
  T& value() { return std::get<0>(v_); }
  const T& value() const { return std::get<0>(v_); }
  const ApiError& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, ApiError> v_;
};

}  // namespace zl::api
