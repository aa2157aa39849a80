#include "api/json_fields.h"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <algorithm>
#include <cmath>

#include "api/json_util.h"

namespace zl::api {
namespace json = boost::json;

void throw_field_error(const std::string& param, const std::string& message, ErrorReason reason) {
  throw FieldError{invalid_request(param, param.empty() ? message : param + ": " + message, reason)};
}

ApiResult<json::value> parse_json_body(std::string_view body) {
  boost::system::error_code ec;
  json::parse_options opts;
  opts.max_depth = kMaxJsonDepth;
  json::value v = json::parse(body, ec, json::storage_ptr(), opts);
  if (ec) return invalid_request("", "request body is not valid JSON: " + ec.message(), ErrorReason::kInvalidJson);
  if (!v.is_object()) return invalid_request("", "request body must be a JSON object", ErrorReason::kInvalidJson);
  return v;
}

void check_tool_choice(const ChatRequest& chat, const std::string& param) {
  if (chat.tool_choice == "any" && chat.tools.empty()) {
    // A call is required but none can be made (OpenAI answers this with a 400 too).
    throw_field_error("tool_choice", "requires a tool call, but the request has no tools", ErrorReason::kInvalidValue);
  }
  if (!chat.tool_choice.starts_with("tool:")) return;
  const std::string name = chat.tool_choice.substr(5);
  for (const ToolDef& t : chat.tools) {
    if (t.name == name) return;
  }
  throw_field_error(param, "names no tool in tools: '" + name + "'", ErrorReason::kInvalidValue);
}

void check_tool_name(const std::string& name, const std::string& param) {
  const bool ok = !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
  if (!ok) throw_field_error(param, "must match ^[a-zA-Z0-9_-]{1,64}$", ErrorReason::kInvalidValue);
}

const json::value* find_field(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v && !v->is_null() ? v : nullptr;
}

const json::value& require_field(const json::object& o, std::string_view key, const std::string& param) {
  const json::value* v = find_field(o, key);
  if (!v) throw_field_error(param, "field required", ErrorReason::kMissingField);
  return *v;
}

std::string json_string(const json::value& v, const std::string& param) {
  if (!v.is_string()) throw_field_error(param, "expected a string", ErrorReason::kInvalidType);
  return std::string(v.get_string());
}

bool json_bool(const json::value& v, const std::string& param) {
  if (!v.is_bool()) throw_field_error(param, "expected a boolean", ErrorReason::kInvalidType);
  return v.get_bool();
}

int64_t json_int(const json::value& v, const std::string& param, int64_t min, int64_t max) {
  int64_t x = 0;
  if (v.is_int64()) {
    x = v.get_int64();
  } else if (v.is_uint64()) {
    x = v.get_uint64() > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(v.get_uint64());
  } else if (v.is_double()) {
    const double d = v.get_double();
    if (!std::isfinite(d) || d != std::floor(d)) throw_field_error(param, "expected an integer", ErrorReason::kInvalidType);
    if (d < static_cast<double>(min) || d > static_cast<double>(max)) {
      throw_field_error(param, "must be between " + std::to_string(min) + " and " + std::to_string(max),
                        ErrorReason::kOutOfRange);
    }
    x = static_cast<int64_t>(d);
  } else {
    throw_field_error(param, "expected an integer", ErrorReason::kInvalidType);
  }
  if (x < min || x > max) {
    throw_field_error(param, "must be between " + std::to_string(min) + " and " + std::to_string(max),
                      ErrorReason::kOutOfRange);
  }
  return x;
}

double json_number(const json::value& v, const std::string& param, double min, double max) {
  double d;
  if (v.is_double()) {
    d = v.get_double();
  } else if (v.is_int64()) {
    d = static_cast<double>(v.get_int64());
  } else if (v.is_uint64()) {
    d = static_cast<double>(v.get_uint64());
  } else {
    throw_field_error(param, "expected a number", ErrorReason::kInvalidType);
  }
  if (!std::isfinite(d) || d < min || d > max) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "must be a number between %g and %g", min, max);
    throw_field_error(param, buf, ErrorReason::kOutOfRange);
  }
  return d;
}

const json::array& json_array(const json::value& v, const std::string& param) {
  if (!v.is_array()) throw_field_error(param, "expected an array", ErrorReason::kInvalidType);
  return v.get_array();
}

const json::object& json_object(const json::value& v, const std::string& param) {
  if (!v.is_object()) throw_field_error(param, "expected an object", ErrorReason::kInvalidType);
  return v.get_object();
}

}  // namespace zl::api

namespace zl::api {

std::optional<http::StreamShape> parse_stream_options(const boost::json::value& v, bool* include_usage) {
  const auto& o = json_object(v, "stream_options");
  if (include_usage) {
    if (const auto* f = find_field(o, "include_usage")) *include_usage = json_bool(*f, "stream_options.include_usage");
  }
  http::StreamShape shape;
  bool any = false;
  if (const auto* f = find_field(o, "max_buffer_size")) {
    shape.max_buffer_size = json_int(*f, "stream_options.max_buffer_size", 4, 16 << 20);
    any = true;
  }
  if (const auto* f = find_field(o, "min_delay_ms")) {
    shape.min_delay_ms = json_int(*f, "stream_options.min_delay_ms", 0, 10000);
    any = true;
  }
  if (const auto* f = find_field(o, "network_rtt_ms")) {
    shape.network_rtt_ms = json_int(*f, "stream_options.network_rtt_ms", 0, 60000);
    any = true;
  }
  if (!any) return std::nullopt;
  return shape;
}

}  // namespace zl::api
