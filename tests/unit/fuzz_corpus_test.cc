// The fuzz targets (tests/fuzz) in the normal build, without clang: every
// target replays its seed corpus and the crashes it once found
// (tests/fuzz/<target>/ and its regressions/), so a fixed crash stays fixed
// in CI. A failed invariant aborts with the target's message (FUZZ_CHECK).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/fuzz_target.h"

namespace zl::fuzz {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

TEST(FuzzCorpus, EveryTargetIsLinked) {
  for (const char* name : {"fuzz_gguf", "fuzz_tokenizer", "fuzz_anthropic_request", "fuzz_openai_request", "fuzz_http",
                           "fuzz_stream_shaper", "fuzz_chat_template", "fuzz_tool_calls", "fuzz_guard",
                           "fuzz_thinking", "fuzz_jinja",
                           "fuzz_json_schema", "fuzz_gbnf"}) {
    EXPECT_TRUE(targets().contains(name)) << name;
  }
}

TEST(FuzzCorpus, SeedsAndRegressionsPass) {
  for (const auto& [name, fn] : targets()) {
    const fs::path dir = fs::path(ZL_SOURCE_DIR) / "tests" / "fuzz" / name;
    ASSERT_TRUE(fs::is_directory(dir)) << dir << ": every target has a seed corpus";
    int n_inputs = 0;
    for (const auto& entry : fs::recursive_directory_iterator(dir)) {
      if (!entry.is_regular_file()) continue;
      SCOPED_TRACE(entry.path().string());
      const std::vector<uint8_t> bytes = read_file(entry.path());
      EXPECT_EQ(fn(bytes.data(), bytes.size()), 0);
      ++n_inputs;
    }
    EXPECT_GT(n_inputs, 0) << name;
  }
}

}  // namespace
}  // namespace zl::fuzz
