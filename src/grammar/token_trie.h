// Token masks from a grammar state: which tokens of a vocabulary the grammar
// accepts next, whole.
//
// The vocabulary's token byte strings are stored once as a trie (built when
// the first constrained request arrives, shared by all). A mask is a depth-
// first walk of the trie carrying the grammar state reached by each prefix:
// a prefix the grammar refuses prunes its whole subtree, so a state that
// allows few tokens (after `{`: `"`, whitespace, `}`) costs a few hundred
// steps, not one per token. A state that allows most tokens (inside a free
// string) walks most of the trie once; the mask is then cached per state
// (TokenMasker), and such states recur at every token of the string. And a
// subtree whose bytes all loop back to the state reached at its root (the
// string's content characters) is taken whole without walking it
// (Matcher::self_loops, Node::below). The per-step cost after the first
// visit to a state is one hash lookup.
//
// Tokens with an empty byte string (control tokens: BOS, EOS, chat markup)
// are never allowed by the walk; the caller decides about end-of-sequence
// (the grammar's accepting()).
// Thread-safety: a TokenTrie is immutable after construction (share it); a
// TokenMasker belongs to one sequence.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/matcher.h"

namespace zl::grammar {

class TokenTrie {
 public:
  // Tokens longer than this many bytes are never allowed (none exist in
  // real vocabularies; the bound keeps the walk's depth fixed).
  static constexpr size_t kMaxTokenBytes = 256;

  // pieces[id]: the bytes token `id` stands for in the output.
  // Cost: O(total bytes · log n) once.
  explicit TokenTrie(std::span<const std::string> pieces);

  int32_t n_vocab() const { return n_vocab_; }
  size_t n_nodes() const { return nodes_.size(); }
  // Sets bit id of `allowed` (n_vocab bits, cleared first) for every token
  // whose bytes `m` accepts from its current state.
  void fill_allowed(Matcher& m, std::span<uint64_t> allowed) const;

 private:
  // Nodes in depth-first order: a node's first child follows it, its
  // siblings are linked, and the tokens of its whole subtree are the range
  // tokens_[first_token, subtree_end).
  struct Node {
    uint32_t next_sibling = 0;  // 0: none
    uint32_t first_token = 0;   // tokens_[first_token .. + n_tokens): ids ending here
    uint32_t n_tokens = 0;
    uint32_t subtree_end = 0;   // end of the subtree's tokens
    bool has_children = false;
    uint8_t byte = 0;
    ByteSet below;  // the bytes of every strict descendant
  };
  uint32_t build(std::span<const std::string> pieces, const std::vector<int32_t>& ids, size_t lo, size_t hi,
                 size_t depth, uint8_t byte);
  void walk(Matcher& m, uint32_t node, size_t depth, std::span<uint64_t> allowed) const;

  int32_t n_vocab_;
  std::vector<Node> nodes_;  // nodes_[0]: the root (empty prefix); children contiguous
  std::vector<int32_t> tokens_;
  mutable std::vector<Matcher::State> states_;  // per depth, scratch of fill_allowed (one caller at a time)
};

// A sequence's masks, cached per grammar state.
class TokenMasker {
 public:
  // Cached masks at most; then the cache starts over.
  static constexpr size_t kMaxCachedBytes = 32 << 20;
  // The matcher's work bound for one mask (Matcher::start_budget): ~8x
  // the largest walk of the schemas in bench/grammar_bench.cc on the 151k
  // qwen2 vocabulary (1.7e7 units, ~35 ms; an enum of 3000 values walks
  // 3.6e7, so enums up to ~10k values fit), ~0.1-0.3 s of the engine thread
  // at most. A walk that reaches it keeps the tokens found so far (a subset
  // of what the grammar allows, possibly none; cached like any mask) and
  // says so (truncated()). Twice the bound measured 0.33 s a token (p99
  // 0.68 s) on a grammar that reaches it at every token: the stall every
  // co-batched sequence would take.
  static constexpr uint64_t kMaxMaskWork = uint64_t{1} << 27;

  explicit TokenMasker(const TokenTrie& trie) : trie_(&trie) {}
  // The allowed tokens (n_vocab bits) for `m`'s current state. The span is
  // valid until the next call.
  std::span<const uint64_t> allowed(Matcher& m);
  size_t n_cached() const { return cache_.size(); }
  int64_t n_walks() const { return n_walks_; }
  // Walks cut at kMaxMaskWork (cached masks not counted again).
  int64_t n_cut_walks() const { return n_cut_walks_; }
  // Whether the last allowed() mask (walked or cached) came from a walk cut
  // at kMaxMaskWork, and the largest matcher work a walk of this masker took.
  bool truncated() const { return truncated_; }
  uint64_t max_walk_work() const { return max_walk_work_; }

 private:
  const TokenTrie* trie_;
  struct Mask {
    std::vector<uint64_t> bits;
    bool truncated;
  };
  std::unordered_map<Matcher::State, Mask, Matcher::StateHash> cache_;
  int64_t n_walks_ = 0;
  int64_t n_cut_walks_ = 0;
  bool truncated_ = false;
  uint64_t max_walk_work_ = 0;
};

}  // namespace zl::grammar
