// guard: the normaliser and its offset map, policy loading errors (with
// lines), bounded regexes, phrases through Unicode tricks, input screening,
// and the stream redactor's release, hold-back and stop behaviour.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <thread>
#include <fstream>
#include <random>
#include <string>

#include "core/utf8.h"
#include "guard/guard.h"
#include "guard/normalize.h"
#include "guard/regex.h"
#include "guard/stream_redactor.h"

namespace zl::guard {
namespace {

std::shared_ptr<const Guard> make(std::string_view toml) {
  auto p = parse_policy(toml, "test.toml");
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  auto g = Guard::compile(std::move(p).value());
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  return std::move(g).value();
}

// ---- normaliser ---------------------------------------------------------------

TEST(GuardNormalize, FoldsCaseWidthSpacesAndRemovesFormatCharacters) {
  EXPECT_EQ(normalize_text("HeLLo"), "hello");
  EXPECT_EQ(normalize_text("\uff21\uff22\uff23\uff20\uff11"), "abc@1");  // full-width
  EXPECT_EQ(normalize_text("a\u200Bb\u200Cc\u200Dd\u2060e\uFEFFf\u00ADg"), "abcdefg");
  EXPECT_EQ(normalize_text("a\u00A0b\u2003c\u3000d"), "a b c d");
  EXPECT_EQ(normalize_text("\uFB01"), "fi");                 // ligature
  EXPECT_EQ(normalize_text("Stra\u00DFe"), "strasse");       // full case folding
  EXPECT_EQ(normalize_text("\u0663\u0664"), "34");           // Arabic-Indic digits
  EXPECT_EQ(normalize_text("a\u2011b\u2014c\u2212d"), "a-b-c-d");
  EXPECT_EQ(normalize_text("e\u0301"), "\u00E9");            // composed
  // Homoglyphs: Cyrillic а, о, р, с, е; Greek Ρ (upper) and ο.
  EXPECT_EQ(normalize_text("\u0440\u0430\u0441\u0435"), "pace");
  EXPECT_EQ(normalize_text("\u03A1\u03BFint"), "point");
  EXPECT_EQ(normalize_text("\u041D"), "h");  // Cyrillic Н looks like H
  EXPECT_EQ(normalize_text("\u043D"), "\u043D");  // н does not look like h
  EXPECT_EQ(normalize_text("\xFF"), "\uFFFD");
}

TEST(GuardNormalize, OffsetsCoverWholeOriginalCodePoints) {
  const std::string s = "x\u200B\uFF21e\u0301\uFB01z";
  const NormalizedText v = normalize(s);
  ASSERT_EQ(v.text, "xa\u00E9fiz");
  ASSERT_EQ(v.src_begin.size(), v.text.size());
  // 'x' <- x + the dropped ZWSP, one segment [0,4); 'a' <- U+FF21 [4,7);
  // é <- e + U+0301 [7,10); fi <- U+FB01 [10,13).
  EXPECT_EQ(v.original_range(0, 1), std::make_pair(size_t{0}, size_t{4}));
  EXPECT_EQ(v.original_range(1, 2), std::make_pair(size_t{4}, size_t{7}));
  EXPECT_EQ(v.original_range(2, 4), std::make_pair(size_t{7}, size_t{10}));
  EXPECT_EQ(v.original_range(4, 6), std::make_pair(size_t{10}, size_t{13}));
  EXPECT_EQ(v.original_range(0, 7), std::make_pair(size_t{0}, s.size()));
  EXPECT_TRUE(v.flags[1] & NormalizedText::kWasUpper);
  EXPECT_FALSE(v.flags[0] & NormalizedText::kWasUpper);
}

TEST(GuardNormalize, OffsetsAreMonotoneAndOnCodePointBoundariesOnRandomText) {
  const char* pieces[] = {"a", "Z", " ", "\u00A0", "\u200B", "e\u0301", "\u0301", "\uFB01", "\uFF21", "\u0430",
                          "\xF0\x9F\x98\x80", "\xFF", "\xE2\x82", "9", "\u0663", "\u00DF"};
  std::mt19937 rng(3);
  for (int t = 0; t < 300; ++t) {
    std::string s;
    for (int i = 0, n = rng() % 20; i < n; ++i) s += pieces[rng() % std::size(pieces)];
    const NormalizedText v = normalize(s);
    ASSERT_TRUE(utf8::is_valid(v.text));
    for (size_t i = 0; i < v.size(); ++i) {
      ASSERT_LT(v.src_begin[i], v.src_end[i]);
      ASSERT_LE(v.src_end[i], s.size());
      if (i > 0) {
        ASSERT_LE(v.src_begin[i - 1], v.src_begin[i]);
      }
      ASSERT_TRUE(v.src_begin[i] == 0 || !utf8::is_continuation(s[v.src_begin[i]]) ||
                  !utf8::is_valid(s.substr(0, v.src_begin[i])));
    }
    // The view of a stable prefix is a prefix of the whole view.
    const size_t k = stable_prefix_length(s);
    ASSERT_EQ(v.text.substr(0, normalize_text(s.substr(0, k)).size()), normalize_text(s.substr(0, k))) << s;
  }
}

TEST(GuardNormalize, StablePrefixHoldsWhatACombiningMarkCouldChange) {
  EXPECT_EQ(stable_prefix_length("abc"), 2u);          // 'c' + U+0301 would be ć
  EXPECT_EQ(stable_prefix_length("ab "), 3u);
  EXPECT_EQ(stable_prefix_length("ab\xE2\x82"), 1u);   // incomplete € and the 'b' before it
  EXPECT_EQ(stable_prefix_length(""), 0u);
}

// ---- policy -------------------------------------------------------------------

std::string load_error(std::string_view toml) {
  auto p = parse_policy(toml, "g.toml");
  return p.ok() ? "" : p.status().message();
}

TEST(GuardPolicy, ParsesTheDocumentedExample) {
  auto p = parse_policy(R"(# comment
[[rule]]
name = "pii"
pii = ["email", "phone", "credit_card", "iban", "us_ssn", "api_key"]
input = "redact"
output = "redact"

[[rule]]
name = "codename"
phrases = ["project falcon", "Falcon-9 launch code"]
input = "block"
output = "mask"

[[rule]]
name = "ticket"
regex = ["TICKET-[0-9]{6}"]
output = "redact"
)");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_EQ(p->rules.size(), 3u);
  EXPECT_EQ(p->rules[0].pii.size(), 6u);
  EXPECT_EQ(p->rules[0].line, 2);
  EXPECT_EQ(p->rules[1].input, InputAction::kBlock);
  EXPECT_EQ(p->rules[1].output, OutputAction::kMask);
  EXPECT_EQ(p->rules[2].input, InputAction::kAllow);
  EXPECT_EQ(p->rules[2].line, 14);
}

TEST(GuardPolicy, ErrorsNameTheLine) {
  EXPECT_EQ(load_error("[[rule]]\nname = \"t\"\nregex = [\"a+\"]\n"),
            "g.toml:3: regex 'a+': unbounded quantifier '+' (use {n,m}) at offset 1");
  EXPECT_EQ(load_error("[[rule]]\nname = \"t\"\nregex = [\n  \"ok{1,2}\",\n  \"x*\"]\n").substr(0, 9), "g.toml:5:");
  EXPECT_EQ(load_error("[[rule]]\nname = \"t\"\nregex = [\"a{2,}\"]\n").substr(0, 9), "g.toml:3:");
  EXPECT_TRUE(load_error("[[rule]]\nname = \"t\"\npii = [\"email\", \"passport\"]\n")
                  .starts_with("g.toml:3: unknown pii kind 'passport'"));
  EXPECT_EQ(load_error("[[rule]]\nname = \"t\"\nphrases = [\"x\"]\noutput = \"drop\"\n"),
            "g.toml:4: 'output' must be one of allow | mask | redact | stop");
  EXPECT_TRUE(load_error("[[rule]]\nname = \"t\"\nphrases = [\"x\"]\ninptu = \"block\"\n")
                  .starts_with("g.toml:4: unknown key 'inptu'"));
  EXPECT_EQ(load_error("[[rule]]\nname = \"a\"\nphrases = [\"x\"]\n[[rule]]\nname = \"a\"\nphrases = [\"y\"]\n"),
            "g.toml:4: rule name 'a' used twice");
  EXPECT_EQ(load_error("[[rule]]\nname = \"t\"\n"), "g.toml:1: rule 't' has no pii, phrases or regex");
  EXPECT_TRUE(load_error("[[rule]]\nname = \"t\"\npii = [\"email\"]\noutput = \"mask\"\n")
                  .starts_with("g.toml:1: rule 't': output = \"mask\" works on phrases only"));
  EXPECT_EQ(load_error("[[rule]]\nname = \"t\"\nphrases = [\"\u200B\"]\n"),
            "g.toml:3: phrase '\u200B' is empty after normalisation");
  EXPECT_EQ(load_error("[[rule]]\nname = \"t\"\nphrases = [\"x\"\n").substr(0, 7), "g.toml:");
  EXPECT_EQ(load_error(""), "g.toml:1: no [[rule]] in the policy");
  EXPECT_EQ(load_error("guard = 1\n"), "g.toml:1: unknown key 'guard' (a policy holds [[rule]] tables)");
}

TEST(GuardPolicy, LoadPolicyReadsAFileAndReportsAMissingOne) {
  EXPECT_EQ(load_policy("/nonexistent/guard.toml").status().kind(), ErrorKind::kNotFound);
  const std::string path = testing::TempDir() + "guard_policy_test.toml";
  std::ofstream(path) << "[[rule]]\nname = \"t\"\nregex = [\"(ab|c)+\"]\n";
  auto p = load_policy(path);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message().rfind(path + ":3: ", 0), 0u) << p.status().message();
  std::remove(path.c_str());
}

// ---- regex --------------------------------------------------------------------

TEST(GuardRegex, BoundedOnlyAndKnowsItsLongestMatch) {
  for (const char* bad : {"a*", "a+", "a{3,}", "(a|b)*c", "^abc", "abc$", "a?", "(?=x)", "\\bword", "[a-z", "(ab",
                          "ab)", "a{5,2}", "a{1001}"}) {
    EXPECT_FALSE(BoundedRegex::compile(bad).ok()) << bad;
  }
  EXPECT_FALSE(BoundedRegex::compile(std::string(5000, '(') + "a" + std::string(5000, ')')).ok());
  EXPECT_FALSE(BoundedRegex::compile("(a{1000}){1000}").ok());
  auto re = BoundedRegex::compile("TICKET-[0-9]{6}");
  ASSERT_TRUE(re.ok());
  EXPECT_EQ(re->max_len(), 13u);
  EXPECT_EQ(re->match("ticket-123456", 0), 13u);  // case-insensitive on the folded view
  EXPECT_EQ(re->match("ticket-12345x", 0), 0u);
  EXPECT_TRUE(re->live_at_end("see ticket-12", 4));
  EXPECT_FALSE(re->live_at_end("see ticket-1x", 4));
  auto all = [](size_t) { return true; };
  EXPECT_EQ(re->earliest_live_start("see ticket-12", 0, all), 4u);
  EXPECT_EQ(re->earliest_live_start("ticket-1 tick", 0, all), 9u);
  EXPECT_EQ(re->earliest_live_start("ticket-123456", 0, all), 13u);  // complete: nothing still alive
  EXPECT_EQ(re->earliest_live_start("see ticket-12", 5, all), 13u);
  auto alt = BoundedRegex::compile("(?:ab|abcd){1,2}x?");
  ASSERT_TRUE(alt.ok());
  EXPECT_EQ(alt->match("abcdabx", 0), 7u);  // longest
  EXPECT_EQ(alt->max_len(), 9u);
  auto cls = BoundedRegex::compile("[^a-c\\d]\\.\\w{2}");
  ASSERT_TRUE(cls.ok());
  EXPECT_EQ(cls->match("z.q_", 0), 4u);
  EXPECT_EQ(cls->match("b.q_", 0), 0u);
  EXPECT_EQ(cls->match("\u00E9.ab", 0), 5u);  // é is two bytes
}

// ---- whole-text guard ---------------------------------------------------------

constexpr std::string_view kPolicy = R"(
[[rule]]
name = "pii"
pii = ["email", "phone", "credit_card", "iban", "us_ssn", "api_key"]
input = "redact"
output = "redact"

[[rule]]
name = "codename"
phrases = ["project falcon", "Falcon-9 launch code"]
input = "block"
output = "mask"

[[rule]]
name = "ticket"
regex = ["TICKET-[0-9]{6}"]
output = "redact"

[[rule]]
name = "secret"
phrases = ["the password is"]
output = "stop"
)";

