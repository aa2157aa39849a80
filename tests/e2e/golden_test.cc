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

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The README's tolerances, by the file's name: its tensor type is the last
// '-' part. A free greedy run is sound for stories260K and the F32 files
// except tiny-gpt-oss-F32 (a 5.3e-6 margin in case 1).
GoldenModel golden_model(const std::string& name) {
  if (name == "stories260K") return {name, 1e-4, true};
  if (ends_with(name, "-F32")) {
    const bool gemma3 = name.find("gemma3") != std::string::npos;  // llama.cpp's F16-table GELU
    return {name, gemma3 ? 1e-3 : 2e-5, name.find("gpt-oss") == std::string::npos};
  }
  if (ends_with(name, "-F16")) return {name, 1e-3, false};
  if (ends_with(name, "-BF16")) return {name, 1e-2, false};
  return {name, 3e-2, false};  // the quantized files
}

// Every golden file that has its model: new files are picked up as they come.
std::vector<GoldenModel> discover() {
  std::vector<GoldenModel> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(shared_dir() + "/golden", ec)) {
    const std::string file = e.path().filename().string();
    if (!ends_with(file, ".json")) continue;
    const std::string name = file.substr(0, file.size() - 5);
    if (file_exists(shared_dir() + "/models/" + name + ".gguf")) out.push_back(golden_model(name));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  if (out.empty()) out.push_back({"absent", 0, false});  // SetUp skips it: ../shared is absent
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
    // A file whose architecture or tensor type this build does not have yet
    // is reported as skipped, with zerolayer's own error, not as a failure.
    auto probe = run_command(zerolayer_bin() + " logits --model " + model_ + " --ids 1 2>&1 >/dev/null");
    if (probe.exit_code != 0 && probe.out.find(": unsupported: ") != std::string::npos) {
      GTEST_SKIP() << "SKIPPED: " << probe.out;
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

INSTANTIATE_TEST_SUITE_P(Models, GoldenTest, ::testing::ValuesIn(discover()),
                         [](const auto& info) {
                           std::string n = info.param.name;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });


// The golden files per KV cache type (`logits --kv-type`): teacher-forced
// logits of the longest case (the most positions, so the most KV rounding)
// against llama.cpp's F32-KV golden logits and against our own F16-KV run,
// and the argmax wherever the golden top-2 margin exceeds twice the
// tolerance. Tolerances (max |Δlogit|) are about 2-3x the measured worst case:
//   f16   K and V rounded to 11 bits: 3e-4 / 7e-4 on the random tiny models
//         (logits within a few units), 1.3e-2 on stories260K (a trained model
//         whose logits span ±15).
//   q8_0  32-value blocks with an F16 scale, each value within max|x|/254 of
//         its block, and the query quantized the same way for q·k (as
//         llama.cpp scores a q8_0 cache): 6.3e-3 / 2.1e-2 on the tiny models
//         (head_dim 32: a block is one head's row; 6e-3 / 1.8e-2 with a
//         float query). stories260K has head_dim 8, so one block spans four
//         heads of K after RoPE and the smaller heads lose most of their
//         bits: 0.84 there (0.75 with a float query; the argmax still
//         agrees) — use f16 for models with head_dim < 32.
struct GoldenKvCase {
  std::string model;
  std::string kv_type;
  double vs_golden;  // max |Δlogit| against the golden (F32 KV) logits
  double vs_f16;     // max |Δlogit| against our F16-KV logits (0: not compared)
};

const GoldenKvCase kKvCases[] = {
    {"stories260K", "f16", 3e-2, 0},      {"stories260K", "q8_0", 1.5, 1.5},
    {"tiny-llama-F32", "f16", 1e-3, 0},   {"tiny-llama-F32", "q8_0", 2e-2, 2e-2},
    {"tiny-gemma3-F32", "f16", 2e-3, 0},  {"tiny-gemma3-F32", "q8_0", 5e-2, 5e-2},
};

class GoldenKvTest : public ::testing::TestWithParam<GoldenKvCase> {};

std::vector<std::vector<double>> logits_rows(const std::string& model, const std::string& kv_type,
                                             const std::vector<int64_t>& fed) {
  auto r = run_command(zerolayer_bin() + " logits --threads 2 --kv-type " + kv_type + " --model " + model + " --ids " +
                       join(fed));
  EXPECT_EQ(r.exit_code, 0) << "zerolayer logits --kv-type " << kv_type << " failed";
  std::vector<std::vector<double>> rows;
  if (r.exit_code != 0) return rows;
  const boost::json::value doc = boost::json::parse(r.out);
  for (const auto& row : doc.at("logits").as_array()) rows.push_back(doubles(row));
  return rows;
}

TEST_P(GoldenKvTest, TeacherForcedLogitsWithinKvTolerance) {
  const GoldenKvCase& kc = GetParam();
  const std::string golden = shared_dir() + "/golden/" + kc.model + ".json";
  const std::string model = shared_dir() + "/models/" + kc.model + ".gguf";
  if (!file_exists(golden) || !file_exists(model)) GTEST_SKIP() << "SKIPPED: " << golden << " not found";
  const auto doc = boost::json::parse(read_file(golden));
  const auto& cases = doc.at("cases").as_array();
  size_t longest = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    if (cases[i].at("prompt_ids").as_array().size() > cases[longest].at("prompt_ids").as_array().size()) longest = i;
  }
  const auto prompt = ints(cases[longest].at("prompt_ids"));
  const auto generated = ints(cases[longest].at("generated_ids"));
  const auto& golden_logits = cases[longest].at("logits").as_array();
  std::vector<int64_t> fed = prompt;
  fed.insert(fed.end(), generated.begin(), generated.end() - 1);
  const auto ours = logits_rows(model, kc.kv_type, fed);
  ASSERT_EQ(ours.size(), fed.size());
  std::vector<std::vector<double>> f16;
  if (kc.vs_f16 > 0) {
    f16 = logits_rows(model, "f16", fed);
    ASSERT_EQ(f16.size(), fed.size());
  }
  double worst = 0, worst_f16 = 0;
  for (size_t i = 0; i < generated.size(); ++i) {
    const auto want = doubles(golden_logits[i]);
    const auto& got = ours[prompt.size() - 1 + i];
    ASSERT_EQ(want.size(), got.size());
    for (size_t j = 0; j < want.size(); ++j) {
      worst = std::max(worst, std::abs(want[j] - got[j]));
      if (kc.vs_f16 > 0) worst_f16 = std::max(worst_f16, std::abs(f16[prompt.size() - 1 + i][j] - got[j]));
    }
    std::vector<double> sorted = want;
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
    if (sorted[0] - sorted[1] > 2 * kc.vs_golden) {
      EXPECT_EQ(std::max_element(got.begin(), got.end()) - got.begin(), generated[i]) << "step " << i;
    }
  }
  std::printf("%s --kv-type %s: %zu positions, max |dlogit| %.3g vs golden (tolerance %.0e), %.3g vs f16 KV\n",
              kc.model.c_str(), kc.kv_type.c_str(), fed.size(), worst, kc.vs_golden, worst_f16);
  EXPECT_LE(worst, kc.vs_golden);
  if (kc.vs_f16 > 0) {
    EXPECT_LE(worst_f16, kc.vs_f16);
  }
}

INSTANTIATE_TEST_SUITE_P(KvTypes, GoldenKvTest, ::testing::ValuesIn(kKvCases), [](const auto& info) {
  std::string n = info.param.model + "_" + info.param.kv_type;
  std::replace(n.begin(), n.end(), '-', '_');
  return n;
});

}  // namespace
}  // namespace zl::test
