// Internal to the guard: the compiled matchers and the one scanning pass
// that Guard::scan, redact, screen_input and the StreamRedactor share.
//
// The pass (design, see guard.h for the user-visible rules): positions are
// the starts of normalisation segments of the view; at each, every active
// matcher offers its longest match and the longest offer wins; a match
// ends at a segment end. In streaming mode (eof = false) the pass stops at
// the hold position H: the earliest position at which some active matcher
// could still produce or lengthen a match if text were appended. Before H
// every offer is final, so the matches chosen before H, and the position
// where the pass rests, are exactly those of a pass over the whole text.
// The pass keeps no state but its position, so it can resume at any
// position where it rested, given the code point before it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "guard/guard.h"
#include "guard/normalize.h"
#include "guard/phrases.h"
#include "guard/regex.h"

namespace zl::guard {

class Matchers {
 public:
  struct Pii {
    uint32_t rule;
    PiiKind kind;
  };
  struct Regex {
    uint32_t rule;
    BoundedRegex re;
  };
  std::vector<Pii> pii;        // rule order
  PhraseSet phrases;           // every rule's phrases
  std::vector<Regex> regexes;  // rule order
  std::vector<size_t> phrase_max;  // per rule: longest normalised phrase (0: none)
};

// A match in view offsets, before mapping back to the original.
struct ViewMatch {
  uint32_t rule;
  MatcherType type;
  PiiKind pii;
  size_t begin, end;
};

struct PassResult {
  std::vector<ViewMatch> matches;
  size_t rest = 0;  // view position where the pass stopped (a segment start, or the end)
};

// active[r]: rule r takes part. from: a resting position (segment start).
PassResult scan_pass(const Matchers& m, const NormalizedText& view, size_t from, const std::vector<char>& active,
                     bool eof);

// Rules taking part in a direction (see guard.h); for kOutput, mask rules
// only when `with_mask`.
std::vector<char> active_rules(const Policy& policy, Direction direction, bool with_mask = true);

// View matches to original matches (offsets + `base` subtracted).
std::vector<Match> to_original(const NormalizedText& view, const std::vector<ViewMatch>& matches, size_t base);

}  // namespace zl::guard
