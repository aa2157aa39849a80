// core/utf8: every scalar value round trips; every 1-, 2- and 3-byte string
// is judged as a reference decoder (written out from RFC 3629 below) judges
// it; overlongs, surrogates, > U+10FFFF and truncated sequences follow the
// one-U+FFFD-per-byte policy; streaming cut points never split a character.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "core/utf8.h"

namespace zl {
namespace {

const std::string kR(utf8::kReplacement);

// Reference twin: is `s` a concatenation of well-formed sequences? Decodes by
// the bit patterns and then rejects overlong forms, surrogates and values
// above U+10FFFF, instead of the lead-byte table the implementation uses.
bool reference_valid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<uint8_t>(s[i]);
    size_t n;
    uint32_t cp;
    if (b0 < 0x80) {
      n = 1, cp = b0;
    } else if ((b0 & 0xE0) == 0xC0) {
      n = 2, cp = b0 & 0x1F;
    } else if ((b0 & 0xF0) == 0xE0) {
      n = 3, cp = b0 & 0x0F;
    } else if ((b0 & 0xF8) == 0xF0) {
      n = 4, cp = b0 & 0x07;
    } else {
      return false;
    }
    if (i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      const auto b = static_cast<uint8_t>(s[i + k]);
      if ((b & 0xC0) != 0x80) return false;
      cp = cp << 6 | (b & 0x3F);
    }
    const uint32_t min_of_len[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_of_len[n] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return false;
    i += n;
  }
  return true;
}

TEST(Utf8, EveryScalarValueRoundTrips) {
  for (uint32_t cp = 0; cp <= utf8::kMaxCodePoint; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    const std::string s = utf8::encode(cp);
    const size_t expected_len = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    ASSERT_EQ(s.size(), expected_len) << cp;
    ASSERT_TRUE(utf8::is_valid(s)) << cp;
    ASSERT_EQ(utf8::valid_sequence_length(s, 0), expected_len) << cp;
    size_t pos = 0;
    ASSERT_EQ(utf8::decode_one(s, &pos), cp);
    ASSERT_EQ(pos, s.size());
    ASSERT_EQ(utf8::incomplete_suffix_length(s), 0u) << cp;
    // Every proper prefix is an incomplete tail that may still complete.
    for (size_t k = 1; k < s.size(); ++k) {
      std::string tail = "a";
      tail.append(s, 0, k);
      ASSERT_EQ(utf8::incomplete_suffix_length(tail), k) << cp << " prefix " << k;
    }
  }
}

TEST(Utf8, EveryShortStringAgreesWithTheReference) {
  std::string s;
  for (uint32_t len = 1; len <= 3; ++len) {
    const uint32_t n = 1u << (8 * len);
    s.resize(len);
    for (uint32_t v = 0; v < n; ++v) {
      for (uint32_t k = 0; k < len; ++k) s[k] = static_cast<char>(v >> (8 * k));
      const bool valid = reference_valid(s);
      ASSERT_EQ(utf8::is_valid(s), valid) << "bytes " << std::hex << v;
      // sanitize leaves valid text alone and makes anything valid.
      const std::string clean = utf8::sanitize(s);
      if (valid) {
        ASSERT_EQ(clean, s);
      } else {
        ASSERT_TRUE(reference_valid(clean)) << std::hex << v;
      }
    }
  }
}

TEST(Utf8, OneReplacementPerInvalidByte) {
  EXPECT_EQ(utf8::sanitize("a\x80" "b"), "a" + kR + "b");           // stray continuation
  EXPECT_EQ(utf8::sanitize("\xE2\x82"), kR + kR);                   // truncated
  EXPECT_EQ(utf8::sanitize("\xE2\x82" "A"), kR + kR + "A");
  EXPECT_EQ(utf8::sanitize("\xF0\x9F\x98"), kR + kR + kR);          // truncated 4-byte
  EXPECT_EQ(utf8::sanitize("\xC0\x80"), kR + kR);                   // overlong NUL
  EXPECT_EQ(utf8::sanitize("\xC1\xBF"), kR + kR);                   // overlong U+007F
  EXPECT_EQ(utf8::sanitize("\xE0\x9F\xBF"), kR + kR + kR);          // overlong U+07FF
  EXPECT_EQ(utf8::sanitize("\xF0\x8F\xBF\xBF"), kR + kR + kR + kR); // overlong U+FFFF
  EXPECT_EQ(utf8::sanitize("\xED\xA0\x80"), kR + kR + kR);          // surrogate U+D800
  EXPECT_EQ(utf8::sanitize("\xED\xBF\xBF"), kR + kR + kR);          // surrogate U+DFFF
  EXPECT_EQ(utf8::sanitize("\xF4\x90\x80\x80"), kR + kR + kR + kR); // U+110000
  EXPECT_EQ(utf8::sanitize("\xF7\xBF\xBF\xBF"), kR + kR + kR + kR); // U+1FFFFF
  EXPECT_EQ(utf8::sanitize("\xF8\x88\x80\x80\x80"), kR + kR + kR + kR + kR);  // old 5-byte form
  EXPECT_EQ(utf8::sanitize("\xFE\xFF"), kR + kR);
  EXPECT_EQ(utf8::sanitize(std::string("a\0b", 3)), std::string("a\0b", 3));  // NUL is fine
  EXPECT_EQ(utf8::sanitize("\xEF\xBB\xBF\xE2\x80\x8B"), "\xEF\xBB\xBF\xE2\x80\x8B");  // BOM, ZWSP
  EXPECT_EQ(utf8::sanitize("\xF4\x8F\xBF\xBF"), "\xF4\x8F\xBF\xBF");  // U+10FFFF itself
  std::string out = "x";
  utf8::append_sanitized("\xC3\xA9\xC3", &out);
  EXPECT_EQ(out, "x\xC3\xA9" + kR);
}

TEST(Utf8, DecodeOneStepsOverInvalidBytesOneAtATime) {
  const std::string s = "\xE2\x82" "A\xF0\x9F\x98\x81";
  size_t pos = 0;
  EXPECT_EQ(utf8::decode_one(s, &pos), utf8::kReplacementChar);
  EXPECT_EQ(pos, 1u);
  EXPECT_EQ(utf8::decode_one(s, &pos), utf8::kReplacementChar);
  EXPECT_EQ(pos, 2u);
  EXPECT_EQ(utf8::decode_one(s, &pos), uint32_t{'A'});
  EXPECT_EQ(utf8::decode_one(s, &pos), 0x1F601u);
  EXPECT_EQ(pos, s.size());
  EXPECT_EQ(utf8::valid_sequence_length("\xE2\x82", 0), 0u);
  EXPECT_EQ(utf8::valid_sequence_length("\x80", 0), 0u);
}

TEST(Utf8, IncompleteSuffix) {
  EXPECT_EQ(utf8::incomplete_suffix_length("a\xE2\x82"), 2u);
  EXPECT_EQ(utf8::incomplete_suffix_length("\xF0\x9F\x98"), 3u);
  EXPECT_EQ(utf8::incomplete_suffix_length("\xF0"), 1u);
  EXPECT_EQ(utf8::incomplete_suffix_length("\xE0\x80"), 0u);  // can never complete (overlong)
  EXPECT_EQ(utf8::incomplete_suffix_length("\xED\xA0"), 0u);  // a surrogate
  EXPECT_EQ(utf8::incomplete_suffix_length("\xF4\x90"), 0u);  // > U+10FFFF
  EXPECT_EQ(utf8::incomplete_suffix_length("\xF5"), 0u);
  EXPECT_EQ(utf8::incomplete_suffix_length("\xC3\xA9"), 0u);
  EXPECT_EQ(utf8::incomplete_suffix_length("\x80"), 0u);
  EXPECT_EQ(utf8::incomplete_suffix_length("\x80\x80\x80\x80"), 0u);
  EXPECT_EQ(utf8::incomplete_suffix_length(""), 0u);
}

TEST(Utf8, SafePrefixCases) {
  EXPECT_EQ(utf8::safe_prefix_length("ab\xC3\xA9", 3), 2u);
  EXPECT_EQ(utf8::safe_prefix_length("ab\xC3\xA9", 4), 4u);
  EXPECT_EQ(utf8::safe_prefix_length("ab\xC3\xA9", 9), 4u);
  EXPECT_EQ(utf8::safe_prefix_length("ab\xC3\xA9x", 4), 4u);
  EXPECT_EQ(utf8::safe_prefix_length("\xF0\x9F\x8E\x89x", 2), 4u);  // longer than max: whole
  EXPECT_EQ(utf8::safe_prefix_length("\xF0\x9F\x8E\x89x", 0), 4u);
  EXPECT_EQ(utf8::safe_prefix_length("abc", 0), 1u);
  EXPECT_EQ(utf8::safe_prefix_length("", 0), 0u);
  EXPECT_EQ(utf8::safe_prefix_length("a\xE4\xB8\xAD\xE4\xB8\xAD", 5), 4u);
  // Bytes that belong to no character are cut like one-byte characters: a
  // run of stray continuation bytes never makes a piece longer than max.
  EXPECT_EQ(utf8::safe_prefix_length("a\x80\x80\x80\x80\x80\x80", 3), 3u);
  EXPECT_EQ(utf8::safe_prefix_length(std::string(100, '\x80'), 4), 4u);
  EXPECT_EQ(utf8::safe_prefix_length("\xC3\xC3\xC3", 1), 1u);
  // A truncated sequence is kept whole, like the character it may become.
  EXPECT_EQ(utf8::safe_prefix_length("ab\xE2\x82", 3), 2u);
}

// Cutting any text over and over, as the stream shaper does: nothing is lost,
// no piece of valid text splits a character, no piece exceeds max unless it is
// one character longer than max.
TEST(Utf8, RepeatedCutsOfRandomText) {
  std::mt19937 rng(7);
  const uint32_t kPool[] = {'a', ' ', 0xE9, 0x4E2D, 0x1F389, 0xFFFD, 0x10FFFF, 0};
  for (int trial = 0; trial < 2000; ++trial) {
    std::string s;
    const int n = static_cast<int>(rng() % 24);
    for (int i = 0; i < n; ++i) utf8::append(kPool[rng() % std::size(kPool)], &s);
    const bool corrupt = trial % 3 == 0 && !s.empty();
    if (corrupt) s[rng() % s.size()] = static_cast<char>(0x80 | (rng() % 0x80));
    const size_t max = rng() % 7;
    std::string joined;
    for (std::string_view rest = s; !rest.empty();) {
      const size_t k = utf8::safe_prefix_length(rest, max);
      ASSERT_GT(k, 0u);
      ASSERT_LE(k, rest.size());
      const std::string_view piece = rest.substr(0, k);
      if (!corrupt) {
        ASSERT_TRUE(utf8::is_valid(piece)) << trial;
        ASSERT_TRUE(k <= max || utf8::valid_sequence_length(piece, 0) == k) << trial;
      } else {
        ASSERT_LE(k, std::max<size_t>(max, 4)) << trial;
      }
      joined += piece;
      rest.remove_prefix(k);
    }
    ASSERT_EQ(joined, s);
  }
}

}  // namespace
}  // namespace zl
