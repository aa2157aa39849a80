// The product binary's command line, run for real: no test switch reaches
// it (defect 1 of issue 21), usage errors exit 2, and sizes that cannot fit
// in memory are an error naming the setting and the bytes, exit 1 (defect 2),
// never std::bad_alloc (exit 134) or the OOM killer.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cstdio>
#include <fstream>
#include <string>

#include "support/json_object.h"
#include "support/process.h"

namespace zl::test {
namespace {

namespace json = boost::json;

// Runs `cmd` with stderr folded into the output; stdin from /dev/null.
CommandResult run(const std::string& cmd) { return run_command(cmd + " </dev/null 2>&1"); }

std::string bin() { return zerolayer_bin(); }

std::string stories() { return shared_dir() + "/models/stories260K.gguf"; }

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
  // A repeated boolean flag too (only --api-key may come more than once).
  CommandResult twice = run(bin() + " generate --json --prompt x --json");
  EXPECT_EQ(twice.exit_code, 2) << twice.out;
  EXPECT_TRUE(contains(twice.out, "--json given 2 times")) << twice.out;
  EXPECT_EQ(run(bin() + " inspect --model a --json --json").exit_code, 2);
  EXPECT_EQ(run(bin()).exit_code, 2);
  EXPECT_EQ(run(bin() + " no-such-command").exit_code, 2);
  EXPECT_EQ(run(bin() + " --help").exit_code, 0);
}

TEST(CliE2e, ImpossibleKvSizeIsAnErrorNamingTheFlag) {
  if (!file_exists(stories())) GTEST_SKIP() << "SKIPPED: " << stories() << " is absent (needs ../shared)";
  // 2^32 tokens × 640 B (5 layers × K,V × 32 values × 2 bytes) = 2.5 TiB.
  CommandResult r = run(bin() + " serve --port 0 --request-log false --model " + stories() + " --kv-size 4294967296");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "--kv-size 4294967296: the KV cache (4294967296 tokens × 640 B) needs 2.5 TiB, "))
      << r.out;
  EXPECT_TRUE(contains(r.out, " available")) << r.out;
  // The same from the environment names the variable.
  r = run("ZEROLAYER_KV_SIZE=4294967296 " + bin() + " serve --port 0 --model " + stories());
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "ZEROLAYER_KV_SIZE=4294967296: the KV cache")) << r.out;
}

// --kv-type: q8_0 sizes the cache at 34 bytes per 32 values (5 layers × K,V
// × 34 B = 340 B a token on stories260K); an unknown type is a usage error
// naming the accepted ones, from a flag or the environment, on every command.
TEST(CliE2e, KvTypeQ8SizesTheCacheAndUnknownTypesAreUsageErrors) {
  if (!file_exists(stories())) GTEST_SKIP() << "SKIPPED: " << stories() << " is absent (needs ../shared)";
  CommandResult r = run(bin() + " serve --port 0 --request-log false --model " + stories() +
                        " --kv-type q8_0 --kv-size 4294967296");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "the KV cache (4294967296 tokens × 340 B)")) << r.out;
  r = run(bin() + " serve --port 0 --model " + stories() + " --kv-type q4_0");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "kv-type must be f16, q8_0 or f32, got 'q4_0'")) << r.out;
  r = run("ZEROLAYER_KV_TYPE=int8 " + bin() + " serve --port 0 --model " + stories());
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "ZEROLAYER_KV_TYPE")) << r.out;
  for (const char* cmd : {" generate --prompt Hi -n 1", " logits --ids 1,2", " bench --depth 16"}) {
    r = run(bin() + cmd + " --model " + stories() + " --kv-type q4_0");
    EXPECT_NE(r.exit_code, 0) << cmd << ": " << r.out;
    EXPECT_TRUE(contains(r.out, "--kv-type must be")) << cmd << ": " << r.out;
  }
}

