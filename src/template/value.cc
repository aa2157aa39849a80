#include "template/value.h"

#include <algorithm>
#include <boost/json/value.hpp>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

namespace zl::tmpl {
namespace json = boost::json;

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

Value* Dict::find(std::string_view key) {
  for (auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Dict::set(std::string key, Value v) {
  if (Value* old = find(key)) {
    *old = std::move(v);
  } else {
    items.emplace_back(std::move(key), std::move(v));
  }
}

void Value::measure() {
  int depth = 0;
  bool ns = namespace_;
  auto child = [&](const Value& v) {
    depth = std::max(depth, static_cast<int>(v.depth_));
    ns |= v.holds_namespace_;
  };
  if (list_) {
    for (const Value& v : *list_) child(v);
  } else if (dict_) {
    for (const auto& kv : dict_->items) child(kv.second);
  }
  if (depth + 1 > kMaxDepth) throw std::length_error("values nested deeper than " + std::to_string(kMaxDepth));
  depth_ = static_cast<uint16_t>(depth + 1);
  holds_namespace_ = ns;
}

bool Value::truthy() const {
  switch (type_) {
    case Type::kUndefined:
    case Type::kNone: return false;
    case Type::kBool:
    case Type::kInt: return int_ != 0;
    case Type::kFloat: return float_ != 0;
    case Type::kString: return !str_->empty();
    case Type::kList: return !list_->empty();
    case Type::kDict: return namespace_ || !dict_->items.empty();
    case Type::kCallable: return true;
  }
  return false;
}

std::string python_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  const std::string_view sci(buf, static_cast<size_t>(r.ptr - buf));  // [-]d[.ddd]e±XX
  const size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e)) {
    if (c >= '0' && c <= '9') digits += c;
  }
  const int exp = std::atoi(std::string(sci.substr(e + 1)).c_str());
  std::string out = sci.front() == '-' ? "-" : "";
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out.append("0.").append(static_cast<size_t>(-exp - 1), '0').append(digits);
    } else if (static_cast<size_t>(exp) + 1 >= digits.size()) {
      out += digits + std::string(static_cast<size_t>(exp) + 1 - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(exp) + 1) + "." + digits.substr(static_cast<size_t>(exp) + 1);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out.append(".").append(digits, 1);
  out += exp < 0 ? "e-" : "e+";
  const int a = std::abs(exp);
  if (a < 10) out += '0';
  out += std::to_string(a);
  return out;
}

