#include "grammar/json_schema.h"

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "core/json_text.h"
#include "grammar/matcher.h"
#include "grammar/regex.h"

namespace zl::grammar {
namespace json = boost::json;
using Seq = GrammarBuilder::Seq;

// ---------------------------------------------------------------------------------------------
// JSON text pieces

uint32_t JsonRules::ws() {
  if (ws_ < 0) {
    ByteSet indent = ByteSet::of(' ');
    indent.add('\t');
    const uint32_t tail = b_.repeat({b_.bytes(indent)}, 0, 32);
    ws_ = b_.rule({{}, b_.literal(" "), {b_.bytes(ByteSet::of('\n')), b_.ref(tail)}});
  }
  return static_cast<uint32_t>(ws_);
}

uint32_t JsonRules::string_char() {
  if (char_ < 0) {
    ByteSet plain = ByteSet::range(0x20, 0x7e);
    ByteSet quote_backslash;
    quote_backslash.add('"');
    quote_backslash.add('\\');
    for (int i = 0; i < 4; ++i) plain.bits[i] &= ~quote_backslash.bits[i];
    ByteSet escapable;
    for (char c : std::string_view("\"\\/bfnrt")) escapable.add(static_cast<uint8_t>(c));
    ByteSet hex = ByteSet::range('0', '9');
    hex.add_range('a', 'f');
    hex.add_range('A', 'F');
    ByteSet hex_no_d = ByteSet::range('0', '9');  // \uXXXX outside the surrogates D800-DFFF
    hex_no_d.add_range('a', 'c');
    hex_no_d.add_range('A', 'C');
    hex_no_d.add_range('e', 'f');
    hex_no_d.add_range('E', 'F');
    ByteSet d;
    d.add('d');
    d.add('D');
    const auto h = b_.bytes(hex);
    const auto bs = b_.bytes(ByteSet::of('\\'));
    const auto u = b_.bytes(ByteSet::of('u'));
    char_ = b_.rule({
        {b_.bytes(plain)},
        {bs, b_.bytes(escapable)},
        {bs, u, b_.bytes(hex_no_d), h, h, h},
        {bs, u, b_.bytes(d), b_.bytes(ByteSet::range('0', '7')), h, h},
        {b_.ref(multibyte_char())},
    });
  }
  return static_cast<uint32_t>(char_);
}

uint32_t JsonRules::multibyte_char() {
  if (multi_ < 0) {
    // Well-formed UTF-8: no overlongs, no surrogates, nothing past U+10FFFF.
    const auto cont = b_.bytes(ByteSet::range(0x80, 0xbf));
    multi_ = b_.rule({
        {b_.bytes(ByteSet::range(0xc2, 0xdf)), cont},
        {b_.bytes(ByteSet::of(0xe0)), b_.bytes(ByteSet::range(0xa0, 0xbf)), cont},
        {b_.bytes(ByteSet::range(0xe1, 0xec)), cont, cont},
        {b_.bytes(ByteSet::of(0xed)), b_.bytes(ByteSet::range(0x80, 0x9f)), cont},
        {b_.bytes(ByteSet::range(0xee, 0xef)), cont, cont},
        {b_.bytes(ByteSet::of(0xf0)), b_.bytes(ByteSet::range(0x90, 0xbf)), cont, cont},
        {b_.bytes(ByteSet::range(0xf1, 0xf3)), cont, cont, cont},
        {b_.bytes(ByteSet::of(0xf4)), b_.bytes(ByteSet::range(0x80, 0x8f)), cont, cont},
    });
  }
  return static_cast<uint32_t>(multi_);
}

uint32_t JsonRules::string() {
  if (string_ < 0) {
    const auto q = b_.bytes(ByteSet::of('"'));
    string_ = b_.rule({{q, b_.ref(b_.star({b_.ref(string_char())})), q}});
  }
  return static_cast<uint32_t>(string_);
}

uint32_t JsonRules::integer() {
  if (integer_ < 0) {
    const uint32_t digits = b_.repeat({b_.bytes(ByteSet::range('0', '9'))}, 0, 18);
    const uint32_t magnitude = b_.rule({b_.literal("0"), {b_.bytes(ByteSet::range('1', '9')), b_.ref(digits)}});
    integer_ = b_.rule({{b_.ref(b_.optional(b_.literal("-"))), b_.ref(magnitude)}});
  }
  return static_cast<uint32_t>(integer_);
}

uint32_t JsonRules::number() {
  if (number_ < 0) {
    const auto digit = b_.bytes(ByteSet::range('0', '9'));
    const uint32_t frac = b_.optional({b_.bytes(ByteSet::of('.')), digit, b_.ref(b_.repeat({digit}, 0, 16))});
    ByteSet e = ByteSet::of('e');
    e.add('E');
    ByteSet sign = ByteSet::of('+');
    sign.add('-');
    // At most two exponent digits: with the 19 integer digits above, every
    // number the grammar allows is a finite double (1e400 would parse as
    // infinity, which JSON cannot write back).
    const uint32_t exp = b_.optional(
        {b_.bytes(e), b_.ref(b_.optional({b_.bytes(sign)})), digit, b_.ref(b_.repeat({digit}, 0, 1))});
    number_ = b_.rule({{b_.ref(integer()), b_.ref(frac), b_.ref(exp)}});
  }
  return static_cast<uint32_t>(number_);
}

uint32_t JsonRules::value() {
  if (value_ < 0) {
    value_ = b_.new_rule();
    const uint32_t v = static_cast<uint32_t>(value_);
    const Seq array = list('[', {b_.ref(v), b_.ref(ws())}, ']');
    b_.define(v, {{b_.ref(object())}, array, {b_.ref(string())}, {b_.ref(number())}, b_.literal("true"),
                  b_.literal("false"), b_.literal("null")});
  }
  return static_cast<uint32_t>(value_);
}

uint32_t JsonRules::object() {
  if (object_ < 0) {
    const uint32_t v = value();            // (value() makes the object rule itself on first use)
    if (object_ < 0) object_ = object_of(v);
  }
  return static_cast<uint32_t>(object_);
}

uint32_t JsonRules::object_of(uint32_t v) {
  const auto w = b_.ref(ws());
  Seq member = {b_.ref(string()), w};
  b_.append_literal(member, ":");
  member.insert(member.end(), {w, b_.ref(v), w});
  return b_.rule({list('{', member, '}')});
}

GrammarBuilder::Seq JsonRules::list(char open, const Seq& item, char close) {
  // open ws [item ("," ws item)*] close; `item` ends with its own whitespace.
  const auto w = b_.ref(ws());
  Seq more = b_.literal(",");
  more.push_back(w);
  more.insert(more.end(), item.begin(), item.end());
  Seq items = item;
  items.push_back(b_.ref(b_.star(more)));
  Seq out = b_.literal(std::string_view(&open, 1));
  out.push_back(w);
  out.push_back(b_.ref(b_.optional(items)));
  b_.append_literal(out, std::string_view(&close, 1));
  return out;
}

std::string json_quote(std::string_view s) { return json::serialize(json::string(s)); }

namespace {

// ---------------------------------------------------------------------------------------------
// Integer ranges as digit patterns

constexpr int64_t kUnbounded = INT64_MAX;

// Decimal strings a..b of the same length.
void same_length(GrammarBuilder& b, const std::string& lo, const std::string& hi, Seq prefix, std::vector<Seq>& out) {
  if (lo.empty()) {
    out.push_back(std::move(prefix));
    return;
  }
  const auto digit_set = [&](char from, char to) { return b.bytes(ByteSet::range(static_cast<uint8_t>(from), static_cast<uint8_t>(to))); };
  const std::string lo_rest = lo.substr(1), hi_rest = hi.substr(1);
  if (lo[0] == hi[0]) {
    prefix.push_back(digit_set(lo[0], lo[0]));
    same_length(b, lo_rest, hi_rest, std::move(prefix), out);
    return;
  }
  const bool lo_all0 = lo_rest.find_first_not_of('0') == std::string::npos;
  const bool hi_all9 = hi_rest.find_first_not_of('9') == std::string::npos;
  const auto any_digits = [&](Seq s, size_t n) {
    for (size_t i = 0; i < n; ++i) s.push_back(digit_set('0', '9'));
    return s;
  };
  char first = lo[0], last = hi[0];
  if (!lo_all0) {
    Seq p = prefix;
    p.push_back(digit_set(lo[0], lo[0]));
    same_length(b, lo_rest, std::string(lo_rest.size(), '9'), std::move(p), out);
    ++first;
  }
  if (!hi_all9) --last;
  if (first <= last) {
    Seq p = prefix;
    p.push_back(digit_set(first, last));
    out.push_back(any_digits(std::move(p), lo_rest.size()));
  }
  if (!hi_all9) {
    Seq p = prefix;
    p.push_back(digit_set(hi[0], hi[0]));
    same_length(b, std::string(hi_rest.size(), '0'), hi_rest, std::move(p), out);
  }
}

// Non-negative integers in [lo, hi] (hi may be kUnbounded), no leading zeros.
void non_negative(GrammarBuilder& b, int64_t lo, int64_t hi, Seq prefix, std::vector<Seq>& out) {
  const std::string los = std::to_string(lo);
  const size_t max_len = hi == kUnbounded ? los.size() : std::to_string(hi).size();
  for (size_t len = los.size(); len <= max_len; ++len) {
    std::string a = los;
    if (len != los.size()) {
      a.assign(len, '0');
      a[0] = '1';
    }
    const std::string z = len == max_len && hi != kUnbounded ? std::to_string(hi) : std::string(len, '9');
    same_length(b, a, z, prefix, out);
  }
  if (hi == kUnbounded) {
    // Any number with more digits than lo (at most 19 digits in all).
    Seq p = prefix;
    p.push_back(b.bytes(ByteSet::range('1', '9')));
    const uint32_t more = b.repeat({b.bytes(ByteSet::range('0', '9'))}, static_cast<int64_t>(los.size()),
                                   std::max<int64_t>(18, static_cast<int64_t>(los.size())));
    p.push_back(b.ref(more));
    out.push_back(std::move(p));
  }
}

// ---------------------------------------------------------------------------------------------
// The compiler

struct SchemaError {
  Status status;
};

[[noreturn]] void unsupported_keyword(std::string_view keyword, const std::string& path, std::string_view why = {}) {
  std::string msg = "unsupported JSON Schema keyword '" + std::string(keyword) + "' at " + path;
  if (!why.empty()) msg += ": " + std::string(why);
  throw SchemaError{invalid_argument(std::move(msg), {.reason = ErrorReason::kUnsupportedValue})};
}

// Whether `v` has one of the types the schema `o` names (true when it names none).
bool of_schema_type(const json::object& o, const json::value& v) {
  const auto* t = o.if_contains("type");
  if (!t) return true;
  auto is = [&v](std::string_view type) {
    if (type == "string") return v.is_string();
    if (type == "boolean") return v.is_bool();
    if (type == "null") return v.is_null();
    if (type == "object") return v.is_object();
    if (type == "array") return v.is_array();
    if (type == "number") return v.is_number();
    if (type == "integer") {
      if (v.is_int64() || v.is_uint64()) return true;
      return v.is_double() && std::isfinite(v.get_double()) && std::trunc(v.get_double()) == v.get_double();
    }
    return false;
  };
  if (t->is_string()) return is(t->get_string());
  if (t->is_array()) {
    for (const auto& x : t->get_array()) {
      if (x.is_string() && is(x.get_string())) return true;
    }
    return false;
  }
  return true;  // a malformed `type` is reported where it is compiled
}

[[noreturn]] void invalid_schema(const std::string& path, std::string_view why) {
  throw SchemaError{invalid_argument("invalid JSON Schema at " + path + ": " + std::string(why),
                                     {.reason = ErrorReason::kInvalidValue})};
}

const std::set<std::string_view> kAnnotations = {"title",    "description", "default",  "examples",  "$schema",
                                                 "$id",      "$comment",    "deprecated", "readOnly", "writeOnly",
                                                 "$defs",    "definitions", "strict",   "name"};
const std::set<std::string_view> kSupported = {
    "type",    "properties", "required", "additionalProperties", "enum",      "const",     "items",
    "minItems", "maxItems",  "minLength", "maxLength",           "minimum",   "maximum",   "exclusiveMinimum",
    "exclusiveMaximum", "anyOf", "oneOf", "allOf", "$ref",        "pattern"};

class Compiler {
 public:
  Compiler(JsonRules& j, const json::value& root) : j_(j), b_(j.builder()), root_(root) {}

