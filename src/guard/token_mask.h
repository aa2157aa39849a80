// Output masking of banned phrases at sampling time (rules with output = "mask").
//
// PhraseAutomaton: an Aho-Corasick automaton over the bytes of the rules'
// NORMALISED phrases (guard/normalize.h), turned into a dense DFA: the state
// after a byte is the longest suffix of the normalised output so far that is
// a prefix of some phrase, and match(state) names the rule of a phrase that
// ends there (the lowest rule index when several do). Bytes that occur in no
// phrase share one character class, so the table is n_states x n_classes.
//
// TokenMaskTable: the automaton together with one vocabulary. The normalised
// text of every token (passed in as strings: the guard never links the
// tokenizer) is translated to character classes once, and what every token
// does from the root state is precomputed, so checking a sampled token costs
//   - O(1) when the token has no byte of any phrase (it "cannot advance a
//     match": the state falls back to the root whatever it was; a token
//     without text leaves it as it was) or the
//     sequence is at the root state (the usual case),
//   - else one table lookup per byte of the token (a few),
// never a scan of the vocabulary. The engine samples a token, asks step(),
// and when the token would complete a phrase forbids it and samples again
// (engine/sampler.h: Sampler::sample with a veto).
//
// Semantics: a token is refused when appending its normalised text to the
// normalised output completes an occurrence of a phrase (the occurrence may
// start in earlier tokens). Tokens are normalised one by one: a character
// whose UTF-8 bytes are split over byte tokens is compared byte by byte, as
// the phrase's own normalised bytes.
//
// Memory: 4 bytes x n_states x n_classes for the DFA (n_states <= total phrase
// bytes + 1, n_classes <= distinct phrase bytes + 1: 1000 phrases of 15 bytes
// over 40 letters are ~2.4 MB) plus ~6 bytes per vocabulary byte and 9 bytes
// per token. Construction O(that). Immutable after construction: thread-safe,
// shared by every sequence; the per-sequence state is one int32_t.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <memory>
#include <vector>

#include "guard/guard.h"  // Guard::MaskPhrase

namespace zl::guard {

// One banned phrase, already normalised (empty phrases are ignored), and the
// index of its rule.
using MaskPhrase = Guard::MaskPhrase;

class PhraseAutomaton {
 public:
  static constexpr int32_t kRoot = 0;

  explicit PhraseAutomaton(std::span<const MaskPhrase> phrases);

  bool empty() const { return n_states_ <= 1; }
  int32_t n_states() const { return n_states_; }
  int32_t n_classes() const { return n_classes_; }
  uint8_t byte_class(uint8_t byte) const { return class_of_[byte]; }
  // The state after one more character class / byte.
  int32_t next_class(int32_t state, uint8_t cls) const { return delta_[static_cast<size_t>(state) * n_classes_ + cls]; }
  int32_t next(int32_t state, uint8_t byte) const { return next_class(state, class_of_[byte]); }
  // The rule of a phrase that ends at `state` (lowest rule index), or -1.
  int32_t match(int32_t state) const { return match_[state]; }
  // Feeds `bytes` from `state`: the state after them, or -1 - rule as soon
  // as a phrase completes (the rest is not fed).
  int32_t feed(int32_t state, std::string_view bytes) const;

 private:
  int32_t n_states_ = 1;
  int32_t n_classes_ = 1;
  uint8_t class_of_[256] = {};      // 0: a byte of no phrase
  std::vector<int32_t> delta_;      // n_states_ x n_classes_
  std::vector<int32_t> match_;      // per state
};

// What one more token does to a sequence's mask state.
struct MaskStep {
  int32_t state = PhraseAutomaton::kRoot;  // the state after the token (unchanged when refused)
  int32_t rule = -1;                       // >= 0: the token would complete a phrase of this rule
  bool refused() const { return rule >= 0; }
};

class TokenMaskTable {
 public:
  // token_texts[id]: the normalised text token `id` adds to the output
  // (empty for control tokens and ids that produce no text).
  TokenMaskTable(std::span<const MaskPhrase> phrases, std::span<const std::string> token_texts);

  bool empty() const { return automaton_.empty(); }
  int32_t n_vocab() const { return static_cast<int32_t>(root_state_.size()); }
  // What appending `token` does from `state`. Ids outside the vocabulary
  // leave the state unchanged and are never refused. O(1) or O(token bytes).
  MaskStep step(int32_t state, int32_t token) const;
  // The state after `token` whether or not it completes a phrase: for text
  // the sampler did not choose (the prompt's tail, which an answer may
  // continue). O(token bytes).
  int32_t advance(int32_t state, int32_t token) const;
  // Whether `token` contains a byte of some phrase (only those can advance
  // or complete a match).
  bool can_advance(int32_t token) const {
    return token >= 0 && token < n_vocab() && ((advances_[token >> 6] >> (token & 63)) & 1);
  }
  const PhraseAutomaton& automaton() const { return automaton_; }
  // Bytes held by the tables (DFA and per-token data).
  size_t memory_bytes() const;

 private:
  PhraseAutomaton automaton_;
  std::vector<uint8_t> classes_;      // every token's bytes as character classes, concatenated
  std::vector<uint32_t> offsets_;     // token id -> its classes: [offsets_[id], offsets_[id + 1])
  std::vector<uint64_t> advances_;    // bitset: can_advance
  std::vector<int32_t> root_state_;   // step(kRoot, id): state or -1 - rule
};

// The table of `guard`'s mask rules (Guard::mask_phrases) over a vocabulary
// given as each token's raw text (Tokenizer::token_to_piece): pieces that are
// valid UTF-8 are normalised (normalize_text), others (byte tokens, a piece
// ending inside a character) are compared as their raw bytes. Null when the
// guard has no mask rule. Cost: one normalisation per token.
std::shared_ptr<const TokenMaskTable> build_token_mask(const Guard& guard, std::span<const std::string> token_pieces);

}  // namespace zl::guard
