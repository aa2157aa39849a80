// Shared limits across replicas end to end (README "Shared limits across
// replicas"): two `zerolayer_test_server serve --fake-engine --keys FILE
// --redis URL` processes and one real redis-server (tests/support/
// redis_server.h; SKIPPED without the binary). The replicas share one key's
// budget; then Redis is killed mid-test: with --redis-fail open both serve
// on with local buckets, with closed both answer 503 quota_backend_unavailable
// on both APIs; Redis restarted on the same port is picked up in the
// background (zerolayer_quota_backend_up back to 1) and the budget is shared
// again.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <fstream>

#include "support/http_client.h"
#include "support/json_object.h"
#include "support/process.h"
#include "support/prom_text.h"
#include "support/redis_server.h"
#include "support/temp_files.h"
#include "support/wait.h"

namespace zl::test {
namespace {

const auto* const kCleanup = testing_support::register_temp_cleanup("zl_server_redis_test");

// Three requests a minute: a refill of one takes 20 s, longer than any test
// here, so every count below is exact.
const char kKeys[] = R"([[key]]
name = "team"
key = "sk-team"
requests_per_minute = 3
input_tokens_per_minute = 100000
)";

const std::string kMsg = R"({"model":"m","max_tokens":3,"messages":[{"role":"user","content":"hi"}]})";

// The string at `path` in `o`, or "" when any step is missing.
std::string str_at(const boost::json::object& o, std::initializer_list<const char*> path) {
  const boost::json::value* v = nullptr;
  const boost::json::object* cur = &o;
  for (const char* k : path) {
    if (!cur || !(v = cur->if_contains(k))) return "";
    cur = v->if_object();
  }
  return v && v->is_string() ? std::string(v->get_string()) : "";
}

std::string keys_file() {
  const std::string path = testing_support::temp_file("zl_server_redis_test", "keys.toml");
  std::ofstream(path, std::ios::binary | std::ios::trunc) << kKeys;
  return path;
}

struct Replica {
  Replica(const RedisServer& redis, const std::string& fail)
      : server({"--fake-engine", "--keys", keys_file(), "--redis", redis.url(), "--redis-fail", fail}, ZL_TEST_SERVER) {}
  HttpReply anthropic() const {
    return fetch(server.port(), "POST", "/v1/messages", kMsg, {"x-api-key: sk-team"});
  }
  HttpReply openai() const {
    return fetch(server.port(), "POST", "/v1/chat/completions", kMsg, {"Authorization: Bearer sk-team"});
  }
  double metric(const std::string& name, const std::map<std::string, std::string>& labels) const {
    const HttpReply r = fetch(server.port(), "GET", "/metrics");
    const PromText t = parse_prom_text(r.body);
    EXPECT_TRUE(t.errors.empty()) << (t.errors.empty() ? "" : t.errors[0]);
    return t.value(name, labels);
  }
  double up() const { return metric("zerolayer_quota_backend_up", {{"backend", "redis"}}); }
  double errors() const {
    double n = 0;
    for (const char* k : {"connect", "timeout", "io", "reply"}) {
      n += metric("zerolayer_quota_backend_errors_total", {{"backend", "redis"}, {"kind", k}});
    }
    return n;
  }
  ServerProcess server;
};

#define START_REDIS_OR_SKIP(redis)                                           \
  RedisServer redis;                                                         \
  if (!RedisServer::available()) GTEST_SKIP() << RedisServer::skip_reason(); \
  ASSERT_TRUE(redis.start()) << "redis-server did not start"

// A: 2 requests, B: 1 (the other API), then the 4th on either is a 429.
void expect_one_shared_budget(const Replica& a, const Replica& b) {
  HttpReply r = a.anthropic();
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("anthropic-ratelimit-requests-remaining"), "2");
  ASSERT_EQ(a.openai().status, 200);
  r = b.openai();
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("x-ratelimit-remaining-requests"), "0");  // B saw A's two
  r = b.anthropic();
  EXPECT_EQ(r.status, 429) << r.body;
  EXPECT_EQ(str_at(parse_obj(r.body), {"error", "detail", "limit"}), "requests");
  EXPECT_GE(std::stoi(r.header("retry-after").empty() ? "0" : r.header("retry-after")), 1);
  r = a.openai();
  EXPECT_EQ(r.status, 429) << r.body;
}

