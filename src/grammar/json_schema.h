// JSON Schema -> Grammar: the JSON texts that validate against a schema.
//
// Supported (draft 2020-12 names, as OpenAI's structured outputs use them):
//   type (one or a list: object, array, string, integer, number, boolean,
//   null), properties, required, additionalProperties (false; true/absent;
//   a schema when there are no properties), enum, const, items, minItems,
//   maxItems, minLength, maxLength (in characters), pattern (a simple regex,
//   grammar/regex.h), minimum / maximum / exclusiveMinimum /
//   exclusiveMaximum on integers, anyOf, oneOf (as anyOf: exclusivity is not
//   enforced), allOf with one schema, $ref to #, #/$defs/… and
//   #/definitions/…. Annotations are ignored: title, description, default,
//   examples, $schema, $id, $comment, deprecated, readOnly, writeOnly.
//   Anything else is an error naming the keyword and where it is
//   (ErrorReason::kUnsupportedValue): a schema the grammar cannot enforce is
//   refused rather than silently loosened.
//
// Objects with `properties` get those properties only (additional ones are
// never generated: valid whatever additionalProperties says); an object
// schema with neither properties nor additionalProperties takes any members.
// The text generated: properties in the schema's order (required ones always,
// optional ones may be left out), with at most a little whitespace after
// `{ [ , :` and after values (none before the first `{`-level value but an
// optional leading run, none after the top-level value), so the output is
// what a JSON parser reads and a model trained on JSON writes. Numbers are
// bounded in length (19 integer digits, 17 fraction digits, 3 exponent
// digits) so a weak model cannot run on forever inside one.
//
// Thread-safe (pure functions).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "grammar/grammar.h"

namespace boost::json {
class value;
}

namespace zl::grammar {

// Shared pieces of JSON text grammar, made once per builder on demand.
class JsonRules {
 public:
  explicit JsonRules(GrammarBuilder& b) : b_(b) {}
  GrammarBuilder& builder() { return b_; }
  uint32_t ws();           // optional whitespace: "", " ", or "\n" then up to 32 spaces/tabs
  uint32_t string_char();  // one character of a string's content (escapes included)
  uint32_t multibyte_char();  // one well-formed non-ASCII UTF-8 character
  uint32_t string();       // a JSON string
  uint32_t number();
  uint32_t integer();
  uint32_t value();        // any JSON value
  uint32_t object();       // any JSON object
  uint32_t object_of(uint32_t value_rule);  // a new rule: objects with any keys, values of value_rule

 private:
  GrammarBuilder::Seq list(char open, const GrammarBuilder::Seq& item, char close);

  GrammarBuilder& b_;
  int64_t ws_ = -1, char_ = -1, multi_ = -1, string_ = -1, number_ = -1, integer_ = -1, value_ = -1, object_ = -1;
};

// The rule for values valid against `schema`, added to `rules`' builder.
// Errors: kUnsupportedValue naming an unsupported keyword; kInvalidValue for
// a malformed schema (a bad $ref, minItems > maxItems, …).
Result<uint32_t> add_json_schema(JsonRules& rules, const boost::json::value& schema);

// How a tool-call syntax spells the arguments object's members when it does
// not write them as a JSON object (Python keyword arguments, Qwen3-Coder's
// <parameter=…> XML): the top-level object's members, in the schema's
// order as for JSON, each `key_open NAME key_close VALUE value_close`,
// `separator` between them, `open` / `close` around them all. Values below
// the top level are JSON. `spaces`: JSON whitespace may follow `open` and
// each separator. `raw_string_stops` non-empty: a top-level string member is
// written as raw text (no quotes, no escapes) that never contains one of
// these texts (the syntax's closing tags); a string schema with
// minLength/maxLength/pattern is then unsupported (it cannot be enforced
// on raw text), an enum/const of strings is its raw values. Object schemas
// without properties take any member names: Python identifiers, or for raw
// strings identifiers with '-' and '.'. A property name the syntax cannot
// write (not an identifier for keyword arguments; empty, or holding '<',
// '>', a line end or a closing text for raw strings) is kUnsupportedValue.
struct MemberStyle {
  std::string open, close;
  std::string key_open, key_close;
  std::string value_close;
  std::string separator;
  bool spaces = false;
  std::vector<std::string> raw_string_stops;
};

// The rule for the members of an object valid against `schema`, written in
// `style`. The schema must be an object schema at the top (type object or
// properties; not $ref, anyOf, enum…): else kUnsupportedValue.
Result<uint32_t> add_json_schema_members(JsonRules& rules, const boost::json::value& schema, const MemberStyle& style);

// Raw text (printable ASCII, tab, newline, CR, well-formed UTF-8) that never
// contains one of `stops` (each non-empty).
uint32_t add_text_avoiding(JsonRules& rules, const std::vector<std::string>& stops);

// Whole grammars: optional leading whitespace, then one value, then nothing.
Result<std::shared_ptr<const Grammar>> compile_json_schema_value(const boost::json::value& schema);
Result<std::shared_ptr<const Grammar>> compile_json_schema(std::string_view schema_json);
std::shared_ptr<const Grammar> json_object_grammar();  // any JSON object (response_format json_object)

// JSON text of `s` as a JSON string literal (quotes included, minimal escapes).
std::string json_quote(std::string_view s);

}  // namespace zl::grammar