// bench --depth: 0 is a usage error, with the same range as every other value outside it
// (review 23 #3); past the training context (stories260K: 2048) it warns; the text output's
// attention label says what it computes.
TEST(CliE2e, BenchDepthBoundsAndWarning) {
  if (!file_exists(stories())) GTEST_SKIP() << "SKIPPED: " << stories() << " is absent (needs ../shared)";
  for (const char* depth : {"0", "-1", "1048577", "x"}) {
    CommandResult r = run(bin() + " bench --model " + stories() + " --depth " + depth);
    EXPECT_EQ(r.exit_code, 2) << depth << ": " << r.out;
    EXPECT_TRUE(contains(r.out, std::string("--depth must be an integer in [1, 1048576], got '") + depth + "'"))
        << depth << ": " << r.out;
  }
  // One real run (~5 s: the bandwidth probes), one token past the training context.
  CommandResult r = run(bin() + " bench --model " + stories() + " --depth 2049 --reps 1 --threads 1");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "larger than the context the model was trained on")) << r.out;
  EXPECT_TRUE(contains(r.out, "\"depth\":2049,\"n_ctx_train\":2048")) << r.out;
  EXPECT_TRUE(contains(r.out, "(1 - depth rate / depth-0 rate)")) << r.out;
}

// bench --depth with a comma list of KV types: one object per type and each type's decode rate
// over the first's (the first against itself: exactly 1); a type named twice is a usage error.
TEST(CliE2e, BenchDepthComparesKvTypes) {
  const std::string model = shared_dir() + "/models/tiny-llama-F32.gguf";  // K/V rows of 32 values: q8_0 fits
  if (!file_exists(model)) GTEST_SKIP() << "SKIPPED: " << model << " is absent (needs ../shared)";
  CommandResult r = run(bin() + " bench --model " + model + " --depth 32 --kv-type f16,f16");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_TRUE(contains(r.out, "--kv-type names f16 twice")) << r.out;
  r = run(bin() + " bench --model " + model + " --depth 32 --kv-type f16,");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  r = run(bin() + " bench --model " + model + " --depth 32 --kv-type f16,q8_0 --reps 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "\"kv_types\": [{\"kv_type\": \"f16\"")) << r.out;
  EXPECT_TRUE(contains(r.out, "\"decode_vs_first\": 1.0000, \"decode_vs_first_min\": 1.0000")) << r.out;
  EXPECT_TRUE(contains(r.out, "}, {\"kv_type\": \"q8_0\"")) << r.out;
}

// generate --json: no decode step (-n 1) is no decode rate (null), not 0; the engine sizing line
// names the KV type, its bytes per token and the speculative mode; q8_0 on head_dim 8 warns, in
// generate, logits and serve.
TEST(CliE2e, GenerateRatesSizingLineAndKvTypeWarning) {
  if (!file_exists(stories())) GTEST_SKIP() << "SKIPPED: " << stories() << " is absent (needs ../shared)";
  CommandResult r = run(bin() + " generate --model " + stories() + " --prompt Once --temperature 0 -n 1 --json");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "\"decode_tokens_per_s\": null")) << r.out;
  EXPECT_FALSE(contains(r.out, "\"prefill_tokens_per_s\": null")) << r.out;
  EXPECT_FALSE(contains(r.out, "\"tokens_per_s\":")) << r.out;  // the log line leaves it out
  // 640 B a token: 5 layers × K,V × 32 values × 2 bytes (f16).
  EXPECT_TRUE(contains(r.out, "\"kv_type\":\"f16\",\"kv_bytes_per_token\":640,\"speculative\":\"off\",\"spec_draft_max\":8"))
      << r.out;
  EXPECT_FALSE(contains(r.out, "head_dim below 32")) << r.out;
  r = run(bin() + " generate --model " + stories() + " --prompt Once --temperature 0 -n 8 --json --kv-type q8_0" +
          " --speculative ngram --spec-draft-max 5");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_FALSE(contains(r.out, "\"decode_tokens_per_s\": null")) << r.out;
  EXPECT_TRUE(contains(r.out, "\"kv_type\":\"q8_0\",\"kv_bytes_per_token\":340,\"speculative\":\"ngram\",\"spec_draft_max\":5"))
      << r.out;
  EXPECT_TRUE(contains(r.out, "head_dim below 32")) << r.out;
  r = run(bin() + " logits --model " + stories() + " --ids 1,2 --kv-type q8_0");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "head_dim below 32")) << r.out;
  EXPECT_FALSE(contains(run(bin() + " logits --model " + stories() + " --ids 1,2").out, "head_dim below 32"));
  // serve: started, read until it serves, stopped by pid.
  const std::string log = ::testing::TempDir() + "cli_e2e_serve_q8.log";
  r = run_command("( " + bin() + " serve --port 0 --request-log false --ui false --model " + stories() +
                  " --kv-type q8_0 --speculative ngram >" + log + " 2>&1 </dev/null & pid=$!;" +
                  " for i in $(seq 200); do grep -q '127.0.0.1:' " + log + " && break; sleep 0.05; done;" +
                  " kill $pid; wait $pid; cat " + log + " )");
  EXPECT_TRUE(contains(r.out, "head_dim below 32")) << r.out;
  EXPECT_TRUE(contains(r.out, "\"kv_type\":\"q8_0\",\"kv_bytes_per_token\":340,\"speculative\":\"ngram\"")) << r.out;
}

