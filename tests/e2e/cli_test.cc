// The product binary's command line, run for real: no test switch reaches
// it (defect 1 of issue 21), usage errors exit 2.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "support/process.h"

namespace zl::test {
namespace {

// Runs `cmd` with stderr folded into the output; stdin from /dev/null.
CommandResult run(const std::string& cmd) { return run_command(cmd + " </dev/null 2>&1"); }

std::string bin() { return zerolayer_bin(); }

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(CliE2e, FakeEngineFlagsAreUsageErrorsInTheProduct) {
  for (const char* flags : {"--fake-engine", "--fake-ctx 256", "--fake-step-us 10", "--fake-engine=true"}) {
    CommandResult r = run(bin() + " serve --port 0 " + flags);
    EXPECT_EQ(r.exit_code, 2) << flags << ": " << r.out;
    EXPECT_TRUE(contains(r.out, "Usage: zerolayer serve")) << r.out;
    EXPECT_FALSE(contains(r.out, "serving")) << r.out;
  }
}

TEST(CliE2e, FakeEngineVariableHasNoEffect) {
  // With the old switch set and a model that does not exist, serve must try
  // (and fail) to load that model: nothing serves a canned story.
  CommandResult r = run("ZEROLAYER_FAKE_ENGINE=true ZEROLAYER_FAKE_CTX=256 " + bin() +
                        " serve --port 0 --model /nonexistent/zl-model.gguf");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "/nonexistent/zl-model.gguf")) << r.out;
  EXPECT_FALSE(contains(r.out, "serving")) << r.out;
}

TEST(CliE2e, FakeEngineConfigKeyIsRefused) {
  const std::string path = ::testing::TempDir() + "cli_e2e_fake.toml";
  std::ofstream(path) << "fake_engine = true\n";
  CommandResult r = run(bin() + " serve --port 0 --config " + path);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "unknown key 'fake_engine'")) << r.out;
}

TEST(CliE2e, HelpRepeatedAndUnknownFlagsOnEveryCommand) {
  for (const char* cmd : {"serve", "generate", "logits", "inspect", "tokenize", "detokenize", "make-model", "bench"}) {
    CommandResult help = run(bin() + " " + cmd + " --help");
    EXPECT_EQ(help.exit_code, 0) << cmd << ": " << help.out;
    EXPECT_TRUE(contains(help.out, std::string("Usage: zerolayer ") + cmd)) << help.out;
    EXPECT_EQ(run(bin() + " " + cmd + " --model a --model b").exit_code, 2) << cmd;
    EXPECT_EQ(run(bin() + " " + cmd + " --no-such-flag").exit_code, 2) << cmd;
  }
  EXPECT_EQ(run(bin() + " serve --port 1 --port=2").exit_code, 2);
  EXPECT_EQ(run(bin() + " generate -n 1 -n 2 --prompt x").exit_code, 2);
  EXPECT_EQ(run(bin()).exit_code, 2);
  EXPECT_EQ(run(bin() + " no-such-command").exit_code, 2);
  EXPECT_EQ(run(bin() + " --help").exit_code, 0);
}

}  // namespace
}  // namespace zl::test
