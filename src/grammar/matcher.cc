#include "grammar/matcher.h"

#include <algorithm>

namespace zl::grammar {
namespace {

void sort_unique(Matcher::State& s) {
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
}

}  // namespace

Matcher::Matcher(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  nodes_.push_back({.pos = 0, .parent = kNoParent});  // kAccept: never looked up by position
  const Grammar& g = *grammar_;
  expanded_.clear();
  const auto alts = g.alternatives(g.root());
  for (auto it = alts.rbegin(); it != alts.rend(); ++it) todo_.push_back({*it, kNoParent});
  expand(start_);
  sort_unique(start_);
  state_ = start_;
}

uint32_t Matcher::intern(uint32_t pos, uint32_t parent) {
  const uint64_t key = (uint64_t{pos} << 32) | parent;
  auto [it, inserted] = index_.try_emplace(key, static_cast<uint32_t>(nodes_.size()));
  if (inserted) nodes_.push_back({.pos = pos, .parent = parent});
  return it->second;
}

void Matcher::expand_from(uint32_t pos, uint32_t parent, State& out) {
  expanded_.clear();
  todo_.assign(1, {pos, parent});
  expand(out);
}

void Matcher::expand(State& out) {
  const Grammar& g = *grammar_;
  for (size_t n_steps = 0; !todo_.empty() && n_steps < kMaxExpandSteps; ++n_steps) {
    const auto [pos, parent] = todo_.back();
    todo_.pop_back();
    // What an expansion adds depends on (pos, parent) alone: a second visit adds nothing.
    work_ += kExpandWork;
    if (!expanded_.insert((uint64_t{pos} << 32) | parent).second) continue;
    const Sym& s = g.sym(pos);
    switch (s.kind) {
      case Sym::kBytes:
        out.push_back(intern(pos, parent));
        break;
      case Sym::kEnd:
        if (parent == kNoParent) {
          out.push_back(kAccept);
        } else {
          todo_.push_back({nodes_[parent].pos, nodes_[parent].parent});
        }
        break;
      case Sym::kRule: {
        // The continuation is pushed only when something follows (tail calls
        // leave the stack as it is: a right-recursive loop stays flat).
        const uint32_t next = g.sym(pos + 1).kind == Sym::kEnd ? parent : intern(pos + 1, parent);
        // Pushed last first: visited in the grammar's order, as a recursive
        // descent would (the order nodes are made in, their ids).
        const auto alts = g.alternatives(s.value);
        for (auto it = alts.rbegin(); it != alts.rend(); ++it) todo_.push_back({*it, next});
        break;
      }
    }
  }
  todo_.clear();
}

std::pair<uint32_t, uint32_t> Matcher::successors(uint32_t node, uint8_t byte) {
  const uint64_t key = (uint64_t{node} << 8) | byte;
  if (auto it = memo_.find(key); it != memo_.end()) return it->second;
  if (grammar_->bounded() && nodes_.size() >= kMaxNodes) return {0, 0};  // refused, not remembered
  const Node n = nodes_[node];
  scratch_.clear();
  if (grammar_->byte_set(grammar_->sym(n.pos).value).has(byte)) {
    const uint32_t next = n.pos + 1;
    if (grammar_->sym(next).kind == Sym::kEnd && n.parent != kNoParent) {
      const Node p = nodes_[n.parent];
      expand_from(p.pos, p.parent, scratch_);
    } else {
      expand_from(next, n.parent, scratch_);
    }
    sort_unique(scratch_);
  }
  const auto begin = static_cast<uint32_t>(results_.size());
  results_.insert(results_.end(), scratch_.begin(), scratch_.end());
  const std::pair<uint32_t, uint32_t> range{begin, static_cast<uint32_t>(results_.size())};
  memo_.emplace(key, range);
  return range;
}

bool Matcher::may_take(const State& from, uint8_t byte) const {
  work_ += from.size();
  for (uint32_t node : from) {
    if (node == kAccept) continue;
    if (grammar_->byte_set(grammar_->sym(nodes_[node].pos).value).has(byte)) return true;
  }
  return false;
}

void Matcher::step(const State& from, uint8_t byte, State& to) {
  to.clear();
  if (work_ >= work_limit_) return;  // the budget is spent: refused
  work_ += from.size();
  // The union of the sources' successor lists, each node once. The first
  // list is copied as it is (sorted, unique: most steps have one source);
  // from the second on, the lists are merged through marks (O(total
  // length)) and only the union is sorted: an ambiguous grammar's stacks
  // share most successors ((x?){1000} written out, after some x's: ~1000
  // stacks of ~1000 successors each), and concatenating and sorting them
  // all cost ~50 ms a byte there.
  bool marking = false;
  for (uint32_t node : from) {
    // The top's byte set first: most stacks of a state refuse most bytes.
    if (node == kAccept || !grammar_->byte_set(grammar_->sym(nodes_[node].pos).value).has(byte)) continue;
    const auto [b, e] = successors(node, byte);
    work_ += 1 + (e - b);
    if (work_ > work_limit_) {  // spent midway: the whole byte is refused
      to.clear();
      return;
    }
    if (b == e) continue;
    if (to.empty()) {
      to.assign(results_.begin() + b, results_.begin() + e);
      continue;
    }
    if (!marking) {  // a second source: mark what the first gave
      if (mark_.size() < nodes_.size()) mark_.resize(nodes_.size(), 0u);
      if (++epoch_ == 0) {  // the marks wrapped: clear them
        std::fill(mark_.begin(), mark_.end(), 0u);
        epoch_ = 1;
      }
      for (uint32_t r : to) mark_[r] = epoch_;
      marking = true;
    }
    if (mark_.size() < nodes_.size()) mark_.resize(nodes_.size(), 0u);
    for (uint32_t i = b; i < e; ++i) {
      const uint32_t r = results_[i];
      if (mark_[r] == epoch_) continue;
      mark_[r] = epoch_;
      to.push_back(r);
    }
  }
  if (marking) std::sort(to.begin(), to.end());
  if (grammar_->bounded() && to.size() > kMaxStacks) to.resize(kMaxStacks);  // the oldest stacks
}

const ByteSet& Matcher::self_loops(const State& s) {
  work_ += s.size();  // the lookup hashes and compares the state
  if (auto it = loops_.find(s); it != loops_.end()) return it->second;
  ByteSet loops;
  State next;
  for (int b = 0; b < 256; ++b) {
    if (!may_take(s, static_cast<uint8_t>(b))) continue;
    step(s, static_cast<uint8_t>(b), next);
    if (next == s) loops.add(static_cast<uint8_t>(b));
  }
  if (work_ >= work_limit_) {  // cut by the budget: right for now (fewer loops), not remembered
    cut_loops_ = loops;
    return cut_loops_;
  }
  return loops_.emplace(s, loops).first->second;
}

size_t Matcher::StateHash::operator()(const State& s) const {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ s.size();
  for (uint32_t v : s) h = (h ^ v) * 0x100000001B3ull + (h >> 29);
  return static_cast<size_t>(h);
}

bool Matcher::advance(uint8_t byte) {
  State next;
  step(state_, byte, next);
  if (next.empty()) return false;
  state_ = std::move(next);
  return true;
}

bool Matcher::advance(std::string_view bytes) {
  State cur = state_, next;
  for (char c : bytes) {
    step(cur, static_cast<uint8_t>(c), next);
    if (next.empty()) return false;
    std::swap(cur, next);
  }
  state_ = std::move(cur);
  return true;
}

void Matcher::reset() { state_ = start_; }

}  // namespace zl::grammar
