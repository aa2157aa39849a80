// libFuzzer target fuzz_gbnf: the GBNF compiler and the matcher
// (grammar/gbnf.h, grammar/matcher.h) on arbitrary grammars, as a client may
// send them (llama-server's `grammar`, vLLM's `guided_grammar`).
// Input: a grammar (bytes up to the first NUL), then bytes that drive a walk
// through it: each picks one of the bytes the state takes, until the grammar
// is complete or the input ends.
// Invariants: compiling never crashes and fails only with unsupported_value
// or invalid_value; a walk never reaches a state that takes no byte unless
// it is complete (no dead ends: classes are never empty, endless rules and
// left recursion are refused) -- short of the matcher's node bound; every
// byte string walked is well-formed UTF-8 once complete.
#include <string>

#include "core/utf8.h"
#include "fuzz/fuzz_target.h"
#include "fuzz/grammar_walk.h"
#include "grammar/gbnf.h"
#include "grammar/matcher.h"

ZL_FUZZ_TARGET(fuzz_gbnf) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string text = input.substr(0, nul);
  const std::string walk = nul == std::string::npos ? std::string() : input.substr(nul + 1);
  auto g = zl::grammar::compile_gbnf(text);
  if (!g.ok()) {
    FUZZ_CHECK(g.status().reason() == zl::ErrorReason::kUnsupportedValue ||
               g.status().reason() == zl::ErrorReason::kInvalidValue);
    return 0;
  }
  zl::grammar::Matcher m(*g);
  const std::string out = zl::fuzz::walk_grammar(
      m, walk, [](const zl::grammar::Matcher& s) { return s.n_nodes() >= zl::grammar::Matcher::kMaxNodes; });
  if (m.accepting()) FUZZ_CHECK(zl::utf8::is_valid(out));
  return 0;
}
