// `zerolayer diff` (cli/cmd_diff.cc) against pairs of fake-engine servers:
// two equal engines (every gate passes, BLEU-4 = 1), an engine whose output
// a smaller window cuts short (the BLEU gate fails), a slower engine (the latency
// gate, both ways), an engine that refuses the key (the error-rate gate),
// the requests file written by `serve --record-requests`, and usage errors.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <fstream>
#include <string>

#include "support/http_client.h"
#include "support/process.h"
#include "support/real_model.h"
#include "support/temp_files.h"

namespace zl::test {
namespace {

namespace json = boost::json;
const auto* const kCleanup = testing_support::register_temp_cleanup("zl_diff_test");

std::string url(int port) { return "http://127.0.0.1:" + std::to_string(port); }

CommandResult diff(const std::string& args) { return run_command(std::string(ZL_BIN) + " diff " + args + " 2>&1"); }

// n requests, one Messages body a line.
std::string requests_file(const std::string& name, int n, int max_tokens) {
  const std::string path = testing_support::temp_file("zl_diff_test", name);
  std::ofstream f(path);
  f << "# recorded requests\n\n";
  for (int i = 0; i < n; ++i) {
    f << R"({"model":"m","max_tokens":)" << max_tokens + i
      << R"(,"messages":[{"role":"user","content":"story )" << i << R"("}]})" << "\n";
  }
  return path;
}

ServerProcess fake(std::vector<std::string> more = {}) {
  std::vector<std::string> a = {"--fake-engine", "--request-log", "false"};
  a.insert(a.end(), more.begin(), more.end());
  return ServerProcess(a, ZL_TEST_SERVER);
}

TEST(Diff, EqualEnginesPassEveryGate) {
  ServerProcess a = fake(), b = fake();
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string req = requests_file("equal.jsonl", 6, 20);
  const std::string out = testing_support::temp_file("zl_diff_test", "equal-report.json");
  CommandResult r = diff("--a " + url(a.port()) + " --b " + url(b.port()) + " --requests " + req + " --out " + out +
                         " --concurrency 3 --max-error-rate 0.00001 --min-bleu 0.999");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("mean BLEU-4 (b against a): 1.0000 over 6 pairs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("PASS"), std::string::npos);
  const json::object rep = json::parse(read_file(out)).as_object();
  EXPECT_TRUE(rep.at("pass").as_bool());
  EXPECT_EQ(rep.at("n_requests").as_int64(), 6);
  const json::array& rows = rep.at("requests").as_array();
  ASSERT_EQ(rows.size(), 6u);
  for (size_t i = 0; i < rows.size(); ++i) {
    const json::object& row = rows[i].as_object();
    EXPECT_EQ(row.at("bleu4").to_number<double>(), 1.0);
    for (const char* side : {"a", "b"}) {
      const json::object& s = row.at(side).as_object();
      EXPECT_EQ(s.at("status").as_int64(), 200);
      EXPECT_EQ(s.at("total_tokens").as_int64(), static_cast<int64_t>(20 + i));
      EXPECT_EQ(s.at("stop_reason").as_string(), "max_tokens");
      EXPECT_GT(s.at("first_token_ms").to_number<double>(), 0);
      EXPECT_GE(s.at("last_token_ms").to_number<double>(), s.at("first_token_ms").to_number<double>());
    }
  }
  const json::object& sum = rep.at("summary").as_object();
  for (const char* side : {"a", "b"}) {
    EXPECT_EQ(sum.at(side).at("error_rate").to_number<double>(), 0);
    EXPECT_GE(sum.at(side).at("last_token_ms").at("p95").to_number<double>(),
              sum.at(side).at("last_token_ms").at("p50").to_number<double>());
  }
  EXPECT_GT(sum.at("latency_ratio").at("last_token_p95").to_number<double>(), 0);
  EXPECT_EQ(sum.at("mean_bleu4").to_number<double>(), 1.0);
  EXPECT_EQ(rep.at("gates").as_array().size(), 2u);
}

TEST(Diff, DifferentOutputFailsTheBleuGate) {
  // b's window is 44 tokens: its answers stop early (the window), a's run
  // to the story's end. Shorter texts: a lower BLEU-4 (brevity penalty).
  ServerProcess a = fake(), b = fake({"--ctx", "44"});
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string req = requests_file("rewritten.jsonl", 3, 120);
  const std::string out = testing_support::temp_file("zl_diff_test", "rewritten-report.json");
  CommandResult r = diff("--a " + url(a.port()) + " --b " + url(b.port()) + " --requests " + req + " --out " + out +
                         " --min-bleu 0.99");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("gate min-bleu"), std::string::npos);
  EXPECT_NE(r.out.find("FAIL"), std::string::npos);
  const json::object rep = json::parse(read_file(out)).as_object();
  const double mean = rep.at("summary").at("mean_bleu4").to_number<double>();
  EXPECT_GT(mean, 0.0);
  EXPECT_LT(mean, 0.99);
  EXPECT_FALSE(rep.at("pass").as_bool());
  EXPECT_EQ(rep.at("summary").at("same_stop_reason_rate").to_number<double>(), 0.0);
  EXPECT_EQ(rep.at("requests").at(0).at("b").at("stop_reason").as_string(), "model_context_window_exceeded");
  // The same run with a gate it meets.
  r = diff("--a " + url(a.port()) + " --b " + url(b.port()) + " --requests " + req + " --min-bleu " +
           std::to_string(mean / 2));
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

TEST(Diff, LatencyGateBothWays) {
  // 1 ms against 30 ms per token, 20 tokens: the slow side's p95 is many times the fast one's.
  ServerProcess fast = fake({"--fake-step-us", "1000"}), slow = fake({"--fake-step-us", "30000"});
  ASSERT_TRUE(fast.ok() && slow.ok());
  const std::string req = requests_file("latency.jsonl", 4, 20);
  CommandResult r = diff("--a " + url(fast.port()) + " --b " + url(slow.port()) + " --requests " + req +
                         " --max-latency-ratio 0.7");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("gate max-latency-ratio"), std::string::npos) << r.out;
  r = diff("--a " + url(slow.port()) + " --b " + url(fast.port()) + " --requests " + req + " --max-latency-ratio 0.7");
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

TEST(Diff, ErrorRateGate) {
  ServerProcess a = fake(), b = fake({"--api-key", "kb"});
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string req = requests_file("errors.jsonl", 3, 8);
  const std::string out = testing_support::temp_file("zl_diff_test", "errors-report.json");
  CommandResult r = diff("--a " + url(a.port()) + " --b " + url(b.port()) + " --requests " + req + " --out " + out +
                         " --max-error-rate 0.00001");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  const json::object rep = json::parse(read_file(out)).as_object();
  EXPECT_EQ(rep.at("summary").at("b").at("error_rate").to_number<double>(), 1.0);
  EXPECT_EQ(rep.at("requests").at(0).at("b").at("status").as_int64(), 401);
  EXPECT_TRUE(rep.at("requests").at(0).at("bleu4").is_null());
  EXPECT_TRUE(rep.at("summary").at("mean_bleu4").is_null());
  r = diff("--a " + url(a.port()) + " --b " + url(b.port()) + " --api-key-b kb --requests " + req +
           " --max-error-rate 0.00001");
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

TEST(Diff, ReplaysWhatServeRecorded) {
  const std::string rec = testing_support::temp_file("zl_diff_test", "recorded.jsonl");
  ServerProcess a = fake({"--record-requests", rec});
  ASSERT_TRUE(a.ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(fetch(a.port(), "POST", "/v1/messages",
                    R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}]})")
                  .status,
              200);
  }
  CommandResult r = diff("--a " + url(a.port()) + " --b " + url(a.port()) + " --requests " + rec + " --min-bleu 1");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("over 3 pairs"), std::string::npos) << r.out;
}

