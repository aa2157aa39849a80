#include "template/builtins.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>

#include "template/ast.h"
#include "template/text.h"

namespace zl::tmpl {

void runtime_error(int line, const std::string& msg) {
  throw TemplateError(TemplateError::Kind::kRuntime, line, msg);
}

const Value* CallArgs::get(size_t index, std::string_view name) const {
  if (index < args.size()) return &args[index];
  for (const auto& [k, v] : kwargs) {
    if (k == name) return &v;
  }
  return nullptr;
}

namespace {

const std::string& need_str(const Value& v, std::string_view what, int line) {
  if (!v.is_string()) runtime_error(line, std::string(what) + " expects a string, got " + v.type_name());
  return v.str();
}

int64_t arg_int(const CallArgs& a, size_t i, std::string_view name, int64_t def, int line) {
  const Value* v = a.get(i, name);
  if (!v || v->is_none()) return def;
  if (!v->is_int() && !v->is_bool()) runtime_error(line, std::string(name) + " must be an integer");
  return v->as_int();
}

bool arg_bool(const CallArgs& a, size_t i, std::string_view name, bool def) {
  const Value* v = a.get(i, name);
  return v ? v->truthy() : def;
}

// Follows a dotted attribute path ("function.name") as Jinja's attribute= does.
Value attribute_of(const Value& v, std::string_view path) {
  Value cur = v;
  while (true) {
    const size_t dot = path.find('.');
    const std::string_view part = path.substr(0, dot);
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    cur = numeric && cur.is_list() ? get_item(cur, Value(static_cast<int64_t>(std::atoll(std::string(part).c_str()))))
                                   : get_item(cur, Value(std::string(part)));
    if (dot == std::string_view::npos) return cur;
    path.remove_prefix(dot + 1);
  }
}

std::string to_json_string(const Value& v, const CallArgs& a, int line) {
  const Value* ind = a.get(0, "indent");
  int indent = -1;
  if (ind && !ind->is_none()) {
    if (!ind->is_int()) runtime_error(line, "tojson: indent must be an integer");
    indent = static_cast<int>(std::clamp<int64_t>(ind->as_int(), 0, 64));
  }
  std::string item_sep = indent >= 0 ? "," : ", ";
  std::string key_sep = ": ";
  if (const Value* seps = a.get(99, "separators"); seps && seps->is_list() && seps->list().size() == 2 &&
                                                     seps->list()[0].is_string() && seps->list()[1].is_string()) {
    item_sep = seps->list()[0].str();
    key_sep = seps->list()[1].str();
  }
  std::string out;
  v.to_json(out, indent, item_sep, key_sep, arg_bool(a, 99, "sort_keys", false));
  return out;
}

Value sorted(const Value& input, bool reverse, bool case_sensitive, const Value* attribute, int line) {
  List items = iterate(input, line);
  auto key = [&](const Value& v) {
    Value k = attribute && attribute->is_string() ? attribute_of(v, attribute->str()) : v;
    if (!case_sensitive && k.is_string()) return Value(ascii_lower(k.str()));
    return k;
  };
  bool ok = true;
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    bool comparable = true;
    const bool r = reverse ? less(key(b), key(a), &comparable) : less(key(a), key(b), &comparable);
    ok &= comparable;
    return r;
  });
  if (!ok) runtime_error(line, "sort: values cannot be compared");
  return Value(std::move(items));
}

// select/reject/selectattr/rejectattr.
Value select_items(const Value& input, const CallArgs& a, bool by_attr, bool keep, int line) {
  List out;
  size_t next_arg = 0;
  std::string attr;
  if (by_attr) {
    if (a.args.empty() || !a.args[0].is_string()) runtime_error(line, "selectattr: expects an attribute name");
    attr = a.args[0].str();
    next_arg = 1;
  }
  std::string test;
  CallArgs test_args;
  if (next_arg < a.args.size()) {
    test = need_str(a.args[next_arg], "select: the test", line);
    test_args.args.assign(a.args.begin() + static_cast<long>(next_arg) + 1, a.args.end());
  }
  for (const Value& item : iterate(input, line)) {
    const Value v = by_attr ? attribute_of(item, attr) : item;
    const bool pass = test.empty() ? v.truthy() : apply_test(test, v, test_args, line);
    if (pass == keep) out.push_back(item);
  }
  return Value(std::move(out));
}

