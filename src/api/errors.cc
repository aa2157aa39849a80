#include "api/errors.h"

#include <array>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include "core/utf8.h"

namespace zl::api {
namespace json = boost::json;
namespace {

struct ReasonRow {
  ErrorReason reason;
  ErrorType type;
  std::string_view name;  // wire name and metric label
};

using R = ErrorReason;
using T = ErrorType;
// THE table: every reason, in enum order (checked below).
constexpr std::array<ReasonRow, kNumErrorReasons> kReasons = {{
    {R::kUnspecified, T::kApi, "unspecified"},
    {R::kInvalidRequest, T::kInvalidRequest, "invalid_request"},
    {R::kInvalidJson, T::kInvalidRequest, "invalid_json"},
    {R::kMissingField, T::kInvalidRequest, "missing_field"},
    {R::kInvalidType, T::kInvalidRequest, "invalid_type"},
    {R::kInvalidValue, T::kInvalidRequest, "invalid_value"},
    {R::kOutOfRange, T::kInvalidRequest, "out_of_range"},
    {R::kUnsupportedValue, T::kInvalidRequest, "unsupported_value"},
    {R::kUnsupportedContent, T::kInvalidRequest, "unsupported_content"},
    {R::kInvalidRole, T::kInvalidRequest, "invalid_role"},
    {R::kEmptyMessages, T::kInvalidRequest, "empty_messages"},
    {R::kInvalidPrompt, T::kInvalidRequest, "invalid_prompt"},
    {R::kBadHttpRequest, T::kInvalidRequest, "bad_http_request"},
    {R::kContextLengthExceeded, T::kInvalidRequest, "context_length_exceeded"},
    {R::kSafetyViolation, T::kInvalidRequest, "safety_violation"},
    {R::kMissingApiKey, T::kAuthentication, "missing_api_key"},
    {R::kInvalidApiKey, T::kAuthentication, "invalid_api_key"},
    {R::kNotFound, T::kNotFound, "not_found"},
    {R::kRouteNotFound, T::kNotFound, "route_not_found"},
    {R::kModelNotFound, T::kNotFound, "model_not_found"},
    {R::kMethodNotAllowed, T::kMethodNotAllowed, "method_not_allowed"},
    {R::kRequestTooLarge, T::kRequestTooLarge, "request_too_large"},
    {R::kHeadersTooLarge, T::kRequestTooLarge, "headers_too_large"},
    {R::kRateLimitExceeded, T::kRateLimit, "rate_limit_exceeded"},
    {R::kQuotaBackendUnavailable, T::kUnavailable, "quota_backend_unavailable"},
    {R::kInternalServerError, T::kApi, "internal_server_error"},
    {R::kInvalidToolCall, T::kApi, "invalid_tool_call"},
    {R::kOverloaded, T::kOverloaded, "overloaded"},
    {R::kQueueTimeout, T::kOverloaded, "queue_timeout"},
    {R::kKvCacheOverflow, T::kInvalidRequest, "kv_cache_overflow"},  // 400: can never fit (limits/kv_admission.h)
    {R::kEngineShuttingDown, T::kOverloaded, "engine_shutting_down"},
    {R::kCancelled, T::kOverloaded, "cancelled"},
    {R::kClientGone, T::kInvalidRequest, "client_gone"},  // never sent: logged as 499
}};

constexpr bool table_in_enum_order() {
  for (size_t i = 0; i < kReasons.size(); ++i) {
    if (static_cast<size_t>(kReasons[i].reason) != i || kReasons[i].name.empty()) return false;
  }
  return true;
}
static_assert(table_in_enum_order(), "kReasons must list every ErrorReason once, in enum order");

const ReasonRow& row(ErrorReason reason) {
  const size_t i = static_cast<size_t>(reason);
  return i < kReasons.size() ? kReasons[i] : kReasons[static_cast<size_t>(R::kInternalServerError)];
}

}  // namespace

ErrorType error_type(ErrorReason reason) { return row(reason).type; }
std::string_view error_reason_name(ErrorReason reason) { return row(reason).name; }
ErrorType ApiError::type() const { return error_type(reason); }

int http_status(ErrorType type) {
  switch (type) {
    case ErrorType::kInvalidRequest: return 400;
    case ErrorType::kAuthentication: return 401;
    case ErrorType::kPermission: return 403;
    case ErrorType::kNotFound: return 404;
    case ErrorType::kMethodNotAllowed: return 405;
    case ErrorType::kRequestTooLarge: return 413;
    case ErrorType::kRateLimit: return 429;
    case ErrorType::kApi: return 500;
    case ErrorType::kUnavailable: return 503;
    case ErrorType::kOverloaded: return 529;
  }
  return 500;
}

std::string_view anthropic_type_name(ErrorType type) {
  switch (type) {
    case ErrorType::kInvalidRequest: return "invalid_request_error";
    case ErrorType::kAuthentication: return "authentication_error";
    case ErrorType::kPermission: return "permission_error";
    case ErrorType::kNotFound: return "not_found_error";
    case ErrorType::kMethodNotAllowed: return "invalid_request_error";
    case ErrorType::kRequestTooLarge: return "request_too_large";
    case ErrorType::kRateLimit: return "rate_limit_error";
    case ErrorType::kApi: return "api_error";
    case ErrorType::kUnavailable: return "api_error";
    case ErrorType::kOverloaded: return "overloaded_error";
  }
  return "api_error";
}

std::string_view openai_type_name(ErrorType type) {
  switch (type) {
    case ErrorType::kInvalidRequest:
    case ErrorType::kMethodNotAllowed:
    case ErrorType::kRequestTooLarge: return "invalid_request_error";
    case ErrorType::kAuthentication: return "authentication_error";
    case ErrorType::kPermission: return "permission_error";
    case ErrorType::kNotFound: return "not_found_error";
    case ErrorType::kRateLimit: return "rate_limit_error";
    case ErrorType::kApi:
    case ErrorType::kUnavailable: return "server_error";
    case ErrorType::kOverloaded: return "overloaded_error";
  }
  return "server_error";
}

ApiError invalid_request(std::string param, std::string message, ErrorReason reason) {
  return ApiError{.reason = reason, .message = std::move(message), .param = std::move(param)};
}

namespace {
ErrorReason reason_of_kind(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument:
    case ErrorKind::kUnsupported:
    case ErrorKind::kOutOfRange: return ErrorReason::kInvalidRequest;
    case ErrorKind::kNotFound: return ErrorReason::kNotFound;
    case ErrorKind::kResourceExhausted: return ErrorReason::kOverloaded;
    default: return ErrorReason::kInternalServerError;
  }
}
}  // namespace