TEST(Diff, UsageErrorsAreExit2) {
  const std::string req = requests_file("usage.jsonl", 1, 4);
  const std::string bad = testing_support::temp_file("zl_diff_test", "bad.jsonl");
  std::ofstream(bad) << "{\"model\":\"m\"}\nnot json\n";
  const std::string empty = testing_support::temp_file("zl_diff_test", "empty.jsonl");
  std::ofstream(empty) << "\n# nothing\n";
  const std::string ab = "--a http://127.0.0.1:1 --b http://127.0.0.1:2 ";
  EXPECT_EQ(diff("").exit_code, 2);
  EXPECT_EQ(diff("--a http://127.0.0.1:1 --requests " + req).exit_code, 2);
  EXPECT_EQ(diff("--a ftp://x --b http://127.0.0.1:2 --requests " + req).exit_code, 2);
  EXPECT_EQ(diff(ab + "--requests /nonexistent/file.jsonl").exit_code, 2);
  CommandResult r = diff(ab + "--requests " + bad);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find(":2: not a JSON object"), std::string::npos) << r.out;
  EXPECT_EQ(diff(ab + "--requests " + empty).exit_code, 2);
  EXPECT_EQ(diff(ab + "--requests " + req + " --min-bleu 2").exit_code, 2);
  EXPECT_EQ(diff(ab + "--requests " + req + " --max-error-rate -1").exit_code, 2);
  EXPECT_EQ(diff(ab + "--requests " + req + " --concurrency 0").exit_code, 2);
  EXPECT_EQ(diff(ab + "--requests " + req + " --nope").exit_code, 2);
  r = diff("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("Usage: zerolayer diff"), std::string::npos);
}

// stories260K, greedy: two replicas of the same model give the same text
// (BLEU-4 = 1, same stop reasons and token counts); the fake engine's story
// against the model's does not.
TEST(Diff, RealModelAgainstItselfAndAgainstAnotherEngine) {
  REQUIRE_MODEL();
  ServerProcess a(real_model_args()), b(real_model_args()), other = fake();
  ASSERT_TRUE(a.ok() && b.ok() && other.ok());
  const std::string req = testing_support::temp_file("zl_diff_test", "real.jsonl");
  {
    std::ofstream f(req);
    for (const char* prompt : {"Once upon a time", "The cat", "Lily went to the park"}) {
      f << R"({"model":"m","max_tokens":24,"temperature":0,"messages":[{"role":"user","content":")" << prompt
        << "\"}]}\n";
    }
  }
  const std::string out = testing_support::temp_file("zl_diff_test", "real-report.json");
  CommandResult r = diff("--a " + url(a.port()) + " --b " + url(b.port()) + " --requests " + req + " --out " + out +
                         " --min-bleu 1 --max-error-rate 0");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  const json::object rep = json::parse(read_file(out)).as_object();
  EXPECT_EQ(rep.at("summary").at("same_total_tokens_rate").to_number<double>(), 1.0);
  EXPECT_EQ(rep.at("summary").at("same_stop_reason_rate").to_number<double>(), 1.0);
  r = diff("--a " + url(a.port()) + " --b " + url(other.port()) + " --requests " + req + " --min-bleu 0.5");
  EXPECT_EQ(r.exit_code, 1) << r.out;
}

TEST(Diff, UnreachableSidesAreErrorsNotCrashes) {
  const std::string req = requests_file("unreachable.jsonl", 2, 4);
  CommandResult r = diff("--a http://127.0.0.1:1 --b http://127.0.0.1:2 --requests " + req + " --max-error-rate 0");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("no request answered on both sides"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace zl::test
