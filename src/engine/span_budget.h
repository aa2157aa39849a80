// The engine side of StopParams::span (engine/request.h): follows one
// sequence's output, says when the span's end must be forced and which token
// comes next. One per request, on the engine thread; not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "engine/request.h"

namespace zl {

class SpanBudgetTracker {
 public:
  enum class State { kBefore, kInside, kClosed };

  explicit SpanBudgetTracker(SpanBudget span);

  // The token to use instead of sampling at this step, when the budget is
  // spent and the end is being forced; nullopt: sample as usual.
  std::optional<int32_t> forced_next() const;
  // After each generated token (sampled or forced) with the text it added
  // to the output (the detokenizer's delta, possibly empty).
  void observe(std::string_view text);

  State state() const { return state_; }
  int32_t n_inside() const { return n_inside_; }  // tokens generated inside the span so far
  bool forcing() const { return n_forced_ > 0 && state_ == State::kInside; }

 private:
  // True when `marker` ends within tail_ + text; keeps the last
  // |marker| - 1 bytes in tail_. Whatever follows the marker in `text` is
  // returned in *after (the start marker: output already inside the span).
  bool find_marker(std::string_view marker, std::string_view text, std::string* after);

  SpanBudget span_;
  State state_;
  int32_t n_inside_ = 0;
  size_t n_forced_ = 0;  // end_ids handed out so far
  std::string tail_;     // output bytes that may begin a marker
};

}  // namespace zl
