#include "engine/span_budget.h"

namespace zl {

SpanBudgetTracker::SpanBudgetTracker(SpanBudget span)
    : span_(std::move(span)), state_(span_.open_at_start ? State::kInside : State::kBefore) {}

std::optional<int32_t> SpanBudgetTracker::forced_next() const {
  if (state_ != State::kInside || span_.budget <= 0 || n_inside_ < span_.budget) return std::nullopt;
  if (n_forced_ >= span_.end_ids.size()) return std::nullopt;
  return span_.end_ids[n_forced_];
}

bool SpanBudgetTracker::find_marker(std::string_view marker, std::string_view text, std::string* after) {
  if (marker.empty()) return false;
  tail_.append(text);
  const size_t at = tail_.find(marker);
  if (at != std::string::npos) {
    if (after) *after = tail_.substr(at + marker.size());
    tail_.clear();
    return true;
  }
  if (tail_.size() >= marker.size()) tail_.erase(0, tail_.size() - (marker.size() - 1));
  return false;
}

void SpanBudgetTracker::observe(std::string_view text) {
  switch (state_) {
    case State::kBefore: {
      std::string after;
      if (!find_marker(span_.start_text, text, &after)) return;
      state_ = State::kInside;
      // The end may follow the start in the same delta; this token itself
      // is the one that opened the span and is not counted inside it.
      if (find_marker(span_.end_text, after, nullptr)) state_ = State::kClosed;
      return;
    }
    case State::kInside: {
      // (forced_next() still answers for the step that made this token.)
      const bool was_forced = forced_next().has_value();
      if (was_forced) ++n_forced_;
      ++n_inside_;
      const bool saw_end = find_marker(span_.end_text, text, nullptr);
      // Once forcing has begun, all of end_ids go out (what follows the
      // marker in them too); otherwise the model's own marker closes it.
      if (was_forced ? n_forced_ >= span_.end_ids.size() : saw_end) {
        state_ = State::kClosed;
        tail_.clear();
      }
      return;
    }
    case State::kClosed:
      return;
  }
}

}  // namespace zl
