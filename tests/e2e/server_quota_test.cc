// Per-key quotas end to end (README "Keys and quotas"):
// `zerolayer_test_server serve --fake-engine --keys FILE` — 401 for a wrong
// key, the rate-limit headers of both APIs (streamed and not) with
// `remaining` going down by each request's exact charge, 429 with
// detail.limit and retry-after, keys that do not affect each other, the
// concurrency limit, metrics, and SIGHUP reloading the file.
//
// Buckets refill continuously, so between two answers a bucket may gain
// back up to rate x elapsed units: a decrease is checked to lie within
// [charge - ceil(rate x elapsed), charge] (exactly the charge when no whole
// unit came back).
#include <gtest/gtest.h>
#include <signal.h>

#include <boost/json.hpp>
#include <chrono>
#include <cmath>
#include <fstream>
#include <regex>

#include "support/http_client.h"
#include "support/json_object.h"
#include "support/prom_text.h"
#include "support/temp_files.h"
#include "support/wait.h"

namespace zl::test {
namespace {

namespace json = boost::json;
using Clock = std::chrono::steady_clock;

const auto* const kCleanup = testing_support::register_temp_cleanup("zl_server_quota_test");

const char kKeys[] = R"(# per-key quotas for the tests
[[key]]
name = "anth"
key = "sk-anth"
requests_per_minute = 6
input_tokens_per_minute = 6000
output_tokens_per_minute = 600

[[key]]
name = "oai"
key = "sk-oai"
requests_per_minute = 6
input_tokens_per_minute = 6000
output_tokens_per_minute = 600

[[key]]
name = "other"
key = "sk-other"
requests_per_minute = 6
input_tokens_per_minute = 6000
output_tokens_per_minute = 600

[[key]]
name = "tiny"
key = "sk-tiny"
requests_per_minute = 1

[[key]]
name = "toks"
key = "sk-toks"
input_tokens_per_minute = 40

[[key]]
name = "conc"
key = "sk-conc"
max_concurrent = 1

[[key]]
name = "refund"
key = "sk-refund"
requests_per_minute = 6
input_tokens_per_minute = 6000

[[key]]
name = "free"
key = "sk-free"
)";

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
}

ServerProcess* g_server = nullptr;

class QuotaEnv : public ::testing::Environment {
 public:
  void SetUp() override {
    const std::string path = testing_support::temp_file("zl_server_quota_test", "keys.toml");
    write_file(path, kKeys);
    g_server = new ServerProcess({"--fake-engine", "--fake-step-us", "500", "--keys", path, "--api-key", "sk-legacy"},
                                 ZL_TEST_SERVER);
  }
  void TearDown() override { delete g_server; }
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new QuotaEnv);

int port() { return g_server->port(); }

const std::string kMsg = R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]})";
const std::string kMsgStream =
    R"({"model":"m","max_tokens":7,"stream":true,"messages":[{"role":"user","content":"hi"}]})";
const std::string kChat = R"({"model":"m","max_tokens":4,"messages":[{"role":"user","content":"hello"}]})";
const std::string kChatStream =
    R"({"model":"m","max_tokens":6,"stream":true,"messages":[{"role":"user","content":"hello"}]})";

HttpReply post(const std::string& path, const std::string& body, const std::string& key) {
  return fetch(port(), "POST", path, body, {"Authorization: Bearer " + key});
}

int64_t num(const HttpReply& r, const std::string& header) {
  const std::string v = r.header(header);
  EXPECT_FALSE(v.empty()) << "no header " << header;
  return v.empty() ? -1 : std::stoll(v);
}

std::string str(const json::value& v) { return v.is_string() ? std::string(v.get_string()) : ""; }