Value map_items(const Value& input, const CallArgs& a, int line) {
  List out;
  if (const Value* attr = a.get(99, "attribute")) {
    const Value* def = a.get(99, "default");
    for (const Value& item : iterate(input, line)) {
      Value v = attr->is_string() ? attribute_of(item, attr->str()) : get_item(item, *attr);
      out.push_back(v.is_undefined() && def ? *def : v);
    }
    return Value(std::move(out));
  }
  if (a.args.empty() || !a.args[0].is_string()) runtime_error(line, "map: expects a filter name or attribute=");
  CallArgs rest;
  rest.args.assign(a.args.begin() + 1, a.args.end());
  rest.kwargs = a.kwargs;
  for (const Value& item : iterate(input, line)) out.push_back(apply_filter(a.args[0].str(), item, rest, line));
  return Value(std::move(out));
}

Value join_items(const Value& input, const CallArgs& a, int line) {
  const Value* sep = a.get(0, "d");
  const Value* attr = a.get(1, "attribute");
  std::string out;
  bool first = true;
  bool all_input = true;
  for (const Value& item : iterate(input, line)) {
    if (!first && sep) out += sep->to_str();
    first = false;
    const Value v = attr ? attribute_of(item, attr->to_str()) : item;
    all_input &= v.is_string() && v.from_input();
    out += v.to_str();
  }
  return Value(std::move(out), all_input && !first && !(sep && !sep->str().empty()));
}

Value min_max(const Value& input, const CallArgs& a, bool want_max, int line) {
  List items = iterate(input, line);
  if (items.empty()) return {};
  const Value* attr = a.get(1, "attribute");
  const bool cs = arg_bool(a, 0, "case_sensitive", false);
  Value best = items[0];
  for (const Value& v : items) {
    Value x = attr ? attribute_of(v, attr->to_str()) : v;
    Value y = attr ? attribute_of(best, attr->to_str()) : best;
    if (!cs && x.is_string()) x = Value(ascii_lower(x.str()));
    if (!cs && y.is_string()) y = Value(ascii_lower(y.str()));
    bool comparable = true;
    if (want_max ? less(y, x, &comparable) : less(x, y, &comparable)) best = v;
    if (!comparable) runtime_error(line, "min/max: values cannot be compared");
  }
  return best;
}

Value string_filter(std::string_view name, const Value& input, const CallArgs& a, int line, bool* handled) {
  *handled = true;
  if (name == "trim") {
    const Value* chars = a.get(0, "chars");
    return Value(py_strip(input.to_str(), chars && chars->is_string() ? &chars->str() : nullptr, true, true),
                 input.from_input());
  }
  if (name == "upper") return Value(ascii_upper(input.to_str()), input.from_input());
  if (name == "lower") return Value(ascii_lower(input.to_str()), input.from_input());
  if (name == "capitalize") return Value(py_capitalize(input.to_str()), input.from_input());
  if (name == "title") return Value(py_title(input.to_str()), input.from_input());
  if (name == "replace") {
    const Value* from = a.get(0, "old");
    const Value* to = a.get(1, "new");
    if (!from || !to) runtime_error(line, "replace: expects two arguments");
    return Value(py_replace(input.to_str(), from->to_str(), to->to_str(), arg_int(a, 2, "count", -1, line)));
  }
  if (name == "indent") {
    const Value* w = a.get(0, "width");
    const std::string pad = w && w->is_string() ? w->str() : std::string(static_cast<size_t>(std::clamp<int64_t>(
                                                                               w ? w->as_int() : 4, 0, 256)), ' ');
    return Value(py_indent(input.to_str(), pad, arg_bool(a, 1, "first", false), arg_bool(a, 2, "blank", false)));
  }
  if (name == "escape" || name == "e" || name == "forceescape") return Value(html_escape(input.to_str()));
  if (name == "wordcount") return Value(static_cast<int64_t>(py_split(input.to_str(), nullptr, -1).size()));
  *handled = false;
  return {};
}

