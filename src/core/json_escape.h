// One JSON string escaper for hand-written JSON (SSE frames, log lines, OTLP
// spans): cheaper than building a DOM on the hot path.
#pragma once

#include <string>
#include <string_view>

namespace zl {

// Appends `s` as a quoted JSON string literal. '"', '\\' and control
// characters (and DEL) are escaped; invalid UTF-8 bytes become U+FFFD (one
// per byte, core/utf8.h's policy), so the output is always valid JSON and
// valid UTF-8. Thread-safe; O(bytes).
void append_json_string(std::string& out, std::string_view s);

}  // namespace zl