// Checks that `remaining` went from `before` to `after` by `charge`, given
// what `rate_per_minute` can refill in `elapsed`.
void expect_charged(int64_t before, int64_t after, int64_t charge, double rate_per_minute, Clock::duration elapsed) {
  const double s = std::chrono::duration<double>(elapsed).count();
  const int64_t refill = static_cast<int64_t>(std::ceil(rate_per_minute / 60 * s));
  EXPECT_LE(before - after, charge) << "before " << before << " after " << after;
  EXPECT_GE(before - after, charge - refill) << "before " << before << " after " << after << " refill <= " << refill;
}

TEST(ServerQuota, AWrongOrMissingKeyIs401OnBothApis) {
  for (const char* path : {"/v1/messages", "/v1/chat/completions"}) {
    EXPECT_EQ(post(path, kMsg, "sk-nope").status, 401) << path;
    EXPECT_EQ(post(path, kMsg, "sk-ant").status, 401) << path;
    EXPECT_EQ(post(path, kMsg, "SK-ANTH").status, 401) << path;
    EXPECT_EQ(fetch(port(), "POST", path, kMsg).status, 401) << path;
  }
  // --api-key keys work beside the file: no limits, no rate-limit headers.
  HttpReply legacy = post("/v1/messages", kMsg, "sk-legacy");
  EXPECT_EQ(legacy.status, 200);
  EXPECT_EQ(legacy.header("anthropic-ratelimit-requests-limit"), "");
  // A key without limits: admitted, no headers.
  HttpReply free = fetch(port(), "POST", "/v1/messages", kMsg, {"x-api-key: sk-free"});
  EXPECT_EQ(free.status, 200);
  EXPECT_EQ(free.header("anthropic-ratelimit-requests-limit"), "");
}

TEST(ServerQuota, AnthropicHeadersReflectEachRequestsExactCharge) {
  const std::regex rfc3339(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)");
  const auto t0 = Clock::now();
  HttpReply a = fetch(port(), "POST", "/v1/messages", kMsg, {"x-api-key: sk-anth"});
  ASSERT_EQ(a.status, 200) << a.body;
  auto usage = parse_obj(a.body)["usage"].as_object();
  const int64_t n_in = usage["input_tokens"].as_int64();
  const int64_t n_out = usage["output_tokens"].as_int64();
  EXPECT_EQ(n_out, 5);
  EXPECT_EQ(num(a, "anthropic-ratelimit-requests-limit"), 6);
  EXPECT_EQ(num(a, "anthropic-ratelimit-input-tokens-limit"), 6000);
  EXPECT_EQ(num(a, "anthropic-ratelimit-output-tokens-limit"), 600);
  // A fresh key: its buckets were full, this request took its exact share.
  expect_charged(6, num(a, "anthropic-ratelimit-requests-remaining"), 1, 6, Clock::now() - t0);
  expect_charged(6000, num(a, "anthropic-ratelimit-input-tokens-remaining"), n_in, 6000, Clock::now() - t0);
  expect_charged(600, num(a, "anthropic-ratelimit-output-tokens-remaining"), n_out, 600, Clock::now() - t0);
  for (const char* what : {"requests", "input-tokens", "output-tokens"}) {
    EXPECT_TRUE(std::regex_match(a.header(std::string("anthropic-ratelimit-") + what + "-reset"), rfc3339)) << what;
  }
  EXPECT_EQ(a.header("x-ratelimit-limit-requests"), "");  // the other API's headers: not here

  // A stream: its head goes out before any output, with the input charged.
  const auto t1 = Clock::now();
  HttpReply s = fetch(port(), "POST", "/v1/messages", kMsgStream, {"x-api-key: sk-anth"});
  ASSERT_EQ(s.status, 200);
  ASSERT_EQ(s.header("content-type"), "text/event-stream");
  expect_charged(num(a, "anthropic-ratelimit-requests-remaining"), num(s, "anthropic-ratelimit-requests-remaining"), 1,
                 6, Clock::now() - t1);
  expect_charged(num(a, "anthropic-ratelimit-input-tokens-remaining"),
                 num(s, "anthropic-ratelimit-input-tokens-remaining"), n_in, 6000, Clock::now() - t1);
  expect_charged(num(a, "anthropic-ratelimit-output-tokens-remaining"),
                 num(s, "anthropic-ratelimit-output-tokens-remaining"), 0, 600, Clock::now() - t1);
  EXPECT_NE(s.body.find("\"output_tokens\":7"), std::string::npos) << s.body;

  // The stream's 7 output tokens were charged at its end: the next answer shows them and its own 5.
  const auto t2 = Clock::now();
  HttpReply b = fetch(port(), "POST", "/v1/messages", kMsg, {"x-api-key: sk-anth"});
  ASSERT_EQ(b.status, 200);
  expect_charged(num(s, "anthropic-ratelimit-output-tokens-remaining"),
                 num(b, "anthropic-ratelimit-output-tokens-remaining"), 7 + 5, 600, Clock::now() - t2);
  expect_charged(num(s, "anthropic-ratelimit-requests-remaining"), num(b, "anthropic-ratelimit-requests-remaining"), 1,
                 6, Clock::now() - t2);
}