  uint32_t compile(const json::value& s, const std::string& path, int depth) {
    if (depth > kMaxDepth) invalid_schema(path, "nested more than " + std::to_string(kMaxDepth) + " levels");
    if (b_.too_large()) throw SchemaError{invalid_argument("the schema is too large to compile", {.reason = ErrorReason::kInvalidValue})};
    if (s.is_bool()) {
      if (s.get_bool()) return j_.value();
      unsupported_keyword("false", path, "a schema that accepts nothing");
    }
    if (!s.is_object()) invalid_schema(path, "a schema must be an object or a boolean");
    const json::object& o = s.get_object();
    for (const auto& kv : o) {
      const std::string_view k = kv.key();
      if (!kAnnotations.contains(k) && !kSupported.contains(k)) unsupported_keyword(k, path);
    }
    if (const auto* r = o.if_contains("$ref")) return compile_ref(o, *r, path, depth);
    if (o.contains("const") || o.contains("enum")) return literal_rule(literal_values(o, path));
    for (std::string_view key : {"anyOf", "oneOf", "allOf"}) {
      if (const auto* a = o.if_contains(key)) return compile_any_of(o, key, *a, path, depth);
    }
    std::vector<std::string> types;
    if (const auto* t = o.if_contains("type")) {
      if (t->is_string()) {
        types.emplace_back(t->get_string());
      } else if (t->is_array() && !t->get_array().empty()) {
        for (const auto& v : t->get_array()) {
          if (!v.is_string()) invalid_schema(path + "/type", "must be a string or an array of strings");
          types.emplace_back(v.get_string());
        }
      } else {
        invalid_schema(path + "/type", "must be a string or a non-empty array of strings");
      }
    } else {
      types = inferred_types(o);
      if (types.empty()) return j_.value();
    }
    std::vector<Seq> alts;
    for (const std::string& t : types) alts.push_back({b_.ref(compile_type(o, t, path, depth))});
    return alts.size() == 1 ? alts[0][0].value : b_.rule(std::move(alts));
  }

