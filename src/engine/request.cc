#include "engine/request.h"

namespace zl {

std::string_view finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kNone: return "none";
    case FinishReason::kEndOfSequence: return "end_of_sequence";
    case FinishReason::kMaxTokens: return "max_tokens";
    case FinishReason::kStopSequence: return "stop_sequence";
    case FinishReason::kContextWindow: return "context_window";
    case FinishReason::kSafety: return "safety";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
  }
  return "unknown";
}

double Timings::t_queued_ms() const {
  if (t_scheduled == Clock::time_point{}) return 0;
  return std::chrono::duration<double, std::milli>(t_scheduled - t_submit).count();
}

double Timings::t_prefill_ms() const {
  const Clock::time_point end = t_first_token != Clock::time_point{} ? t_first_token : t_prefilled;
  if (end == Clock::time_point{} || t_scheduled == Clock::time_point{}) return 0;
  return std::chrono::duration<double, std::milli>(end - t_scheduled).count();
}

double Timings::t_decode_ms() const {
  if (t_first_token == Clock::time_point{} || t_last_token == Clock::time_point{}) return 0;
  return std::chrono::duration<double, std::milli>(t_last_token - t_first_token).count();
}

void RequestChannel::push(Event e) {
  std::function<void()> notify;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (e.kind != EventKind::kText) finished_ = true;
    events_.push_back(std::move(e));
    notify = notifier_;
  }
  cv_.notify_all();
  if (notify) notify();
}

std::vector<Event> RequestChannel::drain() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Event> out(std::make_move_iterator(events_.begin()), std::make_move_iterator(events_.end()));
  events_.clear();
  return out;
}

std::vector<Event> RequestChannel::wait_and_drain(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return !events_.empty(); });
  std::vector<Event> out(std::make_move_iterator(events_.begin()), std::make_move_iterator(events_.end()));
  events_.clear();
  return out;
}

void RequestChannel::set_notifier(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  notifier_ = std::move(fn);
}

size_t RequestChannel::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_.size();
}

bool RequestChannel::finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_;
}

}  // namespace zl
