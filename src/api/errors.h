// API errors: the typed error of a request, its HTTP status (mapped here and
// nowhere else) and its two wire envelopes.
//
//   Anthropic: {"type":"error","error":{"type","message","detail":{"reason",…}},"request_id"}
//   OpenAI:    {"error":{"message","type","param","code"}}   (code = reason)
// After a 200 the same bodies travel as an SSE `error` event (Anthropic) or a
// `data: {"error":…}` frame (OpenAI).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

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
  kOverloaded,        // 529 overloaded_error
};

struct ApiError {
  ErrorType type = ErrorType::kInvalidRequest;
  std::string message;
  std::string reason;  // fine-grained cause (detail.reason / OpenAI code): "context_length_exceeded"
  std::string param;   // the offending field, when one is to blame: "messages[2].role"
  std::vector<std::pair<std::string, int64_t>> numbers;  // "n_prompt_tokens", "n_ctx", …
};

// The one mapping from error type to HTTP status.
int http_status(ErrorType type);
std::string_view anthropic_type_name(ErrorType type);
std::string_view openai_type_name(ErrorType type);

// A 400 naming `param` (reason "invalid_request" unless given).
ApiError invalid_request(std::string param, std::string message, std::string reason = "invalid_request");
// From a core Status (engine or tokenizer failure).
ApiError from_status(const Status& status);
// From an error that the HTTP layer detected.
ApiError from_http_error(http::HttpError error, const http::HttpRequest& request);

std::string anthropic_error_json(const ApiError& e, std::string_view request_id);
std::string openai_error_json(const ApiError& e);
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
