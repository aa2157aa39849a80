#include "api/errors.h"

#include "api/json_util.h"

namespace zl::api {

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
    case ErrorType::kApi: return "server_error";
    case ErrorType::kOverloaded: return "overloaded_error";
  }
  return "server_error";
}

ApiError invalid_request(std::string param, std::string message, std::string reason) {
  return ApiError{.type = ErrorType::kInvalidRequest,
                  .message = std::move(message),
                  .reason = std::move(reason),
                  .param = std::move(param)};
}

ApiError from_status(const Status& status) {
  ApiError e;
  e.message = status.message();
  switch (status.kind()) {
    case ErrorKind::kInvalidArgument:
    case ErrorKind::kUnsupported:
      e.type = ErrorType::kInvalidRequest;
      e.reason = "invalid_request";
      break;
    case ErrorKind::kOutOfRange:
      e.type = ErrorType::kInvalidRequest;
      e.reason = "context_length_exceeded";
      break;
    case ErrorKind::kNotFound:
      e.type = ErrorType::kNotFound;
      e.reason = "not_found";
      break;
    case ErrorKind::kResourceExhausted:
      e.type = ErrorType::kOverloaded;
      e.reason = "kv_cache_overflow";
      break;
    default:
      e.type = ErrorType::kApi;
      e.reason = "internal_server_error";
      break;
  }
  return e;
}

ApiError from_http_error(http::HttpError error, const http::HttpRequest& request) {
  switch (error) {
    case http::HttpError::kBadRequest:
      return invalid_request("", "malformed HTTP request", "bad_http_request");
    case http::HttpError::kNotFound:
      return ApiError{.type = ErrorType::kNotFound,
                      .message = "no route for " + request.method + " " + request.path,
                      .reason = "route_not_found"};
    case http::HttpError::kMethodNotAllowed:
      return ApiError{.type = ErrorType::kMethodNotAllowed,
                      .message = "method " + request.method + " is not allowed on " + request.path,
                      .reason = "method_not_allowed"};
    case http::HttpError::kBodyTooLarge:
      return ApiError{.type = ErrorType::kRequestTooLarge,
                      .message = "request body is larger than the server accepts",
                      .reason = "request_too_large"};
    case http::HttpError::kHeadersTooLarge:
      return ApiError{.type = ErrorType::kRequestTooLarge,
                      .message = "request headers are larger than the server accepts",
                      .reason = "headers_too_large"};
    case http::HttpError::kInternal:
      return ApiError{.type = ErrorType::kApi, .message = "internal server error", .reason = "internal_server_error"};
  }
  return ApiError{.type = ErrorType::kApi, .message = "internal server error", .reason = "internal_server_error"};
}

std::string anthropic_error_json(const ApiError& e, std::string_view request_id) {
  std::string out = "{\"type\":\"error\",\"error\":{\"type\":";
  append_json_string(out, anthropic_type_name(e.type));
  out += ",\"message\":";
  append_json_string(out, e.message);
  out += ",\"detail\":{\"reason\":";
  append_json_string(out, e.reason.empty() ? "error" : e.reason);
  if (!e.param.empty()) {
    out += ",\"param\":";
    append_json_string(out, e.param);
  }
  for (const auto& [k, v] : e.numbers) {
    out += ',';
    append_json_string(out, k);
    out += ':';
    append_json_int(out, v);
  }
  out += "}}";
  if (!request_id.empty()) {
    out += ",\"request_id\":";
    append_json_string(out, request_id);
  }
  out += '}';
  return out;
}

std::string openai_error_json(const ApiError& e) {
  std::string out = "{\"error\":{\"message\":";
  append_json_string(out, e.message);
  out += ",\"type\":";
  append_json_string(out, openai_type_name(e.type));
  out += ",\"param\":";
  if (e.param.empty()) {
    out += "null";
  } else {
    append_json_string(out, e.param);
  }
  out += ",\"code\":";
  if (e.reason.empty()) {
    out += "null";
  } else {
    append_json_string(out, e.reason);
  }
  for (const auto& [k, v] : e.numbers) {
    out += ',';
    append_json_string(out, k);
    out += ':';
    append_json_int(out, v);
  }
  out += "}}";
  return out;
}

namespace {
http::HttpResponse error_response(const ApiError& e, std::string body) {
  http::HttpResponse r;
  r.status = http_status(e.type);
  r.body = std::move(body);
  if (e.type == ErrorType::kOverloaded || e.type == ErrorType::kRateLimit) {
    int64_t retry_ms = 1000;
    for (const auto& [k, v] : e.numbers) {
      if (k == "retry_after_ms") retry_ms = v;
    }
    r.headers.emplace_back("retry-after", std::to_string((retry_ms + 999) / 1000));
    r.headers.emplace_back("retry-after-ms", std::to_string(retry_ms));
  }
  if (e.type == ErrorType::kMethodNotAllowed) r.headers.emplace_back("Allow", "GET, POST, HEAD");
  return r;
}
}  // namespace

http::HttpResponse anthropic_error_response(const ApiError& e, std::string_view request_id) {
  return error_response(e, anthropic_error_json(e, request_id));
}

http::HttpResponse openai_error_response(const ApiError& e) { return error_response(e, openai_error_json(e)); }

}  // namespace zl::api