Value to_int(const Value& input, const CallArgs& a, int line) {
  const int64_t def = arg_int(a, 0, "default", 0, line);
  if (input.is_int() || input.is_bool()) return Value(input.as_int());
  if (input.is_float()) return std::isfinite(input.as_number()) ? Value(static_cast<int64_t>(input.as_number())) : Value(def);
  if (input.is_string()) {
    const std::string s = py_strip(input.str(), nullptr, true, true);
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && end == s.c_str() + s.size() && errno == 0) return Value(static_cast<int64_t>(v));
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size() && std::isfinite(d) && std::fabs(d) < 9e18) {
      return Value(static_cast<int64_t>(d));
    }
  }
  return Value(def);
}

Value to_float(const Value& input, const CallArgs& a) {
  const Value* def = a.get(0, "default");
  if (input.is_number() || input.is_bool()) return Value(input.as_number());
  if (input.is_string()) {
    const std::string s = py_strip(input.str(), nullptr, true, true);
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end == s.c_str() + s.size()) return Value(d);
  }
  return def ? *def : Value(0.0);
}

Value unique_items(const Value& input, const CallArgs& a, int line) {
  const bool cs = arg_bool(a, 0, "case_sensitive", false);
  const Value* attr = a.get(1, "attribute");
  List out;
  List keys;
  for (const Value& v : iterate(input, line)) {
    Value k = attr ? attribute_of(v, attr->to_str()) : v;
    if (!cs && k.is_string()) k = Value(ascii_lower(k.str()));
    if (std::none_of(keys.begin(), keys.end(), [&](const Value& x) { return equal(x, k); })) {
      keys.push_back(k);
      out.push_back(v);
    }
  }
  return Value(std::move(out));
}

Value dict_items(const Value& input, int line) {
  if (input.is_undefined() || input.is_none()) return Value(List{});
  if (!input.is_dict()) runtime_error(line, "items: expects a dict, got " + input.type_name());
  List out;
  for (const auto& [k, v] : input.dict().items) out.push_back(Value(List{Value(k), v}));
  return Value(std::move(out));
}

Value dictsort(const Value& input, const CallArgs& a, int line) {
  Value items = dict_items(input, line);
  const bool cs = arg_bool(a, 0, "case_sensitive", false);
  const Value* by = a.get(1, "by");
  const size_t pos = by && by->is_string() && by->str() == "value" ? 1 : 0;
  const bool reverse = arg_bool(a, 2, "reverse", false);
  List& l = items.list();
  bool ok = true;
  std::stable_sort(l.begin(), l.end(), [&](const Value& x, const Value& y) {
    Value kx = x.list()[pos];
    Value ky = y.list()[pos];
    if (!cs && kx.is_string()) kx = Value(ascii_lower(kx.str()));
    if (!cs && ky.is_string()) ky = Value(ascii_lower(ky.str()));
    bool comparable = true;
    const bool r = reverse ? less(ky, kx, &comparable) : less(kx, ky, &comparable);
    ok &= comparable;
    return r;
  });
  if (!ok) runtime_error(line, "dictsort: values cannot be compared");
  return items;
}

Value sequence_filter(std::string_view name, const Value& input, const CallArgs& a, int line, bool* handled) {
  *handled = true;
  if (name == "first" || name == "last") {
    List items = iterate(input, line);
    if (items.empty()) return {};
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") return Value(iterate(input, line));
  if (name == "reverse") {
    if (input.is_string()) {
      List chars = iterate(input, line);
      std::string out;
      for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += it->str();
      return Value(std::move(out), input.from_input());
    }
    List items = iterate(input, line);
    std::reverse(items.begin(), items.end());
    return Value(std::move(items));
  }
  if (name == "sort") {
    return sorted(input, arg_bool(a, 0, "reverse", false), arg_bool(a, 1, "case_sensitive", false),
                  a.get(2, "attribute"), line);
  }
  if (name == "unique") return unique_items(input, a, line);
  if (name == "join") return join_items(input, a, line);
  if (name == "map") return map_items(input, a, line);
  if (name == "select" || name == "reject") return select_items(input, a, false, name == "select", line);
  if (name == "selectattr" || name == "rejectattr") return select_items(input, a, true, name == "selectattr", line);
  if (name == "items") return dict_items(input, line);
  if (name == "dictsort") return dictsort(input, a, line);
  if (name == "min" || name == "max") return min_max(input, a, name == "max", line);
  if (name == "sum") {
    const Value* attr = a.get(0, "attribute");
    Value total = a.get(1, "start") ? *a.get(1, "start") : Value(0);
    for (const Value& v : iterate(input, line)) total = arithmetic("+", total, attr ? attribute_of(v, attr->to_str()) : v, line);
    return total;
  }
  if (name == "batch") {
    const int64_t n = arg_int(a, 0, "linecount", 1, line);
    if (n <= 0) runtime_error(line, "batch: the size must be positive");
    List out;
    for (const Value& v : iterate(input, line)) {
      if (out.empty() || static_cast<int64_t>(out.back().list().size()) == n) out.push_back(Value(List{}));
      out.back().list().push_back(v);
    }
    return Value(std::move(out));
  }
  *handled = false;
  return {};
}

}  // namespace