// --prompt-ids and --ids: an empty item is the same usage error as any malformed list (review 23 #4).
TEST(CliE2e, EmptyTokenIdItemsAreUsageErrors) {
  if (!file_exists(stories())) GTEST_SKIP() << "SKIPPED: " << stories() << " is absent (needs ../shared)";
  for (const char* ids : {"1,,2", "1,2,", ",1"}) {
    for (const std::string cmd : {" generate -n 1 --prompt-ids '", " logits --ids '"}) {
      CommandResult r = run(bin() + cmd + ids + "' --model " + stories());
      EXPECT_EQ(r.exit_code, 2) << cmd << ids << ": " << r.out;
      EXPECT_TRUE(contains(r.out, std::string("bad token id list '") + ids + "' (expected e.g. 1,2,3)")) << r.out;
    }
  }
  EXPECT_EQ(run(bin() + " generate -n 1 --temperature 0 --prompt-ids '1, 2' --model " + stories()).exit_code, 0);
}

// inspect --json, which its help advertises (review 22 #7): the metadata, the tensors and the
// model's shape as the text output shows them, one JSON object; a model that does not load is
// model_error and exit 1, as in the text output.
TEST(CliE2e, InspectJson) {
  if (!file_exists(stories())) GTEST_SKIP() << "SKIPPED: " << stories() << " is absent (needs ../shared)";
  CommandResult help = run(bin() + " inspect --help");
  EXPECT_TRUE(contains(help.out, "--json")) << help.out;
  const CommandResult r = run_command(bin() + " inspect --json --model " + stories() + " 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const json::object o = parse_obj(r.out);
  EXPECT_EQ(o.at("file").as_string(), stories());
  EXPECT_EQ(o.at("version").as_int64(), 3);
  EXPECT_EQ(o.at("alignment").as_int64(), 32);
  EXPECT_EQ(o.at("file_size").as_int64(), 1185376);
  const json::object& meta = o.at("metadata").as_object();
  EXPECT_EQ(meta.at("general.architecture").as_string(), "llama");
  EXPECT_EQ(meta.at("llama.block_count").as_int64(), 5);
  EXPECT_NEAR(meta.at("llama.attention.layer_norm_rms_epsilon").as_double(), 1e-5, 1e-9);
  const json::object& tokens = meta.at("tokenizer.ggml.tokens").as_object();
  EXPECT_EQ(tokens.at("type").as_string(), "string");
  EXPECT_EQ(tokens.at("count").as_int64(), 512);
  ASSERT_EQ(tokens.at("items").as_array().size(), 8u);  // as the text shows them
  EXPECT_EQ(tokens.at("items").as_array()[1].as_string(), "<s>");
  const json::array& tensors = o.at("tensors").as_array();
  ASSERT_EQ(tensors.size(), 48u);
  const json::object& embd = tensors[0].as_object();
  EXPECT_EQ(embd.at("name").as_string(), "token_embd.weight");
  EXPECT_EQ(embd.at("type").as_string(), "F32");
  EXPECT_EQ(json::serialize(embd.at("shape")), "[64,512]");
  EXPECT_EQ(embd.at("offset").as_int64(), 0);
  EXPECT_EQ(embd.at("n_bytes").as_int64(), 64 * 512 * 4);
  const json::object& model = o.at("model").as_object();
  EXPECT_EQ(model.at("arch").as_string(), "llama");
  EXPECT_EQ(model.at("n_layer").as_int64(), 5);
  EXPECT_EQ(model.at("head_dim").as_int64(), 8);
  EXPECT_EQ(model.at("n_vocab").as_int64(), 512);
  EXPECT_TRUE(model.at("sliding_window").is_null());
  // --all: every item.
  const json::object all = parse_obj(run_command(bin() + " inspect --json --all --model " + stories() + " 2>/dev/null").out);
  EXPECT_EQ(all.at("metadata").as_object().at("tokenizer.ggml.tokens").as_object().at("items").as_array().size(), 512u);
  // A file that parses but does not load (stories260K relabelled `mamba`).
  std::string bytes = read_file(stories());
  const size_t at = bytes.find("general.architecture") + std::string("general.architecture").size() + 4 + 8;
  ASSERT_EQ(bytes.substr(at, 5), "llama");
  bytes.replace(at, 5, "mamba");
  const std::string path = ::testing::TempDir() + "zl_cli_inspect_mamba.gguf";
  std::ofstream(path, std::ios::binary) << bytes;
  const CommandResult bad = run_command(bin() + " inspect --json --model " + path + " 2>/dev/null");
  EXPECT_EQ(bad.exit_code, 1) << bad.out;
  const json::object b = parse_obj(bad.out);
  EXPECT_TRUE(b.at("model").is_null());
  EXPECT_TRUE(contains(std::string(b.at("model_error").as_string()), "architecture 'mamba' is not supported")) << bad.out;
  EXPECT_EQ(b.at("metadata").as_object().at("general.architecture").as_string(), "mamba");
  std::remove(path.c_str());
}

TEST(CliE2e, ImpossibleContextIsAnErrorNamingTheFlag) {
  if (!file_exists(stories())) GTEST_SKIP() << "SKIPPED: " << stories() << " is absent (needs ../shared)";
  // generate: --ctx sizes the KV cache (2e9 tokens × 640 B = 1.2 TiB).
  CommandResult r = run(bin() + " generate --model " + stories() + " --prompt Hi -n 4 --ctx 2000000000");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "--ctx 2000000000: the KV cache (2000000000 tokens × 640 B) needs 1.2 TiB")) << r.out;
  // Past what any engine indexes: a usage error, not an overflow.
  r = run(bin() + " generate --model " + stories() + " --prompt Hi --ctx 9223372036854775807");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  // serve: the largest --ctx with the most sequences, f32 and the largest
  // --kv-size: no overflow on the way to the check.
  r = run(bin() + " serve --port 0 --model " + stories() + " --ctx 16777216 --parallel 4096 --kv-type f32" +
          " --kv-size 4294967296");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "--kv-size 4294967296: the KV cache")) << r.out;
}

