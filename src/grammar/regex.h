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
// kMaxRepeat, and nested ones up to kMaxRepeat in all, their counts
// multiplied ((x{0,10}){0,100} is 1000; a loop, * or +, counts once): each
// nesting multiplies the parse stacks that the matcher carries through every
// byte. Thread-safe (pure function).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "core/status.h"
#include "grammar/json_schema.h"

namespace zl::grammar {

inline constexpr size_t kMaxPatternBytes = 4096;
inline constexpr int64_t kMaxRepeat = 1000;

Result<uint32_t> add_regex(JsonRules& rules, std::string_view pattern);

// Text that matches `pattern` as a whole, as it is (vLLM's guided_regex): the
// same regex support, without JSON escaping (`"` and `\` are plain
// characters; control characters other than \t \n \r are never generated).
Result<std::shared_ptr<const Grammar>> compile_text_regex(std::string_view pattern);

// Exactly one of `choices` (vLLM's guided_choice): non-empty strings, up to
// kMaxChoiceBytes in all; kInvalidValue for an empty list or choice.
inline constexpr size_t kMaxChoiceBytes = 1 << 16;
Result<std::shared_ptr<const Grammar>> compile_text_choice(std::span<const std::string> choices);

}  // namespace zl::grammar
