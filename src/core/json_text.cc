#include "core/json_text.h"

#include <boost/json.hpp>
#include <charconv>
#include <cmath>
#include <string_view>

#include "core/json_escape.h"

namespace zl {
namespace {

void append_double(std::string& out, double d) {
  if (!std::isfinite(d)) {
    out += "null";
    return;
  }
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, d);
  const std::string_view text(buf, static_cast<size_t>(r.ptr - buf));
  out += text;
  if (text.find_first_of(".e") == std::string_view::npos) out += ".0";
}

}  // namespace

void append_json_text(std::string& out, const boost::json::value& v) {
  switch (v.kind()) {
    case boost::json::kind::null: out += "null"; return;
    case boost::json::kind::bool_: out += v.get_bool() ? "true" : "false"; return;
    case boost::json::kind::int64: out += std::to_string(v.get_int64()); return;
    case boost::json::kind::uint64: out += std::to_string(v.get_uint64()); return;
    case boost::json::kind::double_: append_double(out, v.get_double()); return;
    case boost::json::kind::string: append_json_string(out, v.get_string()); return;
    case boost::json::kind::array: {
      out += '[';
      bool first = true;
      for (const boost::json::value& e : v.get_array()) {
        if (!first) out += ',';
        first = false;
        append_json_text(out, e);
      }
      out += ']';
      return;
    }
    case boost::json::kind::object: {
      out += '{';
      bool first = true;
      for (const auto& kv : v.get_object()) {
        if (!first) out += ',';
        first = false;
        append_json_string(out, kv.key());
        out += ':';
        append_json_text(out, kv.value());
      }
      out += '}';
      return;
    }
  }
}

}  // namespace zl
