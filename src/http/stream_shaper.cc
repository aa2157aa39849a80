#include "http/stream_shaper.h"

#include <algorithm>

namespace zl::http {

size_t utf8_safe_prefix(std::string_view s, size_t max) {
  if (s.size() <= max) return s.size();
  auto continuation = [&](size_t i) { return (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80; };
  size_t n = max;
  // Back up over continuation bytes (10xxxxxx) to the start of a character:
  // at most 3, as a character has at most 4 bytes. A longer run is not
  // UTF-8, and cutting it at max splits no character.
  while (n > 0 && max - n < 3 && continuation(n)) --n;
  if (n > 0 && continuation(n)) return max;
  if (n == 0) {
    // One character longer than max (max < 4): take the whole character
    // (at most 4 bytes, also when the bytes are not UTF-8).
    n = 1;
    while (n < s.size() && n < 4 && continuation(n)) ++n;
  }
  return n;
}

StreamShaper::StreamShaper(StreamShape shape) : shape_(shape) {
  const int64_t rtt_part = std::min<int64_t>(shape.network_rtt_ms / 4, 100);
  window_ = std::chrono::milliseconds(std::max<int64_t>(shape.min_delay_ms, rtt_part));
}

std::string StreamShaper::cut_one() {
  size_t n = pending_.size();
  if (shape_.max_buffer_size > 0) n = utf8_safe_prefix(pending_, static_cast<size_t>(shape_.max_buffer_size));
  std::string out = pending_.substr(0, n);
  pending_.erase(0, n);
  return out;
}

std::vector<std::string> StreamShaper::take_ready(Clock::time_point now) {
  std::vector<std::string> out;
  if (pending_.empty()) return out;
  if (window_.count() == 0) {
    while (!pending_.empty()) out.push_back(cut_one());
    return out;
  }
  if (last_emit_ && now < *last_emit_ + window_) return out;
  out.push_back(cut_one());
  last_emit_ = now;
  return out;
}

std::vector<std::string> StreamShaper::take_all(Clock::time_point now) {
  std::vector<std::string> out;
  while (!pending_.empty()) out.push_back(cut_one());
  if (!out.empty()) last_emit_ = now;
  return out;
}

std::optional<StreamShaper::Clock::time_point> StreamShaper::next_due() const {
  if (pending_.empty()) return std::nullopt;
  if (window_.count() == 0 || !last_emit_) return Clock::time_point::min();
  return *last_emit_ + window_;
}

}  // namespace zl::http