TEST(ServerQuota, OpenAiHeadersReflectEachRequestsExactCharge) {
  const std::regex go_duration(R"((\d+h)?(\d+m)?\d+(\.\d+)?s|\d+ms)");
  const auto t0 = Clock::now();
  HttpReply a = post("/v1/chat/completions", kChat, "sk-oai");
  ASSERT_EQ(a.status, 200) << a.body;
  auto usage = parse_obj(a.body)["usage"].as_object();
  const int64_t n_in = usage["prompt_tokens"].as_int64();
  const int64_t n_out = usage["completion_tokens"].as_int64();
  EXPECT_EQ(n_out, 4);
  EXPECT_EQ(num(a, "x-ratelimit-limit-requests"), 6);
  EXPECT_EQ(num(a, "x-ratelimit-limit-tokens"), 6000);  // "tokens": the input bucket
  EXPECT_EQ(num(a, "x-ratelimit-limit-input-tokens"), 6000);
  EXPECT_EQ(num(a, "x-ratelimit-limit-output-tokens"), 600);
  expect_charged(6, num(a, "x-ratelimit-remaining-requests"), 1, 6, Clock::now() - t0);
  expect_charged(6000, num(a, "x-ratelimit-remaining-tokens"), n_in, 6000, Clock::now() - t0);
  EXPECT_EQ(a.header("x-ratelimit-remaining-tokens"), a.header("x-ratelimit-remaining-input-tokens"));
  expect_charged(600, num(a, "x-ratelimit-remaining-output-tokens"), n_out, 600, Clock::now() - t0);
  for (const char* what : {"requests", "tokens", "input-tokens", "output-tokens"}) {
    EXPECT_TRUE(std::regex_match(a.header(std::string("x-ratelimit-reset-") + what), go_duration))
        << what << ": " << a.header(std::string("x-ratelimit-reset-") + what);
  }
  EXPECT_EQ(a.header("anthropic-ratelimit-requests-limit"), "");

  const auto t1 = Clock::now();
  HttpReply s = post("/v1/chat/completions", kChatStream, "sk-oai");
  ASSERT_EQ(s.status, 200);
  ASSERT_EQ(s.header("content-type"), "text/event-stream");
  expect_charged(num(a, "x-ratelimit-remaining-requests"), num(s, "x-ratelimit-remaining-requests"), 1, 6,
                 Clock::now() - t1);
  expect_charged(num(a, "x-ratelimit-remaining-output-tokens"), num(s, "x-ratelimit-remaining-output-tokens"), 0, 600,
                 Clock::now() - t1);
  const auto t2 = Clock::now();
  HttpReply b = post("/v1/completions", R"({"model":"m","max_tokens":3,"prompt":"x"})", "sk-oai");
  ASSERT_EQ(b.status, 200) << b.body;
  expect_charged(num(s, "x-ratelimit-remaining-output-tokens"), num(b, "x-ratelimit-remaining-output-tokens"), 6 + 3,
                 600, Clock::now() - t2);
}

