#include "engine/stop_matcher.h"

#include <algorithm>
#include <deque>

#include "core/utf8.h"

namespace zl {

using utf8::is_continuation;

StopMatcher::StopMatcher(std::vector<std::string> stop_strings) : stops_(std::move(stop_strings)) {
  nodes_.emplace_back();
  // The trie.
  for (size_t i = 0; i < stops_.size(); ++i) {
    const std::string& s = stops_[i];
    if (s.empty()) continue;
    int32_t node = 0;
    for (char ch : s) {
      const auto byte = static_cast<uint8_t>(ch);
      int32_t next = child(node, byte);
      if (next < 0) {
        next = static_cast<int32_t>(nodes_.size());
        Node n;
        n.depth = nodes_[node].depth + 1;
        nodes_.push_back(std::move(n));
        auto& edges = nodes_[node].next;
        edges.insert(std::lower_bound(edges.begin(), edges.end(), std::make_pair(byte, int32_t{0})),
                     {byte, next});
      }
      node = next;
    }
    // Duplicates keep the first index: the first listed string is the one reported.
    if (nodes_[node].match < 0) nodes_[node].match = static_cast<int32_t>(i);
  }
  // Failure links, breadth first; a node's match falls back to its failure node's (a shorter
  // stop string that ends at the same place).
  std::deque<int32_t> queue;
  for (const auto& [byte, c] : nodes_[0].next) queue.push_back(c);
  while (!queue.empty()) {
    const int32_t node = queue.front();
    queue.pop_front();
    for (const auto& [byte, c] : nodes_[node].next) {
      int32_t f = nodes_[node].fail;
      while (f != 0 && child(f, byte) < 0) f = nodes_[f].fail;
      const int32_t fc = child(f, byte);
      nodes_[c].fail = (fc >= 0 && fc != c) ? fc : 0;
      if (nodes_[c].match < 0) nodes_[c].match = nodes_[nodes_[c].fail].match;
      queue.push_back(c);
    }
  }
}

int32_t StopMatcher::child(int32_t node, uint8_t byte) const {
  const auto& edges = nodes_[node].next;
  auto it = std::lower_bound(edges.begin(), edges.end(), std::make_pair(byte, int32_t{0}));
  return (it != edges.end() && it->first == byte) ? it->second : -1;
}

int32_t StopMatcher::step(int32_t node, uint8_t byte) const {
  for (;;) {
    const int32_t c = child(node, byte);
    if (c >= 0) return c;
    if (node == 0) return 0;
    node = nodes_[node].fail;
  }
}

StopFeed StopMatcher::feed(std::string_view delta) {
  StopFeed out;
  if (matched_) return out;
  if (!has_stops()) {
    out.text = delta;
    return out;
  }
  std::string buf = std::move(held_);
  held_.clear();
  const size_t start = buf.size();
  buf.append(delta);
  for (size_t i = start; i < buf.size(); ++i) {
    state_ = step(state_, static_cast<uint8_t>(buf[i]));
    const int32_t m = nodes_[state_].match;
    if (m >= 0) {
      matched_ = static_cast<size_t>(m);
      buf.resize(i + 1 - stops_[m].size());  // drop the stop string and everything after it
      out.text = std::move(buf);
      out.stop = matched_;
      return out;
    }
  }
  // Hold the longest suffix that may still grow into a stop string.
  size_t cut = buf.size() - static_cast<size_t>(nodes_[state_].depth);
  while (cut > 0 && cut < buf.size() && is_continuation(buf[cut])) --cut;
  held_.assign(buf, cut, std::string::npos);
  buf.resize(cut);
  out.text = std::move(buf);
  return out;
}

std::string StopMatcher::flush() {
  std::string out = std::move(held_);
  held_.clear();
  state_ = 0;
  return out;
}

const std::string& StopMatcher::matched() const {
  static const std::string kEmpty;
  return matched_ ? stops_[*matched_] : kEmpty;
}

}  // namespace zl
