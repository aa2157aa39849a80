// Methods of str, list and dict that chat templates call (obj.name(args)).
// The sandbox is immutable, as Hugging Face's: no method changes a value.
#include <algorithm>

#include "template/builtins.h"
#include "template/text.h"

namespace zl::tmpl {
namespace {

const std::string* opt_str(const CallArgs& a, size_t i, std::string_view name, int line) {
  const Value* v = a.get(i, name);
  if (!v || v->is_none()) return nullptr;
  if (!v->is_string()) runtime_error(line, std::string(name) + " must be a string");
  return &v->str();
}

int64_t opt_int(const CallArgs& a, size_t i, std::string_view name, int64_t def, int line) {
  const Value* v = a.get(i, name);
  if (!v || v->is_none()) return def;
  if (!v->is_int()) runtime_error(line, std::string(name) + " must be an integer");
  return v->as_int();
}

// startswith/endswith: a string or a tuple (list) of strings.
bool affix_match(const std::string& s, const Value& affix, bool prefix, int line) {
  auto one = [&](const Value& v) {
    if (!v.is_string()) runtime_error(line, "startswith/endswith: expects a string");
    return prefix ? s.starts_with(v.str()) : s.ends_with(v.str());
  };
  if (affix.is_list()) return std::any_of(affix.list().begin(), affix.list().end(), one);
  return one(affix);
}

Value string_list(std::vector<std::string> parts, bool from_input) {
  List out;
  out.reserve(parts.size());
  for (std::string& p : parts) out.push_back(Value(std::move(p), from_input));
  return Value(std::move(out));
}

// str.format with {} / {0} / {name} fields (no format specs).
std::string py_format(const std::string& fmt, const CallArgs& a, int line) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    const char c = fmt[i];
    if ((c == '{' || c == '}') && i + 1 < fmt.size() && fmt[i + 1] == c) {
      out += c;
      ++i;
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    const size_t close = fmt.find('}', i);
    if (close == std::string::npos) runtime_error(line, "format: unmatched '{'");
    const std::string field = fmt.substr(i + 1, close - i - 1);
    const Value* v = nullptr;
    if (field.empty()) {
      v = auto_index < a.args.size() ? &a.args[auto_index++] : nullptr;
    } else if (std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      const size_t k = std::stoul(field);
      v = k < a.args.size() ? &a.args[k] : nullptr;
    } else {
      v = a.get(SIZE_MAX, field);
    }
    if (!v) runtime_error(line, "format: no value for field {" + field + "}");
    out += v->to_str();
    i = close;
  }
  return out;
}

bool all_chars(const std::string& s, bool (*pred)(char)) {
  return !s.empty() && std::all_of(s.begin(), s.end(), pred);
}

bool string_method(const Value& obj, std::string_view name, const CallArgs& a, int line, Value* out) {
  const std::string& s = obj.str();
  const bool in = obj.from_input();
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    *out = Value(py_strip(s, opt_str(a, 0, "chars", line), name != "rstrip", name != "lstrip"), in);
  } else if (name == "split" || name == "rsplit") {
    const std::string* sep = opt_str(a, 0, "sep", line);
    if (sep && sep->empty()) runtime_error(line, "empty separator");  // as Python's ValueError
    *out = string_list(py_split(s, sep, opt_int(a, 1, "maxsplit", -1, line), name == "rsplit"), in);
  } else if (name == "splitlines") {
    std::vector<std::string> lines;
    size_t start = 0;
    while (start < s.size()) {
      size_t nl = s.find('\n', start);
      if (nl == std::string::npos) nl = s.size();
      std::string line_text = s.substr(start, nl - start);
      if (!line_text.empty() && line_text.back() == '\r') line_text.pop_back();
      lines.push_back(std::move(line_text));
      start = nl + 1;
    }
    *out = string_list(std::move(lines), in);
  } else if (name == "startswith" || name == "endswith") {
    const Value* affix = a.get(0, "prefix");
    if (!affix) runtime_error(line, std::string(name) + " expects an argument");
    *out = Value(affix_match(s, *affix, name == "startswith", line));
  } else if (name == "upper") {
    *out = Value(ascii_upper(s), in);
  } else if (name == "lower") {
    *out = Value(ascii_lower(s), in);
  } else if (name == "title") {
    *out = Value(py_title(s), in);
  } else if (name == "capitalize") {
    *out = Value(py_capitalize(s), in);
  } else if (name == "replace") {
    const std::string* from = opt_str(a, 0, "old", line);
    const std::string* to = opt_str(a, 1, "new", line);
    if (!from || !to) runtime_error(line, "replace expects two strings");
    *out = Value(py_replace(s, *from, *to, opt_int(a, 2, "count", -1, line)));
  } else if (name == "find" || name == "rfind" || name == "count" || name == "index") {
    const std::string* sub = opt_str(a, 0, "sub", line);
    if (!sub) runtime_error(line, std::string(name) + " expects a string");
    if (name == "count") {
      int64_t n = 0;
      for (size_t p = s.find(*sub); p != std::string::npos && !sub->empty(); p = s.find(*sub, p + sub->size())) ++n;
      *out = Value(sub->empty() ? static_cast<int64_t>(utf8_length(s)) + 1 : n);
    } else {
      const size_t p = name == "rfind" ? s.rfind(*sub) : s.find(*sub);
      if (p == std::string::npos && name == "index") runtime_error(line, "substring not found");
      *out = Value(p == std::string::npos ? int64_t{-1} : static_cast<int64_t>(utf8_length(s.substr(0, p))));
    }
  } else if (name == "join") {
    const Value* items = a.get(0, "iterable");
    if (!items) runtime_error(line, "join expects an iterable");
    std::string r;
    bool first = true;
    for (const Value& v : iterate(*items, line)) {
      if (!v.is_string()) runtime_error(line, "join: sequence item is " + v.type_name() + ", not str");
      if (!first) r += s;
      first = false;
      r += v.str();
    }
    *out = Value(std::move(r));
  } else if (name == "format") {
    *out = Value(py_format(s, a, line));
  } else if (name == "isdigit") {
    *out = Value(all_chars(s, [](char c) { return c >= '0' && c <= '9'; }));
  } else if (name == "isalpha") {
    *out = Value(all_chars(s, [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }));
  } else if (name == "isalnum") {
    *out = Value(all_chars(s, [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }));
  } else if (name == "isspace") {
    *out = Value(all_chars(s, [](char c) { return py_isspace(static_cast<unsigned char>(c)); }));
  } else if (name == "islower" || name == "isupper") {
    const bool want_lower = name == "islower";
    bool cased = false;
    bool ok = true;
    for (char c : s) {
      if (c >= 'a' && c <= 'z') {
        cased = true;
        ok &= want_lower;
      } else if (c >= 'A' && c <= 'Z') {
        cased = true;
        ok &= !want_lower;
      }
    }
    *out = Value(cased && ok);
  } else {
    return false;
  }
  return true;
}

