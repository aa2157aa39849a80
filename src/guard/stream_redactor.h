// The output side of the guard on a stream of text deltas: releases only
// bytes that can no longer be part of a match, with matches replaced by
// their placeholders.
//
// Contract (tests/unit/guard_stream_test.cc checks it on random splits):
//   - the concatenation of everything feed() and finish() release equals
//     guard.redact(whole text, Direction::kOutput) (up to a stop, below);
//   - no released byte belongs to a match: text that could still be the
//     start of a match is held back until it completes one (then the
//     placeholder is released) or can no longer match (then it is released);
//   - stop rules: when a match of a rule with output = stop becomes certain,
//     feed() releases the text before it (earlier redactions applied), sets
//     `stop`, and every later call releases nothing. The caller ends the
//     generation (FinishReason::kSafety).
//
// Hold-back bound: at most max_match_bytes(kOutput) bytes of the normalised
// view (plus the last character, which a combining mark could still change,
// and an incomplete UTF-8 sequence). Zero-width characters have no view
// bytes, so held original bytes can exceed the bound by those. Text that no
// matcher could be starting is released at once.
//
// Cost per feed: O(held bytes + delta) normalisation and scanning.
// Thread-safety: one StreamRedactor per stream; not thread-safe. It keeps
// the Guard alive.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "guard/guard.h"

namespace zl::guard {

struct StreamOptions {
  // Also redact phrases of rules with output = mask (the sampler masks them;
  // this is a second line for text the sampler did not produce).
  bool redact_mask_rules = true;
};

struct Release {
  std::string text;                 // what may leave the process now
  std::vector<Match> matches;       // matches decided in this call; offsets in bytes fed so far
  std::optional<Match> stop;        // set once: a stop rule matched at stop->start; nothing after it is released
};

class StreamRedactor {
 public:
  explicit StreamRedactor(std::shared_ptr<const Guard> guard, StreamOptions options = {});

  // Appends a delta (any bytes; a UTF-8 sequence may be split across
  // deltas) and returns what can be released now.
  Release feed(std::string_view delta);
  // End of the stream: releases everything still held (with matches decided
  // against the end of text).
  Release finish();

  bool stopped() const { return stopped_; }
  // Bytes fed but not yet released (or dropped by a stop).
  size_t held_bytes() const { return pending_.size(); }

 private:
  Release step(bool eof);

  std::shared_ptr<const Guard> guard_;
  StreamOptions options_;
  std::vector<char> active_;  // rules taking part (scan.h active_rules)
  std::string context_;   // the last released original bytes (left context for boundaries)
  std::string pending_;   // original bytes fed, not yet released
  size_t pending_offset_ = 0;  // stream offset of pending_[0]
  bool stopped_ = false;
};

}  // namespace zl::guard
