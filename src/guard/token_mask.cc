#include "guard/token_mask.h"

#include <algorithm>
#include <deque>

#include "core/utf8.h"

namespace zl::guard {
namespace {

// The lower of two rule indices where -1 means none.
int32_t lower_rule(int32_t a, int32_t b) {
  if (a < 0) return b;
  if (b < 0) return a;
  return std::min(a, b);
}

}  // namespace

PhraseAutomaton::PhraseAutomaton(std::span<const MaskPhrase> phrases) {
  // Character classes: one per distinct phrase byte, 0 for every other byte.
  for (const MaskPhrase& p : phrases) {
    for (char ch : p.normalized) {
      uint8_t& c = class_of_[static_cast<uint8_t>(ch)];
      if (c == 0) c = static_cast<uint8_t>(n_classes_++);
    }
  }
  // The trie, in the dense table (-1: no edge yet).
  size_t n_bytes = 0;
  for (const MaskPhrase& p : phrases) n_bytes += p.normalized.size();
  delta_.reserve((n_bytes + 1) * n_classes_);
  delta_.assign(n_classes_, -1);
  match_.assign(1, -1);
  for (const MaskPhrase& p : phrases) {
    if (p.normalized.empty()) continue;
    int32_t node = kRoot;
    for (char ch : p.normalized) {
      const size_t at = static_cast<size_t>(node) * n_classes_ + class_of_[static_cast<uint8_t>(ch)];
      if (delta_[at] < 0) {
        delta_[at] = n_states_++;
        delta_.insert(delta_.end(), n_classes_, -1);
        match_.push_back(-1);
      }
      node = delta_[at];
    }
    match_[node] = lower_rule(match_[node], static_cast<int32_t>(p.rule));
  }
  // Failure transitions, breadth first: a missing edge goes where the
  // node's failure state goes; a node's match includes its failure state's.
  std::vector<int32_t> fail(n_states_, kRoot);
  std::deque<int32_t> queue;
  for (int32_t c = 0; c < n_classes_; ++c) {
    int32_t& to = delta_[c];
    if (to < 0) {
      to = kRoot;
    } else {
      queue.push_back(to);
    }
  }
  while (!queue.empty()) {
    const int32_t u = queue.front();
    queue.pop_front();
    for (int32_t c = 0; c < n_classes_; ++c) {
      const size_t at = static_cast<size_t>(u) * n_classes_ + c;
      const int32_t via_fail = delta_[static_cast<size_t>(fail[u]) * n_classes_ + c];
      if (delta_[at] < 0) {
        delta_[at] = via_fail;
      } else {
        const int32_t v = delta_[at];
        fail[v] = via_fail;
        match_[v] = lower_rule(match_[v], match_[via_fail]);
        queue.push_back(v);
      }
    }
  }
}

int32_t PhraseAutomaton::feed(int32_t state, std::string_view bytes) const {
  for (char ch : bytes) {
    state = next(state, static_cast<uint8_t>(ch));
    if (match_[state] >= 0) return -1 - match_[state];
  }
  return state;
}

TokenMaskTable::TokenMaskTable(std::span<const MaskPhrase> phrases, std::span<const std::string> token_texts)
    : automaton_(phrases) {
  const size_t n = token_texts.size();
  offsets_.reserve(n + 1);
  offsets_.push_back(0);
  advances_.assign((n + 63) / 64, 0);
  root_state_.resize(n);
  for (size_t id = 0; id < n; ++id) {
    const std::string& text = token_texts[id];
    bool advances = false;
    for (char ch : text) {
      const uint8_t cls = automaton_.byte_class(static_cast<uint8_t>(ch));
      advances |= cls != 0;
      classes_.push_back(cls);
    }
    offsets_.push_back(static_cast<uint32_t>(classes_.size()));
    if (advances) advances_[id >> 6] |= uint64_t{1} << (id & 63);
    root_state_[id] = advances ? automaton_.feed(PhraseAutomaton::kRoot, text) : PhraseAutomaton::kRoot;
  }
}

MaskStep TokenMaskTable::step(int32_t state, int32_t token) const {
  if (token < 0 || token >= n_vocab()) return {.state = state};
  // A token without a phrase byte: every byte of it leads to the root (a
  // token without text changes nothing).
  if (!can_advance(token)) return {.state = offsets_[token] == offsets_[token + 1] ? state : PhraseAutomaton::kRoot};
  if (state == PhraseAutomaton::kRoot) {
    const int32_t r = root_state_[token];
    return r >= 0 ? MaskStep{.state = r} : MaskStep{.state = state, .rule = -1 - r};
  }
  int32_t s = state;
  for (uint32_t i = offsets_[token]; i < offsets_[token + 1]; ++i) {
    s = automaton_.next_class(s, classes_[i]);
    const int32_t rule = automaton_.match(s);
    if (rule >= 0) return {.state = state, .rule = rule};
  }
  return {.state = s};
}

int32_t TokenMaskTable::advance(int32_t state, int32_t token) const {
  if (token < 0 || token >= n_vocab()) return state;
  for (uint32_t i = offsets_[token]; i < offsets_[token + 1]; ++i) state = automaton_.next_class(state, classes_[i]);
  return state;
}

}  // namespace zl::guard

namespace zl::guard {

size_t TokenMaskTable::memory_bytes() const {
  return automaton_.n_states() * static_cast<size_t>(automaton_.n_classes() + 1) * sizeof(int32_t) +
         classes_.size() + offsets_.size() * sizeof(uint32_t) + advances_.size() * sizeof(uint64_t) +
         root_state_.size() * sizeof(int32_t);
}

std::shared_ptr<const TokenMaskTable> build_token_mask(const Guard& guard, std::span<const std::string> token_pieces) {
  const std::vector<MaskPhrase> phrases = guard.mask_phrases();
  if (phrases.empty()) return nullptr;
  std::vector<std::string> texts;
  texts.reserve(token_pieces.size());
  for (const std::string& piece : token_pieces) {
    texts.push_back(utf8::is_valid(piece) ? normalize_text(piece) : piece);
  }
  return std::make_shared<const TokenMaskTable>(phrases, texts);
}

}  // namespace zl::guard
