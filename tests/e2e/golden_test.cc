// The reference forward pass against llama.cpp's golden outputs
// (../shared/golden/README.md): teacher-forced logits within the README's
// tolerances at every step, argmax equal where the golden margin allows, and
// free-running greedy generation equal where the README says it is sound.
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "support/process.h"

namespace zl::test {
namespace {

struct GoldenModel {
  std::string name;
  double tolerance;   // max |Δlogit|, F32 KV cache (README "Suggested way to compare")
  bool free_running;  // a free greedy run must reproduce the golden ids
};

const GoldenModel kModels[] = {
    {"stories260K", 1e-4, true},       {"tiny-llama-F32", 2e-5, true},   {"tiny-llama-F16", 1e-3, false},
    {"tiny-llama-BF16", 1e-2, false},  {"tiny-llama-Q8_0", 3e-2, false}, {"tiny-llama-Q4_0", 3e-2, false},
    {"tiny-llama-Q4_K_M", 3e-2, false}, {"tiny-llama-Q6_K", 3e-2, false}, {"tiny-qwen2-F32", 2e-5, true},
    {"tiny-qwen3-F32", 2e-5, true},
};

// Files in ../shared/golden that kModels does not list run too, with the
// tolerance of their tensor type (the name's last part: F32, F16, BF16, or
// a quantized type or mix) and no free run: a new golden file needs no code.
double tolerance_for(const std::string& name) {
  const std::string type = name.substr(name.rfind('-') + 1);
  if (type == "F32") return 2e-5;
  if (type == "F16") return 1e-3;
  if (type == "BF16") return 1e-2;
  return 3e-2;
}

std::vector<GoldenModel> golden_models() {
  std::vector<GoldenModel> out(std::begin(kModels), std::end(kModels));
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(shared_dir() + "/golden", ec)) {
    if (e.path().extension() == ".json") found.push_back(e.path().stem().string());
  }
  std::sort(found.begin(), found.end());
  for (const std::string& name : found) {
    const bool listed = std::any_of(out.begin(), out.end(), [&](const GoldenModel& m) { return m.name == name; });
    if (!listed) out.push_back({name, tolerance_for(name), false});
  }
  return out;
}

void PrintTo(const GoldenModel& m, std::ostream* os) { *os << m.name; }

std::vector<int64_t> ints(const boost::json::value& v) {
  std::vector<int64_t> out;
  for (const auto& x : v.as_array()) out.push_back(x.as_int64());
  return out;
}

std::vector<double> doubles(const boost::json::value& v) {
  std::vector<double> out;
  for (const auto& x : v.as_array()) out.push_back(x.is_double() ? x.as_double() : static_cast<double>(x.as_int64()));
  return out;
}

std::string join(const std::vector<int64_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(ids[i]);
  }
  return s;
}

class GoldenTest : public ::testing::TestWithParam<GoldenModel> {
 protected:
  void SetUp() override {
    const std::string golden = shared_dir() + "/golden/" + GetParam().name + ".json";
    model_ = shared_dir() + "/models/" + GetParam().name + ".gguf";
    if (!file_exists(golden) || !file_exists(model_)) {
      GTEST_SKIP() << "SKIPPED: " << golden << " or " << model_ << " not found (../shared absent)";
    }
    doc_ = boost::json::parse(read_file(golden));
  }
  std::string model_;
  boost::json::value doc_;
};