int64_t length(const Value& v) {
  switch (v.type()) {
    case Value::Type::kString: return static_cast<int64_t>(utf8_length(v.str()));
    case Value::Type::kList: return static_cast<int64_t>(v.list().size());
    case Value::Type::kDict: return static_cast<int64_t>(v.dict().items.size());
    default: return 0;
  }
}

Value apply_filter(std::string_view name, const Value& input, const CallArgs& a, int line) {
  if (name == "tojson") return Value(to_json_string(input, a, line));
  if (name == "length" || name == "count") {
    if (!input.is_string() && !input.is_list() && !input.is_dict() && !input.is_undefined()) {
      runtime_error(line, "object of type '" + input.type_name() + "' has no len()");
    }
    return Value(length(input));
  }
  if (name == "default" || name == "d") {
    const bool boolean = arg_bool(a, 1, "boolean", false);
    if (input.is_undefined() || (boolean && !input.truthy())) {
      const Value* def = a.get(0, "default_value");
      return def ? *def : Value(std::string());
    }
    return input;
  }
  if (name == "string") return input.is_string() ? input : Value(input.to_str());
  if (name == "safe") return input;
  if (name == "int") return to_int(input, a, line);
  if (name == "float") return to_float(input, a);
  if (name == "abs") {
    if (input.is_int() || input.is_bool()) return Value(static_cast<int64_t>(std::llabs(input.as_int())));
    if (input.is_float()) return Value(std::fabs(input.as_number()));
    runtime_error(line, "abs: expects a number");
  }
  if (name == "round") {
    if (!input.is_number() && !input.is_bool()) runtime_error(line, "round: expects a number");
    const int64_t precision = std::clamp<int64_t>(arg_int(a, 0, "precision", 0, line), -20, 20);
    const Value* method = a.get(1, "method");
    const double scale = std::pow(10.0, static_cast<double>(precision));
    const double x = input.as_number() * scale;
    const std::string m = method ? method->to_str() : "common";
    const double r = m == "ceil" ? std::ceil(x) : m == "floor" ? std::floor(x) : std::round(x);
    return Value(r / scale);
  }
  bool handled = false;
  Value v = string_filter(name, input, a, line, &handled);
  if (handled) return v;
  v = sequence_filter(name, input, a, line, &handled);
  if (handled) return v;
  runtime_error(line, "no filter named '" + std::string(name) + "'");
}

