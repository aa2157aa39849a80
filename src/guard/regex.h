// Bounded regular expressions for guard rules: a small Thompson-NFA engine
// whose patterns have a known longest match, which the stream redactor's
// hold-back needs (std::regex and RE2 cannot say whether a prefix is still
// alive at the end of the text; this engine can).
//
// Syntax: literals, `.`, classes `[a-z0-9_]` `[^...]`, escapes \d \D \w \W
// \s \S \n \t \r and escaped punctuation, groups `( )` `(?: )`,
// alternation `|`, quantifiers `?` `{n}` `{n,m}` (m <= 1000; a trailing
// lazy `?` is accepted and changes nothing: matches are longest). Rejected
// at load: `*`, `+`, `{n,}` (unbounded), anchors, backreferences,
// lookaround, a pattern that can match the empty string, a longest match
// over kMaxRegexBytes, an expansion over kMaxRegexStates states.
//
// Matching is on the normalised view (case folded): letters in the pattern
// are folded too, so patterns are case-insensitive ("TICKET-[0-9]{6}"
// matches "ticket-123456" and "ＴＩＣＫＥＴ-123456").
//
// Thread-safety: a compiled BoundedRegex is immutable; match/live_at_end
// use thread-local scratch space and may run concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace zl::guard {

constexpr size_t kMaxRegexBytes = 1024;
constexpr size_t kMaxRegexStates = 20000;

class BoundedRegex {
 public:
  // InvalidArgument naming the problem: "unbounded quantifier '+' at
  // offset 3 (use {n,m})".
  static Result<BoundedRegex> compile(std::string_view pattern);

  // Longest possible match, in bytes of the view.
  size_t max_len() const { return max_len_; }
  // Length of the longest match of the pattern anchored at v[s] (s at a
  // code point boundary), 0 if none. Cost O(max_len x states).
  size_t match(std::string_view v, size_t s) const;
  // Whether text appended to v could still make a match at s appear or
  // grow (the NFA has a live state at the end of v).
  bool live_at_end(std::string_view v, size_t s) const;
  // The smallest s in [from, v.size()) with `is_start(s)` and
  // live_at_end(v, s), or v.size() if none: one simulation with a thread
  // started at each start position, O((v.size() - from) x states).
  template <typename IsStart>
  size_t earliest_live_start(std::string_view v, size_t from, IsStart is_start) const;

 private:
  struct State {
    enum Op : uint8_t { kSet, kSplit, kMatch } op;
    int32_t out = -1;
    int32_t out2 = -1;   // kSplit
    int32_t set = -1;    // kSet: index into sets_
  };
  using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;  // inclusive, code points
  struct Set {
    Ranges ranges;
    bool negated = false;
    bool contains(uint32_t cp) const;
  };
  friend class RegexCompiler;

  // Runs the NFA from s; returns the longest match and whether a state is
  // alive at the end of v.
  std::pair<size_t, bool> run(std::string_view v, size_t s) const;
  // earliest_live_start's simulation; starts[i] says whether a thread
  // starts at v[from + i].
  size_t earliest_live(std::string_view v, size_t from, const std::vector<char>& starts) const;

  std::vector<State> states_;
  std::vector<Set> sets_;
  int32_t start_ = -1;
  size_t max_len_ = 0;
};

template <typename IsStart>
size_t BoundedRegex::earliest_live_start(std::string_view v, size_t from, IsStart is_start) const {
  std::vector<char> starts(v.size() > from ? v.size() - from : 0);
  for (size_t i = 0; i < starts.size(); ++i) starts[i] = is_start(from + i) ? 1 : 0;
  return earliest_live(v, from, starts);
}

}  // namespace zl::guard
