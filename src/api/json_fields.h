// Reading request JSON (Boost.JSON) with errors that name the field.
// Inside the API parsers only: a bad field throws FieldError, which the
// parser's entry point catches and returns as an ApiError (no exception
// leaves a parser).
#pragma once

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "api/chat.h"
#include "api/errors.h"
#include "http/stream_shaper.h"

namespace zl::api {

struct FieldError {
  ApiError error;
};

[[noreturn]] void throw_field_error(const std::string& param, const std::string& message,
                                    ErrorReason reason = ErrorReason::kInvalidRequest);

// Parses a request body that must be a JSON object (400 invalid_json otherwise).
ApiResult<boost::json::value> parse_json_body(std::string_view body);

// The parsers' entry point: parses `body` as a JSON object and runs
// fn(object, &result), turning a FieldError thrown inside into its ApiError.
template <typename T, typename Fn>
ApiResult<T> parse_object_with(std::string_view body, Fn fn) {
  auto doc = parse_json_body(body);
  if (!doc.ok()) return doc.error();
  try {
    T result;
    fn(doc.value().get_object(), &result);
    return result;
  } catch (const FieldError& e) {
    return e.error;
  }
}

// The member `key`, or nullptr when absent or null (null means "not given").
const boost::json::value* find_field(const boost::json::object& o, std::string_view key);
// The member `key`, or a 400 "<param> is required" (missing_field).
const boost::json::value& require_field(const boost::json::object& o, std::string_view key, const std::string& param);

std::string json_string(const boost::json::value& v, const std::string& param);
bool json_bool(const boost::json::value& v, const std::string& param);
// An integer in [min, max]; integral doubles (100.0) are accepted.
int64_t json_int(const boost::json::value& v, const std::string& param, int64_t min, int64_t max);
// A finite number in [min, max].
double json_number(const boost::json::value& v, const std::string& param, double min, double max);
const boost::json::array& json_array(const boost::json::value& v, const std::string& param);
const boost::json::object& json_object(const boost::json::value& v, const std::string& param);

// A tool_choice naming a tool ("tool:<name>") must name one of chat.tools:
// else a 400 on `param` (invalid_value). A required call ("any") needs at
// least one tool: else a 400 on "tool_choice".
void check_tool_choice(const ChatRequest& chat, const std::string& param);

// A tool name as both APIs require it, ^[a-zA-Z0-9_-]{1,64}$: else a 400 on
// `param` (invalid_value). Names go into prompts and JSON; this keeps them
// to what every model's format can carry.
void check_tool_name(const std::string& name, const std::string& param);

// "messages[3].content"
inline std::string index_param(const std::string& param, size_t i) { return param + "[" + std::to_string(i) + "]"; }

}  // namespace zl::api

namespace zl::api {

// stream_options (DESIGN.md §3), both APIs: max_buffer_size [4, 16 MiB],
// min_delay_ms [0, 10000], network_rtt_ms [0, 60000]; OpenAI's
// include_usage goes to *include_usage when that is not null (else it is an
// unknown field, ignored). Returns nullopt when no shaping field is given.
std::optional<http::StreamShape> parse_stream_options(const boost::json::value& v, bool* include_usage);

}  // namespace zl::api