TEST_P(GoldenTest, TeacherForcedLogitsWithinTolerance) {
  const double tol = GetParam().tolerance;
  double worst = 0;
  int n_steps = 0, n_argmax_checked = 0;
  const auto& cases = doc_.at("cases").as_array();
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const auto prompt = ints(cases[ci].at("prompt_ids"));
    const auto generated = ints(cases[ci].at("generated_ids"));
    const auto& golden_logits = cases[ci].at("logits").as_array();
    std::vector<int64_t> fed = prompt;
    fed.insert(fed.end(), generated.begin(), generated.end() - 1);  // teacher forcing
    auto r = run_command(zerolayer_bin() + " logits --threads 2 --model " + model_ + " --ids " + join(fed));
    ASSERT_EQ(r.exit_code, 0) << "zerolayer logits failed on case " << ci;
    auto ours_doc = boost::json::parse(r.out);
    const auto& ours = ours_doc.at("logits").as_array();
    ASSERT_EQ(ours.size(), fed.size());
    for (size_t i = 0; i < generated.size(); ++i) {
      const auto want = doubles(golden_logits[i]);
      const auto got = doubles(ours[prompt.size() - 1 + i]);
      ASSERT_EQ(want.size(), got.size());
      double max_diff = 0;
      for (size_t j = 0; j < want.size(); ++j) max_diff = std::max(max_diff, std::abs(want[j] - got[j]));
      worst = std::max(worst, max_diff);
      ++n_steps;
      EXPECT_LE(max_diff, tol) << "case " << ci << " step " << i;
      // Argmax must agree where the golden top-2 margin exceeds twice the tolerance.
      std::vector<double> sorted = want;
      std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
      if (sorted[0] - sorted[1] > 2 * tol) {
        ++n_argmax_checked;
        const auto argmax = std::max_element(got.begin(), got.end()) - got.begin();
        EXPECT_EQ(argmax, generated[i]) << "case " << ci << " step " << i;
      }
    }
  }
  std::printf("%s: %d steps, max |dlogit| %.3g (tolerance %.0e), argmax checked at %d steps\n",
              GetParam().name.c_str(), n_steps, worst, tol, n_argmax_checked);
}

TEST_P(GoldenTest, FreeRunningGreedyMatches) {
  if (!GetParam().free_running) GTEST_SKIP() << "golden README: a free run is not sound for this file";
  for (const auto& c : doc_.at("cases").as_array()) {
    const auto prompt = ints(c.at("prompt_ids"));
    const auto generated = ints(c.at("generated_ids"));
    auto r = run_command(zerolayer_bin() + " generate --ignore-eos --temperature 0 --kv-type f32 --json --model " + model_ +
                         " --prompt-ids " + join(prompt) + " -n " + std::to_string(generated.size()));
    ASSERT_EQ(r.exit_code, 0);
    auto out = boost::json::parse(r.out);
    EXPECT_EQ(ints(out.at("prompt_ids")), prompt);
    EXPECT_EQ(ints(out.at("generated_ids")), generated);
  }
}

// stories260K's text cases: the prompt goes through our tokenizer, and the
// generated text is the concatenation of the generated pieces.
TEST_P(GoldenTest, TextPromptsReproduceGoldenText) {
  int n_text_cases = 0;
  for (const auto& c : doc_.at("cases").as_array()) {
    if (!c.as_object().contains("prompt_text")) continue;
    ++n_text_cases;
    const std::string prompt(c.at("prompt_text").as_string());
    const auto generated = ints(c.at("generated_ids"));
    auto r = run_command(zerolayer_bin() + " generate --ignore-eos --temperature 0 --kv-type f32 --json --model " +
                         model_ + " --prompt '" + prompt + "' -n " + std::to_string(generated.size()));
    ASSERT_EQ(r.exit_code, 0);
    auto out = boost::json::parse(r.out);
    EXPECT_EQ(ints(out.at("prompt_ids")), ints(c.at("prompt_ids"))) << prompt;
    EXPECT_EQ(ints(out.at("generated_ids")), generated) << prompt;
    EXPECT_EQ(std::string(out.at("text").as_string()), std::string(c.at("generated_text").as_string())) << prompt;
  }
  if (n_text_cases == 0) GTEST_SKIP() << "no text cases in this golden file";
}

INSTANTIATE_TEST_SUITE_P(Models, GoldenTest, ::testing::ValuesIn(golden_models()),
                         [](const auto& info) {
                           std::string n = info.param.name;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace zl::test
