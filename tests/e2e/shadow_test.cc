// Shadow traffic (--shadow, rollout/shadow.h) end to end: a primary
// `zerolayer_test_server serve --fake-engine` mirrors to a healthy fake
// engine, to a dead port, to a listener that never answers (slow), and to a
// server that refuses the key. The client's answers are never affected; the
// outcomes land in engine_shadow_requests_total and the JSON-lines log.
// Also --host-name (x-engine-host, /ready, /v1/models) and --record-requests.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "rollout/shadow.h"  // user_in_fraction
#include "support/http_client.h"
#include "support/ports.h"
#include "support/prom_text.h"
#include "support/temp_files.h"
#include "support/wait.h"

namespace zl::test {
namespace {

namespace json = boost::json;
const auto* const kCleanup = testing_support::register_temp_cleanup("zl_shadow_test");

std::string url(int port) { return "http://127.0.0.1:" + std::to_string(port); }

double shadow_count(int port, const std::string& outcome) {
  const PromText t = parse_prom_text(fetch(port, "GET", "/metrics").body);
  return t.value("engine_shadow_requests_total", {{"outcome", outcome}});
}

std::string messages_body(const std::string& user = "", int max_tokens = 12, bool stream = false) {
  json::object o{{"model", "m"}, {"max_tokens", max_tokens}, {"stream", stream},
                 {"messages", json::array{json::object{{"role", "user"}, {"content", "tell me a story"}}}}};
  if (!user.empty()) o["metadata"] = json::object{{"user_id", user}};
  return json::serialize(o);
}

std::vector<json::object> read_log(const std::string& path) {
  std::vector<json::object> out;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) out.push_back(json::parse(line).as_object());
  return out;
}

std::vector<std::string> primary_args(int shadow_port, const std::string& log, std::vector<std::string> more = {}) {
  std::vector<std::string> a = {"--fake-engine", "--request-log", "false", "--host-name", "primary-1",
                                "--shadow", url(shadow_port), "--shadow-fraction", "1", "--shadow-log", log};
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

TEST(Shadow, HealthyShadowIsComparedPairByPair) {
  ServerProcess shadow({"--fake-engine", "--request-log", "false", "--host-name", "shadow-1"}, ZL_TEST_SERVER);
  ASSERT_TRUE(shadow.ok());
  const std::string log = testing_support::temp_file("zl_shadow_test", "healthy.jsonl");
  ServerProcess primary(primary_args(shadow.port(), log), ZL_TEST_SERVER);
  ASSERT_TRUE(primary.ok());
  for (int i = 0; i < 3; ++i) {
    HttpReply r = fetch(primary.port(), "POST", "/v1/messages", messages_body("", 8 + 4 * i, i == 2));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.header("x-engine-host"), "primary-1");
  }
  HttpReply oa = fetch(primary.port(), "POST", "/v1/chat/completions",
                       R"({"model":"m","max_tokens":10,"messages":[{"role":"user","content":"hi"}]})");
  ASSERT_EQ(oa.status, 200) << oa.body;
  ASSERT_TRUE(wait_until([&] { return shadow_count(primary.port(), "compared") == 4; })) << read_file(log);
  const std::vector<json::object> lines = read_log(log);
  ASSERT_EQ(lines.size(), 4u);
  for (const json::object& l : lines) {
    EXPECT_EQ(l.at("outcome").as_string(), "compared") << json::serialize(l);
    EXPECT_EQ(l.at("bleu4").to_number<double>(), 1.0);  // the same fake engine: the same text
    EXPECT_TRUE(l.at("same_stop_reason").as_bool());
    EXPECT_TRUE(l.at("same_total_tokens").as_bool());
    EXPECT_GT(l.at("shadow").at("last_token_ms").to_number<double>(), 0);
    EXPECT_GT(l.at("primary").at("last_token_ms").to_number<double>(), 0);
    EXPECT_FALSE(l.at("request_id").as_string().empty());
  }
  EXPECT_EQ(lines[3].at("route").as_string(), "/v1/chat/completions");
  EXPECT_EQ(lines[3].at("primary").at("stop_reason").as_string(), "length");
  const PromText t = parse_prom_text(fetch(primary.port(), "GET", "/metrics").body);
  EXPECT_TRUE(t.errors.empty());
  EXPECT_EQ(t.value("engine_shadow_bleu4", "engine_shadow_bleu4_count"), 4);
  EXPECT_EQ(t.value("engine_shadow_latency_ratio", "engine_shadow_latency_ratio_count", {{"phase", "last_token"}}), 4);
  // The shadow saw the copies (marked), and did not mirror them on.
  HttpReply ready = fetch(shadow.port(), "GET", "/ready");
  EXPECT_EQ(ready.header("x-engine-host"), "shadow-1");
  EXPECT_EQ(json::parse(ready.body).at("host").as_string(), "shadow-1");
  EXPECT_EQ(json::parse(fetch(primary.port(), "GET", "/v1/models").body).at("host").as_string(), "primary-1");
}

TEST(Shadow, DeadShadowCostsTheClientNothing) {
  DeadPort dead;
  const std::string log = testing_support::temp_file("zl_shadow_test", "dead.jsonl");
  ServerProcess primary(primary_args(dead.port(), log), ZL_TEST_SERVER);
  ASSERT_TRUE(primary.ok());
  for (int i = 0; i < 3; ++i) {
    HttpReply r = fetch(primary.port(), "POST", "/v1/messages", messages_body());
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.body.find("\"stop_reason\":\"max_tokens\""), std::string::npos) << r.body;
  }
  ASSERT_TRUE(wait_until([&] { return shadow_count(primary.port(), "unreachable") == 3; }));
  EXPECT_EQ(shadow_count(primary.port(), "compared"), 0);
  for (const json::object& l : read_log(log)) {
    EXPECT_EQ(l.at("outcome").as_string(), "unreachable");
    EXPECT_EQ(l.at("primary").at("status").as_int64(), 200);
    EXPECT_EQ(l.at("shadow").at("status").as_int64(), 0);
  }
}