  // The top-level object's members in `style` (add_json_schema_members).
  uint32_t compile_members(const json::object& o, const MemberStyle& style) {
    style_ = &style;
    return compile_object(o, "#", 0);
  }

 private:
  static constexpr int kMaxDepth = 64;

  static std::vector<std::string> inferred_types(const json::object& o) {
    if (o.contains("properties") || o.contains("required") || o.contains("additionalProperties")) return {"object"};
    if (o.contains("items") || o.contains("minItems") || o.contains("maxItems")) return {"array"};
    if (o.contains("minLength") || o.contains("maxLength") || o.contains("pattern")) return {"string"};
    if (o.contains("minimum") || o.contains("maximum") || o.contains("exclusiveMinimum") ||
        o.contains("exclusiveMaximum")) {
      return {"integer"};
    }
    return {};
  }

  // The values of `const` / `enum` that the schema's other keywords allow
  // (JSON Schema applies them all: {"minimum": 5, "enum": [1, 7]} is 7).
  // Keywords that shape objects and arrays are refused beside them.
  json::array literal_values(const json::object& o, const std::string& path) {
    json::array values;
    std::string at = path + "/enum";
    if (const auto* c = o.if_contains("const")) {
      values.push_back(*c);
      at = path + "/const";
    } else {
      const auto* e = o.if_contains("enum");
      if (!e->is_array() || e->get_array().empty()) invalid_schema(at, "must be a non-empty array");
      values = e->get_array();
    }
    for (std::string_view k : {"properties", "required", "additionalProperties", "items", "anyOf", "oneOf", "allOf"}) {
      if (o.contains(k)) unsupported_keyword(k, path, "beside enum or const");
    }
    std::shared_ptr<const Grammar> pattern;
    if (const auto* p = o.if_contains("pattern")) {
      if (!p->is_string()) invalid_schema(path + "/pattern", "must be a string");
      auto g = compile_json_schema_value(json::object{{"type", "string"}, {"pattern", *p}});
      if (!g.ok()) throw SchemaError{g.status()};
      pattern = *g;
    }
    json::array allowed;
    bool typed = false;
    for (const json::value& v : values) {
      if (v.is_double() && !std::isfinite(v.get_double())) invalid_schema(at, "a number too large for a double");
      if (!of_schema_type(o, v)) continue;
      typed = true;
      if (allows(o, v, pattern, path)) allowed.push_back(v);
    }
    if (!typed) invalid_schema(at, values.size() == 1 && o.contains("const") ? "the value does not have the schema's type"
                                                                              : "no value has the schema's type");
    if (allowed.empty()) invalid_schema(at, "no value satisfies the schema's other keywords");
    return allowed;
  }

