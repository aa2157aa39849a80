// Load-time checks of the product binary (issue 22, review 4): a model the
// active kernels cannot run is refused when a command starts (exit 1 with
// the reason), not with a 400 on every request after /ready said yes; and
// make-model's shape errors name the flags. Models are written by the real
// `make-model` into a temp dir, with the committed demo model's tokenizer.
#include <gtest/gtest.h>

#include <string>

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

TEST(LoadChecksE2e, AGptOssHeadDimNoSimdKernelTakesIsRefusedAtStartup) {
  const std::string model = make_gpt_oss("goss512.gguf", "--head-dim 512");
  CommandResult r = run(bin() + " serve --port 0 --threads 1 --model " + model);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(contains(r.out, kSinks)) << r.out;
  EXPECT_TRUE(contains(r.out, "head_dim 512")) << r.out;
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
