// The values a Jinja template computes with: Python's none/bool/int/float/
// str/list/dict as Jinja2 sees them, plus undefined, macros and namespaces.
//
// Lists, dicts and namespaces are shared by reference, as in Python (a
// namespace set inside a loop is seen after it); everything else is a value.
// A string remembers whether it came from the request (`from_input`): the
// renderer keeps such text apart from template markup so that message text
// never turns into control tokens. Operations that only cut or trim a string
// keep the flag; anything that mixes it with template text drops it.
//
// Not thread-safe (a render owns its values); templates themselves are.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace boost::json {
class value;
}

namespace zl::tmpl {

class Value;
using List = std::vector<Value>;
// Insertion-ordered (Python 3.7+ dicts; tojson keeps the order).
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(std::string_view key) const;
  Value* find(std::string_view key);
  void set(std::string key, Value v);
};
struct Callable;  // a macro or a builtin (render.cc)

class Value {
 public:
  enum class Type { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kCallable };

  Value() = default;
  static Value none() { return Value(Type::kNone); }
  Value(bool b) : type_(Type::kBool), int_(b) {}            // NOLINT
  Value(int64_t i) : type_(Type::kInt), int_(i) {}          // NOLINT
  Value(int i) : type_(Type::kInt), int_(i) {}              // NOLINT
  Value(double f) : type_(Type::kFloat), float_(f) {}       // NOLINT
  Value(std::string s, bool from_input = false)             // NOLINT
      : type_(Type::kString), from_input_(from_input), str_(std::make_shared<const std::string>(std::move(s))) {}
  Value(const char* s) : Value(std::string(s)) {}           // NOLINT
  // Containers nest at most kMaxDepth deep (deeper: std::length_error), so
  // that printing, comparing and freeing them stays within the stack.
  Value(List l) : type_(Type::kList), list_(std::make_shared<List>(std::move(l))) { measure(); }  // NOLINT
  Value(Dict d, bool is_namespace = false)                  // NOLINT
      : type_(Type::kDict), namespace_(is_namespace), dict_(std::make_shared<Dict>(std::move(d))) { measure(); }
  static constexpr int kMaxDepth = 512;
  explicit Value(std::shared_ptr<const Callable> c) : type_(Type::kCallable), callable_(std::move(c)) {}

  Type type() const { return type_; }
  bool is_undefined() const { return type_ == Type::kUndefined; }
  bool is_none() const { return type_ == Type::kNone; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_int() const { return type_ == Type::kInt; }
  bool is_float() const { return type_ == Type::kFloat; }
  bool is_number() const { return type_ == Type::kInt || type_ == Type::kFloat; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_list() const { return type_ == Type::kList; }
  bool is_dict() const { return type_ == Type::kDict; }
  bool is_namespace() const { return namespace_; }
  bool is_callable() const { return type_ == Type::kCallable; }
  bool from_input() const { return from_input_; }
  // A namespace is this value or inside it (a namespace attribute may not
  // hold one: no cycles).
  bool holds_namespace() const { return holds_namespace_; }

  bool as_bool() const { return int_ != 0; }
  int64_t as_int() const { return int_; }
  double as_number() const { return type_ == Type::kFloat ? float_ : static_cast<double>(int_); }
  const std::string& str() const { return *str_; }
  List& list() const { return *list_; }
  Dict& dict() const { return *dict_; }
  const Callable& callable() const { return *callable_; }
  // The same text with its origin flag set to `from_input`.
  Value with_origin(bool from_input) const {
    Value v = *this;
    v.from_input_ = from_input;
    return v;
  }

  // Python truthiness (undefined is false).
  bool truthy() const;
  // Python's str() (Jinja's output of {{ v }}): None -> "None", True ->
  // "True", lists and dicts as repr; undefined -> "".
  std::string to_str() const;
  // Python's repr() (strings quoted with ').
  std::string repr() const;
  // json.dumps(v, ensure_ascii=False, indent=…, separators=…) as HF's
  // tojson calls it: ", " and ": " without indent, "," and ": " with one.
  // Undefined is null; callables are null.
  void to_json(std::string& out, int indent, std::string_view item_sep, std::string_view key_sep,
               bool sort_keys, int depth = 0) const;
  std::string type_name() const;  // Python's type name: "str", "dict", …

 private:
  explicit Value(Type t) : type_(t) {}
  void measure();  // depth_ and holds_namespace_ from the children
  Type type_ = Type::kUndefined;
  bool namespace_ = false;
  bool holds_namespace_ = false;
  uint16_t depth_ = 0;
  bool from_input_ = false;
  int64_t int_ = 0;
  double float_ = 0;
  std::shared_ptr<const std::string> str_;
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<const Callable> callable_;
};

// Python ==.
bool equal(const Value& a, const Value& b);
// Python <; false for incomparable types (the caller reports the error).
bool less(const Value& a, const Value& b, bool* comparable);
// A double as Python's repr() writes it ("1.0", "1e+16", "inf").
std::string python_float(double d);
// Appends `s` as a JSON string (non-ASCII kept as UTF-8, as ensure_ascii=False).
void append_json_quoted(std::string& out, std::string_view s);

// JSON -> Value; strings are marked as request input (from_input) when asked.
Value from_json(const boost::json::value& v, bool strings_from_input);

}  // namespace zl::tmpl