// A model of an architecture zerolayer does not run (stories260K relabelled
// `mamba`): serve and generate stop with an error naming it and listing the
// supported ones, exit 1, before anything serves.
TEST(CliE2e, UnsupportedArchitectureIsAClearError) {
  if (!file_exists(stories())) GTEST_SKIP() << "SKIPPED: " << stories() << " is absent (needs ../shared)";
  std::string bytes = read_file(stories());
  const std::string key = "general.architecture";
  const size_t at = bytes.find(key);
  ASSERT_NE(at, std::string::npos);
  const size_t value = at + key.size() + 4 + 8;  // value type (u32), string length (u64)
  ASSERT_EQ(bytes.substr(value, 5), "llama");
  bytes.replace(value, 5, "mamba");
  const std::string path = ::testing::TempDir() + "zl_cli_mamba.gguf";
  std::ofstream(path, std::ios::binary) << bytes;
  for (const std::string cmd : {" serve --port 0 --model ", " generate -n 4 --prompt hi --model "}) {
    CommandResult r = run(bin() + cmd + path);
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_TRUE(contains(r.out, "architecture 'mamba' is not supported (supported: llama, qwen2, qwen3")) << r.out;
    EXPECT_TRUE(contains(r.out, "gemma3") && contains(r.out, "phi3")) << r.out;
    EXPECT_FALSE(contains(r.out, "serving")) << r.out;
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace zl::test
