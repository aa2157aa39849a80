// Hand-written JSON output for the hot path (SSE frames): no DOM, no
// allocation beyond the output string.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/json_escape.h"

namespace zl::api {

// The deepest nesting any JSON is parsed with: request bodies, and the JSON
// inside them or in a model's output (tool schemas, call arguments).
// Boost.JSON's own default is 32.
inline constexpr int kMaxJsonDepth = 256;

// JSON's insignificant whitespace (RFC 8259): space, tab, line feed, carriage return.
inline bool is_json_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// Appends `s` as a quoted JSON string (core/json_escape.h).
using zl::append_json_string;
inline void append_json_int(std::string& out, int64_t v) { out += std::to_string(v); }

}  // namespace zl::api
