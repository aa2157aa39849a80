// libFuzzer target fuzz_stream_shaper: the SSE stream shaper (http/stream_shaper.h)
// under random stream_options, random text chunks (UTF-8 or not) and a
// simulated clock.
// Input: 3 bytes of options (max_buffer_size: 0 or 4..67, min_delay_ms,
// network_rtt_ms), then steps of [control, length, bytes...]: control's low
// 6 bits advance the clock (ms), bit 6 asks for take_all instead of
// take_ready.
// Invariants: no event is empty or longer than max_buffer_size; the events
// concatenate to the input exactly; when every chunk is valid UTF-8 (the
// engine's text deltas are) every event is valid UTF-8 (no character split,
// however the chunks were coalesced and cut); with a window, take_ready gives at most
// one event, none before the window has passed, and one once next_due().
#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "fuzz/fuzz_target.h"
#include "http/stream_shaper.h"
#include "core/utf8.h"

namespace {

using zl::http::StreamShaper;

struct Run {
  zl::http::StreamShape shape;
  std::string input;
  bool chunks_utf8 = true;  // every chunk pushed is valid UTF-8 (as the engine's text deltas are)
  std::vector<std::string> events;
};

void check_events(const Run& run, const std::vector<std::string>& out) {
  for (const std::string& e : out) {
    FUZZ_CHECK(!e.empty());
    if (run.shape.max_buffer_size > 0) FUZZ_CHECK(e.size() <= static_cast<size_t>(run.shape.max_buffer_size));
  }
}

}  // namespace

ZL_FUZZ_TARGET(fuzz_stream_shaper) {
  if (size < 3) return 0;
  Run run;
  run.shape.max_buffer_size = data[0] % 4 == 0 ? 0 : 4 + (data[0] >> 2);
  run.shape.min_delay_ms = (data[1] & 0x0F) * 10;
  run.shape.network_rtt_ms = data[2] * 4;
  StreamShaper shaper(run.shape);
  StreamShaper::Clock::time_point now{};
  std::optional<StreamShaper::Clock::time_point> last_emit;
  size_t i = 3;
  while (i < size) {
    const uint8_t control = data[i++];
    const size_t len = i < size ? data[i++] : 0;
    const size_t n = std::min(len, size - i);
    const std::string_view chunk(reinterpret_cast<const char*>(data + i), n);
    i += n;
    now += std::chrono::milliseconds(control & 0x3F);
    shaper.push(chunk);
    run.input.append(chunk);
    run.chunks_utf8 = run.chunks_utf8 && zl::utf8::is_valid(chunk);
    std::vector<std::string> out;
    if (control & 0x40) {
      out = shaper.take_all(now);
    } else {
      const auto due = shaper.next_due();
      FUZZ_CHECK(due.has_value() == shaper.has_pending());
      out = shaper.take_ready(now);
      if (due && *due <= now) FUZZ_CHECK(!out.empty());
      if (shaper.window().count() > 0) {
        FUZZ_CHECK(out.size() <= 1);
        if (!out.empty() && last_emit) FUZZ_CHECK(now >= *last_emit + shaper.window());
      } else {
        FUZZ_CHECK(!shaper.has_pending());
      }
    }
    if (!out.empty()) last_emit = now;
    check_events(run, out);
    run.events.insert(run.events.end(), out.begin(), out.end());
  }
  const std::vector<std::string> rest = shaper.take_all(now);
  check_events(run, rest);
  run.events.insert(run.events.end(), rest.begin(), rest.end());
  FUZZ_CHECK(!shaper.has_pending());

  std::string joined;
  for (const std::string& e : run.events) joined += e;
  FUZZ_CHECK(joined == run.input);
  if (run.chunks_utf8) {
    for (const std::string& e : run.events) FUZZ_CHECK(zl::utf8::is_valid(e));
  }
  return 0;
}
