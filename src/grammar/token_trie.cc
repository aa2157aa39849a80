#include "grammar/token_trie.h"

#include <algorithm>
#include <numeric>

namespace zl::grammar {

TokenTrie::TokenTrie(std::span<const std::string> pieces) : n_vocab_(static_cast<int32_t>(pieces.size())) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (!pieces[i].empty() && pieces[i].size() <= kMaxTokenBytes) ids.push_back(static_cast<int32_t>(i));
  }
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    const int c = pieces[a].compare(pieces[b]);
    return c < 0 || (c == 0 && a < b);
  });
  tokens_.reserve(ids.size());
  build(pieces, ids, 0, ids.size(), 0, 0);
  states_.resize(kMaxTokenBytes + 2);
}

// The node for the sorted ids [lo, hi) sharing their first `depth` bytes,
// then its subtree, depth first (recursion depth <= kMaxTokenBytes).
uint32_t TokenTrie::build(std::span<const std::string> pieces, const std::vector<int32_t>& ids, size_t lo, size_t hi,
                          size_t depth, uint8_t byte) {
  const auto node = static_cast<uint32_t>(nodes_.size());
  nodes_.push_back({.first_token = static_cast<uint32_t>(tokens_.size()), .byte = byte});
  size_t i = lo;
  while (i < hi && pieces[ids[i]].size() == depth) tokens_.push_back(ids[i++]);
  nodes_[node].n_tokens = static_cast<uint32_t>(tokens_.size()) - nodes_[node].first_token;
  uint32_t prev = 0;
  ByteSet below;
  while (i < hi) {
    const auto b = static_cast<uint8_t>(pieces[ids[i]][depth]);
    size_t j = i;
    while (j < hi && static_cast<uint8_t>(pieces[ids[j]][depth]) == b) ++j;
    const uint32_t child = build(pieces, ids, i, j, depth + 1, b);
    if (prev != 0) nodes_[prev].next_sibling = child;
    prev = child;
    below.add(b);
    below.add(nodes_[child].below);
    i = j;
  }
  nodes_[node].has_children = prev != 0;
  nodes_[node].below = below;
  nodes_[node].subtree_end = static_cast<uint32_t>(tokens_.size());
  return node;
}

void TokenTrie::walk(Matcher& m, uint32_t node, size_t depth, std::span<uint64_t> allowed) const {
  const Matcher::State& from = states_[depth];
  Matcher::State& to = states_[depth + 1];
  auto allow = [&](uint32_t first, uint32_t end) {
    for (uint32_t t = first; t < end; ++t) allowed[tokens_[t] >> 6] |= uint64_t{1} << (tokens_[t] & 63);
  };
  for (uint32_t c = nodes_[node].has_children ? node + 1 : 0; c != 0; c = nodes_[c].next_sibling) {
    const Node& child = nodes_[c];
    if (!m.may_take(from, child.byte)) continue;
    m.step(from, child.byte, to);
    if (to.empty()) continue;
    if (!child.has_children) {
      allow(child.first_token, child.first_token + child.n_tokens);
      continue;
    }
    const ByteSet& loops = m.self_loops(to);
    bool all_loop = true;
    for (int w = 0; w < 4; ++w) all_loop &= (child.below.bits[w] & ~loops.bits[w]) == 0;
    if (all_loop) {
      allow(child.first_token, child.subtree_end);  // every continuation stays in this state
      continue;
    }
    allow(child.first_token, child.first_token + child.n_tokens);
    walk(m, c, depth + 1, allowed);
  }
}

void TokenTrie::fill_allowed(Matcher& m, std::span<uint64_t> allowed) const {
  std::fill(allowed.begin(), allowed.end(), 0);
  states_[0] = m.state();
  walk(m, 0, 0, allowed);
}

std::span<const uint64_t> TokenMasker::allowed(Matcher& m) {
  if (auto it = cache_.find(m.state()); it != cache_.end()) {
    truncated_ = it->second.truncated;
    return it->second.bits;
  }
  const size_t n_words = (static_cast<size_t>(trie_->n_vocab()) + 63) / 64;
  if ((cache_.size() + 1) * n_words * 8 > kMaxCachedBytes) cache_.clear();
  std::vector<uint64_t> bits(n_words);
  m.start_budget(kMaxMaskWork);
  trie_->fill_allowed(m, bits);
  truncated_ = m.budget_spent();
  max_walk_work_ = std::max(max_walk_work_, m.work());
  m.end_budget();
  ++n_walks_;
  n_cut_walks_ += truncated_ ? 1 : 0;
  return cache_.emplace(m.state(), Mask{std::move(bits), truncated_}).first->second.bits;
}

}  // namespace zl::grammar