TEST(Shadow, SlowShadowTimesOutAfterThePrimaryAnsweredAndTheQueueIsBounded) {
  DeadPort silent;
  silent.listen_silently();  // connections complete; nothing is ever answered
  const std::string log = testing_support::temp_file("zl_shadow_test", "slow.jsonl");
  ServerProcess primary(primary_args(silent.port(), log, {"--shadow-timeout-ms", "3000", "--shadow-queue", "2"}),
                        ZL_TEST_SERVER);
  ASSERT_TRUE(primary.ok());
  for (int i = 0; i < 4; ++i) {
    HttpReply r = fetch(primary.port(), "POST", "/v1/messages", messages_body("", 12, /*stream=*/true));
    ASSERT_EQ(r.status, 200);
    EXPECT_NE(r.body.find("event: message_stop"), std::string::npos);
  }
  // Every answer is complete while the first two shadow requests still wait
  // (their deadline is 3 s away): the primary did not wait for them. The
  // queue holds two pairs: the other two were dropped.
  EXPECT_EQ(shadow_count(primary.port(), "timeout"), 0);
  EXPECT_EQ(shadow_count(primary.port(), "dropped"), 2);
  ASSERT_TRUE(wait_until([&] { return shadow_count(primary.port(), "timeout") == 2; }, std::chrono::seconds(15)));
  EXPECT_EQ(read_log(log).size(), 2u);
  // The queue has room again.
  ASSERT_EQ(fetch(primary.port(), "POST", "/v1/messages", messages_body()).status, 200);
  EXPECT_EQ(shadow_count(primary.port(), "dropped"), 2);
}

TEST(Shadow, ShadowErrorsAreCountedNotPassedOn) {
  ServerProcess shadow({"--fake-engine", "--request-log", "false", "--api-key", "right"}, ZL_TEST_SERVER);
  ASSERT_TRUE(shadow.ok());
  const std::string log = testing_support::temp_file("zl_shadow_test", "error.jsonl");
  ServerProcess primary(primary_args(shadow.port(), log, {"--shadow-api-key", "wrong"}), ZL_TEST_SERVER);
  ASSERT_TRUE(primary.ok());
  ASSERT_EQ(fetch(primary.port(), "POST", "/v1/messages", messages_body()).status, 200);
  ASSERT_TRUE(wait_until([&] { return shadow_count(primary.port(), "shadow_error") == 1; }));
  const std::vector<json::object> lines = read_log(log);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].at("shadow").at("status").as_int64(), 401);
}

