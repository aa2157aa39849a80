// Stop strings, matched on detokenized text as it streams.
//
// feed() takes each text delta and returns the part that is safe to emit now. Text that could
// still be the beginning of a stop string is held back until the following text rules that
// out; a matched stop string is never emitted, nor anything after it. At the end of a
// generation that did not stop on a string, flush() releases what is still held.
//
// Matching is an Aho-Corasick automaton over bytes, so the state after each byte is the longest
// suffix of the text so far that is a prefix of some stop string: that suffix is exactly what
// must be held back. With overlapping stop strings, the first one to be complete wins (ties:
// the longer one), which lets a stream stop as soon as any stop string has appeared.
//
// UTF-8: with valid UTF-8 deltas and stop strings, every hold-back boundary is a character
// boundary (a held suffix starts where a stop string starts); emitted text is additionally cut
// back to a character boundary, so it is valid UTF-8 even for odd stop strings.
//
// Costs: construction O(total stop bytes); feed() O(held + delta) amortized, independent of the
// number of stop strings; held text is shorter than the longest stop string.
// Thread-safety: none; one matcher per sequence.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zl {

struct StopFeed {
  std::string text;               // safe to emit now (possibly empty)
  std::optional<size_t> stop;     // set when a stop string matched: its index in the list
};

class StopMatcher {
 public:
  // Empty strings in the list are ignored (they never match).
  explicit StopMatcher(std::vector<std::string> stop_strings = {});

  // Feeds the next delta. After a match, returns empty results and ignores further input.
  StopFeed feed(std::string_view delta);
  // Returns the held-back text (none after a match) and resets the hold.
  std::string flush();

  bool has_stops() const { return nodes_.size() > 1; }
  bool stopped() const { return matched_.has_value(); }
  std::optional<size_t> matched_index() const { return matched_; }
  // The stop string that matched; empty when none did.
  const std::string& matched() const;
  const std::string& held() const { return held_; }
  const std::vector<std::string>& stop_strings() const { return stops_; }

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> next;  // trie edges, sorted by byte
    int32_t fail = 0;         // longest proper suffix that is also a trie node
    int32_t depth = 0;        // bytes from the root
    int32_t match = -1;       // longest stop string that ends here (via fail links), or -1
  };
  int32_t child(int32_t node, uint8_t byte) const;   // trie edge or -1
  int32_t step(int32_t node, uint8_t byte) const;    // automaton transition

  std::vector<std::string> stops_;
  std::vector<Node> nodes_;    // nodes_[0] is the root
  int32_t state_ = 0;
  std::string held_;
  std::optional<size_t> matched_;
};

}  // namespace zl
