// KV-aware admission through the server (limits/kv_admission.h):
//
// - the real engine on stories260K with --ctx 256 --kv-size 128 (8 blocks of
//   16 tokens, less than one context): the 400 kv_cache_overflow on both
//   APIs with its exact numbers, a request at exactly max_tokens_fit
//   admitted, --degrade max-tokens admitting with x-engine-degraded and the
//   metric. Skipped when ../shared is absent.
// - the fake engine (--fake-kv-tokens 128: its used blocks are its running
//   requests' tokens) for the decay under KV pressure: a request that holds
//   the whole cache while it "prefills" makes the pressure, deterministically.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <map>
#include <string>
#include <vector>

#include "support/http_client.h"
#include "support/json_object.h"
#include "support/json_path.h"
#include "support/metric_scrape.h"
#include "support/process.h"
#include "support/prom_text.h"
#include "support/real_model.h"
#include "support/wait.h"

namespace zl::test {
namespace {

namespace json = boost::json;

constexpr int64_t kKvTokens = 128;

// The real engine with a KV cache of half a context; started once per
// process and name. Thread-safe.
ServerProcess& real_server(const std::string& name, const std::vector<std::string>& extra) {
  static LazyServers servers;
  std::vector<std::string> args = {"--ctx", "256", "--kv-size", std::to_string(kKvTokens),
                                   "--parallel", "2"};
  args.insert(args.end(), extra.begin(), extra.end());
  return servers.real(name, args);
}
int strict_port() { return real_server("strict", {}).port(); }
// Watermark 1: never under pressure. One answer fills this small cache, and
// the engine's KV usage is published after its step, so the next request
// could still see it full and be halved (the fake engine's test does that).
int degrade_port() { return real_server("degrade", {"--degrade", "max-tokens", "--kv-high-watermark", "1"}).port(); }

std::string messages(const std::string& content) {
  return R"("messages":[{"role":"user","content":)" + jquote(content) + "}]";
}
std::string anthropic_body(const std::string& content, const std::string& extra) {
  return R"({"model":"m","temperature":0,)" + messages(content) + (extra.empty() ? "" : "," + extra) + "}";
}

int64_t num(const json::object& o, std::initializer_list<std::string_view> path) {
  return test::num(at(o, path));
}
std::string str(const json::object& o, std::initializer_list<std::string_view> path) {
  return test::str(at(o, path));
}

// The prompt's exact token count, from the server's own count_tokens.
int64_t count_tokens(int port, const std::string& content, const std::vector<std::string>& headers = {}) {
  HttpReply r = fetch(port, "POST", "/v1/messages/count_tokens", R"({"model":"m",)" + messages(content) + "}",
                      headers);
  EXPECT_EQ(r.status, 200) << r.body;
  return num(parse_obj(r.body), {"input_tokens"});
}

const std::string kPrompt = "Once upon a time";

TEST(KvServer, OverflowIsA400WithExactNumbersOnBothApis) {
  REQUIRE_MODEL();
  const int port = strict_port();
  ASSERT_GT(port, 0);
  const int64_t n_prompt = count_tokens(port, kPrompt);
  ASSERT_GT(n_prompt, 0);
  const int64_t fit = kKvTokens - n_prompt;
  // Anthropic: 200 tokens fit the 256-token window but not the 128-token cache.
  HttpReply r = fetch(port, "POST", "/v1/messages", anthropic_body(kPrompt, R"("max_tokens":200)"));
  ASSERT_EQ(r.status, 400) << r.body;
  json::object o = parse_obj(r.body);
  EXPECT_EQ(str(o, {"type"}), "error");
  EXPECT_EQ(str(o, {"error", "type"}), "invalid_request_error");
  EXPECT_EQ(str(o, {"error", "detail", "reason"}), "kv_cache_overflow");
  EXPECT_EQ(num(o, {"error", "detail", "n_prompt_tokens"}), n_prompt);
  EXPECT_EQ(num(o, {"error", "detail", "max_tokens"}), 200);
  EXPECT_EQ(num(o, {"error", "detail", "max_tokens_fit"}), fit);
  EXPECT_EQ(r.header("x-engine-degraded"), "");
  // Past the window too: the clamp comes first, the error names what was asked.
  r = fetch(port, "POST", "/v1/messages", anthropic_body(kPrompt, R"("max_tokens":100000)"));
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(num(parse_obj(r.body), {"error", "detail", "max_tokens"}), 100000);
  EXPECT_EQ(num(parse_obj(r.body), {"error", "detail", "max_tokens_fit"}), fit);
  // OpenAI: its own envelope, the same numbers, also for streams.
  for (const char* stream : {"false", "true"}) {
    r = fetch(port, "POST", "/v1/chat/completions",
              R"({"model":"m","temperature":0,"max_tokens":200,"stream":)" + std::string(stream) + "," +
                  messages(kPrompt) + "}");
    ASSERT_EQ(r.status, 400) << r.body;
    o = parse_obj(r.body);
    EXPECT_EQ(str(o, {"error", "type"}), "invalid_request_error");
    EXPECT_EQ(str(o, {"error", "code"}), "kv_cache_overflow");
    EXPECT_EQ(str(o, {"error", "param"}), "max_tokens");
    EXPECT_EQ(num(o, {"error", "n_prompt_tokens"}), n_prompt);
    EXPECT_EQ(num(o, {"error", "max_tokens"}), 200);
    EXPECT_EQ(num(o, {"error", "max_tokens_fit"}), fit);
  }
  EXPECT_EQ(scrape_metric(port, "engine_requests_rejected_total", {{"api", "openai"}, {"reason", "kv_cache_overflow"}}), 2);
}

TEST(KvServer, ExactlyMaxTokensFitIsAdmitted) {
  REQUIRE_MODEL();
  const int port = strict_port();
  const int64_t fit = kKvTokens - count_tokens(port, kPrompt);
  HttpReply r = fetch(port, "POST", "/v1/messages",
                      anthropic_body(kPrompt, R"("max_tokens":)" + std::to_string(fit)), {}, 60000);
  ASSERT_EQ(r.status, 200) << r.body;
  json::object o = parse_obj(r.body);
  EXPECT_LE(num(o, {"usage", "output_tokens"}), fit);
  EXPECT_GT(num(o, {"usage", "output_tokens"}), 0);
  EXPECT_EQ(r.header("x-engine-degraded"), "");
  // One more is refused.
  r = fetch(port, "POST", "/v1/messages", anthropic_body(kPrompt, R"("max_tokens":)" + std::to_string(fit + 1)));
  EXPECT_EQ(r.status, 400) << r.body;
}

TEST(KvServer, APromptThatFillsTheCacheLeavesNothing) {
  REQUIRE_MODEL();
  const int port = strict_port();
  // Between the cache (128) and the window (256): kv_cache_overflow with 0.
  std::string long_prompt;
  while (count_tokens(port, long_prompt) < kKvTokens + 20) long_prompt += "the cat sat on the mat. ";
  const int64_t n_prompt = count_tokens(port, long_prompt);
  ASSERT_LT(n_prompt, 256);
  HttpReply r = fetch(port, "POST", "/v1/messages", anthropic_body(long_prompt, R"("max_tokens":1)"));
  ASSERT_EQ(r.status, 400) << r.body;
  json::object o = parse_obj(r.body);
  EXPECT_EQ(str(o, {"error", "detail", "reason"}), "kv_cache_overflow");
  EXPECT_EQ(num(o, {"error", "detail", "n_prompt_tokens"}), n_prompt);
  EXPECT_EQ(num(o, {"error", "detail", "max_tokens_fit"}), 0);
  // Past the window it stays context_length_exceeded.
  while (count_tokens(port, long_prompt) < 260) long_prompt += "the cat sat on the mat. ";
  r = fetch(port, "POST", "/v1/messages", anthropic_body(long_prompt, R"("max_tokens":1)"));
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(str(parse_obj(r.body), {"error", "detail", "reason"}), "context_length_exceeded");
}

TEST(KvServer, WithoutMaxTokensTheCacheBoundsTheAnswer) {
  REQUIRE_MODEL();
  const int port = strict_port();
  const int64_t fit = kKvTokens - count_tokens(port, kPrompt);
  HttpReply r = fetch(port, "POST", "/v1/chat/completions", R"({"model":"m","temperature":0,)" + messages(kPrompt) + "}",
                      {}, 60000);
  ASSERT_EQ(r.status, 200) << r.body;
  json::object o = parse_obj(r.body);
  EXPECT_LE(num(o, {"usage", "completion_tokens"}), fit);
  EXPECT_EQ(r.header("x-engine-degraded"), "");
}

TEST(KvServer, DegradeAdmitsWithTheFitAndSaysSo) {
  REQUIRE_MODEL();
  const int port = degrade_port();
  ASSERT_GT(port, 0);
  const int64_t fit = kKvTokens - count_tokens(port, kPrompt);
  const std::string header = "max_tokens=" + std::to_string(fit);
  HttpReply r = fetch(port, "POST", "/v1/messages", anthropic_body(kPrompt, R"("max_tokens":200)"), {}, 60000);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("x-engine-degraded"), header);
  json::object o = parse_obj(r.body);
  EXPECT_LE(num(o, {"usage", "output_tokens"}), fit);
  const std::string stop = str(o, {"stop_reason"});
  EXPECT_TRUE(stop == "max_tokens" || stop == "end_turn") << stop;
  // A stream carries it on its 200.
  r = fetch(port, "POST", "/v1/messages", anthropic_body(kPrompt, R"("max_tokens":200,"stream":true)"), {}, 60000);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("x-engine-degraded"), header);
  // OpenAI too.
  r = fetch(port, "POST", "/v1/chat/completions",
            R"({"model":"m","temperature":0,"max_tokens":200,)" + messages(kPrompt) + "}", {}, 60000);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("x-engine-degraded"), header);
  EXPECT_LE(num(parse_obj(r.body), {"usage", "completion_tokens"}), fit);
  // What fits is not degraded.
  r = fetch(port, "POST", "/v1/messages", anthropic_body(kPrompt, R"("max_tokens":5)"), {}, 60000);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("x-engine-degraded"), "");
  EXPECT_EQ(scrape_metric(port, "engine_degraded_requests_total", {{"reason", "kv_cache_overflow"}}), 3);
  EXPECT_EQ(scrape_metric(port, "engine_degraded_requests_total", {{"reason", "kv_pressure"}}), 0);
}