  // Whether literal `v` (of the schema's type) satisfies the bounds, lengths
  // and pattern of `o`; each applies to the values of its own type.
  bool allows(const json::object& o, const json::value& v, const std::shared_ptr<const Grammar>& pattern,
              const std::string& path) {
    if (v.is_number()) {
      const double x = v.to_number<double>();
      auto bound = [&](std::string_view k) -> std::optional<double> {
        const auto* b = o.if_contains(k);
        if (!b) return std::nullopt;
        if (!b->is_number()) invalid_schema(path + "/" + std::string(k), "must be a number");
        return b->to_number<double>();
      };
      if (auto b = bound("minimum"); b && !(x >= *b)) return false;
      if (auto b = bound("maximum"); b && !(x <= *b)) return false;
      if (auto b = bound("exclusiveMinimum"); b && !(x > *b)) return false;
      if (auto b = bound("exclusiveMaximum"); b && !(x < *b)) return false;
    }
    if (v.is_string()) {
      const json::string& str = v.get_string();
      const auto n = static_cast<int64_t>(std::count_if(str.begin(), str.end(), [](char c) {
        return (static_cast<unsigned char>(c) & 0xC0) != 0x80;  // code points: not continuation bytes
      }));
      const int64_t max = count(o, "maxLength", path, -1);
      if (n < count(o, "minLength", path, 0) || (max >= 0 && n > max)) return false;
      if (pattern) {
        Matcher m(pattern);
        if (!m.advance(json_text(v)) || !m.accepting()) return false;
      }
    }
    if (v.is_array()) {
      const auto n = static_cast<int64_t>(v.get_array().size());
      const int64_t max = count(o, "maxItems", path, -1);
      if (n < count(o, "minItems", path, 0) || (max >= 0 && n > max)) return false;
    }
    return true;
  }

  uint32_t literal_rule(const json::array& values) {
    std::vector<Seq> alts;
    for (const auto& v : values) alts.push_back(b_.literal(json_text(v)));
    return b_.rule(std::move(alts));
  }

  uint32_t compile_ref(const json::object& o, const json::value& ref, const std::string& path, int depth) {
    for (const auto& kv : o) {
      if (kv.key() != "$ref" && !kAnnotations.contains(kv.key())) {
        unsupported_keyword(kv.key(), path, "beside $ref");
      }
    }
    if (!ref.is_string()) invalid_schema(path + "/$ref", "must be a string");
    const std::string target(ref.get_string());
    if (auto it = refs_.find(target); it != refs_.end()) return it->second;
    const json::value* node = &root_;
    if (target != "#") {
      std::string_view rest = target;
      if (!rest.starts_with("#/")) unsupported_keyword("$ref", path, "only local references (#/$defs/...) are supported");
      rest.remove_prefix(2);
      while (!rest.empty()) {
        const size_t slash = rest.find('/');
        const std::string_view raw = rest.substr(0, slash);
        rest = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
        std::string part;  // JSON Pointer escapes: ~1 is '/', ~0 is '~'
        for (size_t i = 0; i < raw.size(); ++i) {
          if (raw[i] == '~' && i + 1 < raw.size() && (raw[i + 1] == '0' || raw[i + 1] == '1')) {
            part += raw[++i] == '1' ? '/' : '~';
          } else {
            part += raw[i];
          }
        }
        if (!node->is_object() || !node->get_object().contains(part)) {
          invalid_schema(path + "/$ref", "'" + target + "' does not name a definition");
        }
        node = &node->get_object().at(part);
      }
    }
    // Made before its body so that recursive definitions refer to it.
    const uint32_t r = b_.new_rule();
    refs_.emplace(target, r);
    ref_rules_.insert(r);
    if (++n_refs_in_progress_ > kMaxDepth) invalid_schema(path, "$ref chain too deep");
    const uint32_t body = compile(*node, target, depth + 1);
    --n_refs_in_progress_;
    if (body == r) invalid_schema(path + "/$ref", "'" + target + "' refers to itself");
    // A definition that is only another reference: follow the chain of such
    // aliases; coming back here is a cycle that never reads a byte.
    if (ref_rules_.contains(body)) {
      aliases_[r] = body;
      for (uint32_t x = body; aliases_.contains(x);) {
        x = aliases_.at(x);
        if (x == r) invalid_schema(path + "/$ref", "'" + target + "' is a cycle of references");
      }
    }
    b_.define(r, {{b_.ref(body)}});
    return r;
  }

