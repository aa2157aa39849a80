// GBNF text -> Grammar: llama.cpp's grammar format (llama-server's `grammar`,
// vLLM's `guided_grammar`), the answer being text the grammar's `root` rule
// matches as a whole.
//
// Supported, as llama.cpp's grammars/README.md defines it:
//   rules `name ::= alternatives`, names of letters, digits, `-` and `_`,
//   used before or after their definition; `|` alternatives, sequences,
//   groups `( … )`; string literals "…" and character classes […] / [^…]
//   with ranges a-z, over Unicode code points (generated as well-formed
//   UTF-8; a negated class is every code point not listed, surrogates
//   excluded); `.` any code point (newline included, as in llama.cpp);
//   repetitions * + ? {m} {m,} {m,n} {,n}; escapes \n \r \t \\ \" \[ \] \-
//   \xHH \uHHHH \UHHHHHHHH (code points); `#` comments to the end of the
//   line. A rule ends at the end of its line, except inside a group and after
//   `|` or `::=`.
// Refused:
//   kInvalidValue, with the line and column: a syntax error (saying what was
//   expected), an unknown escape, a rule defined twice, a reference to an
//   undefined rule, no `root` rule, a class that matches nothing, a code point
//   UTF-8 cannot encode (a surrogate, above U+10FFFF), left recursion (a rule
//   that can reach itself before matching a character, directly, through
//   other rules or through a prefix that may be empty: the matcher cannot run
//   it; llama.cpp refuses it too), a rule that can never finish (every
//   alternative needs itself again: nothing would end the output).
//   kUnsupportedValue: llama.cpp's token syntax (<[id]>, <text>, !<…>), and
//   the limits: the text up to kMaxGbnfBytes, groups nested up to
//   kMaxGbnfDepth, repetition counts up to kMaxRepeat (grammar/regex.h), the
//   expanded grammar up to GrammarBuilder::kMaxSyms symbols.
// The grammar is built bounded (Grammar::bounded): a client's grammar may be
// ambiguous enough to make the parses the matcher follows grow exponentially.
//
// Costs: O(text + expanded grammar). Thread-safe (pure function).
#pragma once

#include <memory>
#include <string_view>

#include "core/status.h"
#include "grammar/grammar.h"

namespace zl::grammar {

inline constexpr size_t kMaxGbnfBytes = 64 << 10;
inline constexpr int kMaxGbnfDepth = 64;

Result<std::shared_ptr<const Grammar>> compile_gbnf(std::string_view text);

}  // namespace zl::grammar
