// `zerolayer guard`, run for real: JSON lines in, one answer per line out,
// an error line for a bad line without aborting, exit 2 naming the policy
// line; and precision/recall of the built-in detectors over the guard
// corpus (tests/unit/guard_corpus/corpus.txt) through the command.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/json_escape.h"
#include "support/process.h"

namespace zl::test {
namespace {

namespace json = boost::json;

std::string write_temp(const std::string& name, const std::string& content) {
  const std::string path = ::testing::TempDir() + "guard_cli_" + name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

constexpr const char* kPolicy = R"([[rule]]
name = "pii"
pii = ["email", "phone", "credit_card", "iban", "us_ssn", "api_key"]
input = "redact"
output = "redact"

[[rule]]
name = "codename"
phrases = ["project falcon", "Falcon-9 launch code"]
input = "block"
output = "mask"
)";

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

TEST(GuardCli, AnswersEveryLineAndReportsBadOnes) {
  const std::string policy = write_temp("policy.toml", kPolicy);
  const std::string input = write_temp("in.jsonl",
                                       "{\"text\": \"Contact me at john@example.com today\"}\n"
                                       "{\"text\": \n"
                                       "\n"
                                       "[1, 2]\n"
                                       "{\"text\": \"pro\\u200bject falcon and 4111 1111 1111 1111\"}\n"
                                       "{\"text\": \"version 1.2.3 on 2024-01-15, sk-short\"}\n");
  const CommandResult r = run_command(zerolayer_bin() + " guard --guard " + policy + " < " + input + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto out = lines_of(r.out);
  ASSERT_EQ(out.size(), 5u) << r.out;
  EXPECT_EQ(json::parse(out[0]), json::parse(R"({"text": "Contact me at [REDACTED:email] today",
      "matches": [{"rule": "pii", "kind": "email", "start": 14, "end": 30}]})"));
  EXPECT_EQ(json::parse(out[1]).at("error").at("line"), 2);
  EXPECT_EQ(json::parse(out[2]).at("error").at("line"), 4);
  EXPECT_EQ(json::parse(out[3]), json::parse(R"({"text": "[REDACTED:codename] and [REDACTED:credit_card]",
      "matches": [{"rule": "codename", "kind": "phrase", "start": 0, "end": 17},
                  {"rule": "pii", "kind": "credit_card", "start": 22, "end": 41}]})"));
  EXPECT_EQ(json::parse(out[4]), json::parse(R"({"text": "version 1.2.3 on 2024-01-15, sk-short", "matches": []})"));
}

TEST(GuardCli, InputDirectionSaysWhichRuleBlocks) {
  const std::string policy = write_temp("policy_in.toml", kPolicy);
  const std::string input = write_temp("in_dir.jsonl", "{\"text\": \"Is PROJECT FALCON on?\"}\n");
  const CommandResult r = run_command(zerolayer_bin() + " guard --direction input --guard " + policy + " < " + input);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(json::parse(r.out).at("blocked"), "codename");
}

TEST(GuardCli, BadPolicyExitsTwoNamingTheLine) {
  const std::string policy = write_temp("bad.toml", "[[rule]]\nname = \"t\"\n\nregex = [\"TICKET-[0-9]+\"]\n");
  const CommandResult r = run_command(zerolayer_bin() + " guard --guard " + policy + " </dev/null 2>&1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("bad.toml:4: regex 'TICKET-[0-9]+': unbounded quantifier '+'"), std::string::npos) << r.out;
  EXPECT_EQ(run_command(zerolayer_bin() + " guard </dev/null 2>&1").exit_code, 2);
  EXPECT_EQ(run_command(zerolayer_bin() + " guard --guard /nonexistent.toml </dev/null 2>&1").exit_code, 2);
}

struct Figures {
  size_t lines = 0, expected = 0, found = 0, wrong = 0;
  double precision() const { return found + wrong ? double(found) / double(found + wrong) : 1.0; }
  double recall() const { return expected ? double(found) / double(expected) : 1.0; }
};

// Runs `zerolayer guard` over a marked corpus file: a match counts as found
// when kind and byte range equal a marked span, wrong otherwise.
Figures measure(const std::string& corpus_file) {
  std::ifstream in(std::string(ZL_SOURCE_DIR) + "/tests/unit/guard_corpus/" + corpus_file);
  const std::string open = "\u27e6", close = "\u27e7";
  struct Span {
    std::string kind;
    size_t start, end;
  };
  std::vector<std::vector<Span>> expect;
  std::string jsonl;
  for (std::string raw; std::getline(in, raw);) {
    if (raw.empty() || raw[0] == '#') continue;
    std::string text;
    std::vector<Span> spans;
    size_t i = 0;
    while (true) {
      const size_t o = raw.find(open, i);
      if (o == std::string::npos) break;
      const size_t bar = raw.find('|', o), c = raw.find(close, bar);
      text += raw.substr(i, o - i);
      const size_t start = text.size();
      text += raw.substr(bar + 1, c - bar - 1);
      spans.push_back({raw.substr(o + open.size(), bar - o - open.size()), start, text.size()});
      i = c + close.size();
    }
    text += raw.substr(i);
    expect.push_back(spans);
    jsonl += "{\"text\": ";
    append_json_string(jsonl, text);
    jsonl += "}\n";
  }
  const std::string policy = write_temp("pr.toml", kPolicy);
  const std::string input = write_temp(corpus_file + ".jsonl", jsonl);
  const CommandResult r = run_command(zerolayer_bin() + " guard --guard " + policy + " < " + input);
  EXPECT_EQ(r.exit_code, 0);
  const auto out = lines_of(r.out);
  EXPECT_EQ(out.size(), expect.size());
  Figures f;
  f.lines = expect.size();
  for (size_t l = 0; l < out.size() && l < expect.size(); ++l) {
    f.expected += expect[l].size();
    const json::value answer = json::parse(out[l]);
    for (const json::value& m : answer.at("matches").as_array()) {
      bool hit = false;
      for (const Span& s : expect[l]) {
        hit |= m.at("kind").as_string() == s.kind && static_cast<size_t>(m.at("start").as_int64()) == s.start &&
               static_cast<size_t>(m.at("end").as_int64()) == s.end;
      }
      (hit ? f.found : f.wrong) += 1;
    }
  }
  std::printf("guard %s: %zu lines, %zu marked spans, %zu found, %zu wrong; precision %.4f recall %.4f\n",
              corpus_file.c_str(), f.lines, f.expected, f.found, f.wrong, f.precision(), f.recall());
  return f;
}

// Precision and recall of the detectors (and the codename phrases) through
// the command: corpus.txt is generated from templates, heldout.txt written
// by hand without tuning the detectors to it.
TEST(GuardCli, PrecisionAndRecallOnTheCorpus) {
  const Figures generated = measure("corpus.txt");
  EXPECT_GE(generated.precision(), 0.98);
  EXPECT_GE(generated.recall(), 0.98);
  const Figures heldout = measure("heldout.txt");
  EXPECT_GE(heldout.precision(), 0.95);
  EXPECT_GE(heldout.recall(), 0.95);
}

}  // namespace
}  // namespace zl::test
