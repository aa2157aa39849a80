// Lenient accessors into a JSON answer for the e2e tests: a missing or
// mistyped member reads as nullptr, "" or -1, so an assertion on it fails
// with the value instead of the test crashing.
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace zl::test {

// The value at `path` (object keys, outermost first), or nullptr.
inline const boost::json::value* at(const boost::json::object& o,
                                    std::initializer_list<std::string_view> path) {
  const boost::json::value* v = nullptr;
  const boost::json::object* cur = &o;
  for (std::string_view k : path) {
    if (!cur) return nullptr;
    v = cur->if_contains(k);
    cur = v && v->is_object() ? &v->get_object() : nullptr;
  }
  return v;
}

// The string `v` holds, or "".
inline std::string str(const boost::json::value* v) {
  return v && v->is_string() ? std::string(v->get_string()) : "";
}

// The integer `v` holds, or -1.
inline int64_t num(const boost::json::value* v) {
  return v && v->is_int64() ? v->get_int64() : -1;
}

// `s` as a JSON string literal.
inline std::string jquote(const std::string& s) {
  return boost::json::serialize(boost::json::value(s));
}

}  // namespace zl::test
