// The built-in demo model (models/zerolayer-demo.gguf): found without
// --model, named as the demo model, and writing English: at least 80% of the
// words it generates over a few prompts are dictionary words (wamerican).
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cctype>
#include <fstream>
#include <string>
#include <unordered_set>
#include <vector>

#include "support/process.h"

namespace zl::test {
namespace {

const char kWordList[] = "/usr/share/dict/american-english";

std::unordered_set<std::string> load_words() {
  std::unordered_set<std::string> words;
  std::ifstream f(kWordList);
  std::string w;
  while (std::getline(f, w)) {
    std::transform(w.begin(), w.end(), w.begin(), [](unsigned char c) { return std::tolower(c); });
    words.insert(w);
  }
  return words;
}

// Lower-case words of letters (an apostrophe inside a word is kept, so "king's"
// is looked up as written, and then without its "'s").
std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  auto flush = [&] {
    while (!cur.empty() && cur.back() == '\'') cur.pop_back();
    if (!cur.empty()) out.push_back(cur);
    cur.clear();
  };
  for (unsigned char c : text) {
    if (std::isalpha(c) || (c == '\'' && !cur.empty())) {
      cur += static_cast<char>(std::tolower(c));
    } else {
      flush();
    }
  }
  flush();
  return out;
}

TEST(DefaultModel, IsFoundWithoutModelFlagAndNamedAsTheDemo) {
  auto r = run_command(zerolayer_bin() + " inspect --model " + std::string(ZL_SOURCE_DIR) + "/models/zerolayer-demo.gguf");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("zerolayer's built-in demo model"), std::string::npos);
  auto g = run_command("cd /tmp && " + zerolayer_bin() + " generate --prompt 'The' -n 4 --json");
  ASSERT_EQ(g.exit_code, 0) << "generate without --model must use the built-in demo model";
}

TEST(DefaultModel, WritesMostlyDictionaryWords) {
  const auto dict = load_words();
  if (dict.empty()) GTEST_SKIP() << "SKIPPED: " << kWordList << " not found (package wamerican)";
  int n_words = 0, n_known = 0;
  std::string all;
  for (const char* prompt : {"The old man", "Once upon a time", "A wise person knows", "In the morning",
                             "My friend said"}) {
    for (int seed : {1, 2}) {
      auto r = run_command(zerolayer_bin() + " generate --prompt '" + prompt + "' -n 60 --temperature 0.8 --seed " +
                           std::to_string(seed) + " --json");
      ASSERT_EQ(r.exit_code, 0);
      const std::string text(boost::json::parse(r.out).at("text").as_string());
      all += text + "\n";
      for (const std::string& w : split_words(text)) {
        ++n_words;
        bool known = dict.count(w) > 0;
        if (!known && w.size() > 2 && w.compare(w.size() - 2, 2, "'s") == 0) known = dict.count(w.substr(0, w.size() - 2)) > 0;
        n_known += known;
      }
    }
  }
  ASSERT_GT(n_words, 200) << all;
  const double ratio = static_cast<double>(n_known) / n_words;
  std::printf("%d of %d generated words (%.1f%%) are in %s\n", n_known, n_words, 100 * ratio, kWordList);
  EXPECT_GE(ratio, 0.80) << all;
}

}  // namespace
}  // namespace zl::test