TEST(Shadow, SampledByUserIdHashAndNeverAShadowCopy) {
  ServerProcess shadow({"--fake-engine", "--request-log", "false"}, ZL_TEST_SERVER);
  ASSERT_TRUE(shadow.ok());
  const std::string log = testing_support::temp_file("zl_shadow_test", "sampled.jsonl");
  ServerProcess primary({"--fake-engine", "--request-log", "false", "--shadow", url(shadow.port()),
                         "--shadow-fraction", "0.3", "--shadow-log", log},
                        ZL_TEST_SERVER);
  ASSERT_TRUE(primary.ok());
  int expected = 0;
  for (int i = 0; i < 12; ++i) {
    const std::string user = "user-" + std::to_string(i);
    expected += rollout::user_in_fraction(user, 0.3) ? 2 : 0;
    for (int rep = 0; rep < 2; ++rep) {  // the same user twice: the same decision
      ASSERT_EQ(fetch(primary.port(), "POST", "/v1/messages", messages_body(user, 4)).status, 200);
    }
  }
  // A request that is itself a shadow copy is never mirrored again.
  ASSERT_EQ(fetch(primary.port(), "POST", "/v1/messages", messages_body("user-0", 4), {"x-engine-shadow: 1"}).status, 200);
  ASSERT_GT(expected, 0);
  ASSERT_LT(expected, 24);
  ASSERT_TRUE(wait_until([&] { return shadow_count(primary.port(), "compared") == expected; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // nothing more arrives
  EXPECT_EQ(read_log(log).size(), static_cast<size_t>(expected));
}

TEST(Shadow, RecordRequestsWritesOneBodyALine) {
  const std::string rec = testing_support::temp_file("zl_shadow_test", "recorded.jsonl");
  ServerProcess s({"--fake-engine", "--request-log", "false", "--record-requests", rec}, ZL_TEST_SERVER);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(fetch(s.port(), "POST", "/v1/messages", "{\n  \"model\": \"m\",\n  \"max_tokens\": 3,\n"
                                                     "  \"messages\": [{\"role\": \"user\", \"content\": \"a\\nb\"}]\n}")
                .status,
            200);
  ASSERT_EQ(fetch(s.port(), "POST", "/v1/messages", messages_body("u", 2, true)).status, 200);
  ASSERT_EQ(fetch(s.port(), "POST", "/v1/messages", "{bad json").status, 400);  // not recorded
  ASSERT_EQ(fetch(s.port(), "POST", "/v1/messages", messages_body(), {"x-engine-mode: validate"}).status, 200);
  std::ifstream f(rec);
  std::vector<std::string> lines;
  for (std::string line; std::getline(f, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(json::parse(lines[0]).at("messages").at(0).at("content").as_string(), "a\nb");
  EXPECT_EQ(json::parse(lines[1]).at("metadata").at("user_id").as_string(), "u");
}

TEST(Shadow, BadSettingsAreUsageErrors) {
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"--shadow", "ftp://x"}, {"--shadow", "http://127.0.0.1:1", "--shadow-fraction", "2"},
        {"--shadow", "http://127.0.0.1:1", "--shadow-fraction", "x"}, {"--host-name", "has space"},
        {"--shadow", "http://127.0.0.1:1", "--shadow-log", "/nonexistent-dir/x.jsonl"}}) {
    ServerProcess s([&] {
      std::vector<std::string> a = {"--fake-engine"};
      a.insert(a.end(), bad.begin(), bad.end());
      return a;
    }(), ZL_TEST_SERVER);
    EXPECT_FALSE(s.ok()) << bad[0];
    EXPECT_EQ(s.wait_exit(10000), 2) << bad.back();
  }
}

}  // namespace
}  // namespace zl::test