void expect_429(const HttpReply& r, bool openai, const std::string& limit) {
  EXPECT_EQ(r.status, 429) << r.body;
  const int64_t retry_s = num(r, "retry-after");
  const int64_t retry_ms = num(r, "retry-after-ms");
  EXPECT_GE(retry_s, 1);
  EXPECT_EQ(retry_s, (retry_ms + 999) / 1000);
  auto o = parse_obj(r.body);
  json::object& e = o["error"].as_object();
  EXPECT_EQ(str(e["type"]), "rate_limit_error") << r.body;
  json::object& d = openai ? e : e["detail"].as_object();
  EXPECT_EQ(str(openai ? d["code"] : d["reason"]), "rate_limit_exceeded") << r.body;
  EXPECT_EQ(str(d["limit"]), limit) << r.body;
  EXPECT_EQ(d["retry_after_ms"].as_int64(), retry_ms);
}

TEST(ServerQuota, OverALimitIs429WithTheLimitRetryAfterAndHeaders) {
  HttpReply first = post("/v1/messages", kMsg, "sk-tiny");
  ASSERT_EQ(first.status, 200);
  EXPECT_EQ(num(first, "anthropic-ratelimit-requests-remaining"), 0);
  HttpReply refused = post("/v1/messages", kMsg, "sk-tiny");
  expect_429(refused, /*openai=*/false, "requests");
  EXPECT_GT(num(refused, "retry-after"), 50);  // one request a minute
  EXPECT_EQ(num(refused, "anthropic-ratelimit-requests-limit"), 1);
  EXPECT_EQ(num(refused, "anthropic-ratelimit-requests-remaining"), 0);
  HttpReply refused_oai = post("/v1/chat/completions", kChat, "sk-tiny");
  expect_429(refused_oai, /*openai=*/true, "requests");
  EXPECT_EQ(num(refused_oai, "x-ratelimit-limit-requests"), 1);
  EXPECT_EQ(num(refused_oai, "x-ratelimit-remaining-requests"), 0);
  // A stream is refused before it starts: a plain 429, no event stream.
  HttpReply refused_stream = post("/v1/messages", kMsgStream, "sk-tiny");
  expect_429(refused_stream, /*openai=*/false, "requests");
  EXPECT_EQ(refused_stream.header("content-type"), "application/json");

  // Input tokens: 40 a minute, and a chat prompt of more than 20 tokens.
  const auto t_in = Clock::now();
  HttpReply in1 = post("/v1/messages", kMsg, "sk-toks");
  ASSERT_EQ(in1.status, 200);
  const int64_t n_in = parse_obj(in1.body)["usage"].as_object()["input_tokens"].as_int64();
  ASSERT_GT(n_in, 20);
  HttpReply in2 = post("/v1/chat/completions", kChat, "sk-toks");
  expect_429(in2, /*openai=*/true, "input_tokens");
  EXPECT_EQ(num(in2, "x-ratelimit-limit-tokens"), 40);
  const double refill = 40.0 / 60 * std::chrono::duration<double>(Clock::now() - t_in).count();
  EXPECT_LE(num(in2, "x-ratelimit-remaining-tokens"), 40 - n_in + static_cast<int64_t>(std::ceil(refill)));

  // Another key is not affected by either.
  HttpReply other = post("/v1/messages", kMsg, "sk-other");
  ASSERT_EQ(other.status, 200);
  EXPECT_GE(num(other, "anthropic-ratelimit-requests-remaining"), 5);
  EXPECT_GE(num(other, "anthropic-ratelimit-output-tokens-remaining"), 595);

  const PromText m = parse_prom_text(fetch(port(), "GET", "/metrics").body);
  EXPECT_TRUE(m.errors.empty());
  EXPECT_EQ(m.value("zerolayer_quota_rejections_total", "zerolayer_quota_rejections_total",
                    {{"tenant", "tiny"}, {"limit", "requests"}}),
            3);
  EXPECT_EQ(m.value("zerolayer_quota_rejections_total", "zerolayer_quota_rejections_total",
                    {{"tenant", "toks"}, {"limit", "input_tokens"}}),
            1);
  EXPECT_EQ(m.value("zerolayer_tenant_requests_total", "zerolayer_tenant_requests_total", {{"tenant", "tiny"}}), 1);
  EXPECT_EQ(m.value("zerolayer_tenant_tokens_total", "zerolayer_tenant_tokens_total",
                    {{"tenant", "toks"}, {"direction", "input"}}),
            n_in);
}