void append_json_quoted(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {  // json.dumps leaves DEL and non-ASCII as they are (unlike core/json_escape.h)
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

namespace {

void append_repr_string(std::string& out, std::string_view s) {
  const bool dq = s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos;
  const char q = dq ? '"' : '\'';
  out += q;
  for (char c : s) {
    if (c == q || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += c;
    }
  }
  out += q;
}

void repr_into(const Value& v, std::string& out) {
  switch (v.type()) {
    case Value::Type::kString: append_repr_string(out, v.str()); return;
    case Value::Type::kList: {
      out += '[';
      bool first = true;
      for (const Value& x : v.list()) {
        if (!first) out += ", ";
        first = false;
        repr_into(x, out);
      }
      out += ']';
      return;
    }
    case Value::Type::kDict: {
      if (v.is_namespace()) {
        out += "<Namespace>";
        return;
      }
      out += '{';
      bool first = true;
      for (const auto& [k, x] : v.dict().items) {
        if (!first) out += ", ";
        first = false;
        append_repr_string(out, k);
        out += ": ";
        repr_into(x, out);
      }
      out += '}';
      return;
    }
    default: out += v.to_str();
  }
}

void newline(std::string& out, int indent, int depth) {
  if (indent < 0) return;
  out += '\n';
  out.append(static_cast<size_t>(indent * depth), ' ');
}

}  // namespace

std::string Value::to_str() const {
  switch (type_) {
    case Type::kUndefined: return "";
    case Type::kNone: return "None";
    case Type::kBool: return int_ ? "True" : "False";
    case Type::kInt: return std::to_string(int_);
    case Type::kFloat: return python_float(float_);
    case Type::kString: return *str_;
    case Type::kCallable: return "<function>";
    default: {
      std::string out;
      repr_into(*this, out);
      return out;
    }
  }
}

std::string Value::repr() const {
  std::string out;
  repr_into(*this, out);
  return out;
}

std::string Value::type_name() const {
  switch (type_) {
    case Type::kUndefined: return "undefined";
    case Type::kNone: return "NoneType";
    case Type::kBool: return "bool";
    case Type::kInt: return "int";
    case Type::kFloat: return "float";
    case Type::kString: return "str";
    case Type::kList: return "list";
    case Type::kDict: return namespace_ ? "Namespace" : "dict";
    case Type::kCallable: return "function";
  }
  return "?";
}

void Value::to_json(std::string& out, int indent, std::string_view item_sep, std::string_view key_sep,
                    bool sort_keys, int depth) const {
  switch (type_) {
    case Type::kUndefined:
    case Type::kNone:
    case Type::kCallable: out += "null"; return;
    case Type::kBool: out += int_ ? "true" : "false"; return;
    case Type::kInt: out += std::to_string(int_); return;
    case Type::kFloat:
      if (std::isnan(float_)) {
        out += "NaN";
      } else if (std::isinf(float_)) {
        out += float_ > 0 ? "Infinity" : "-Infinity";
      } else {
        out += python_float(float_);
      }
      return;
    case Type::kString: append_json_quoted(out, *str_); return;
    case Type::kList: {
      if (list_->empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < list_->size(); ++i) {
        if (i > 0) out += item_sep;
        newline(out, indent, depth + 1);
        (*list_)[i].to_json(out, indent, item_sep, key_sep, sort_keys, depth + 1);
      }
      newline(out, indent, depth);
      out += ']';
      return;
    }
    case Type::kDict: {
      if (dict_->items.empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<std::string, Value>*> order;
      order.reserve(dict_->items.size());
      for (const auto& kv : dict_->items) order.push_back(&kv);
      if (sort_keys) std::stable_sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->first < b->first; });
      out += '{';
      bool first = true;
      for (const auto* kv : order) {
        if (!first) out += item_sep;
        first = false;
        newline(out, indent, depth + 1);
        append_json_quoted(out, kv->first);
        out += key_sep;
        kv->second.to_json(out, indent, item_sep, key_sep, sort_keys, depth + 1);
      }
      newline(out, indent, depth);
      out += '}';
      return;
    }
  }
}

bool equal(const Value& a, const Value& b) {
  if (a.is_number() || a.is_bool()) {
    if (!(b.is_number() || b.is_bool())) return false;
    if (a.is_float() || b.is_float()) return a.as_number() == b.as_number();
    return a.as_int() == b.as_int();
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Value::Type::kUndefined:
    case Value::Type::kNone: return true;
    case Value::Type::kString: return a.str() == b.str();
    case Value::Type::kList: {
      if (a.list().size() != b.list().size()) return false;
      for (size_t i = 0; i < a.list().size(); ++i) {
        if (!equal(a.list()[i], b.list()[i])) return false;
      }
      return true;
    }
    case Value::Type::kDict: {
      if (a.is_namespace() || b.is_namespace()) return &a.dict() == &b.dict();
      if (a.dict().items.size() != b.dict().items.size()) return false;
      for (const auto& [k, v] : a.dict().items) {
        const Value* o = b.dict().find(k);
        if (!o || !equal(v, *o)) return false;
      }
      return true;
    }
    case Value::Type::kCallable: return &a.callable() == &b.callable();
    default: return false;
  }
}

bool less(const Value& a, const Value& b, bool* comparable) {
  *comparable = true;
  if ((a.is_number() || a.is_bool()) && (b.is_number() || b.is_bool())) {
    if (a.is_float() || b.is_float()) return a.as_number() < b.as_number();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();
  if (a.is_list() && b.is_list()) {
    const List& x = a.list();
    const List& y = b.list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equal(x[i], y[i])) continue;
      return less(x[i], y[i], comparable);
    }
    return x.size() < y.size();
  }
  *comparable = false;
  return false;
}

Value from_json(const json::value& v, bool strings_from_input) {
  switch (v.kind()) {
    case json::kind::null: return Value::none();
    case json::kind::bool_: return Value(v.get_bool());
    case json::kind::int64: return Value(v.get_int64());
    case json::kind::uint64: return Value(static_cast<double>(v.get_uint64()));
    case json::kind::double_: return Value(v.get_double());
    case json::kind::string: return Value(std::string(v.get_string()), strings_from_input);
    case json::kind::array: {
      List l;
      l.reserve(v.get_array().size());
      for (const json::value& x : v.get_array()) l.push_back(from_json(x, strings_from_input));
      return Value(std::move(l));
    }
    case json::kind::object: {
      Dict d;
      d.items.reserve(v.get_object().size());
      for (const auto& kv : v.get_object()) d.set(std::string(kv.key()), from_json(kv.value(), strings_from_input));
      return Value(std::move(d));
    }
  }
  return {};
}

}  // namespace zl::tmpl
