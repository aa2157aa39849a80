// An independent JSON Schema validator for tests: it checks a parsed value
// against the subset of JSON Schema that grammar/json_schema.h compiles, with
// none of the grammar's code (a plain recursive walk over Boost.JSON values;
// patterns through std::regex). Tests of constrained decoding parse every
// answer and validate it here. Returns "" when valid, else what is wrong.
#pragma once

#include <boost/json.hpp>
#include <cmath>
#include <regex>
#include <string>

namespace zl::testing {

inline size_t utf8_chars(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xc0) != 0x80;
  return n;
}

inline std::string validate_schema(const boost::json::value& v, const boost::json::value& schema,
                                   const boost::json::value& root, const std::string& at = "$") {
  namespace json = boost::json;
  if (schema.is_bool()) return schema.get_bool() ? "" : at + ": false schema";
  const json::object& s = schema.get_object();
  if (const auto* r = s.if_contains("$ref")) {
    std::string ref(r->get_string());
    const json::value* node = &root;
    if (ref != "#") {
      std::string rest = ref.substr(2);
      while (!rest.empty()) {
        const size_t slash = rest.find('/');
        node = &node->get_object().at(rest.substr(0, slash));
        rest = slash == std::string::npos ? "" : rest.substr(slash + 1);
      }
    }
    return validate_schema(v, *node, root, at);
  }
  if (const auto* c = s.if_contains("const")) {
    if (v != *c) return at + ": not the const";
  }
  if (const auto* e = s.if_contains("enum")) {
    bool found = false;
    for (const auto& x : e->get_array()) found |= x == v;
    if (!found) return at + ": not in the enum";
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    if (const auto* a = s.if_contains(key)) {
      int n_ok = 0;
      for (const auto& sub : a->get_array()) n_ok += validate_schema(v, sub, root, at).empty();
      if (n_ok == 0) return at + ": matches no " + key + " branch";
    }
  }
  if (const auto* a = s.if_contains("allOf")) {
    for (const auto& sub : a->get_array()) {
      if (std::string e = validate_schema(v, sub, root, at); !e.empty()) return e;
    }
  }
  if (const auto* t = s.if_contains("type")) {
    auto is = [&](std::string_view type) {
      if (type == "object") return v.is_object();
      if (type == "array") return v.is_array();
      if (type == "string") return v.is_string();
      if (type == "boolean") return v.is_bool();
      if (type == "null") return v.is_null();
      if (type == "number") return v.is_number();
      if (type == "integer") {
        return v.is_int64() || v.is_uint64() || (v.is_double() && std::floor(v.get_double()) == v.get_double());
      }
      return false;
    };
    bool ok = false;
    if (t->is_string()) {
      ok = is(t->get_string());
    } else {
      for (const auto& x : t->get_array()) ok |= is(x.get_string());
    }
    if (!ok) return at + ": wrong type";
  }
  if (v.is_object()) {
    const json::object& o = v.get_object();
    const json::object* props = s.contains("properties") ? &s.at("properties").get_object() : nullptr;
    if (const auto* r = s.if_contains("required")) {
      for (const auto& k : r->get_array()) {
        if (!o.contains(k.get_string())) return at + ": missing " + std::string(k.get_string());
      }
    }
    for (const auto& kv : o) {
      const std::string child = at + "." + std::string(kv.key());
      if (props && props->contains(kv.key())) {
        if (std::string e = validate_schema(kv.value(), props->at(kv.key()), root, child); !e.empty()) return e;
      } else if (const auto* ap = s.if_contains("additionalProperties")) {
        if (ap->is_bool() && !ap->get_bool()) return child + ": additional property";
        if (ap->is_object()) {
          if (std::string e = validate_schema(kv.value(), *ap, root, child); !e.empty()) return e;
        }
      }
    }
  }
  if (v.is_array()) {
    const json::array& a = v.get_array();
    if (const auto* m = s.if_contains("minItems"); m && a.size() < m->to_number<uint64_t>()) return at + ": minItems";
    if (const auto* m = s.if_contains("maxItems"); m && a.size() > m->to_number<uint64_t>()) return at + ": maxItems";
    if (const auto* it = s.if_contains("items")) {
      for (size_t i = 0; i < a.size(); ++i) {
        if (std::string e = validate_schema(a[i], *it, root, at + "[" + std::to_string(i) + "]"); !e.empty()) return e;
      }
    }
  }
  if (v.is_string()) {
    const std::string str(v.get_string());
    if (const auto* m = s.if_contains("minLength"); m && utf8_chars(str) < m->to_number<uint64_t>()) return at + ": minLength";
    if (const auto* m = s.if_contains("maxLength"); m && utf8_chars(str) > m->to_number<uint64_t>()) return at + ": maxLength";
    if (const auto* p = s.if_contains("pattern")) {
      std::string pat(p->get_string());
      if (!pat.empty() && pat.front() == '^') pat.erase(0, 1);
      if (!pat.empty() && pat.back() == '$') pat.pop_back();
      if (!std::regex_match(str, std::regex(pat, std::regex::ECMAScript))) return at + ": pattern " + pat;
    }
  }
  if (v.is_number()) {
    const double x = v.to_number<double>();
    if (const auto* m = s.if_contains("minimum"); m && x < m->to_number<double>()) return at + ": minimum";
    if (const auto* m = s.if_contains("maximum"); m && x > m->to_number<double>()) return at + ": maximum";
    if (const auto* m = s.if_contains("exclusiveMinimum"); m && x <= m->to_number<double>()) return at + ": exclusiveMinimum";
    if (const auto* m = s.if_contains("exclusiveMaximum"); m && x >= m->to_number<double>()) return at + ": exclusiveMaximum";
  }
  return "";
}

// Parses `text` and validates it; "" when it parses and is valid.
inline std::string parse_and_validate(std::string_view text, const boost::json::value& schema) {
  boost::system::error_code ec;
  const boost::json::value v = boost::json::parse(text, ec);
  if (ec) return "does not parse: " + ec.message();
  return validate_schema(v, schema, schema);
}

}  // namespace zl::testing