TEST(KvServer, ValidateModeRunsTheSameCheckAndCountsNothing) {
  REQUIRE_MODEL();
  const int64_t fit = kKvTokens - count_tokens(strict_port(), kPrompt);
  HttpReply r = fetch(strict_port(), "POST", "/v1/messages", anthropic_body(kPrompt, R"("max_tokens":200)"),
                      {"X-Engine-Mode: validate"});
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(str(parse_obj(r.body), {"error", "detail", "reason"}), "kv_cache_overflow");
  // With --degrade: validated, with the grant it would get, not counted.
  const int port = degrade_port();
  const double before = scrape_metric(port, "engine_degraded_requests_total", {{"reason", "kv_cache_overflow"}});
  r = fetch(port, "POST", "/v1/messages", anthropic_body(kPrompt, R"("max_tokens":200)"), {"X-Engine-Mode: validate"},
            60000);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(str(parse_obj(r.body), {"status"}), "validated");
  EXPECT_EQ(num(parse_obj(r.body), {"max_tokens_fit"}), fit);
  EXPECT_EQ(r.header("x-engine-degraded"), "max_tokens=" + std::to_string(fit));
  EXPECT_EQ(scrape_metric(port, "engine_degraded_requests_total", {{"reason", "kv_cache_overflow"}}), before);
}