TEST(GuardGuard, PhrasesSurviveUnicodeTricks) {
  const auto g = make(kPolicy);
  for (const char* t : {"about project falcon.", "PROJECT FALCON", "proj\u200Bect fal\u200Bcon", "pro\u00ADject falcon",
                        "project\u00A0falcon", "\uFF50roject falcon", "pr\u043Eject f\u0430lcon", "project  falcon"}) {
    const auto m = g->scan(t);
    if (std::string_view(t) == "project  falcon") {
      EXPECT_TRUE(m.empty()) << t;  // two spaces: a different phrase
      continue;
    }
    ASSERT_EQ(m.size(), 1u) << t;
    EXPECT_EQ(g->kind_name(m[0]), "phrase");
    EXPECT_EQ(g->rule(m[0]).name, "codename");
  }
  EXPECT_EQ(g->redact("x proj\u200Bect falcon y", Direction::kAll), "x [REDACTED:codename] y");
}

TEST(GuardGuard, RedactPerDirectionAndScreenInput) {
  const auto g = make(kPolicy);
  const std::string t = "mail a@example.com about TICKET-123456";
  EXPECT_EQ(g->redact(t, Direction::kInput), "mail [REDACTED:email] about TICKET-123456");
  EXPECT_EQ(g->redact(t, Direction::kOutput), "mail [REDACTED:email] about [REDACTED:ticket]");
  const auto ok = g->screen_input(t);
  EXPECT_FALSE(ok.blocked_by);
  EXPECT_EQ(ok.text, "mail [REDACTED:email] about TICKET-123456");
  const auto blocked = g->screen_input("Is Project Falcon on? a@example.com");
  ASSERT_TRUE(blocked.blocked_by);
  EXPECT_EQ(g->policy().rules[*blocked.blocked_by].name, "codename");
  EXPECT_TRUE(g->has_input_rules());
  EXPECT_TRUE(g->has_output_rules());
  EXPECT_EQ(g->mask_phrases().size(), 2u);
  EXPECT_EQ(g->mask_phrases()[1].normalized, "falcon-9 launch code");
  // Longest match wins where rules overlap; offsets are original bytes.
  const auto m = g->scan("\uFF21@example.com");
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].start, 0u);
  EXPECT_EQ(m[0].end, std::string("\uFF21@example.com").size());
}

