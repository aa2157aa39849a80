// StreamShaper::cut_one on long texts with tiny max_buffer_size: every
// piece within the limit and whole characters, nothing lost or reordered.
// Before cut_one skipped the taken text instead of erasing it from the
// front, this input took time quadratic in its length (about 10^12 byte
// moves for the 2 MB below); the test asserts on the result, not the time.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "http/stream_shaper.h"

namespace zl::http {
namespace {

// Bytes in the UTF-8 character that starts with `lead`.
size_t char_len(unsigned char lead) { return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4; }

// ~2 MB mixing 1-, 2-, 3- and 4-byte characters.
std::string long_text() {
  const std::string unit = "Once upon a time, caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x99\x82 end.\n";
  std::string text;
  while (text.size() < (2u << 20)) text += unit;
  return text;
}

TEST(StreamShaperCut, OneByteLimitOverALongTextIsWholeCharactersInOrder) {
  const std::string text = long_text();
  StreamShaper shaper({.max_buffer_size = 1});
  shaper.push(text);
  const std::vector<std::string> pieces = shaper.take_all(StreamShaper::Clock::now());
  EXPECT_FALSE(shaper.has_pending());
  std::string joined;
  joined.reserve(text.size());
  for (const std::string& p : pieces) {
    ASSERT_FALSE(p.empty());
    // One character per piece: one byte, or a character longer than the limit, whole.
    ASSERT_EQ(p.size(), char_len(static_cast<unsigned char>(p[0]))) << joined.size();
    joined += p;
  }
  EXPECT_EQ(joined, text);
}

TEST(StreamShaperCut, PushesBetweenTakesKeepTheOrder) {
  // Pushes interleaved with paced takes (one event per window): the
  // skipped prefix is compacted while text keeps arriving.
  StreamShaper shaper({.max_buffer_size = 3, .min_delay_ms = 1});
  const std::string text = long_text().substr(0, 200000);
  std::string joined;
  auto now = StreamShaper::Clock::now();
  size_t fed = 0;
  while (fed < text.size() || shaper.has_pending()) {
    if (fed < text.size()) {
      const size_t n = std::min<size_t>(7, text.size() - fed);
      shaper.push(std::string_view(text).substr(fed, n));
      fed += n;
    }
    now += std::chrono::milliseconds(1);
    for (const std::string& p : shaper.take_ready(now)) {
      ASSERT_LE(p.size(), 4u);
      ASSERT_TRUE(p.size() <= 3 || p.size() == char_len(static_cast<unsigned char>(p[0])));
      joined += p;
    }
  }
  EXPECT_EQ(joined, text);
}

}  // namespace
}  // namespace zl::http