  uint32_t compile_any_of(const json::object& o, std::string_view key, const json::value& a, const std::string& path,
                          int depth) {
    for (const auto& kv : o) {
      if (kv.key() != key && !kAnnotations.contains(kv.key())) {
        unsupported_keyword(kv.key(), path, "beside " + std::string(key));
      }
    }
    const std::string p = path + "/" + std::string(key);
    if (!a.is_array() || a.get_array().empty()) invalid_schema(p, "must be a non-empty array");
    if (key == "allOf" && a.get_array().size() != 1) unsupported_keyword("allOf", path, "only with one schema");
    std::vector<Seq> alts;
    for (size_t i = 0; i < a.get_array().size(); ++i) {
      alts.push_back({b_.ref(compile(a.get_array()[i], p + "/" + std::to_string(i), depth + 1))});
    }
    return b_.rule(std::move(alts));
  }

  uint32_t compile_type(const json::object& o, const std::string& t, const std::string& path, int depth) {
    if (t == "object") return compile_object(o, path, depth);
    if (t == "array") return compile_array(o, path, depth);
    if (t == "string") return compile_string(o, path);
    if (t == "integer") return compile_integer(o, path);
    if (t == "number") {
      for (std::string_view k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}) {
        if (o.contains(k)) unsupported_keyword(k, path, "bounds are supported on integers only");
      }
      return j_.number();
    }
    if (t == "boolean") return b_.rule({b_.literal("true"), b_.literal("false")});
    if (t == "null") return b_.rule({b_.literal("null")});
    invalid_schema(path + "/type", "unknown type '" + t + "'");
  }

  int64_t count(const json::object& o, std::string_view key, const std::string& path, int64_t dflt) {
    const auto* v = o.if_contains(key);
    if (!v) return dflt;
    if (v->is_int64() && v->get_int64() >= 0) return v->get_int64();
    if (v->is_uint64()) return static_cast<int64_t>(std::min<uint64_t>(v->get_uint64(), INT64_MAX));
    if (v->is_double() && v->get_double() >= 0 && std::floor(v->get_double()) == v->get_double()) {
      return static_cast<int64_t>(std::min(v->get_double(), 9e18));
    }
    invalid_schema(path + "/" + std::string(key), "must be a non-negative integer");
  }

  uint32_t compile_object(const json::object& o, const std::string& path, int depth) {
    const MemberStyle* style = depth == 0 ? style_ : nullptr;
    const auto w = b_.ref(j_.ws());
    const json::object empty;
    const json::object* props = &empty;
    if (const auto* p = o.if_contains("properties")) {
      if (!p->is_object()) invalid_schema(path + "/properties", "must be an object");
      props = &p->get_object();
    }
    std::set<std::string> required;
    if (const auto* r = o.if_contains("required")) {
      if (!r->is_array()) invalid_schema(path + "/required", "must be an array of strings");
      for (const auto& v : r->get_array()) {
        if (!v.is_string()) invalid_schema(path + "/required", "must be an array of strings");
        required.emplace(v.get_string());
      }
    }
    const json::value* additional = o.if_contains("additionalProperties");
    const bool closed = additional && additional->is_bool() && !additional->get_bool();
    if (additional && !additional->is_bool() && !additional->is_object()) {
      invalid_schema(path + "/additionalProperties", "must be a boolean or a schema");
    }
    // Properties named by `required` only: any value (or an error when closed).
    std::vector<std::pair<std::string, const json::value*>> members;
    for (const auto& kv : *props) members.emplace_back(std::string(kv.key()), &kv.value());
    static const json::value kAny = json::object();
    for (const std::string& name : required) {
      if (props->contains(name)) continue;
      if (closed) invalid_schema(path + "/required", "'" + name + "' is required but not in properties");
      members.emplace_back(name, &kAny);
    }
    if (members.empty() && style) {
      if (closed || (o.contains("properties") && !additional)) return styled_object(*style, {});
      const uint32_t value = additional && additional->is_object()
                                 ? compile(*additional, path + "/additionalProperties", depth + 1)
                                 : any_member_value(*style);
      return any_members(*style, value);
    }
    if (members.empty()) {
      // `properties: {}` declares no arguments: only {} is generated (valid
      // whatever additionalProperties says). Neither given: any object.
      if (closed || (o.contains("properties") && !additional)) {
        Seq s = b_.literal("{");
        s.push_back(w);
        b_.append_literal(s, "}");
        return b_.rule({std::move(s)});
      }
      if (additional && additional->is_object()) return j_.object_of(compile(*additional, path + "/additionalProperties", depth + 1));
      return j_.object();
    }
    if (additional && additional->is_object() && !(additional->get_object().empty())) {
      unsupported_keyword("additionalProperties", path, "a schema beside properties");
    }
    // first_k: members k.. with none written yet; after_k: at least one written (a comma first).
    const size_t n = members.size();
    std::vector<uint32_t> first(n + 1), after(n + 1);
    first[n] = after[n] = b_.rule({{}});
    for (size_t k = n; k-- > 0;) {
      const auto& [name, schema] = members[k];
      const std::string member_path = path + "/properties/" + name;
      Seq kv;
      if (style) {
        b_.append_literal(kv, style->key_open + name + style->key_close);
        kv.push_back(b_.ref(styled_value(*style, *schema, member_path, depth + 1)));
        b_.append_literal(kv, style->value_close);
      } else {
        kv = b_.literal(json_quote(name));
        kv.push_back(w);
        b_.append_literal(kv, ":");
        kv.push_back(w);
        kv.push_back(b_.ref(compile(*schema, member_path, depth + 1)));
        kv.push_back(w);
      }
      const bool req = required.contains(name);
      Seq a = b_.literal(style ? style->separator : ",");
      if (!style || style->spaces) a.push_back(w);
      a.insert(a.end(), kv.begin(), kv.end());
      a.push_back(b_.ref(after[k + 1]));
      Seq f = kv;
      f.push_back(b_.ref(after[k + 1]));
      std::vector<Seq> a_alts{std::move(a)}, f_alts{std::move(f)};
      if (!req) {
        a_alts.push_back({b_.ref(after[k + 1])});
        f_alts.push_back({b_.ref(first[k + 1])});
      }
      after[k] = b_.rule(std::move(a_alts));
      first[k] = b_.rule(std::move(f_alts));
    }
    if (style) return styled_object(*style, {b_.ref(first[0])});
    Seq obj = b_.literal("{");
    obj.push_back(w);
    obj.push_back(b_.ref(first[0]));
    b_.append_literal(obj, "}");
    return b_.rule({std::move(obj)});
  }

