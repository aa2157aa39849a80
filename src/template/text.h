// Python's str operations on UTF-8 text, as chat templates use them (code
// points, not bytes, for lengths, indexes and strip sets). Case mapping is
// ASCII-only. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zl::tmpl {

size_t utf8_length(std::string_view s);
// The code points of `s` as views (an invalid byte is a code point of its own).
std::vector<std::string_view> utf8_chars(std::string_view s);

std::string ascii_lower(std::string_view s);
std::string ascii_upper(std::string_view s);
std::string py_capitalize(std::string_view s);
std::string py_title(std::string_view s);
// str.strip/lstrip/rstrip: `chars` null strips whitespace.
std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right);
// str.split(sep, maxsplit) (sep null: runs of whitespace, no empty parts);
// rsplit when `from_right`.
std::vector<std::string> py_split(std::string_view s, const std::string* sep, int64_t maxsplit, bool from_right = false);
std::string py_replace(std::string_view s, std::string_view from, std::string_view to, int64_t count);
std::string py_indent(std::string_view s, std::string_view pad, bool first, bool blank);
std::string html_escape(std::string_view s);
bool py_isspace(uint32_t cp);

}  // namespace zl::tmpl
