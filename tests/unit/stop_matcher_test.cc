// engine/stop_matcher: hold-back, matches split across deltas, overlaps, UTF-8, and a
// brute-force comparison on random texts.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "engine/stop_matcher.h"

namespace zl {
namespace {

// Feeds each delta; returns what was emitted per feed.
std::vector<std::string> feed_all(StopMatcher& m, const std::vector<std::string>& deltas) {
  std::vector<std::string> out;
  for (const auto& d : deltas) out.push_back(m.feed(d).text);
  return out;
}

using Strs = std::vector<std::string>;

TEST(StopMatcher, WithoutStopStringsEverythingPassesThrough) {
  StopMatcher m;
  EXPECT_FALSE(m.has_stops());
  EXPECT_EQ(feed_all(m, {"a", "bc", ""}), (Strs{"a", "bc", ""}));
  EXPECT_EQ(m.flush(), "");
  StopMatcher empties({"", ""});
  EXPECT_FALSE(empties.has_stops());
  EXPECT_EQ(empties.feed("xyz").text, "xyz");
}

TEST(StopMatcher, AMatchInOneDeltaCutsItAndEverythingAfter) {
  StopMatcher m({"END"});
  StopFeed f = m.feed("Hello END world");
  EXPECT_EQ(f.text, "Hello ");
  ASSERT_TRUE(f.stop.has_value());
  EXPECT_EQ(*f.stop, 0u);
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.matched(), "END");
  // Nothing more comes out.
  EXPECT_EQ(m.feed("more").text, "");
  EXPECT_FALSE(m.feed("END").stop.has_value());
  EXPECT_EQ(m.flush(), "");
}

TEST(StopMatcher, AMatchSplitAcrossDeltasIsHeldThenDropped) {
  StopMatcher m({"END"});
  EXPECT_EQ(feed_all(m, {"Hel", "lo E", "N"}), (Strs{"Hel", "lo ", ""}));
  EXPECT_EQ(m.held(), "EN");
  StopFeed f = m.feed("D more");
  EXPECT_EQ(f.text, "");
  EXPECT_EQ(f.stop, 0u);
}

TEST(StopMatcher, HeldTextIsReleasedAsSoonAsItCannotMatch) {
  StopMatcher m({"<|end|>"});
  EXPECT_EQ(feed_all(m, {"a<", "|", "x"}), (Strs{"a", "", "<|x"}));
  EXPECT_EQ(m.held(), "");
  // A partial match at the end of the generation comes out on flush().
  EXPECT_EQ(m.feed("b<|en").text, "b");
  EXPECT_EQ(m.flush(), "<|en");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcher, OverlappingPrefixesOfTheSameString) {
  StopMatcher m({"abc"});
  EXPECT_EQ(m.feed("aab").text, "a");   // "ab" could start "abc"
  EXPECT_EQ(m.feed("ab").text, "ab");   // "abab": only the last "ab" may still become "abc"
  StopFeed f = m.feed("c!");
  EXPECT_EQ(f.text, "");
  EXPECT_EQ(f.stop, 0u);

  StopMatcher n({"aab"});
  EXPECT_EQ(n.feed("aaa").text, "a");   // keep "aa"
  EXPECT_EQ(n.feed("a").text, "a");
  EXPECT_EQ(n.feed("b").text, "");
  EXPECT_TRUE(n.stopped());
}

TEST(StopMatcher, SeveralStopStringsReportWhichMatched) {
  StopMatcher m({"foo", "bar", "User:"});
  EXPECT_EQ(m.feed("say ba").text, "say ");
  StopFeed f = m.feed("r now");
  EXPECT_EQ(f.text, "");
  EXPECT_EQ(f.stop, 1u);
  EXPECT_EQ(m.matched(), "bar");
  EXPECT_EQ(m.matched_index(), 1u);
  // Hold back the longest suffix that is a prefix of any of them.
  StopMatcher h({"xyz", "yq"});
  EXPECT_EQ(h.feed("axy").text, "a");  // "xy" (prefix of xyz) covers "y" (prefix of yq)
  EXPECT_EQ(h.feed("q").text, "x");    // "yq" completes
  EXPECT_EQ(h.matched(), "yq");
}

TEST(StopMatcher, TheFirstStopStringToCompleteWinsAndTiesGoToTheLonger) {
  StopMatcher m({"abcd", "bc"});
  StopFeed f = m.feed("xabcd");
  EXPECT_EQ(f.text, "xa");  // "bc" completes before "abcd" does
  EXPECT_EQ(m.matched(), "bc");
  StopMatcher t({"bc", "abc"});
  f = t.feed("xabc");
  EXPECT_EQ(f.text, "x");  // both end at 'c': the longer one cuts more
  EXPECT_EQ(t.matched(), "abc");
  StopMatcher dup({"ab", "ab"});
  (void)dup.feed("ab");
  EXPECT_EQ(dup.matched_index(), 0u);
}

TEST(StopMatcher, Utf8MultibyteStopStringsAndHoldBack) {
  StopMatcher m({"世界"});
  EXPECT_EQ(m.feed("你好世").text, "你好");
  EXPECT_EQ(m.held(), "世");
  StopFeed f = m.feed("界!");
  EXPECT_EQ(f.text, "");
  EXPECT_EQ(m.matched(), "世界");

  StopMatcher e({"é!"});
  EXPECT_EQ(e.feed("café").text, "caf");
  EXPECT_EQ(e.feed(" ok").text, "é ok");

  // A stop string that starts inside a character (odd, but possible): the hold-back is moved
  // to the character boundary so that emitted text stays valid UTF-8.
  StopMatcher odd({std::string("\xA9!")});
  EXPECT_EQ(odd.feed("café").text, "caf");
  EXPECT_EQ(odd.held(), "é");
  EXPECT_EQ(odd.feed("?").text, "é?");
}

// Reference: scan the whole text; the first stop string to complete (ties: the longest) wins.
struct Ref {
  std::string emitted;
  int stop = -1;
};
Ref reference(const std::string& text, const std::vector<std::string>& stops) {
  for (size_t end = 1; end <= text.size(); ++end) {
    int best = -1;
    for (size_t i = 0; i < stops.size(); ++i) {
      const std::string& s = stops[i];
      if (s.empty() || s.size() > end) continue;
      if (text.compare(end - s.size(), s.size(), s) != 0) continue;
      if (best < 0 || s.size() > stops[best].size()) best = static_cast<int>(i);
    }
    if (best >= 0) return {text.substr(0, end - stops[best].size()), best};
  }
  return {text, -1};
}

TEST(StopMatcher, MatchesABruteForceReferenceOnRandomTexts) {
  std::mt19937 rng(99);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const std::string alphabet = "abc";
  for (int iter = 0; iter < 20000; ++iter) {
    std::vector<std::string> stops(uniform(1, 3));
    size_t max_len = 0;
    for (auto& s : stops) {
      for (int i = uniform(1, 4); i > 0; --i) s += alphabet[uniform(0, 2)];
      max_len = std::max(max_len, s.size());
    }
    std::string text;
    for (int i = uniform(0, 30); i > 0; --i) text += alphabet[uniform(0, 2)];
    StopMatcher m(stops);
    std::string out;
    std::optional<size_t> stop;
    size_t pos = 0;
    while (pos < text.size() && !stop) {
      const size_t n = std::min<size_t>(uniform(0, 5), text.size() - pos);
      StopFeed f = m.feed(std::string_view(text).substr(pos, n));
      pos += n;
      out += f.text;
      stop = f.stop;
      ASSERT_LT(m.held().size(), max_len);
      // What is out so far never exceeds what the reference emits.
      ASSERT_EQ(out, reference(text, stops).emitted.substr(0, out.size()));
    }
    if (!stop) out += m.flush();
    const Ref want = reference(text, stops);
    ASSERT_EQ(out, want.emitted) << "text " << text;
    if (want.stop < 0) {
      ASSERT_FALSE(stop.has_value());
    } else {
      ASSERT_TRUE(stop.has_value());
      ASSERT_EQ(stops[*stop], stops[want.stop]);
    }
  }
}

}  // namespace
}  // namespace zl