TEST(GuardGuard, ConcurrentScansAgree) {
  const auto g = make(kPolicy);
  std::string text;
  for (int i = 0; i < 200; ++i) text += "mail a" + std::to_string(i) + "@example.com about TICKET-12345" + std::to_string(i % 10) + " and project falcon. ";
  const std::string want = g->redact(text, Direction::kOutput);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) bad += g->redact(text, Direction::kOutput) != want;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_NE(want.find("[REDACTED:ticket]"), std::string::npos);
}

// ---- stream redactor ----------------------------------------------------------

TEST(GuardStream, ReleasesPlainTextAtOnceAndHoldsAPossibleMatch) {
  const auto g = make(kPolicy);
  StreamRedactor r(g);
  EXPECT_EQ(r.feed("Hello there. ").text, "Hello there. ");
  // "call " can start nothing; "4111" could be a card.
  EXPECT_EQ(r.feed("call 4111 1111").text, "call ");
  EXPECT_EQ(r.feed(" 1111 1111").text, "");
  // The last word could still be an email's local part until '!' comes.
  const Release rel = r.feed(" now!");
  EXPECT_EQ(rel.text, "[REDACTED:credit_card] now!");
  ASSERT_EQ(rel.matches.size(), 1u);
  EXPECT_EQ(rel.matches[0].start, 18u);  // stream offsets
  EXPECT_EQ(rel.matches[0].end, 37u);
  EXPECT_EQ(r.finish().text, "");
}

