// Compact JSON text of a Boost.JSON value, with numbers as people write them.
// Boost.JSON's serialize() spells every double in scientific notation
// (7.78 → "7.78E0"); that text reaches users in tool-call arguments, models
// in rendered tool schemas and history, and the grammar in enum literals.
#pragma once

#include <boost/json/value.hpp>
#include <string>

namespace zl {

// Appends `v` as compact JSON (no insignificant whitespace, members in their
// order). A double is the shortest text that reads back to the same value,
// with ".0" when that text would read as an integer ("2.0", "0.1", "1e+100");
// NaN and infinities, which JSON cannot carry, become null. Strings go
// through append_json_string (core/json_escape.h). O(size of the text);
// recursion as deep as the value (parsed values are depth-bounded).
void append_json_text(std::string& out, const boost::json::value& v);

inline std::string json_text(const boost::json::value& v) {
  std::string out;
  append_json_text(out, v);
  return out;
}

}  // namespace zl