bool apply_test(std::string_view name, const Value& v, const CallArgs& a, int line) {
  const Value* arg = a.get(0, "value");
  auto need_arg = [&]() -> const Value& {
    if (!arg) runtime_error(line, "test '" + std::string(name) + "' expects an argument");
    return *arg;
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number() || v.is_bool();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "mapping") return v.is_dict() && !v.is_namespace();
  if (name == "iterable") return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
  if (name == "sequence") return v.is_string() || v.is_list() || (v.is_dict() && !v.is_namespace());
  if (name == "callable") return v.is_callable();
  if (name == "odd" || name == "even") {
    if (!v.is_int()) runtime_error(line, "test '" + std::string(name) + "' expects an integer");
    return (v.as_int() % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    const Value& d = need_arg();
    if (!v.is_int() || !d.is_int() || d.as_int() == 0) runtime_error(line, "divisibleby expects non-zero integers");
    return v.as_int() % d.as_int() == 0;
  }
  if (name == "lower") return v.is_string() && ascii_lower(v.str()) == v.str();
  if (name == "upper") return v.is_string() && ascii_upper(v.str()) == v.str();
  if (name == "eq" || name == "equalto" || name == "==") return equal(v, need_arg());
  if (name == "ne" || name == "!=") return !equal(v, need_arg());
  if (name == "sameas") {
    const Value& o = need_arg();
    if (v.is_list() && o.is_list()) return &v.list() == &o.list();
    if (v.is_dict() && o.is_dict()) return &v.dict() == &o.dict();
    return v.type() == o.type() && equal(v, o);
  }
  if (name == "in") return contains(need_arg(), v, line);
  if (name == "lt" || name == "<" || name == "gt" || name == ">" || name == "le" || name == "<=" || name == "ge" ||
      name == ">=") {
    const Value& o = need_arg();
    bool comparable = true;
    const bool lt = less(v, o, &comparable);
    const bool gt = less(o, v, &comparable);
    if (!comparable) runtime_error(line, "cannot compare " + v.type_name() + " and " + o.type_name());
    if (name == "lt" || name == "<") return lt;
    if (name == "gt" || name == ">") return gt;
    if (name == "le" || name == "<=") return !gt;
    return !lt;
  }
  runtime_error(line, "no test named '" + std::string(name) + "'");
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_dict()) {
    if (!key.is_string()) {
      if (key.is_int()) {
        if (const Value* v = obj.dict().find(std::to_string(key.as_int()))) return *v;
      }
      return {};
    }
    if (const Value* v = obj.dict().find(key.str())) return *v;
    return {};
  }
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    if (obj.is_list()) {
      const List& l = obj.list();
      int64_t i = key.as_int();
      if (i < 0) i += static_cast<int64_t>(l.size());
      if (i < 0 || i >= static_cast<int64_t>(l.size())) return {};
      return l[static_cast<size_t>(i)];
    }
    const std::vector<std::string_view> chars = utf8_chars(obj.str());
    int64_t i = key.as_int();
    if (i < 0) i += static_cast<int64_t>(chars.size());
    if (i < 0 || i >= static_cast<int64_t>(chars.size())) return {};
    return Value(std::string(chars[static_cast<size_t>(i)]), obj.from_input());
  }
  return {};
}

Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step_v, int line) {
  auto opt = [&](const Value& v) -> std::optional<int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    if (!v.is_int()) runtime_error(line, "slice indices must be integers");
    return v.as_int();
  };
  const int64_t step = opt(step_v).value_or(1);
  if (step == 0) runtime_error(line, "slice step cannot be zero");
  std::vector<std::string_view> chars;
  int64_t n = 0;
  if (obj.is_list()) {
    n = static_cast<int64_t>(obj.list().size());
  } else if (obj.is_string()) {
    chars = utf8_chars(obj.str());
    n = static_cast<int64_t>(chars.size());
  } else {
    runtime_error(line, "cannot slice a value of type " + obj.type_name());
  }
  auto clampi = [&](std::optional<int64_t> v, int64_t def) {
    if (!v) return def;
    int64_t i = *v < 0 ? *v + n : *v;
    if (step > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t b = clampi(opt(start), step > 0 ? 0 : n - 1);
  const int64_t e = clampi(opt(stop), step > 0 ? n : -1);
  List items;
  std::string text;
  for (int64_t i = b; step > 0 ? i < e : i > e; i += step) {
    if (obj.is_list()) {
      items.push_back(obj.list()[static_cast<size_t>(i)]);
    } else {
      text += chars[static_cast<size_t>(i)];
    }
  }
  if (obj.is_string()) return Value(std::move(text), obj.from_input());
  return Value(std::move(items));
}

List iterate(const Value& v, int line) {
  switch (v.type()) {
    case Value::Type::kUndefined:
    case Value::Type::kNone:
      if (v.is_none()) runtime_error(line, "'NoneType' object is not iterable");
      return {};
    case Value::Type::kList: return v.list();
    case Value::Type::kDict: {
      List keys;
      for (const auto& kv : v.dict().items) keys.push_back(Value(kv.first));
      return keys;
    }
    case Value::Type::kString: {
      List out;
      for (std::string_view c : utf8_chars(v.str())) out.push_back(Value(std::string(c), v.from_input()));
      return out;
    }
    default: runtime_error(line, "'" + v.type_name() + "' object is not iterable");
  }
}

bool contains(const Value& container, const Value& item, int line) {
  if (container.is_string()) {
    if (!item.is_string()) runtime_error(line, "'in <string>' requires a string as left operand");
    return container.str().find(item.str()) != std::string::npos;
  }
  if (container.is_list()) {
    return std::any_of(container.list().begin(), container.list().end(), [&](const Value& x) { return equal(x, item); });
  }
  if (container.is_dict()) return item.is_string() && container.dict().find(item.str()) != nullptr;
  if (container.is_undefined()) return false;
  runtime_error(line, "argument of type '" + container.type_name() + "' is not iterable");
}

Value arithmetic(std::string_view op, const Value& a, const Value& b, int line) {
  if (op == "+") {
    // An undefined operand beside a string is "" (llama.cpp's engine does
    // this; Jinja2 would raise), e.g. Firefunction's `… + functions`.
    if (a.is_string() && b.is_undefined()) return a;
    if (a.is_undefined() && b.is_string()) return b;
    if (a.is_string() && b.is_string()) return Value(a.str() + b.str(), a.from_input() && b.from_input());
    if (a.is_list() && b.is_list()) {
      List out = a.list();
      out.insert(out.end(), b.list().begin(), b.list().end());
      return Value(std::move(out));
    }
  }
  if (op == "*" && (a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) {
    // Python's repetition: a count below 1 gives an empty value; the result
    // is exact or an error, never silently shortened.
    const int64_t n = std::max<int64_t>(b.as_int(), 0);
    if (a.is_string()) {
      if (a.str().empty() || n == 0) return Value(std::string(), a.from_input());
      if (static_cast<double>(a.str().size()) * static_cast<double>(n) > 64e6) runtime_error(line, "string too long");
      std::string out;
      out.reserve(a.str().size() * static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) out += a.str();
      return Value(std::move(out), a.from_input());
    }
    if (a.list().empty() || n == 0) return Value(List());
    if (static_cast<double>(a.list().size()) * static_cast<double>(n) > 1e6) runtime_error(line, "list too long");
    List out;
    for (int64_t i = 0; i < n; ++i) out.insert(out.end(), a.list().begin(), a.list().end());
    return Value(std::move(out));
  }
  const bool an = a.is_number() || a.is_bool();
  const bool bn = b.is_number() || b.is_bool();
  if (!an || !bn) {
    runtime_error(line, "unsupported operand types for " + std::string(op) + ": '" + a.type_name() + "' and '" +
                            b.type_name() + "'");
  }
  const bool ints = !a.is_float() && !b.is_float();
  if (op == "/") {
    if (b.as_number() == 0) runtime_error(line, "division by zero");
    return Value(a.as_number() / b.as_number());
  }
  if (ints) {
    const int64_t x = a.as_int();
    const int64_t y = b.as_int();
    int64_t r = 0;
    if (op == "+" && !__builtin_add_overflow(x, y, &r)) return Value(r);
    if (op == "-" && !__builtin_sub_overflow(x, y, &r)) return Value(r);
    if (op == "*" && !__builtin_mul_overflow(x, y, &r)) return Value(r);
    if (op == "//" || op == "%") {
      if (y == 0) runtime_error(line, "integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) runtime_error(line, "integer overflow");
      int64_t q = x / y;
      int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) {
        --q;
        m += y;
      }
      return op == "//" ? Value(q) : Value(m);
    }
    if (op == "**" && y >= 0) {
      int64_t acc = 1;
      bool overflow = false;
      for (int64_t i = 0; i < y && !overflow; ++i) overflow = __builtin_mul_overflow(acc, x, &acc);
      if (!overflow) return Value(acc);
    }
    if (op == "+" || op == "-" || op == "*" || op == "**") runtime_error(line, "integer overflow");
  }
  const double x = a.as_number();
  const double y = b.as_number();
  if (op == "+") return Value(x + y);
  if (op == "-") return Value(x - y);
  if (op == "*") return Value(x * y);
  if (op == "**") return Value(std::pow(x, y));
  if (y == 0) runtime_error(line, "float division by zero");
  if (op == "//") return Value(std::floor(x / y));
  if (op == "%") {
    double m = std::fmod(x, y);
    if (m != 0 && ((m < 0) != (y < 0))) m += y;
    return Value(m);
  }
  runtime_error(line, "unknown operator " + std::string(op));
}

}  // namespace zl::tmpl