TEST(GuardStream, TextWithoutSpacesIsNotHeldForLong) {
  const auto g = make(kPolicy);
  StreamRedactor r(g);
  std::string out;
  // 30 CJK characters (90 bytes), no '@': at most 64 bytes may wait for one.
  for (int i = 0; i < 30; ++i) out += r.feed("\u4E2D").text;
  EXPECT_GE(out.size(), 90u - 64u);
  EXPECT_LE(r.held_bytes(), 64u);
}

TEST(GuardStream, HoldBackIsBounded) {
  const auto g = make(kPolicy);
  StreamRedactor r(g);
  // Digits and spaces forever: a card/phone candidate keeps starting, but no
  // candidate can be longer than the longest match.
  std::string out, text;
  for (int i = 0; i < 500; ++i) {
    out += r.feed("12 ").text;
    text += "12 ";
    ASSERT_LE(r.held_bytes(), g->max_match_bytes(Direction::kOutput) + 4);
  }
  EXPECT_GT(out.size(), 1000u);
  out += r.finish().text;
  EXPECT_EQ(out, g->redact(text, Direction::kOutput));
}

TEST(GuardStream, StopRuleEndsBeforeTheMatch) {
  const auto g = make(kPolicy);
  StreamRedactor r(g);
  std::string out = r.feed("Mail a@example.com. The pass").text;
  const Release rel = r.feed("word is hunter2");
  out += rel.text;
  ASSERT_TRUE(rel.stop);
  EXPECT_EQ(g->rule(*rel.stop).name, "secret");
  EXPECT_EQ(out, "Mail [REDACTED:email]. ");
  EXPECT_TRUE(r.stopped());
  EXPECT_EQ(r.feed("more").text, "");
  EXPECT_EQ(r.finish().text, "");
}