TEST(ServerQuota, MaxConcurrentRefusesWhileARequestRunsAndNotAfter) {
  RawClient slow(port());
  ASSERT_TRUE(slow.send_raw(http_request(
      "POST", "/v1/messages",
      R"({"model":"m","max_tokens":40,"stream":true,"messages":[{"role":"user","content":"[[fake:slow]]"}]})",
      {"x-api-key: sk-conc"})));
  // Its head is out once it runs.
  ASSERT_TRUE(slow.read_until([](const std::string& b) { return b.find("\r\n\r\n") != std::string::npos; }, 10000));
  HttpReply refused = post("/v1/messages", kMsg, "sk-conc");
  expect_429(refused, /*openai=*/false, "concurrent");
  EXPECT_EQ(post("/v1/messages", kMsg, "sk-other").status, 200);  // other keys run meanwhile
  slow.close_now();  // the client goes away: its slot comes back
  EXPECT_TRUE(wait_until([] { return post("/v1/messages", kMsg, "sk-conc").status == 200; }));
}

// An authenticated request refused before admission (a 400) charges nothing
// and still carries its key's rate-limit headers, on both APIs.
TEST(ServerQuota, A400BeforeAdmissionCarriesTheHeadersAndChargesNothing) {
  const std::string bad = R"({"model":"m","max_tokens":0,"messages":[{"role":"user","content":"hi"}]})";
  // Buckets only refill between the answers: `remaining` never goes down.
  int64_t requests = -1;
  int64_t input = -1;
  for (int i = 0; i < 3; ++i) {
    HttpReply a = post("/v1/messages", bad, "sk-other");
    ASSERT_EQ(a.status, 400) << a.body;
    EXPECT_EQ(num(a, "anthropic-ratelimit-requests-limit"), 6);
    EXPECT_GE(num(a, "anthropic-ratelimit-requests-remaining"), requests);
    EXPECT_GE(num(a, "anthropic-ratelimit-input-tokens-remaining"), input);
    requests = num(a, "anthropic-ratelimit-requests-remaining");
    input = num(a, "anthropic-ratelimit-input-tokens-remaining");
    HttpReply o = post("/v1/chat/completions", "{", "sk-other");
    ASSERT_EQ(o.status, 400) << o.body;
    EXPECT_EQ(num(o, "x-ratelimit-limit-requests"), 6);
    EXPECT_GE(num(o, "x-ratelimit-remaining-requests"), requests);
    requests = num(o, "x-ratelimit-remaining-requests");
  }
  EXPECT_GE(requests, 1);
  // --api-key keys have no quota: no headers.
  HttpReply legacy = post("/v1/messages", bad, "sk-legacy");
  EXPECT_EQ(legacy.status, 400);
  EXPECT_EQ(legacy.header("anthropic-ratelimit-requests-limit"), "");
}