  // open [ws] MEMBERS close
  uint32_t styled_object(const MemberStyle& style, const Seq& members) {
    Seq s = b_.literal(style.open);
    if (style.spaces) s.push_back(b_.ref(j_.ws()));
    s.insert(s.end(), members.begin(), members.end());
    b_.append_literal(s, style.close);
    return b_.rule({std::move(s)});
  }

  // Any number of members with any names, values of `value`.
  uint32_t any_members(const MemberStyle& style, uint32_t value) {
    const bool raw = !style.raw_string_stops.empty();
    ByteSet first = ByteSet::range('a', 'z');
    first.add_range('A', 'Z');
    first.add('_');
    ByteSet rest = first;
    rest.add_range('0', '9');
    if (raw) rest.add_range('-', '.');  // a tag's attribute: an identifier, '-' and '.' allowed
    Seq member = b_.literal(style.key_open);
    member.push_back(b_.bytes(first));
    member.push_back(b_.ref(b_.repeat({b_.bytes(rest)}, 0, 63)));
    b_.append_literal(member, style.key_close);
    member.push_back(b_.ref(value));
    b_.append_literal(member, style.value_close);
    Seq more = b_.literal(style.separator);
    if (style.spaces) more.push_back(b_.ref(j_.ws()));
    more.insert(more.end(), member.begin(), member.end());
    Seq members = member;
    members.push_back(b_.ref(b_.star(more)));
    return styled_object(style, {b_.ref(b_.optional(members))});
  }

  uint32_t any_member_value(const MemberStyle& style) {
    if (style.raw_string_stops.empty()) return j_.value();
    return add_text_avoiding(j_, style.raw_string_stops);  // raw text reads as JSON where it is JSON
  }

  // A top-level member's value: raw text for a plain string schema when the
  // style writes strings raw, else JSON.
  uint32_t styled_value(const MemberStyle& style, const json::value& s, const std::string& path, int depth) {
    if (style.raw_string_stops.empty() || !s.is_object()) return compile(s, path, depth);
    const json::object& o = s.get_object();
    const json::value* type = o.if_contains("type");
    const bool string_type = type && type->is_string() && type->get_string() == "string";
    if (o.contains("const") || o.contains("enum")) {
      const json::array values = literal_values(o, path);
      std::vector<Seq> alts;
      for (const json::value& v : values) {
        if (!v.is_string()) return compile(s, path, depth);  // JSON values (mixed enums)
        for (const std::string& stop : style.raw_string_stops) {
          if (std::string_view(v.get_string()).find(stop) != std::string_view::npos) {
            unsupported_keyword("enum", path, "a value holds '" + stop + "', which this tool-call format cannot write");
          }
        }
        alts.push_back(b_.literal(v.get_string()));
      }
      return b_.rule(std::move(alts));
    }
    if (!string_type) return compile(s, path, depth);
    for (const auto& kv : o) {
      const std::string_view k = kv.key();
      if (k == "type" || kAnnotations.contains(k)) continue;
      if (k == "minLength" || k == "maxLength" || k == "pattern") {
        unsupported_keyword(k, path, "on a string this tool-call format writes as raw text");
      }
      unsupported_keyword(k, path);
    }
    return add_text_avoiding(j_, style.raw_string_stops);
  }

  uint32_t compile_array(const json::object& o, const std::string& path, int depth) {
    const auto w = b_.ref(j_.ws());
    uint32_t item = j_.value();
    if (const auto* it = o.if_contains("items")) {
      if (it->is_bool() && !it->get_bool()) {
        item = b_.rule({});  // no items at all
      } else {
        item = compile(*it, path + "/items", depth + 1);
      }
    }
    const int64_t min = count(o, "minItems", path, 0);
    const int64_t max = o.contains("maxItems") ? count(o, "maxItems", path, 0) : -1;
    if (max >= 0 && min > max) invalid_schema(path, "minItems is greater than maxItems");
    Seq open = b_.literal("[");
    open.push_back(w);
    if (max == 0) {
      b_.append_literal(open, "]");
      return b_.rule({std::move(open)});
    }
    Seq more = b_.literal(",");
    more.push_back(w);
    more.push_back(b_.ref(item));
    more.push_back(w);
    Seq items = {b_.ref(item), w, b_.ref(b_.repeat(more, std::max<int64_t>(min - 1, 0), max < 0 ? -1 : max - 1))};
    if (min == 0) {
      open.push_back(b_.ref(b_.optional(items)));
    } else {
      open.insert(open.end(), items.begin(), items.end());
    }
    b_.append_literal(open, "]");
    return b_.rule({std::move(open)});
  }