TEST(KvServer, ModelsListTheRoomOfOneSequence) {
  REQUIRE_MODEL();
  HttpReply r = fetch(strict_port(), "GET", "/v1/models");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("\"max_tokens\":" + std::to_string(kKvTokens - 1)), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("\"max_model_len\":256"), std::string::npos) << r.body;  // vLLM's: the window (--ctx)
}

// ---- Decay under pressure, on the fake engine ----

TEST(KvServer, PressureHalvesTheGrantsOfTheTenantThatOverflows) {
  ServerProcess server({"--fake-engine", "--fake-ctx", "256", "--fake-kv-tokens", std::to_string(kKvTokens),
                        "--fake-step-us", "1000", "--degrade", "max-tokens", "--request-log", "false",
                        "--api-key", "k1", "--api-key", "k2", "--api-key", "k3"},
                       ZL_TEST_SERVER);
  ASSERT_TRUE(server.ok());
  const int port = server.port();
  const std::vector<std::string> k1 = {"x-api-key: k1"}, k2 = {"x-api-key: k2"}, k3 = {"x-api-key: k3"};
  // k2 holds all 8 blocks: a prompt of 120 tokens that "prefills" for minutes.
  std::string holder = "[[fake:prefill=600000]]";
  while (count_tokens(port, holder, k2) < 120) holder += "x";
  ASSERT_EQ(count_tokens(port, holder, k2), 120);
  RawClient hold(port);
  ASSERT_TRUE(hold.send_raw(http_request("POST", "/v1/messages",
                                         anthropic_body(holder, R"("max_tokens":4,"stream":true)"), k2)));
  ASSERT_TRUE(wait_until([&] { return scrape_metric(port, "engine_kv_blocks_used", {}) == 8; }));

  // k1's 100 tokens fit the cache (no overflow) but not the 0 free blocks: halved per request.
  auto grant = [&](const std::vector<std::string>& key, int max_tokens) {
    HttpReply r = fetch(port, "POST", "/v1/messages",
                        anthropic_body("Hi", R"("max_tokens":)" + std::to_string(max_tokens)), key);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.header("x-engine-degraded");
  };
  EXPECT_EQ(grant(k1, 100), "max_tokens=50");
  EXPECT_EQ(grant(k1, 100), "max_tokens=25");
  EXPECT_EQ(grant(k1, 100), "max_tokens=16");  // the floor
  // Another key starts from its own first halving.
  EXPECT_EQ(grant(k3, 100), "max_tokens=50");
  // A request at the floor is never lowered.
  EXPECT_EQ(grant(k1, 16), "");
  EXPECT_EQ(scrape_metric(port, "engine_degraded_requests_total", {{"reason", "kv_pressure"}}), 4);

  // The holder leaves: no pressure, nothing new is halved (k1's grants come
  // back one doubling per interval below the watermark: kv_admission_test).
  hold.abort_now();
  ASSERT_TRUE(wait_until([&] { return scrape_metric(port, "engine_kv_blocks_used", {}) == 0; }));
  EXPECT_EQ(grant(k2, 100), "");
}

}  // namespace
}  // namespace zl::test