TEST(ServerQuota, ARequestTheEngineRefusesCostsNothing) {
  const std::string overload =
      R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"[[fake:overload]]"}]})";
  for (const std::string& body : {overload, std::string(overload).insert(1, R"("stream":true,)")}) {
    HttpReply r = post("/v1/messages", body, "sk-refund");
    EXPECT_EQ(r.status, 529) << r.body;
  }
  // Only this request counts: the two refused ones were given back.
  const auto t0 = Clock::now();
  HttpReply ok = post("/v1/messages", kMsg, "sk-refund");
  ASSERT_EQ(ok.status, 200);
  const int64_t n_in = parse_obj(ok.body)["usage"].as_object()["input_tokens"].as_int64();
  expect_charged(6, num(ok, "anthropic-ratelimit-requests-remaining"), 1, 6, Clock::now() - t0);
  expect_charged(6000, num(ok, "anthropic-ratelimit-input-tokens-remaining"), n_in, 6000, Clock::now() - t0);
}

TEST(ServerQuota, SighupReloadsTheKeysFile) {
  const std::string path = testing_support::temp_file("zl_server_quota_test", "reload.toml");
  write_file(path, "[[key]]\nname = \"old\"\nkey = \"sk-old\"\nrequests_per_minute = 100\n"
                   "[[key]]\nname = \"kept\"\nkey = \"sk-kept\"\nrequests_per_minute = 100\n");
  ServerProcess server({"--fake-engine", "--keys", path}, ZL_TEST_SERVER);
  ASSERT_TRUE(server.ok());
  const int p = server.port();
  auto status = [p](const std::string& key) {
    return fetch(p, "POST", "/v1/messages", kMsg, {"x-api-key: " + key}).status;
  };
  auto remaining = [p](const std::string& key) {
    HttpReply r = fetch(p, "POST", "/v1/messages", kMsg, {"x-api-key: " + key});
    return r.status == 200 ? std::stoll(r.header("anthropic-ratelimit-requests-remaining")) : -1;
  };
  ASSERT_EQ(status("sk-old"), 200);
  ASSERT_EQ(status("sk-new"), 401);
  const auto t_kept = Clock::now();
  for (int i = 0; i < 9; ++i) ASSERT_EQ(status("sk-kept"), 200);
  // Kept has used 10 of its 100 (plus what came back meanwhile).
  const int64_t kept_before = remaining("sk-kept");
  const double refill = 100.0 / 60 * std::chrono::duration<double>(Clock::now() - t_kept).count();
  ASSERT_GE(kept_before, 90);
  ASSERT_LE(kept_before, 90 + static_cast<int64_t>(std::ceil(refill)));

  write_file(path, "[[key]]\nname = \"kept\"\nkey = \"sk-kept\"\nrequests_per_minute = 100\n"
                   "[[key]]\nname = \"new\"\nkey = \"sk-new\"\n");
  server.signal(SIGHUP);
  EXPECT_TRUE(wait_until([&] { return status("sk-new") == 200; }));
  EXPECT_EQ(status("sk-old"), 401);
  // The kept name kept its bucket: not a fresh 100.
  EXPECT_LE(remaining("sk-kept"), kept_before);

  // A bad file: the keys in force stay, the server lives on.
  auto reloads = [p](const std::string& result) {
    return parse_prom_text(fetch(p, "GET", "/metrics").body)
        .value("zerolayer_keys_reloads_total", "zerolayer_keys_reloads_total", {{"result", result}});
  };
  EXPECT_TRUE(wait_until([&] { return reloads("ok") == 1; }));  // counted just after the swap
  EXPECT_EQ(reloads("error"), 0);
  write_file(path, "[[key]]\nname = \"broken\"\n");
  server.signal(SIGHUP);
  EXPECT_TRUE(wait_until([&] { return reloads("error") == 1; }));
  EXPECT_EQ(status("sk-new"), 200);
  EXPECT_EQ(status("sk-kept"), 200);
  EXPECT_EQ(server.wait_exit(0), -1);
  // And a good one again.
  write_file(path, "[[key]]\nname = \"last\"\nkey = \"sk-last\"\n");
  server.signal(SIGHUP);
  EXPECT_TRUE(wait_until([&] { return status("sk-last") == 200; }));
  EXPECT_EQ(status("sk-new"), 401);
  EXPECT_EQ(status("sk-kept"), 401);
}

}  // namespace
}  // namespace zl::test
