// JSON Schema `pattern` -> grammar: the content of a JSON string (between the
// quotes, as JSON text: `"` and `\` escaped) whose decoded value matches the
// pattern as a whole.
//
// Supported: literals (UTF-8 included), `.`, classes `[a-z_]` / `[^…]` over
// ASCII (a negated class also admits every non-ASCII character), the escapes
// \d \w \s \D \W \S \. \\ \/ \- \t \n etc., groups `( )` and `(?: )`,
// alternation `|`, quantifiers `* + ? {n} {n,} {n,m}` (a lazy `?` after them
// changes nothing for generation), and `^` / `$` at the ends (the match is
// whole either way: a generated string is exactly a match, never a string
// that merely contains one). Back-references, look-arounds, named groups,
// \b, Unicode classes: an error naming them (kUnsupportedValue). Control
// characters other than \t \n \r are never generated.
//
// Limits: patterns up to kMaxPatternBytes, counted repetitions up to
// kMaxRepeat. Thread-safe (pure function).
#pragma once

#include <string_view>

#include "core/status.h"
#include "grammar/json_schema.h"

namespace zl::grammar {

inline constexpr size_t kMaxPatternBytes = 4096;
inline constexpr int64_t kMaxRepeat = 1000;

Result<uint32_t> add_regex(JsonRules& rules, std::string_view pattern);

}  // namespace zl::grammar