ApiError from_status(const Status& status) {
  ApiError e{.reason = status.reason(), .message = status.message()};
  if (e.reason == ErrorReason::kUnspecified) e.reason = reason_of_kind(status.kind());
  if (const ErrorDetail* d = status.detail()) {
    e.numbers = d->numbers;
    e.labels = d->labels;
    e.param = d->labels.field;  // the engine's field names are the wire's (OpenAI's logit_bias, stop_token_ids)
  }
  return e;
}

ApiError from_http_error(http::HttpError error, const http::HttpRequest& request) {
  switch (error) {
    case http::HttpError::kBadRequest:
      return invalid_request("", "malformed HTTP request", ErrorReason::kBadHttpRequest);
    case http::HttpError::kNotFound:
      return ApiError{.reason = ErrorReason::kRouteNotFound,
                      .message = "no route for " + request.method + " " + request.path};
    case http::HttpError::kMethodNotAllowed:
      return ApiError{.reason = ErrorReason::kMethodNotAllowed,
                      .message = "method " + request.method + " is not allowed on " + request.path};
    case http::HttpError::kBodyTooLarge:
      return ApiError{.reason = ErrorReason::kRequestTooLarge,
                      .message = "request body is larger than the server accepts"};
    case http::HttpError::kHeadersTooLarge:
      return ApiError{.reason = ErrorReason::kHeadersTooLarge,
                      .message = "request headers are larger than the server accepts"};
    case http::HttpError::kInternal:
      break;
  }
  return ApiError{.reason = ErrorReason::kInternalServerError, .message = "internal server error"};
}

namespace {

// A JSON string value of `s`, invalid UTF-8 replaced (Boost.JSON writes bytes as given).
json::value text(std::string_view s) { return json::value(utf8::sanitize(s)); }

// The labels, then the numbers that are set, in a fixed order, into `o`.
void put_numbers(json::object& o, const ApiError& e) {
  if (!e.labels.limit.empty()) o["limit"] = text(e.labels.limit);
  if (!e.labels.rule.empty()) o["rule"] = text(e.labels.rule);
  const ErrorNumbers& n = e.numbers;
  if (n.n_prompt_tokens) o["n_prompt_tokens"] = *n.n_prompt_tokens;
  if (n.max_tokens) o["max_tokens"] = *n.max_tokens;
  if (n.n_ctx) o["n_ctx"] = *n.n_ctx;
  if (n.max_tokens_fit) o["max_tokens_fit"] = *n.max_tokens_fit;
  if (n.retry_after_ms) o["retry_after_ms"] = *n.retry_after_ms;
}

}  // namespace

std::string anthropic_error_json(const ApiError& e, std::string_view request_id) {
  json::object detail;
  detail["reason"] = error_reason_name(e.reason);
  if (!e.param.empty()) detail["param"] = text(e.param);
  put_numbers(detail, e);
  json::object error;
  error["type"] = anthropic_type_name(e.type());
  error["message"] = text(e.message);
  error["detail"] = std::move(detail);
  json::object out;
  out["type"] = "error";
  out["error"] = std::move(error);
  if (!request_id.empty()) out["request_id"] = text(request_id);
  return json::serialize(out);
}

std::string openai_error_json(const ApiError& e) {
  json::object error;
  error["message"] = text(e.message);
  error["type"] = openai_type_name(e.type());
  error["param"] = e.param.empty() ? json::value(nullptr) : text(e.param);
  error["code"] = error_reason_name(e.reason);
  put_numbers(error, e);
  json::object out;
  out["error"] = std::move(error);
  return json::serialize(out);
}

namespace {
http::HttpResponse error_response(const ApiError& e, std::string body, int status) {
  http::HttpResponse r;
  const ErrorType type = e.type();
  r.status = status;
  r.body = std::move(body);
  if (type == ErrorType::kOverloaded || type == ErrorType::kRateLimit || type == ErrorType::kUnavailable) {
    const int64_t retry_ms = e.numbers.retry_after_ms.value_or(1000);
    r.headers.emplace_back("retry-after", std::to_string((retry_ms + 999) / 1000));
    r.headers.emplace_back("retry-after-ms", std::to_string(retry_ms));
  }
  if (type == ErrorType::kMethodNotAllowed) r.headers.emplace_back("Allow", "GET, POST, HEAD");
  return r;
}
}  // namespace

http::HttpResponse anthropic_error_response(const ApiError& e, std::string_view request_id) {
  return error_response(e, anthropic_error_json(e, request_id), http_status(e));
}

http::HttpResponse openai_error_response(const ApiError& e) {
  return error_response(e, openai_error_json(e), openai_http_status(e));
}

int openai_http_status(const ApiError& e) {
  const int status = http_status(e);
  return status == 529 ? 503 : status;  // OpenAI clients know 503, not Anthropic's 529
}

}  // namespace zl::api
