// Load-time checks of the product binary (issue 22, review 4): a model the
// active kernels cannot run is refused when a command starts (exit 1 with
// the reason), not with a 400 on every request after /ready said yes; and
// make-model's shape errors name the flags. Models are written by the real
// `make-model` into a temp dir, with the committed demo model's tokenizer.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "format/gguf.h"
#include "support/process.h"
#include "support/temp_files.h"

namespace zl::test {
namespace {

const auto* const kTempCleanup = testing_support::register_temp_cleanup("zl_load_checks");

std::string temp_path(const std::string& name) { return testing_support::temp_file("zl_load_checks", name); }

// stderr folded in, stdin from /dev/null, never more than 60 s (a serve
// that wrongly starts is stopped by the timeout, exit 124).
CommandResult run(const std::string& cmd) { return run_command("timeout 60 " + cmd + " </dev/null 2>&1"); }

std::string bin() { return zerolayer_bin(); }
std::string demo_vocab() { return std::string(ZL_SOURCE_DIR) + "/models/zerolayer-demo.gguf"; }

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A small gpt-oss model (attention sinks on every layer) with `flags`.
std::string make_gpt_oss(const std::string& name, const std::string& flags) {
  const std::string out = temp_path(name);
  CommandResult r = run(bin() + " make-model --shape tiny-moe --arch gpt-oss --type F32 --n-layer 2 --n-embd 64 " +
                        "--n-head 4 --n-head-kv 2 --n-ff-exp 32 --threads 1 --vocab " + demo_vocab() + " --out " + out +
                        " " + flags);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  return out;
}

const char* const kSinks = "attention sinks need the AVX2 or AVX-512 attention kernels";

TEST(LoadChecksE2e, ScalarKernelsRefuseAGptOssModelAtStartupInEveryCommand) {
  const std::string model = make_gpt_oss("goss.gguf", "");
  const std::string env = "env ZL_KERNELS=scalar ";
  const struct {
    const char* cmd;
    std::string args;
  } commands[] = {{"serve", "--port 0 --threads 1"},
                  {"generate", "--prompt hi -n 2 --threads 1"},
                  {"logits", "--ids 1,2,3 --threads 1"},
                  {"bench", "--reps 1 --threads 1"}};
  for (const auto& c : commands) {
    CommandResult r = run(env + bin() + " " + c.cmd + " --model " + model + " " + c.args);
    EXPECT_EQ(r.exit_code, 1) << c.cmd << ": " << r.out;
    EXPECT_TRUE(contains(r.out, kSinks)) << c.cmd << ": " << r.out;
    EXPECT_TRUE(contains(r.out, "(head_dim 16, kernels scalar)")) << c.cmd << ": " << r.out;
    EXPECT_FALSE(contains(r.out, "serving")) << r.out;
  }
  // The same file runs on the default kernels (this machine has AVX2 at least).
  CommandResult ok = run(bin() + " generate --model " + model + " --prompt hi -n 2 --threads 1");
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
}

// make-model refuses such a shape (below), so the file comes from rewriting a
// good one: the same matrices cut into 16 heads of 4 (8 KV heads), and 16 sinks.
TEST(LoadChecksE2e, AGptOssHeadDimNoSimdKernelTakesIsRefusedAtStartup) {
  auto good = GgufFile::open(make_gpt_oss("goss16.gguf", ""));  // 4 heads of 16, 2 KV heads
  ASSERT_TRUE(good.ok()) << good.status().to_string();
  GgufWriter w;
  for (const auto& [k, v] : (*good)->metadata()) {
    if (k != "general.alignment") w.set(k, v);
  }
  for (const char* key : {"gpt-oss.attention.key_length", "gpt-oss.attention.value_length",
                          "gpt-oss.rope.dimension_count"}) {
    w.set(key, GgufValue::u32(4));
  }
  w.set("gpt-oss.attention.head_count", GgufValue::u32(16));
  w.set("gpt-oss.attention.head_count_kv", GgufValue::u32(8));
  for (const GgufTensor& t : (*good)->tensors()) {
    std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    const uint8_t* data = t.data;
    const uint64_t n = t.n_bytes;
    if (t.name.ends_with("attn_sinks.weight")) ne = {16};  // zeros
    w.add_tensor(t.name, t.type, ne, [=](uint8_t* dst, uint64_t size) { std::memcpy(dst, data, std::min(n, size)); });
  }
  const std::string model = temp_path("goss-hd4.gguf");
  ASSERT_TRUE(w.write(model).ok());
  CommandResult r = run(bin() + " serve --port 0 --threads 1 --model " + model);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(contains(r.out, kSinks)) << r.out;
  EXPECT_TRUE(contains(r.out, "(head_dim 4, kernels ")) << r.out;
  EXPECT_FALSE(contains(r.out, "serving")) << r.out;
}

TEST(LoadChecksE2e, MakeModelShapeErrorsNameTheFlags) {
  const std::string out = temp_path("bad.gguf");
  CommandResult r = run(bin() + " make-model --shape tiny --type Q4_K --n-embd 100 --vocab " + demo_vocab() +
                        " --out " + out);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "--n-embd 100 is not a multiple of --n-head 8")) << r.out;
  EXPECT_FALSE(file_exists(out));
  r = run(bin() + " make-model --shape tiny-moe --type F32 --n-expert-used 9 --vocab " + demo_vocab() + " --out " + out);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "--n-expert-used 9 exceeds --n-expert 8")) << r.out;
  EXPECT_FALSE(file_exists(out));
  // gpt-oss heads the attention-sink kernels refuse (review 22 #6): 256 / 64 heads = 4, and 512.
  for (const std::string flags : {"--shape gpt-oss-20b --n-layer 1 --n-embd 256 --n-ff 512 --n-ff-exp 32 --n-expert 4 "
                                  "--n-expert-used 2",
                                  "--shape tiny-moe --arch gpt-oss --n-layer 1 --n-embd 512 --n-head 1 --n-head-kv 1"}) {
    r = run(bin() + " make-model " + flags + " --type F32 --vocab " + demo_vocab() + " --out " + out);
    EXPECT_EQ(r.exit_code, 2) << flags << ": " << r.out;
    EXPECT_TRUE(contains(r.out, "gpt-oss's attention sinks need a head dimension that is a multiple of 8 up to 256"))
        << r.out;
    EXPECT_FALSE(file_exists(out)) << flags;
  }
}

// generate runs one sequence: the sizing log says so, not a KV-budget
// division whose result it then ignores (issue 22 D9).
TEST(LoadChecksE2e, GenerateSizingLogSaysOneSequence) {
  const std::string model = make_gpt_oss("goss-log.gguf", "");
  CommandResult r = run(bin() + " generate --model " + model + " --prompt hi -n 2 --threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(contains(r.out, R"x("parallel":1,"parallel_from":"generate (one sequence)")x")) << r.out;
}

}  // namespace
}  // namespace zl::test