  uint32_t compile_string(const json::object& o, const std::string& path) {
    const auto q = b_.bytes(ByteSet::of('"'));
    if (const auto* p = o.if_contains("pattern")) {
      if (o.contains("minLength") || o.contains("maxLength")) {
        unsupported_keyword("pattern", path, "together with minLength/maxLength");
      }
      if (!p->is_string()) invalid_schema(path + "/pattern", "must be a string");
      Result<uint32_t> body = add_regex(j_, p->get_string());
      if (!body.ok()) {
        throw SchemaError{invalid_argument(path + "/pattern: " + body.status().message(),
                                           {.reason = body.status().reason()})};
      }
      return b_.rule({{q, b_.ref(*body), q}});
    }
    const int64_t min = count(o, "minLength", path, 0);
    const int64_t max = o.contains("maxLength") ? count(o, "maxLength", path, 0) : -1;
    if (max >= 0 && min > max) invalid_schema(path, "minLength is greater than maxLength");
    if (min == 0 && max < 0) return j_.string();
    return b_.rule({{q, b_.ref(b_.repeat({b_.ref(j_.string_char())}, min, max)), q}});
  }

  std::optional<int64_t> bound(const json::object& o, std::string_view key, const std::string& path) {
    const auto* v = o.if_contains(key);
    if (!v) return std::nullopt;
    double d;
    if (v->is_int64()) {
      d = static_cast<double>(v->get_int64());
      if (std::abs(v->get_int64()) < (int64_t{1} << 53)) {
        int64_t x = v->get_int64();
        if (key == "exclusiveMinimum") ++x;
        if (key == "exclusiveMaximum") --x;
        return x;
      }
    } else if (v->is_uint64()) {
      d = static_cast<double>(v->get_uint64());
    } else if (v->is_double()) {
      d = v->get_double();
    } else {
      invalid_schema(path + "/" + std::string(key), "must be a number");
    }
    const bool lower = key == "minimum" || key == "exclusiveMinimum";
    if (d >= 1e18) return lower ? std::optional<int64_t>(kUnbounded) : std::nullopt;
    if (d <= -1e18) return lower ? std::nullopt : std::optional<int64_t>(-kUnbounded);
    double x = lower ? std::ceil(d) : std::floor(d);
    if (key == "exclusiveMinimum" && x == d) x += 1;
    if (key == "exclusiveMaximum" && x == d) x -= 1;
    return static_cast<int64_t>(x);
  }

  uint32_t compile_integer(const json::object& o, const std::string& path) {
    std::optional<int64_t> lo = bound(o, "minimum", path), hi = bound(o, "maximum", path);
    if (auto x = bound(o, "exclusiveMinimum", path)) lo = lo ? std::max(*lo, *x) : *x;
    if (auto x = bound(o, "exclusiveMaximum", path)) hi = hi ? std::min(*hi, *x) : *x;
    if (!lo && !hi) return j_.integer();
    if (lo == kUnbounded || hi == -kUnbounded || (lo && hi && *lo > *hi)) {
      invalid_schema(path, "no integer lies between minimum and maximum");
    }
    std::vector<Seq> alts;
    // Negative part: "-" then magnitudes in [max(1, -hi), -lo].
    if (!lo || *lo < 0) {
      const int64_t mag_lo = hi && *hi < 0 ? -*hi : 1;
      const int64_t mag_hi = lo ? -*lo : kUnbounded;
      non_negative(b_, mag_lo, mag_hi, b_.literal("-"), alts);
    }
    if (!hi || *hi >= 0) non_negative(b_, lo ? std::max<int64_t>(*lo, 0) : 0, hi ? *hi : kUnbounded, {}, alts);
    return b_.rule(std::move(alts));
  }

  JsonRules& j_;
  GrammarBuilder& b_;
  const json::value& root_;
  std::map<std::string, uint32_t> refs_;
  std::set<uint32_t> ref_rules_;            // rules made for a $ref target
  std::map<uint32_t, uint32_t> aliases_;   // a $ref rule whose body is another $ref rule
  int n_refs_in_progress_ = 0;
  const MemberStyle* style_ = nullptr;  // compile_members: the top-level object's syntax
};

Result<std::shared_ptr<const Grammar>> finish(GrammarBuilder& b, JsonRules& j, uint32_t value) {
  const uint32_t root = b.rule({{b.ref(j.ws()), b.ref(value)}});
  ASSIGN_OR_RETURN(Grammar g, b.build(root));
  return std::make_shared<const Grammar>(std::move(g));
}

}  // namespace

Result<uint32_t> add_json_schema(JsonRules& rules, const json::value& schema) {
  try {
    Compiler c(rules, schema);
    const uint32_t r = c.compile(schema, "#", 0);
    if (rules.builder().too_large()) {
      return invalid_argument("the schema is too large to compile", {.reason = ErrorReason::kInvalidValue});
    }
    return r;
  } catch (const SchemaError& e) {
    return e.status;
  }
}

