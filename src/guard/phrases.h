// Literal phrases of every rule in one Aho-Corasick automaton over the bytes
// of the normalised view, as a full DFA over byte classes (bytes that occur
// in no phrase share one class): one table lookup per byte.
//
// Memory: (trie nodes) x (distinct phrase bytes + 1) x 4 bytes; 1000
// phrases of ~15 bytes take a few MB. Thread-safety: immutable after
// build(); scan() may run concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zl::guard {

class PhraseSet {
 public:
  struct Occurrence {
    size_t start;  // view offset
    size_t len;
    uint32_t rule;
  };

  // Adds a normalised, non-empty phrase for `rule`. Before build() only.
  void add(std::string_view normalized, uint32_t rule);
  void build();

  bool empty() const { return n_phrases_ == 0; }
  size_t max_len() const { return max_len_; }

  // Every occurrence of a phrase that starts at or after `from` in v, in
  // end order (appended to *out). Returns the length of the longest suffix
  // of v[from, end) that is a prefix of some phrase: a phrase occurrence can
  // still start at end - that, but nowhere earlier, once more text comes.
  size_t scan(std::string_view v, size_t from, std::vector<Occurrence>* out) const;

 private:
  struct Node {
    int32_t fail = 0;
    int32_t dict = -1;         // nearest node on the fail chain with outputs
    uint32_t depth = 0;
    std::vector<uint32_t> rules;  // phrases ending exactly here
  };
  std::vector<Node> nodes_{Node{}};
  std::vector<int32_t> trie_;   // build: child per (node, byte class), -1 none; after: the DFA
  uint8_t byte_class_[256] = {};
  int n_classes_ = 1;           // class 0: bytes in no phrase
  size_t n_phrases_ = 0;
  size_t max_len_ = 0;
  std::vector<std::pair<std::string, uint32_t>> pending_;
};

}  // namespace zl::guard
