#include "http/stream_shaper.h"

#include <algorithm>

namespace zl::http {

StreamShaper::StreamShaper(StreamShape shape) : shape_(shape) {
  const int64_t rtt_part = std::min<int64_t>(shape.network_rtt_ms / 4, 100);
  window_ = std::chrono::milliseconds(std::max<int64_t>(shape.min_delay_ms, rtt_part));
}

void StreamShaper::push(std::string_view text) {
  if (head_ > 0 && head_ >= pending_.size() / 2) {
    pending_.erase(0, head_);  // moves at most as many bytes as were taken since the last erase
    head_ = 0;
  }
  pending_.append(text);
}

std::string StreamShaper::cut_one() {
  const std::string_view rest = std::string_view(pending_).substr(head_);
  size_t n = rest.size();
  if (shape_.max_buffer_size > 0) n = utf8_safe_prefix(rest, static_cast<size_t>(shape_.max_buffer_size));
  std::string out(rest.substr(0, n));
  head_ += n;
  if (head_ == pending_.size()) {
    pending_.clear();
    head_ = 0;
  }
  return out;
}

std::vector<std::string> StreamShaper::take_ready(Clock::time_point now) {
  std::vector<std::string> out;
  if (!has_pending()) return out;
  if (window_.count() == 0) {
    while (has_pending()) out.push_back(cut_one());
    return out;
  }
  if (last_emit_ && now < *last_emit_ + window_) return out;
  out.push_back(cut_one());
  last_emit_ = now;
  return out;
}

std::vector<std::string> StreamShaper::take_all(Clock::time_point now) {
  std::vector<std::string> out;
  while (has_pending()) out.push_back(cut_one());
  if (!out.empty()) last_emit_ = now;
  return out;
}

std::optional<StreamShaper::Clock::time_point> StreamShaper::next_due() const {
  if (!has_pending()) return std::nullopt;
  if (window_.count() == 0 || !last_emit_) return Clock::time_point::min();
  return *last_emit_ + window_;
}

}  // namespace zl::http
