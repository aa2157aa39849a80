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

  void push(std::string_view text) { pending_.append(text); }
  bool has_pending() const { return !pending_.empty(); }

  // The text events due at `now` (each within max_buffer_size). With a
  // window, at most one per call and none before the window has passed.
  std::vector<std::string> take_ready(Clock::time_point now);
  // Everything pending, now, window or not (each piece within
  // max_buffer_size): text that must go out before something else does.
  std::vector<std::string> take_all(Clock::time_point now);
  // When take_ready will next have something (nullopt: nothing pending).
  std::optional<Clock::time_point> next_due() const;

 private:
  std::string cut_one();  // the next event from pending_ (a UTF-8-safe prefix)

  StreamShape shape_;
  std::chrono::milliseconds window_{0};
  std::string pending_;
  std::optional<Clock::time_point> last_emit_;
};

// Length of the longest prefix of `s` of at most `max` bytes that does not
// split a UTF-8 character (at least one whole character when max >= 4).
// Bytes that are not UTF-8 are cut anywhere: never past max when max >= 4.
size_t utf8_safe_prefix(std::string_view s, size_t max);

}  // namespace zl::http
