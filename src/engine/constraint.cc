#include "engine/constraint.h"

#include <algorithm>

namespace zl {

ConstrainedOutput::ConstrainedOutput(GrammarConstraint c, const grammar::TokenTrie& trie, std::vector<int32_t> end_ids)
    : c_(std::move(c)), trie_(&trie), end_ids_(std::move(end_ids)) {
  if (!c_.cut_masks) c_.cut_masks = std::make_shared<MaskCutCount>();  // (a moved-from constraint's copy)
  if (c_.start) {
    start(c_.start);
    if (!c_.start_prefix.empty() && phase_ == Phase::kGrammar) {
      if (matcher_->advance(c_.start_prefix)) {
        after_grammar_step();
      } else {
        failed_ = true;  // the API checks the prefix: not reached
        phase_ = Phase::kOff;
      }
    }
  } else if (c_.after_trigger && !c_.trigger.empty()) {
    phase_ = Phase::kFree;
  }
}

void ConstrainedOutput::start(const std::shared_ptr<const grammar::Grammar>& g) {
  if (matcher_ && &matcher_->grammar() == g.get()) {
    matcher_->reset();  // the same grammar again: its memo and cached masks stay valid
  } else {
    matcher_.emplace(g);
    masker_.emplace(*trie_);  // cached masks are keyed by this matcher's state ids
  }
  phase_ = Phase::kGrammar;
  after_grammar_step();  // a grammar complete from the start (an empty one)
}

const TokenMask* ConstrainedOutput::mask(TokenMask& mask) {
  if (phase_ == Phase::kFree || phase_ == Phase::kOff) return nullptr;
  std::span<uint64_t> words = mask.words();
  const int32_t n_vocab = mask.n_vocab();
  bool allow_end = true;
  if (phase_ == Phase::kGrammar) {
    const int64_t cut_before = masker_->n_cut_walks();
    std::span<const uint64_t> allowed = masker_->allowed(*matcher_);
    c_.cut_masks->n += masker_->n_cut_walks() - cut_before;
    const size_t n = std::min(words.size(), allowed.size());
    for (size_t i = 0; i < n; ++i) words[i] = ~allowed[i];
    std::fill(words.begin() + static_cast<ptrdiff_t>(n), words.end(), ~uint64_t{0});
    allow_end = matcher_->accepting();
  } else {  // kEnded
    std::fill(words.begin(), words.end(), ~uint64_t{0});
  }
  // Bits past the vocabulary stay clear (TokenMask's invariant).
  if (n_vocab % 64 != 0 && !words.empty()) words.back() &= (uint64_t{1} << (n_vocab % 64)) - 1;
  for (int32_t id : end_ids_) {
    if (id < 0 || id >= n_vocab) continue;
    const uint64_t bit = uint64_t{1} << (id & 63);
    if (allow_end) {
      words[id >> 6] &= ~bit;
    } else {
      words[id >> 6] |= bit;
    }
  }
  return &mask;
}

void ConstrainedOutput::accept(int32_t token, std::string_view piece) {
  switch (phase_) {
    case Phase::kOff:
    case Phase::kEnded:
      return;
    case Phase::kFree:
      watch(piece);
      return;
    case Phase::kGrammar:
      if (std::find(end_ids_.begin(), end_ids_.end(), token) != end_ids_.end()) return;  // the end
      if (!matcher_->advance(piece)) {
        failed_ = true;
        phase_ = Phase::kOff;
        return;
      }
      after_grammar_step();
      return;
  }
}

void ConstrainedOutput::after_grammar_step() {
  if (!matcher_->accepting() || matcher_->can_continue()) return;
  if (c_.end_when_complete) {
    phase_ = Phase::kEnded;
  } else if (c_.after_trigger && !c_.trigger.empty()) {
    phase_ = Phase::kFree;
    tail_.clear();
  } else {
    phase_ = Phase::kOff;
  }
}

void ConstrainedOutput::watch(std::string_view piece) {
  std::string window = tail_;
  window.append(piece);
  const size_t at = window.find(c_.trigger);
  if (at == std::string::npos) {
    const size_t keep = c_.trigger.size() - 1;
    tail_ = window.size() > keep ? window.substr(window.size() - keep) : window;
    return;
  }
  // The trigger is here: what follows it in this token is the grammar's first bytes.
  const std::string rest = window.substr(at + c_.trigger.size());
  start(c_.after_trigger);
  if (!rest.empty()) {
    if (!matcher_->advance(rest)) {
      failed_ = true;
      phase_ = Phase::kOff;
      return;
    }
    after_grammar_step();
  }
}

}  // namespace zl
