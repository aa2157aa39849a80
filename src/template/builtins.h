// Jinja's filters and tests and the methods of str/list/dict that chat
// templates call, as pure functions of values (render.cc evaluates the
// arguments and calls these). Errors throw TemplateError (kRuntime).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "template/value.h"

namespace zl::tmpl {

struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
  // The argument at `index`, or the keyword `name`; null when neither was given.
  const Value* get(size_t index, std::string_view name) const;
};

// `name` is a filter (throws for unknown ones).
Value apply_filter(std::string_view name, const Value& input, const CallArgs& args, int line);
// `name` is a test (throws for unknown ones).
bool apply_test(std::string_view name, const Value& input, const CallArgs& args, int line);
// obj.name(args): true and *out set when obj has such a method.
bool call_method(const Value& obj, std::string_view name, const CallArgs& args, int line, Value* out);
// obj[key] / obj.key (attributes of values are their dict keys); undefined when absent.
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step] (each may be none).
Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step, int line);
// The items `for` iterates over: list items, dict keys, string characters.
List iterate(const Value& v, int line);
// Python `a in b`.
bool contains(const Value& container, const Value& item, int line);
// Binary arithmetic operators (+ - * / // % **) with Python's semantics.
Value arithmetic(std::string_view op, const Value& a, const Value& b, int line);
// len() as Python counts (code points for strings).
int64_t length(const Value& v);

[[noreturn]] void runtime_error(int line, const std::string& msg);

}  // namespace zl::tmpl
