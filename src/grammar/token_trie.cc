#include "grammar/token_trie.h"

#include <algorithm>
#include <numeric>

namespace zl::grammar {

TokenTrie::TokenTrie(std::span<const std::string> pieces) : n_vocab_(static_cast<int32_t>(pieces.size())) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (!pieces[i].empty() && pieces[i].size() <= kMaxTokenBytes) ids.push_back(static_cast<int32_t>(i));
  }
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return pieces[a] < pieces[b] || (pieces[a] == pieces[b] && a < b); });
  // Breadth-first over ranges of the sorted ids: the children of a node are
  // the runs of equal byte at `depth`, made contiguous.
  struct Pending {
    uint32_t node;
    size_t lo, hi, depth;
  };
  nodes_.push_back({});
  std::vector<Pending> queue{{0, 0, ids.size(), 0}};
  for (size_t q = 0; q < queue.size(); ++q) {
    const Pending p = queue[q];
    size_t i = p.lo;
    nodes_[p.node].first_token = static_cast<uint32_t>(tokens_.size());
    while (i < p.hi && pieces[ids[i]].size() == p.depth) tokens_.push_back(ids[i++]);
    nodes_[p.node].n_tokens = static_cast<uint32_t>(tokens_.size()) - nodes_[p.node].first_token;
    nodes_[p.node].first_child = static_cast<uint32_t>(nodes_.size());
    while (i < p.hi) {
      const auto byte = static_cast<uint8_t>(pieces[ids[i]][p.depth]);
      size_t j = i;
      while (j < p.hi && static_cast<uint8_t>(pieces[ids[j]][p.depth]) == byte) ++j;
      const auto child = static_cast<uint32_t>(nodes_.size());
      nodes_.push_back({.byte = byte});
      queue.push_back({child, i, j, p.depth + 1});
      i = j;
    }
    nodes_[p.node].n_children = static_cast<uint32_t>(nodes_.size()) - nodes_[p.node].first_child;
  }
  states_.resize(kMaxTokenBytes + 2);
}

void TokenTrie::walk(Matcher& m, uint32_t node, size_t depth, std::span<uint64_t> allowed) const {
  const Node& n = nodes_[node];
  const Matcher::State& from = states_[depth];
  Matcher::State& to = states_[depth + 1];
  for (uint32_t c = n.first_child; c < n.first_child + n.n_children; ++c) {
    const Node& child = nodes_[c];
    if (!m.may_take(from, child.byte)) continue;
    m.step(from, child.byte, to);
    if (to.empty()) continue;
    for (uint32_t t = child.first_token; t < child.first_token + child.n_tokens; ++t) {
      const int32_t id = tokens_[t];
      allowed[id >> 6] |= uint64_t{1} << (id & 63);
    }
    if (child.n_children > 0) walk(m, c, depth + 1, allowed);
  }
}

void TokenTrie::fill_allowed(Matcher& m, std::span<uint64_t> allowed) const {
  std::fill(allowed.begin(), allowed.end(), 0);
  states_[0] = m.state();
  walk(m, 0, 0, allowed);
}

size_t TokenMasker::StateHash::operator()(const Matcher::State& s) const {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ s.size();
  for (uint32_t v : s) h = (h ^ v) * 0x100000001B3ull + (h >> 29);
  return static_cast<size_t>(h);
}

std::span<const uint64_t> TokenMasker::allowed(Matcher& m) {
  if (auto it = cache_.find(m.state()); it != cache_.end()) return it->second;
  const size_t n_words = (static_cast<size_t>(trie_->n_vocab()) + 63) / 64;
  if ((cache_.size() + 1) * n_words * 8 > kMaxCachedBytes) cache_.clear();
  std::vector<uint64_t> bits(n_words);
  trie_->fill_allowed(m, bits);
  ++n_walks_;
  return cache_.emplace(m.state(), std::move(bits)).first->second;
}

}  // namespace zl::grammar