// Whether `name` can be a member name in `style`: a Python identifier
// (ASCII) for keyword arguments; for raw-string (tag) syntaxes, non-empty
// text without '<', '>', line ends or one of the syntax's closing texts.
static bool member_name_fits(std::string_view name, const MemberStyle& style) {
  if (name.empty()) return false;
  if (style.raw_string_stops.empty()) {
    const auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
    if (!alpha(name[0])) return false;
    return std::all_of(name.begin(), name.end(), [&](char c) { return alpha(c) || (c >= '0' && c <= '9'); });
  }
  if (name.find_first_of("<>\r\n") != std::string_view::npos) return false;
  return std::none_of(style.raw_string_stops.begin(), style.raw_string_stops.end(),
                      [&](const std::string& stop) { return name.find(stop) != std::string_view::npos; });
}

Result<uint32_t> add_json_schema_members(JsonRules& rules, const json::value& schema, const MemberStyle& style) {
  auto not_object = [] {
    return invalid_argument("the arguments schema must be an object schema (type object, properties) for this tool-call "
                            "format",
                            {.reason = ErrorReason::kUnsupportedValue});
  };
  if (schema.is_bool() && schema.get_bool()) return add_json_schema_members(rules, json::object(), style);
  if (!schema.is_object()) return not_object();
  const json::object& o = schema.get_object();
  for (const auto& kv : o) {
    const std::string_view k = kv.key();
    if (!kAnnotations.contains(k) && k != "type" && k != "properties" && k != "required" && k != "additionalProperties") {
      return not_object();
    }
  }
  if (const auto* t = o.if_contains("type"); t && !(t->is_string() && t->get_string() == "object")) return not_object();
  if (const auto* props = o.if_contains("properties"); props && props->is_object()) {
    for (const auto& kv : props->get_object()) {
      if (!member_name_fits(kv.key(), style)) {
        return invalid_argument("property name " + json::serialize(json::string(kv.key())) +
                                    " cannot be written in this tool-call format's syntax",
                                {.reason = ErrorReason::kUnsupportedValue});
      }
    }
  }
  try {
    Compiler c(rules, schema);
    const uint32_t r = c.compile_members(o, style);
    if (rules.builder().too_large()) {
      return invalid_argument("the schema is too large to compile", {.reason = ErrorReason::kInvalidValue});
    }
    return r;
  } catch (const SchemaError& e) {
    return e.status;
  }
}

uint32_t add_text_avoiding(JsonRules& rules, const std::vector<std::string>& stops) {
  // An automaton over the proper prefixes of the stops (Aho-Corasick by
  // brute force: the stops are a few short tags): state p, byte c goes to
  // the longest suffix of p+c that is a proper prefix of a stop; a p+c that
  // ends with a stop is refused. Bytes that occur in no stop go back to "".
  GrammarBuilder& b = rules.builder();
  std::vector<std::string> states = {""};
  ByteSet in_stops;
  for (const std::string& s : stops) {
    for (size_t i = 1; i < s.size(); ++i) {
      if (std::find(states.begin(), states.end(), s.substr(0, i)) == states.end()) states.push_back(s.substr(0, i));
    }
    for (char c : s) in_stops.add(static_cast<uint8_t>(c));
  }
  std::vector<uint32_t> rule(states.size());
  for (uint32_t& r : rule) r = b.new_rule();
  ByteSet other = ByteSet::range(0x20, 0x7e);
  for (uint8_t c : {'\t', '\n', '\r'}) other.add(c);
  for (int i = 0; i < 4; ++i) other.bits[i] &= ~in_stops.bits[i];
  for (size_t k = 0; k < states.size(); ++k) {
    std::vector<Seq> alts = {{}, {b.bytes(other), b.ref(rule[0])}, {b.ref(rules.multibyte_char()), b.ref(rule[0])}};
    for (int c = 0; c < 256; ++c) {
      if (!in_stops.has(static_cast<uint8_t>(c))) continue;
      const std::string next = states[k] + static_cast<char>(c);
      bool refused = false;
      for (const std::string& s : stops) refused = refused || next.ends_with(s);
      if (refused) continue;
      size_t to = 0;
      for (size_t t = 0; t < states.size(); ++t) {
        if (states[t].size() > states[to].size() && next.ends_with(states[t])) to = t;
      }
      alts.push_back({b.bytes(ByteSet::of(static_cast<uint8_t>(c))), b.ref(rule[to])});
    }
    b.define(rule[k], std::move(alts));
  }
  return rule[0];
}

Result<std::shared_ptr<const Grammar>> compile_json_schema_value(const json::value& schema) {
  GrammarBuilder b;
  JsonRules j(b);
  ASSIGN_OR_RETURN(uint32_t value, add_json_schema(j, schema));
  return finish(b, j, value);
}

Result<std::shared_ptr<const Grammar>> compile_json_schema(std::string_view schema_json) {
  boost::system::error_code ec;
  json::parse_options opts;
  opts.max_depth = 128;
  const json::value v = json::parse(schema_json, ec, json::storage_ptr(), opts);
  if (ec) return invalid_argument("the schema is not valid JSON: " + ec.message(), {.reason = ErrorReason::kInvalidValue});
  return compile_json_schema_value(v);
}

std::shared_ptr<const Grammar> json_object_grammar() {
  GrammarBuilder b;
  JsonRules j(b);
  return std::move(finish(b, j, j.object())).value();
}

}  // namespace zl::grammar
