// Stream shaper: decides when generated text leaves as an SSE event, per the
// request's stream_options (DESIGN.md §3).
//
//   max_buffer_size  no event carries more than this many bytes of text; a
//                    longer run is split at UTF-8 character boundaries.
//   min_delay_ms     no two content events are closer than this; text made
//                    meanwhile is coalesced into the next event.
//   network_rtt_ms   the client's round trip. Rule: the coalescing window is
//                    max(min_delay_ms, min(network_rtt_ms / 4, 100 ms)). On a
//                    long path many small events cost the client more
//                    (per-event parsing, TCP segments) than a short wait; a
//                    quarter of the RTT keeps the added delay small beside
//                    the RTT itself, and the cap bounds it for satellite-like
//                    links.
// With no options the shaper passes each delta through as one event.
//
// Not thread-safe: one per stream, used on its I/O thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/utf8.h"

namespace zl::http {

struct StreamShape {
  int64_t max_buffer_size = 0;  // bytes; 0: no limit
  int64_t min_delay_ms = 0;
  int64_t network_rtt_ms = 0;
};

class StreamShaper {
 public:
  using Clock = std::chrono::steady_clock;

  explicit StreamShaper(StreamShape shape = {});

  // The coalescing window that the rule above gives.
  std::chrono::milliseconds window() const { return window_; }

  // Amortized O(text.size()).
  void push(std::string_view text);
  bool has_pending() const { return head_ < pending_.size(); }

  // The text events due at `now` (each within max_buffer_size). With a
  // window, at most one per call and none before the window has passed.
  std::vector<std::string> take_ready(Clock::time_point now);
  // Everything pending, now, window or not (each piece within
  // max_buffer_size): text that must go out before something else does.
  std::vector<std::string> take_all(Clock::time_point now);
  // When take_ready will next have something (nullopt: nothing pending).
  std::optional<Clock::time_point> next_due() const;

 private:
  // The next event from the pending text (a UTF-8-safe prefix). O(its
  // length): the text taken is skipped (head_), not erased from the front,
  // so cutting a long text into max_buffer_size pieces is linear, not
  // quadratic, however small the pieces.
  std::string cut_one();

  StreamShape shape_;
  std::chrono::milliseconds window_{0};
  // The pending text is pending_[head_, size). push() drops the taken part
  // once it is at least half the buffer (amortized linear).
  std::string pending_;
  size_t head_ = 0;
  std::optional<Clock::time_point> last_emit_;
};

// Length of the longest prefix of `s` of at most `max` bytes that does not
// split a UTF-8 character (the first whole character when it is longer).
inline size_t utf8_safe_prefix(std::string_view s, size_t max) { return utf8::safe_prefix_length(s, max); }

}  // namespace zl::http
