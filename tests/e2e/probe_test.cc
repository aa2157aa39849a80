// `zerolayer probe` (the product binary) against a live fake-engine server,
// a dead port, a server that refuses the key, and a server that accepts the
// connection and never answers; and its usage errors.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <string>

#include "support/http_client.h"  // ServerProcess
#include "support/ports.h"
#include "support/json_object.h"
#include "support/process.h"

namespace zl::test {
namespace {

namespace json = boost::json;

CommandResult probe(const std::string& args) { return run_command(std::string(ZL_BIN) + " probe " + args + " 2>&1"); }

std::string url(int port) { return "http://127.0.0.1:" + std::to_string(port); }

TEST(Probe, LiveServerWithinAGenerousBudget) {
  ServerProcess s({"--fake-engine", "--fake-step-us", "1000", "--request-log", "false"}, ZL_TEST_SERVER);
  ASSERT_GT(s.port(), 0);
  CommandResult r = probe(url(s.port()) + " --timeout-ms 5000");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_GT(std::stod(r.out), 0.0) << r.out;  // the time in ms, alone on its line
  r = probe(url(s.port()) + "/ --timeout-ms 5000 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  json::object o = parse_obj(r.out);
  EXPECT_TRUE(o["ok"].as_bool());
  EXPECT_EQ(o["status"].as_int64(), 200);
  EXPECT_GT(o["ttft_ms"].to_number<double>(), 0.0);
  EXPECT_GE(o["total_ms"].to_number<double>(), o["ttft_ms"].to_number<double>());
  EXPECT_TRUE(o["error"].is_null());
}

TEST(Probe, OverBudgetIsExit1) {
  ServerProcess s({"--fake-engine", "--request-log", "false"}, ZL_TEST_SERVER);
  ASSERT_GT(s.port(), 0);
  // A budget of 0 ms: any measured time is over it (deterministic).
  CommandResult r = probe(url(s.port()) + " --timeout-ms 0 --json");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  json::object o = parse_obj(r.out);
  EXPECT_FALSE(o["ok"].as_bool());
  EXPECT_EQ(o["status"].as_int64(), 200);
  EXPECT_GT(o["ttft_ms"].to_number<double>(), 0.0);
  EXPECT_NE(std::string(o["error"].as_string()).find("over budget"), std::string::npos) << r.out;
}

TEST(Probe, WrongKeyIsExit1) {
  ServerProcess s({"--fake-engine", "--api-key", "right", "--request-log", "false"}, ZL_TEST_SERVER);
  ASSERT_GT(s.port(), 0);
  CommandResult r = probe(url(s.port()) + " --api-key wrong --timeout-ms 5000 --json");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  json::object o = parse_obj(r.out);
  EXPECT_EQ(o["status"].as_int64(), 401);
  EXPECT_TRUE(o["ttft_ms"].is_null());
  r = probe(url(s.port()) + " --api-key right --timeout-ms 5000");
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

TEST(Probe, DeadPortIsExit1AndFast) {
  DeadPort dead;
  const auto t0 = std::chrono::steady_clock::now();
  CommandResult r = probe(url(dead.port()) + " --json");
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_LT(ms.count(), 3000) << "a refused connection should fail at once";
  json::object o = parse_obj(r.out);
  EXPECT_FALSE(o["ok"].as_bool());
  EXPECT_TRUE(o["status"].is_null());
  EXPECT_FALSE(std::string(o["error"].as_string()).empty());
}

TEST(Probe, SilentServerHitsTheOverallDeadline) {
  DeadPort silent;
  silent.listen_silently();
  const auto t0 = std::chrono::steady_clock::now();
  // Budget 10 ms: the overall deadline is max(5 s, 10 x budget) = 5 s.
  CommandResult r = probe(url(silent.port()) + " --timeout-ms 10 --json");
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_GE(ms.count(), 4900);
  EXPECT_LT(ms.count(), 8000);
  EXPECT_EQ(std::string(parse_obj(r.out)["error"].as_string()), "timed out") << r.out;
}

TEST(Probe, UsageErrorsAreExit2) {
  EXPECT_EQ(probe("").exit_code, 2);
  EXPECT_EQ(probe("--timeout-ms 5").exit_code, 2);  // no URL
  CommandResult r = probe("https://127.0.0.1:1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("https"), std::string::npos) << r.out;
  EXPECT_EQ(probe("ftp://x").exit_code, 2);
  EXPECT_EQ(probe("http://127.0.0.1:99999").exit_code, 2);
  EXPECT_EQ(probe("http://:80").exit_code, 2);
  EXPECT_EQ(probe("http://127.0.0.1:1 --timeout-ms -1").exit_code, 2);
  EXPECT_EQ(probe("http://127.0.0.1:1 --timeout-ms abc").exit_code, 2);
  EXPECT_EQ(probe("http://127.0.0.1:1 --nope").exit_code, 2);
  EXPECT_EQ(probe("http://127.0.0.1:1 extra").exit_code, 2);
  r = probe("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("Usage: zerolayer probe"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace zl::test