// "DE" fed, "E" held (a combining mark could follow it): the view ends at
// "d", and an IBAN start may not be judged on the letter after it
// (found by fuzz_guard).
TEST(GuardStream, NoDecisionOnTextNotYetFed) {
  const auto g = make(kPolicy);
  StreamRedactor r(g);
  std::string out = r.feed("pay DE").text;
  EXPECT_EQ(out, "pay ");
  out += r.feed("89 3704 0044 0532 0130 00 ok").text;
  out += r.finish().text;
  EXPECT_EQ(out, "pay [REDACTED:iban] ok");
}

TEST(GuardStream, SplitUtf8AndCombiningMarksAcrossDeltas) {
  const auto g = make(kPolicy);
  StreamRedactor r(g);
  std::string out;
  const std::string text = "caf\u00E9 e\u0301 \u20AC5 pr\u200Boject falcon ok";
  for (char c : text) out += r.feed(std::string(1, c)).text;
  out += r.finish().text;
  EXPECT_EQ(out, "caf\u00E9 e\u0301 \u20AC5 [REDACTED:codename] ok");
}

TEST(GuardStream, RandomSplitsOfRandomTextsEqualTheWholeRedaction) {
  const auto g = make(kPolicy);
  const char* pieces[] = {"a", "b", "@", ".", "com", " ", "-", "4111", "1111", "0", "9", "+1", "(", ")", "\u200B",
                          "e\u0301", "\uFF21", "\uFF14", "TICKET-", "project", "falcon", "sk-", "ant-", "AKIA",
                          "DE89", "3704", "\u00A0", "\xE2\x82", "\xAC", "the password is", "\n", "x7"};
  std::mt19937 rng(11);
  for (int t = 0; t < 3000; ++t) {
    std::string text;
    for (int i = 0, n = 1 + rng() % 30; i < n; ++i) text += pieces[rng() % std::size(pieces)];
    const std::string whole = g->redact(text, Direction::kOutput);
    const auto matches = g->scan(text, Direction::kOutput);
    StreamRedactor r(g);
    std::string out;
    bool stopped = false;
    size_t fed = 0;
    while (fed < text.size() && !stopped) {
      const size_t n = std::min(text.size() - fed, size_t{1} + rng() % 6);
      const Release rel = r.feed(std::string_view(text).substr(fed, n));
      out += rel.text;
      stopped = rel.stop.has_value();
      fed += n;
      ASSERT_EQ(whole.substr(0, out.size()), out) << text;
    }
    if (!stopped) {
      const Release rel = r.finish();
      out += rel.text;
      stopped = rel.stop.has_value();
    }
    if (!stopped) {
      ASSERT_EQ(out, whole) << text;
    } else {
      // The text before the first stop match, redacted.
      size_t i = 0;
      while (g->rule(matches[i]).output != OutputAction::kStop) ++i;
      const std::vector<Match> before(matches.begin(), matches.begin() + i);
      ASSERT_EQ(out, apply_redactions(*g, std::string_view(text).substr(0, matches[i].start), before)) << text;
    }
  }
}

// Arbitrary bytes (invalid UTF-8, lone combining marks, controls): no crash,
// offsets inside the text, and the stream agrees with the whole.
TEST(GuardStream, ArbitraryBytes) {
  const auto g = make(kPolicy);
  std::mt19937 rng(5);
  static constexpr char kBytes[] = "a@.-1 9(+\xcc\x81\xe2\x80\x8b\xff\xc3\xa9\x00\n";
  const std::string alphabet = std::string(kBytes, sizeof kBytes - 1) + "TICKET-0";
  for (int t = 0; t < 2000; ++t) {
    std::string text;
    for (int i = 0, n = static_cast<int>(rng() % 64); i < n; ++i) {
      text += rng() % 4 == 0 ? static_cast<char>(rng() % 256) : alphabet[rng() % alphabet.size()];
    }
    for (const Match& m : g->scan(text)) {
      ASSERT_LT(m.start, m.end);
      ASSERT_LE(m.end, text.size());
    }
    StreamRedactor r(g);
    std::string out;
    for (size_t at = 0; at < text.size(); at += 3) out += r.feed(std::string_view(text).substr(at, 3)).text;
    out += r.finish().text;
    if (!r.stopped()) {
      ASSERT_EQ(out, g->redact(text, Direction::kOutput));
    }
  }
}

}  // namespace
}  // namespace zl::guard