TEST(ServerRedis, ABadRedisUrlIsAUsageErrorNamingTheFlagBeforeTheModelLoads) {
  // The product with a model that does not exist: the URL is refused first.
  const CommandResult r = run_command(std::string(ZL_BIN) +
                                      " serve --model /nonexistent/model.gguf --redis redis://cache:0 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("--redis: redis URL 'redis://cache:0': the port must be a number in 1..65535"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("nonexistent"), std::string::npos) << r.out;
  const CommandResult f = run_command(std::string(ZL_BIN) + " serve --redis-fail maybe 2>&1");
  EXPECT_EQ(f.exit_code, 2) << f.out;
  EXPECT_NE(f.out.find("redis-fail must be open or closed"), std::string::npos) << f.out;
}

TEST(ServerRedis, TwoReplicasShareOneBudgetAndServeOnWhenRedisDies) {
  START_REDIS_OR_SKIP(redis);
  Replica a(redis, "open"), b(redis, "open");
  ASSERT_TRUE(a.server.ok() && b.server.ok());
  EXPECT_EQ(a.up(), 1);
  EXPECT_EQ(b.up(), 1);
  expect_one_shared_budget(a, b);

  redis.kill();  // mid-test; both replicas fall back to (fresh) local buckets
  for (const Replica* r : {&a, &b}) {
    HttpReply x = r->anthropic();
    EXPECT_EQ(x.status, 200) << x.body;
    EXPECT_EQ(x.header("anthropic-ratelimit-requests-remaining"), "2");  // this replica's own bucket
    EXPECT_EQ(r->openai().status, 200);
    EXPECT_EQ(r->up(), 0);
    EXPECT_GE(r->errors(), 1);
  }
  // Each replica enforces the limit on its own meanwhile.
  EXPECT_EQ(a.anthropic().status, 200);
  EXPECT_EQ(a.anthropic().status, 429);

  ASSERT_TRUE(redis.start());  // same port, no data: the shared buckets start full
  ASSERT_TRUE(wait_until([&] { return a.up() == 1 && b.up() == 1; }));
  expect_one_shared_budget(b, a);
}

TEST(ServerRedis, ClosedModeAnswers503OnBothApisWhileRedisIsDown) {
  START_REDIS_OR_SKIP(redis);
  Replica a(redis, "closed"), b(redis, "closed");
  ASSERT_TRUE(a.server.ok() && b.server.ok());
  ASSERT_EQ(a.anthropic().status, 200);

  redis.kill();
  for (const Replica* r : {&a, &b}) {
    HttpReply x = r->anthropic();
    ASSERT_EQ(x.status, 503) << x.body;
    EXPECT_EQ(x.header("retry-after"), "1");
    auto body = parse_obj(x.body);
    EXPECT_EQ(str_at(body, {"type"}), "error");
    EXPECT_EQ(str_at(body, {"error", "type"}), "api_error");
    EXPECT_EQ(str_at(body, {"error", "detail", "reason"}), "quota_backend_unavailable");
    EXPECT_EQ(body["error"].as_object()["detail"].as_object()["retry_after_ms"].as_int64(), 1000);

    x = r->openai();
    ASSERT_EQ(x.status, 503) << x.body;
    EXPECT_EQ(x.header("retry-after"), "1");
    body = parse_obj(x.body);
    EXPECT_EQ(str_at(body, {"error", "code"}), "quota_backend_unavailable");
    EXPECT_EQ(str_at(body, {"error", "type"}), "server_error");
    EXPECT_EQ(r->up(), 0);
  }
  // Without a key the answer is still 401, not 503: authentication comes first.
  EXPECT_EQ(fetch(a.server.port(), "POST", "/v1/messages", kMsg).status, 401);

  ASSERT_TRUE(redis.start());
  ASSERT_TRUE(wait_until([&] { return a.up() == 1 && b.up() == 1; }));
  EXPECT_EQ(a.anthropic().status, 200);
  EXPECT_EQ(b.openai().status, 200);
}

}  // namespace
}  // namespace zl::test
