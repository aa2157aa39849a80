// guard/token_mask.h: the phrase automaton and the per-token table against a
// brute-force reference (substring search on the whole output) on random
// phrase sets, vocabularies and token streams.
#include "guard/token_mask.h"

#include <gtest/gtest.h>

#include <random>

#include "guard/guard.h"
#include "guard/policy.h"

namespace zl::guard {
namespace {

// The rule of the first phrase occurrence in `text` that ends after byte
// `old_size` (completed by the bytes appended): earliest end, then the lowest
// rule index; -1 when there is none.
int32_t brute_completed(const std::vector<MaskPhrase>& phrases, const std::string& text, size_t old_size) {
  int32_t best = -1;
  size_t best_end = SIZE_MAX;
  for (const MaskPhrase& p : phrases) {
    if (p.normalized.empty()) continue;
    for (size_t at = text.find(p.normalized); at != std::string::npos; at = text.find(p.normalized, at + 1)) {
      const size_t end = at + p.normalized.size();
      if (end <= old_size) continue;
      const auto rule = static_cast<int32_t>(p.rule);
      if (end < best_end || (end == best_end && rule < best)) {
        best = rule;
        best_end = end;
      }
      break;
    }
  }
  return best;
}

std::string random_string(std::mt19937& rng, std::string_view alphabet, size_t min_len, size_t max_len) {
  std::uniform_int_distribution<size_t> len(min_len, max_len);
  std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1);
  std::string s(len(rng), ' ');
  for (char& c : s) c = alphabet[pick(rng)];
  return s;
}

TEST(PhraseAutomaton, FindsEveryPhraseAndOnlyThose) {
  const std::vector<MaskPhrase> phrases{{0, "he"}, {1, "she"}, {2, "his"}, {3, "hers"}};
  PhraseAutomaton a(phrases);
  EXPECT_EQ(a.feed(PhraseAutomaton::kRoot, "ushers"), -1 - 0);  // "she" and "he" end together: rule 0 wins
  EXPECT_EQ(a.feed(PhraseAutomaton::kRoot, "hi"), a.feed(a.feed(PhraseAutomaton::kRoot, "h"), "i"));
  EXPECT_GE(a.feed(PhraseAutomaton::kRoot, "hxsxh"), 0);
  EXPECT_EQ(a.feed(a.feed(PhraseAutomaton::kRoot, "xxh"), "is"), -1 - 2);
  EXPECT_EQ(a.byte_class('x'), 0);
}

TEST(PhraseAutomaton, EmptyPhrasesNeverMatch) {
  const std::vector<MaskPhrase> phrases{{0, ""}};
  PhraseAutomaton a(phrases);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.feed(PhraseAutomaton::kRoot, "anything"), PhraseAutomaton::kRoot);
}

TEST(TokenMaskTable, InertTokensResetToRoot) {
  const std::vector<MaskPhrase> phrases{{0, "ab"}};
  const std::vector<std::string> vocab{"a", "b", "xy", "", "ba"};
  TokenMaskTable t(phrases, vocab);
  EXPECT_FALSE(t.can_advance(2));
  EXPECT_FALSE(t.can_advance(3));
  EXPECT_TRUE(t.can_advance(4));
  const MaskStep after_a = t.step(PhraseAutomaton::kRoot, 0);
  EXPECT_NE(after_a.state, PhraseAutomaton::kRoot);
  EXPECT_EQ(t.step(after_a.state, 2).state, PhraseAutomaton::kRoot);
  EXPECT_TRUE(t.step(after_a.state, 1).refused());
  EXPECT_TRUE(t.step(after_a.state, 4).refused());          // "a" + "ba" contains "ab"
  EXPECT_EQ(t.step(after_a.state, 4).state, after_a.state);  // refused: unchanged
  EXPECT_FALSE(t.step(after_a.state, 99).refused());         // outside the vocabulary
}

// Random phrases, vocabularies and streams: at each step a random token is
// proposed; the table's verdict must equal the brute force's, and a refused
// token is not appended (as the engine resamples).
TEST(TokenMaskTable, MatchesBruteForceOnRandomStreams) {
  std::mt19937 rng(1234);
  int n_refused = 0;
  for (int round = 0; round < 200; ++round) {
    std::vector<MaskPhrase> phrases;
    const int n_phrases = 1 + static_cast<int>(rng() % 6);
    for (int i = 0; i < n_phrases; ++i) {
      phrases.push_back({static_cast<uint32_t>(rng() % 3), random_string(rng, "abc ", 1, 5)});
    }
    std::vector<std::string> vocab;
    for (int i = 0; i < 40; ++i) vocab.push_back(random_string(rng, "abc x", 0, 4));
    TokenMaskTable table(phrases, vocab);
    std::string text;
    int32_t state = PhraseAutomaton::kRoot;
    for (int i = 0; i < 200; ++i) {
      const auto token = static_cast<int32_t>(rng() % vocab.size());
      const MaskStep s = table.step(state, token);
      const int32_t want = brute_completed(phrases, text + vocab[token], text.size());
      std::string ps; for (auto& p : phrases) ps += "[" + p.normalized + "]" + std::to_string(p.rule);
      ASSERT_EQ(s.rule, want) << ps << " round " << round << " text '" << text << "' token '" << vocab[token] << "'";
      if (s.refused()) {
        ++n_refused;
        EXPECT_EQ(s.state, state);
        continue;
      }
      text += vocab[token];
      state = s.state;
    }
  }
  EXPECT_GT(n_refused, 100);  // the streams did exercise refusals
}

// build_token_mask: the guard's normalised phrases against normalised token
// pieces: case, full-width forms and zero-width pieces do not hide a phrase.
TEST(BuildTokenMask, NormalisesPhrasesAndTokenPieces) {
  auto policy = parse_policy("[[rule]]\nname = \"codename\"\nphrases = [\"Project Falcon\"]\noutput = \"mask\"\n");
  ASSERT_TRUE(policy.ok()) << policy.status().to_string();
  auto guard = Guard::compile(std::move(policy).value());
  ASSERT_TRUE(guard.ok());
  //                                   0      1       2        3      4           5     6
  const std::vector<std::string> vocab{"Pro", "JECT", " fal", "CON", "\u200b", "con", "\uff23on"};
  auto table = build_token_mask(**guard, vocab);
  ASSERT_NE(table, nullptr);
  auto feed = [&](std::initializer_list<int32_t> ids) {
    int32_t state = PhraseAutomaton::kRoot;
    for (int32_t id : ids) {
      const MaskStep s = table->step(state, id);
      EXPECT_FALSE(s.refused()) << "token " << id;
      state = s.state;
    }
    return state;
  };
  const int32_t after = feed({0, 1, 4, 2});  // "Pro" "JECT" ZWSP " fal"
  EXPECT_TRUE(table->step(after, 3).refused());
  EXPECT_TRUE(table->step(after, 5).refused());
  EXPECT_TRUE(table->step(after, 6).refused());  // full-width C
  EXPECT_FALSE(table->step(feed({0, 2}), 3).refused());  // "Pro fal" + "CON": not the phrase
  // No mask rule: no table.
  auto redact_only = Guard::compile(parse_policy("[[rule]]\nname = \"r\"\nphrases = [\"x\"]\noutput = \"redact\"\n").value());
  ASSERT_TRUE(redact_only.ok());
  EXPECT_EQ(build_token_mask(**redact_only, vocab), nullptr);
}

}  // namespace
}  // namespace zl::guard
