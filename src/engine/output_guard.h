// The guard's output rules on one sequence, on the engine thread.
//
// Two duties, both before any byte reaches an Event:
//   - mask (rules with output = "mask"): veto() tells the sampler whether a
//     drawn token would complete a banned phrase (guard/token_mask.h: a few
//     table lookups); the sampler then draws again from the rest. accept()
//     moves the phrase automaton past the token that was kept.
//   - redact / stop (and mask phrases as a second line): the detokenized
//     text (after the stop-string matcher, so the client's stop strings see
//     the model's own text) goes through a StreamRedactor, which holds back
//     what could still be the start of a match and releases placeholders in
//     place of matches; a stop rule ends the generation before the match.
// Every decision is returned as GuardActions for the engine to count and log
// (never with the matched text).
//
// Cost with no guard (or no output rule): a null check per token.
// Thread-safety: one per sequence; the Guard and the table are shared,
// immutable.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/sampler.h"
#include "guard/guard.h"
#include "guard/stream_redactor.h"
#include "guard/token_mask.h"

namespace zl {

// One guard decision on a sequence's output.
struct GuardAction {
  uint32_t rule = 0;            // index into the guard's policy
  std::string_view action;      // "mask", "redact", "stop" (static strings)
  std::string_view kind;        // "email", "phrase", "regex", ...
};

// What the redactor released for one piece of text.
struct GuardedText {
  std::string text;                  // may leave the process now
  bool stop = false;                 // a stop rule matched: end the sequence (FinishReason::kSafety)
  std::vector<GuardAction> actions;  // decisions taken in this call
};

class OutputGuard {
 public:
  // Both may be null (nothing to do); `mask` is the guard's table over the
  // engine's vocabulary (guard::build_token_mask).
  OutputGuard(std::shared_ptr<const guard::Guard> guard, const guard::TokenMaskTable* mask);

  // Whether text must go through feed() / finish() (the guard has output rules).
  bool redacts() const { return redactor_.has_value(); }
  bool masks() const { return mask_ != nullptr; }
  // A stop rule matched: nothing more is released.
  bool stopped() const { return redactor_ && redactor_->stopped(); }
  const guard::Guard* guard() const { return guard_.get(); }

  // The sampler's veto for the current state (null when nothing is masked).
  // The returned function refers to this object: use it for one sample().
  Sampler::Veto veto();
  // The first rule that refused a token since the last call, if any (one
  // "mask" action per step that steered away from a phrase).
  std::optional<GuardAction> take_refusal();
  // The sampled token was kept: the phrase automaton moves past it.
  void accept(int32_t token);
  // The prompt's last tokens: an answer that continues the prompt (an
  // assistant prefill, a raw completion) cannot finish a phrase it began.
  void start_after(std::span<const int32_t> prompt);

  // The next piece of text (after stop strings); after a stop, nothing.
  GuardedText feed(std::string_view text);
  // The last piece of text, then the end of the stream: everything still
  // held is released (redacted) unless a stop matched.
  GuardedText finish(std::string_view text);

 private:
  GuardedText take(guard::Release r);

  std::shared_ptr<const guard::Guard> guard_;
  const guard::TokenMaskTable* mask_;
  int32_t mask_state_ = guard::PhraseAutomaton::kRoot;
  int32_t refused_rule_ = -1;
  std::optional<guard::StreamRedactor> redactor_;
};

}  // namespace zl
