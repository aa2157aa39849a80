// One sequence's GrammarConstraint (engine/request.h) on the engine thread.
//
// Phases: kGrammar (a grammar is running: each step's mask comes from it),
// kFree (no mask; the output's last bytes are watched for the trigger),
// kEnded (the grammar completed with end_when_complete: only EOS / the
// stop ids may follow), kOff (nothing more to constrain).
// The mask of a step is the TokenMasker's allowed set (grammar/token_trie.h,
// cached per grammar state) turned into forbidden bits, plus the end tokens
// (allowed only while the grammar is complete).
// A token the grammar did not allow can still arrive: forced by a thinking
// budget (SpanBudget), or a trigger whose token carries bytes the grammar
// refuses. The constraint then gives up (kOff, counted in failed()) rather
// than mask a sequence that can no longer be valid into nonsense.
// Costs per step: kFree O(|token| + |trigger|); kGrammar one hash lookup for
// a state seen before, else a trie walk (grammar/token_trie.h), plus
// O(vocab / 64) to write the mask.
// Thread-safety: engine thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/request.h"
#include "engine/sampler.h"
#include "grammar/matcher.h"
#include "grammar/token_trie.h"

namespace zl {

class ConstrainedOutput {
 public:
  enum class Phase { kGrammar, kFree, kEnded, kOff };

  // `trie` (over the engine's vocabulary) must outlive this object; `end_ids`:
  // the tokens that end the sequence (EOS/EOT and the request's stop ids).
  ConstrainedOutput(GrammarConstraint c, const grammar::TokenTrie& trie, std::vector<int32_t> end_ids);

  Phase phase() const { return phase_; }
  // Whether the next step's output is masked (kGrammar, kEnded); in kFree
  // and kOff it is not, and a speculative draft may be verified unmasked.
  bool masks() const { return phase_ == Phase::kGrammar || phase_ == Phase::kEnded; }
  // This step's mask, written into `mask` (n_vocab of the model), or null
  // when the output is free at this step.
  const TokenMask* mask(TokenMask& mask);
  // The kept token and its bytes.
  void accept(int32_t token, std::string_view piece);
  // The grammar was abandoned after a token it refused (see above).
  bool failed() const { return failed_; }
  // Whether this step's mask (the last mask() in kGrammar) came from a walk
  // cut at the masker's work bound (TokenMasker::kMaxMaskWork): a subset of
  // what the grammar allows, possibly empty.
  bool mask_truncated() const { return phase_ == Phase::kGrammar && masker_ && masker_->truncated(); }
  // Masks of a request (all its outputs: the copies of its constraint share
  // GrammarConstraint::cut_masks) that may be walked to the work bound
  // before its outputs are ended as too ambiguous (too_ambiguous()): each
  // such walk holds the engine thread, and every co-batched sequence with
  // it, ~0.1-0.3 s. A grammar that reaches the bound once may still be
  // followed (the mask is a valid subset); one that keeps reaching it would
  // stall the batch at every token of every choice.
  static constexpr int64_t kMaxCutMasks = 3;
  // Whether the request's outputs had kMaxCutMasks walks cut while this one
  // is in its grammar: it must end (checked before and after mask()).
  bool too_ambiguous() const { return phase_ == Phase::kGrammar && c_.cut_masks->n >= kMaxCutMasks; }
  // The largest work a mask walk of this output took (grammar_bench).
  uint64_t max_mask_work() const { return masker_ ? masker_->max_walk_work() : 0; }

 private:
  void start(const std::shared_ptr<const grammar::Grammar>& g);
  void after_grammar_step();
  // Free output: looks for the trigger in the recent bytes.
  void watch(std::string_view piece);

  GrammarConstraint c_;
  const grammar::TokenTrie* trie_;
  std::vector<int32_t> end_ids_;
  Phase phase_ = Phase::kOff;
  std::optional<grammar::Matcher> matcher_;
  std::optional<grammar::TokenMasker> masker_;
  std::string tail_;  // kFree: the last |trigger| - 1 bytes
  bool failed_ = false;
};

}  // namespace zl
