// Aho-Corasick (guard/phrases.h): trie, breadth-first failure links, then
// every missing transition filled from the failure node (a DFA).
#include "guard/phrases.h"

#include <algorithm>
#include <deque>

#include "core/check.h"

namespace zl::guard {

void PhraseSet::add(std::string_view normalized, uint32_t rule) {
  CHECK(!normalized.empty());
  pending_.emplace_back(std::string(normalized), rule);
}

void PhraseSet::build() {
  for (const auto& [p, rule] : pending_) {
    for (unsigned char c : p) {
      if (byte_class_[c] == 0) byte_class_[c] = static_cast<uint8_t>(n_classes_++);
    }
  }
  CHECK(n_classes_ <= 256);
  trie_.assign(n_classes_, -1);
  for (const auto& [p, rule] : pending_) {
    int32_t node = 0;
    for (unsigned char c : p) {
      int32_t& child = trie_[node * n_classes_ + byte_class_[c]];
      if (child < 0) {
        child = static_cast<int32_t>(nodes_.size());
        nodes_.push_back({.depth = nodes_[node].depth + 1});
        trie_.resize(nodes_.size() * n_classes_, -1);
      }
      node = trie_[node * n_classes_ + byte_class_[c]];
    }
    auto& rules = nodes_[node].rules;
    if (std::find(rules.begin(), rules.end(), rule) == rules.end()) rules.push_back(rule);
    max_len_ = std::max(max_len_, p.size());
    ++n_phrases_;
  }
  pending_.clear();
  std::deque<int32_t> queue;
  for (int c = 0; c < n_classes_; ++c) {
    int32_t& child = trie_[c];
    if (child < 0) {
      child = 0;
    } else {
      nodes_[child].fail = 0;
      queue.push_back(child);
    }
  }
  while (!queue.empty()) {
    const int32_t node = queue.front();
    queue.pop_front();
    const int32_t f = nodes_[node].fail;
    nodes_[node].dict = !nodes_[f].rules.empty() ? f : nodes_[f].dict;
    for (int c = 0; c < n_classes_; ++c) {
      int32_t& child = trie_[node * n_classes_ + c];
      if (child < 0) {
        child = trie_[f * n_classes_ + c];
      } else {
        nodes_[child].fail = trie_[f * n_classes_ + c];
        queue.push_back(child);
      }
    }
  }
}

size_t PhraseSet::scan(std::string_view v, size_t from, std::vector<Occurrence>* out) const {
  if (n_phrases_ == 0) return 0;
  int32_t node = 0;
  for (size_t i = from; i < v.size(); ++i) {
    node = trie_[node * n_classes_ + byte_class_[static_cast<unsigned char>(v[i])]];
    for (int32_t n = nodes_[node].rules.empty() ? nodes_[node].dict : node; n > 0; n = nodes_[n].dict) {
      for (uint32_t rule : nodes_[n].rules) out->push_back({i + 1 - nodes_[n].depth, nodes_[n].depth, rule});
    }
  }
  return nodes_[node].depth;
}

}  // namespace zl::guard
