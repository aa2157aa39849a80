// The guard on its corpus (tests/unit/guard_corpus/corpus.txt, written by
// make_corpus.py): every marked span found exactly and nothing else, and the
// stream redactor on every line under random splits: its output equals
// redact(whole line), every intermediate output is a prefix of that, and no
// output reaches into a match before the whole match has been fed.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "guard/guard.h"
#include "guard/stream_redactor.h"

namespace zl::guard {
namespace {

struct Span {
  std::string kind;
  size_t start, end;
};
struct Line {
  std::string text;  // marks removed
  std::vector<Span> expect;
};

constexpr std::string_view kOpen = "\u27e6", kClose = "\u27e7";

std::vector<Line> load_corpus() {
  std::ifstream in(std::string(ZL_SOURCE_DIR) + "/tests/unit/guard_corpus/corpus.txt");
  std::vector<Line> lines;
  std::string raw;
  while (std::getline(in, raw)) {
    if (raw.empty() || raw[0] == '#') continue;
    Line line;
    size_t i = 0;
    while (i < raw.size()) {
      const size_t o = raw.find(kOpen, i);
      if (o == std::string::npos) {
        line.text += raw.substr(i);
        break;
      }
      line.text += raw.substr(i, o - i);
      const size_t bar = raw.find('|', o);
      const size_t c = raw.find(kClose, bar);
      const std::string kind = raw.substr(o + kOpen.size(), bar - o - kOpen.size());
      const size_t start = line.text.size();
      line.text += raw.substr(bar + 1, c - bar - 1);
      line.expect.push_back({kind, start, line.text.size()});
      i = c + kClose.size();
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

std::shared_ptr<const Guard> corpus_guard() {
  static const auto g = [] {
    auto p = parse_policy(R"(
[[rule]]
name = "pii"
pii = ["email", "phone", "credit_card", "iban", "us_ssn", "api_key"]
output = "redact"

[[rule]]
name = "codename"
phrases = ["project falcon", "Falcon-9 launch code"]
output = "redact"
)");
    return Guard::compile(std::move(p).value()).value();
  }();
  return g;
}

TEST(GuardCorpus, EveryMarkedSpanAndNothingElse) {
  const auto lines = load_corpus();
  ASSERT_GT(lines.size(), 400u);
  size_t tp = 0, fp = 0, fn = 0;
  for (const Line& line : lines) {
    const auto got = corpus_guard()->scan(line.text);
    for (const Match& m : got) {
      bool ok = false;
      for (const Span& s : line.expect) ok |= s.start == m.start && s.end == m.end && s.kind == corpus_guard()->kind_name(m);
      if (ok) {
        ++tp;
      } else {
        ++fp;
        ADD_FAILURE() << "unexpected " << corpus_guard()->kind_name(m) << " '"
                      << line.text.substr(m.start, m.end - m.start) << "' in: " << line.text;
      }
    }
    for (const Span& s : line.expect) {
      bool ok = false;
      for (const Match& m : got) ok |= s.start == m.start && s.end == m.end;
      if (!ok) {
        ++fn;
        ADD_FAILURE() << "missed " << s.kind << " '" << line.text.substr(s.start, s.end - s.start) << "' in: " << line.text;
      }
    }
  }
  std::printf("corpus: %zu lines, %zu true positives, %zu false positives, %zu misses\n", lines.size(), tp, fp, fn);
}

// Feeds `text` in random pieces; checks the stream contract.
void check_stream(const Guard& g, const std::shared_ptr<const Guard>& gp, const std::string& text, std::mt19937* rng) {
  const std::string want = g.redact(text, Direction::kOutput);
  StreamRedactor r(gp);
  std::string got;
  size_t fed = 0;
  while (fed < text.size()) {
    const size_t n = std::min(text.size() - fed, size_t{1} + (*rng)() % 7);
    got += r.feed(std::string_view(text).substr(fed, n)).text;
    fed += n;
    ASSERT_EQ(want.substr(0, got.size()), got) << "not a prefix of the redaction after " << fed << " bytes of: " << text;
  }
  got += r.finish().text;
  ASSERT_EQ(want, got) << text;
  EXPECT_EQ(r.held_bytes(), 0u);
}

TEST(GuardCorpus, StreamEqualsWholeOnRandomSplits) {
  const auto lines = load_corpus();
  std::mt19937 rng(7);
  for (int round = 0; round < 4; ++round) {
    for (const Line& line : lines) check_stream(*corpus_guard(), corpus_guard(), line.text, &rng);
  }
  // The whole corpus as one stream (matches next to each other, newlines between).
  std::string all;
  for (const Line& line : lines) all += line.text + "\n";
  check_stream(*corpus_guard(), corpus_guard(), all, &rng);
}

// For every prefix of every match: fed up to there, nothing of the match
// (nor the placeholder that will replace it) has been released.
TEST(GuardCorpus, NoPrefixOfAMatchIsReleased) {
  const auto lines = load_corpus();
  for (const Line& line : lines) {
    const auto matches = corpus_guard()->scan(line.text, Direction::kOutput);
    for (const Match& m : matches) {
      // Where the match's placeholder starts in the redaction.
      const std::string before = apply_redactions(*corpus_guard(), std::string_view(line.text).substr(0, m.start),
                                                  corpus_guard()->scan(std::string_view(line.text).substr(0, m.start), Direction::kOutput));
      for (size_t k = m.start + 1; k <= m.end; ++k) {
        StreamRedactor r(corpus_guard());
        const std::string out = r.feed(std::string_view(line.text).substr(0, k)).text;
        const std::string want = corpus_guard()->redact(line.text, Direction::kOutput);
        ASSERT_EQ(want.substr(0, out.size()), out) << line.text;
        // Until the match is complete its start cannot have been released.
        if (k < m.end) {
          ASSERT_LE(out.size(), before.size()) << "released into a match after " << k << " bytes of: " << line.text;
        }
      }
    }
  }
}

}  // namespace
}  // namespace zl::guard