bool dict_method(const Value& obj, std::string_view name, const CallArgs& a, int line, Value* out) {
  const Dict& d = obj.dict();
  if (name == "items" || name == "keys" || name == "values") {
    List l;
    l.reserve(d.items.size());
    for (const auto& [k, v] : d.items) {
      if (name == "items") {
        l.push_back(Value(List{Value(k), v}));
      } else {
        l.push_back(name == "keys" ? Value(k) : v);
      }
    }
    *out = Value(std::move(l));
    return true;
  }
  if (name == "get") {
    const Value* key = a.get(0, "key");
    if (!key) runtime_error(line, "get expects a key");
    Value v = get_item(obj, *key);
    const Value* def = a.get(1, "default");
    *out = v.is_undefined() ? (def ? *def : Value::none()) : v;
    return true;
  }
  return false;
}

}  // namespace

bool call_method(const Value& obj, std::string_view name, const CallArgs& a, int line, Value* out) {
  if (obj.is_string()) return string_method(obj, name, a, line, out);
  if (obj.is_dict() && !obj.is_namespace()) return dict_method(obj, name, a, line, out);
  if (obj.is_list() && (name == "index" || name == "count")) {
    const Value* x = a.get(0, "value");
    if (!x) runtime_error(line, std::string(name) + " expects an argument");
    const List& l = obj.list();
    if (name == "count") {
      *out = Value(static_cast<int64_t>(std::count_if(l.begin(), l.end(), [&](const Value& v) { return equal(v, *x); })));
      return true;
    }
    for (size_t i = 0; i < l.size(); ++i) {
      if (equal(l[i], *x)) {
        *out = Value(static_cast<int64_t>(i));
        return true;
      }
    }
    runtime_error(line, "value is not in list");
  }
  return false;
}

}  // namespace zl::tmpl
