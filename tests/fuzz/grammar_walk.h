// What the grammar fuzz targets share: a walk through a grammar that the
// fuzzer's bytes drive.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_target.h"
#include "grammar/matcher.h"

namespace zl::fuzz {

// The bytes of a walk through `m` from its state: each byte of `picks` picks
// one of the bytes the state takes, until the state is complete and the
// pick is odd, or the picks run out. The bytes a state takes are those
// step() takes (may_take() only looks at the stacks' top sets: a byte there
// may still lead nowhere once the stack unwinds). Checks on the way that a
// state that is not complete takes some byte, unless dead_end_ok(m).
template <typename DeadEndOk>
std::string walk_grammar(grammar::Matcher& m, std::string_view picks, DeadEndOk dead_end_ok) {
  std::string text;
  for (unsigned char pick : picks) {
    if (m.accepting() && (pick & 1)) break;
    std::vector<uint8_t> next;
    grammar::Matcher::State to;
    for (int b = 0; b < 256; ++b) {
      if (!m.may_take(m.state(), static_cast<uint8_t>(b))) continue;
      m.step(m.state(), static_cast<uint8_t>(b), to);
      if (!to.empty()) next.push_back(static_cast<uint8_t>(b));
    }
    FUZZ_CHECK(!next.empty() || m.accepting() || dead_end_ok(m));
    if (next.empty()) break;
    const uint8_t b = next[pick % next.size()];
    FUZZ_CHECK(m.advance(b));
    text.push_back(static_cast<char>(b));
  }
  return text;
}

}  // namespace zl::fuzz
