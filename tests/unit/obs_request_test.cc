// Per-request visibility and validate mode (issue 16), in process: the real
// API routes over the fake engine behind a real HttpServer.
//   - request ids: a valid incoming x-request-id / request-id is kept (both
//     response headers, the error envelope, the request log), else replaced;
//   - Server-Timing: present, RFC-shaped, non-negative, consistent with the
//     client's wall time, on both APIs, streamed or not, and on errors;
//   - validate mode: both header names, both APIs, the JSON answer, the
//     same 4xx as without the header, nothing generated.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "api/anthropic/messages.h"
#include "api/server_timing.h"
#include "api/service.h"
#include "api/validate.h"
#include "http/request_id.h"
#include "support/fake_api_server.h"
#include "support/fake_engine.h"
#include "support/http_client.h"
#include "support/json_object.h"
#include "support/wait.h"

namespace zl::api {
namespace {

namespace json = boost::json;
using test::HttpReply;
using Clock = std::chrono::steady_clock;

constexpr int kWaitMs = 20000;

// ---- pure functions ----

TEST(RequestId, Validity) {
  EXPECT_TRUE(http::is_valid_request_id("a"));
  EXPECT_TRUE(http::is_valid_request_id("Trace-01.abc_DEF:9"));
  EXPECT_TRUE(http::is_valid_request_id(std::string(128, 'x')));
  EXPECT_FALSE(http::is_valid_request_id(""));
  EXPECT_FALSE(http::is_valid_request_id(std::string(129, 'x')));
  for (const char* bad : {"a b", "a/b", "a;b", "a\"b", "é", "a\tb", "a,b"}) {
    EXPECT_FALSE(http::is_valid_request_id(bad)) << bad;
  }
}

TEST(RequestId, IncomingOrFresh) {
  using H = std::vector<http::Header>;
  EXPECT_EQ(http::request_id_for(H{{"x-request-id", "abc"}}), "abc");
  EXPECT_EQ(http::request_id_for(H{{"request-id", "def"}}), "def");
  // x-request-id first, whatever the order.
  EXPECT_EQ(http::request_id_for(H{{"request-id", "def"}, {"x-request-id", "abc"}}), "abc");
  // An invalid x-request-id falls back to a valid request-id, then to a fresh id.
  EXPECT_EQ(http::request_id_for(H{{"x-request-id", "a b"}, {"request-id", "def"}}), "def");
  const std::string fresh = http::request_id_for(H{{"x-request-id", std::string(200, 'x')}});
  EXPECT_TRUE(fresh.starts_with("req_")) << fresh;
  EXPECT_NE(http::request_id_for({}), http::request_id_for({}));
}

TEST(ServerTimingHeader, KnownPhasesOnlyInOrder) {
  ServerTiming t;
  EXPECT_EQ(t.header_value(), "");
  t.parse_ms = 0.1234;
  t.tokenize_ms = -0.5;  // clamped
  EXPECT_EQ(t.header_value(), "parse;dur=0.123, tokenize;dur=0.000");
  Timings e;
  e.t_submit = Clock::now();
  t.add_engine(e, true);  // never scheduled: no engine phase
  EXPECT_FALSE(t.queue_ms.has_value());
  e.t_scheduled = e.t_submit + std::chrono::milliseconds(2);
  e.t_first_token = e.t_scheduled + std::chrono::milliseconds(3);
  e.t_last_token = e.t_first_token + std::chrono::milliseconds(5);
  t.add_engine(e, /*with_decode=*/false);
  EXPECT_EQ(t.header_value(), "parse;dur=0.123, tokenize;dur=0.000, queue;dur=2.000, prefill;dur=3.000");
  t.add_engine(e, /*with_decode=*/true);
  EXPECT_EQ(t.header_value(),
            "parse;dur=0.123, tokenize;dur=0.000, queue;dur=2.000, prefill;dur=3.000, decode;dur=5.000");
}

TEST(ValidateJson, FitIsTheSmallerOfWindowAndKv) {
  Usage u{.n_prompt_tokens = 100};
  Timings t;
  t.t_submit = Clock::now();
  t.t_scheduled = t.t_submit + std::chrono::milliseconds(1);
  t.t_prefilled = t.t_scheduled + std::chrono::milliseconds(4);
  ValidateContext c{.n_ctx = 4096, .n_kv_tokens_available = 300, .template_name = "chatml"};
  json::object o = test::parse_obj(validated_json(c, u, t));
  EXPECT_EQ(o["status"].as_string(), "validated");
  EXPECT_EQ(o["input_tokens"].as_int64(), 100);
  EXPECT_EQ(o["max_tokens_fit"].as_int64(), 200);
  EXPECT_NEAR(o["engine_latency_ms"].to_number<double>(), 4.0, 1e-6);
  EXPECT_NEAR(o["estimated_ttft_ms"].to_number<double>(), 5.0, 1e-6);
  EXPECT_TRUE(o["stream_options"].is_null());
  EXPECT_EQ(o["template"].as_string(), "chatml");
  c.n_kv_tokens_available = -1;  // unknown: the window alone
  EXPECT_EQ(test::parse_obj(validated_json(c, u, t))["max_tokens_fit"].as_int64(), 3996);
  c.n_kv_tokens_available = 50;  // the KV cache cannot even hold the prompt now
  EXPECT_EQ(test::parse_obj(validated_json(c, u, t))["max_tokens_fit"].as_int64(), 0);
}

// ---- over HTTP ----

// Server-Timing per RFC (W3C Server Timing §3): metric *( OWS "," OWS metric ),
// metric = token *( OWS ";" OWS token [ "=" ( token / quoted-string ) ] ).
// Returns name -> dur; fails the test on a syntax error or a missing dur.
std::map<std::string, double> parse_server_timing(const std::string& v) {
  std::map<std::string, double> out;
  auto is_tchar = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
  };
  size_t i = 0;
  auto ows = [&] { while (i < v.size() && (v[i] == ' ' || v[i] == '\t')) ++i; };
  auto token = [&] {
    const size_t b = i;
    while (i < v.size() && is_tchar(v[i])) ++i;
    return v.substr(b, i - b);
  };
  while (i < v.size()) {
    ows();
    const std::string name = token();
    EXPECT_FALSE(name.empty()) << "bad metric name at " << i << " in '" << v << "'";
    if (name.empty()) return {};
    std::optional<double> dur;
    ows();
    while (i < v.size() && v[i] == ';') {
      ++i;
      ows();
      const std::string pname = token();
      EXPECT_FALSE(pname.empty()) << v;
      std::string pval;
      if (i < v.size() && v[i] == '=') {
        ++i;
        pval = token();
      }
      if (pname == "dur") {
        char* end = nullptr;
        dur = std::strtod(pval.c_str(), &end);
        EXPECT_TRUE(!pval.empty() && *end == '\0') << "dur not a number: '" << pval << "'";
      }
      ows();
    }
    EXPECT_TRUE(dur.has_value()) << name << " without dur in '" << v << "'";
    out[name] = dur.value_or(-1);
    if (i < v.size()) {
      EXPECT_EQ(v[i], ',') << "at " << i << " in '" << v << "'";
      if (v[i] != ',') return {};
      ++i;
    }
  }
  return out;
}

class ObsRequestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ApiConfig cfg;
    cfg.sse_ping_interval = std::chrono::milliseconds(0);  // streams start with the first token
    cfg.request_log = [this](const RequestLog& r) {
      std::lock_guard<std::mutex> lock(mu_);
      log_ids_.push_back(r.request_id);
    };
    http::ServerConfig scfg;
    scfg.max_body_bytes = 1 << 20;
    api_ = std::make_unique<test::FakeApiServer>(
        fake::FakeEngineConfig{.n_ctx = 512, .step_time = std::chrono::microseconds(1000)}, cfg, scfg);
    ASSERT_TRUE(api_->listening());
  }
  void TearDown() override { api_.reset(); }
  int port() const { return api_->port(); }

  HttpReply post(const std::string& path, const std::string& body, const std::vector<std::string>& headers = {}) {
    return test::fetch(port(), "POST", path, body, headers, kWaitMs);
  }
  bool logged(const std::string& id) {
    return test::wait_until([&] {
      std::lock_guard<std::mutex> lock(mu_);
      return std::find(log_ids_.begin(), log_ids_.end(), id) != log_ids_.end();
    });
  }

  std::unique_ptr<test::FakeApiServer> api_;
  std::mutex mu_;
  std::vector<std::string> log_ids_;
};

std::string anthropic_body(const std::string& content, bool stream, const std::string& extra = "") {
  return R"({"model":"m","max_tokens":8)" + std::string(stream ? R"(,"stream":true)" : "") + extra +
         R"(,"messages":[{"role":"user","content":")" + content + R"("}]})";
}
std::string chat_body(const std::string& content, bool stream, const std::string& extra = "") {
  return R"({"model":"m","max_tokens":8)" + std::string(stream ? R"(,"stream":true)" : "") + extra +
         R"(,"messages":[{"role":"user","content":")" + content + R"("}]})";
}
std::string completion_body(const std::string& prompt) {
  return R"({"model":"m","max_tokens":8,"prompt":")" + prompt + R"("})";
}

struct Case {
  const char* path;
  bool stream;
};
constexpr Case kCases[] = {{"/v1/messages", false}, {"/v1/messages", true},
                           {"/v1/chat/completions", false}, {"/v1/chat/completions", true}};

std::string body_for(const Case& c, const std::string& content = "hello") {
  return std::string_view(c.path) == "/v1/messages" ? anthropic_body(content, c.stream) : chat_body(content, c.stream);
}

TEST_F(ObsRequestTest, ValidIncomingIdsAreKeptEverywhere) {
  int n = 0;
  for (const Case& c : kCases) {
    const std::string id = "trace-" + std::to_string(n++) + ".A_b:c";
    HttpReply r = post(c.path, body_for(c), {"X-Request-Id: " + id});
    EXPECT_EQ(r.status, 200) << c.path << r.body;
    EXPECT_EQ(r.header("x-request-id"), id) << c.path << " stream " << c.stream;
    EXPECT_EQ(r.header("request-id"), id) << c.path;
    EXPECT_TRUE(logged(id)) << "no request log line with " << id;
  }
  // request-id alone is accepted too.
  HttpReply r = post("/v1/messages", anthropic_body("hi", false), {"request-id: from-gateway-7"});
  EXPECT_EQ(r.header("x-request-id"), "from-gateway-7");
  // The Anthropic error envelope carries it.
  r = post("/v1/messages", R"({"model":"m","messages":[]})", {"x-request-id: err-1"});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(test::parse_obj(r.body)["request_id"].as_string(), "err-1");
  EXPECT_EQ(r.header("request-id"), "err-1");
  EXPECT_TRUE(logged("err-1"));
}

TEST_F(ObsRequestTest, InvalidIncomingIdsAreReplacedNotRefused) {
  for (const std::string& bad : {std::string("has space"), std::string(129, 'a'), std::string("semi;colon"),
                                 std::string("slash/y")}) {
    for (const Case& c : kCases) {
      HttpReply r = post(c.path, body_for(c), {"x-request-id: " + bad});
      EXPECT_EQ(r.status, 200) << bad << " " << r.body;
      const std::string got = r.header("x-request-id");
      EXPECT_TRUE(got.starts_with("req_")) << bad << " -> " << got;
      EXPECT_EQ(r.header("request-id"), got);
    }
  }
}

// The header's phases, checked against the wall time the client measured.
void expect_timing(const HttpReply& r, double wall_ms, const std::vector<std::string>& want,
                   const std::vector<std::string>& absent = {}) {
  const std::string v = r.header("server-timing");
  ASSERT_FALSE(v.empty()) << "no Server-Timing; status " << r.status;
  const std::map<std::string, double> t = parse_server_timing(v);
  double sum = 0;
  for (const auto& [name, dur] : t) {
    EXPECT_GE(dur, 0.0) << v;
    sum += dur;
  }
  for (const std::string& name : want) EXPECT_TRUE(t.contains(name)) << name << " missing in " << v;
  for (const std::string& name : absent) EXPECT_FALSE(t.contains(name)) << name << " unexpected in " << v;
  EXPECT_LE(sum, wall_ms) << v;
}

TEST_F(ObsRequestTest, ServerTimingOnEveryAnswer) {
  for (const Case& c : kCases) {
    const auto t0 = Clock::now();
    HttpReply r = post(c.path, body_for(c));
    const double wall = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    ASSERT_EQ(r.status, 200) << r.body;
    if (c.stream) {
      // The head goes out with the first token: no decode yet.
      expect_timing(r, wall, {"parse", "tokenize", "queue", "prefill"}, {"decode"});
    } else {
      expect_timing(r, wall, {"parse", "tokenize", "queue", "prefill", "decode"});
    }
  }
  // /v1/completions too.
  const auto t0 = Clock::now();
  HttpReply r = post("/v1/completions", completion_body("once"));
  const double wall = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  expect_timing(r, wall, {"parse", "tokenize", "queue", "prefill", "decode"});
}

TEST_F(ObsRequestTest, ServerTimingMeasuresTheEnginePhases) {
  // [[fake:prefill=80]]: the first token at least 80 ms after submission.
  const auto t0 = Clock::now();
  HttpReply r = post("/v1/messages", anthropic_body("[[fake:prefill=80]] hi", false));
  const double wall = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  ASSERT_EQ(r.status, 200);
  expect_timing(r, wall, {"queue", "prefill", "decode"});
  const auto t = parse_server_timing(r.header("server-timing"));
  EXPECT_GE(t.at("queue") + t.at("prefill"), 80.0) << r.header("server-timing");
}

TEST_F(ObsRequestTest, ServerTimingOnErrorsAfterParsing) {
  // A parse error: the parse phase only.
  auto t0 = Clock::now();
  HttpReply r = post("/v1/messages", R"({"model":"m","max_tokens":"x","messages":[]})");
  double wall = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  EXPECT_EQ(r.status, 400);
  expect_timing(r, wall, {"parse"}, {"tokenize", "queue"});
  // Too long for the window (512): parsed and tokenized, never queued.
  t0 = Clock::now();
  r = post("/v1/chat/completions", chat_body(std::string(600, 'a'), false));
  wall = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  EXPECT_EQ(r.status, 400) << r.body;
  expect_timing(r, wall, {"parse", "tokenize"}, {"queue", "prefill"});
  // An engine error before any token: the engine's queue phase is known.
  t0 = Clock::now();
  r = post("/v1/messages", anthropic_body("[[fake:overload]]", false));
  wall = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  EXPECT_GE(r.status, 400);
  expect_timing(r, wall, {"parse", "tokenize"});
}

// ---- validate mode ----

TEST_F(ObsRequestTest, ValidateModeOnBothApisAndHeaderNames) {
  const std::vector<std::string> headers = {"X-Engine-Mode: validate", "x-anthropic-engine-mode: VALIDATE",
                                            "X-ENGINE-MODE: Validate"};
  struct V {
    const char* path;
    std::string body;
  };
  const std::vector<V> reqs = {{"/v1/messages", anthropic_body("[[fake:prefill=30]] hello", false)},
                               {"/v1/messages", anthropic_body("[[fake:prefill=30]] hello", true)},
                               {"/v1/chat/completions", chat_body("[[fake:prefill=30]] hello", true)},
                               {"/v1/completions", completion_body("[[fake:prefill=30]] hello")}};
  const int64_t generated0 = api_->engine().stats().n_generated_tokens_total;
  for (const std::string& h : headers) {
    for (const V& v : reqs) {
      HttpReply r = post(v.path, v.body, {h});
      ASSERT_EQ(r.status, 200) << v.path << " " << h << ": " << r.body;
      EXPECT_EQ(r.header("content-type"), "application/json") << v.path;
      json::object o = test::parse_obj(r.body);
      EXPECT_EQ(o["status"].as_string(), "validated") << r.body;
      const int64_t n_in = o["input_tokens"].as_int64();
      EXPECT_GT(n_in, 10);
      // The fake's prefill waits 30 ms after submission: queue + prefill.
      EXPECT_GE(o["estimated_ttft_ms"].to_number<double>(), 30.0) << r.body;
      EXPECT_GE(o["estimated_ttft_ms"].to_number<double>(), o["engine_latency_ms"].to_number<double>());
      EXPECT_EQ(o["max_tokens_fit"].as_int64(), 512 - n_in) << r.body;  // the window binds (fake KV: 16384)
      EXPECT_EQ(o["template"].as_string(), "fake");
      const bool stream = v.body.find("\"stream\":true") != std::string::npos;
      EXPECT_EQ(o["stream_options"].is_null(), !stream) << r.body;
      // Server-Timing: no decode phase, nothing was generated.
      EXPECT_FALSE(r.header("server-timing").empty());
      EXPECT_EQ(r.header("server-timing").find("decode"), std::string::npos);
    }
  }
  EXPECT_EQ(api_->engine().stats().n_generated_tokens_total, generated0) << "validate mode generated tokens";
}

TEST_F(ObsRequestTest, ValidateModeReportsEffectiveStreamOptionsAndTheSameErrors) {
  HttpReply r = post("/v1/messages",
                     anthropic_body("hi", true, R"(,"stream_options":{"max_buffer_size":64,"min_delay_ms":20})"),
                     {"X-Engine-Mode: validate"});
  ASSERT_EQ(r.status, 200) << r.body;
  json::object so = test::parse_obj(r.body)["stream_options"].as_object();
  EXPECT_EQ(so["max_buffer_size"].as_int64(), 64);
  EXPECT_EQ(so["min_delay_ms"].as_int64(), 20);
  EXPECT_EQ(so["network_rtt_ms"].as_int64(), 0);
  EXPECT_GE(so["coalesce_window_ms"].as_int64(), 20);
  // Invalid requests: the same status and error as without the header.
  const std::vector<std::pair<const char*, std::string>> bad = {
      {"/v1/messages", anthropic_body("hi", false, R"(,"stream_options":{"min_delay_ms":5})")},  // needs stream
      {"/v1/messages", R"({"model":"m","messages":[{"role":"user","content":"x"}]})"},          // no max_tokens
      {"/v1/chat/completions", chat_body(std::string(600, 'a'), false)},                         // over the window
      {"/v1/chat/completions", chat_body("x", true, R"(,"stream_options":{"max_buffer_size":-1})")}};
  for (const auto& [path, body] : bad) {
    HttpReply plain = post(path, body);
    HttpReply validated = post(path, body, {"X-Engine-Mode: validate"});
    EXPECT_GE(plain.status, 400) << body;
    EXPECT_EQ(validated.status, plain.status) << body;
    json::object a = test::parse_obj(plain.body), b = test::parse_obj(validated.body);
    a.erase("request_id");
    b.erase("request_id");
    EXPECT_EQ(json::serialize(a), json::serialize(b));
  }
  // Another mode value is an ordinary request.
  r = post("/v1/messages", anthropic_body("hi", false), {"X-Engine-Mode: generate"});
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(test::parse_obj(r.body)["type"].as_string(), "message");
}

// The value of the first /metrics sample line that starts with `series`
// ("name" or "name{labels}"); -1 when absent. (Names of api/metrics.cc: when
// the metrics module is rewritten, these series names move with it.)
double metric(int port, const std::string& series) {
  HttpReply r = test::fetch(port, "GET", "/metrics", "", {}, kWaitMs);
  const size_t at = r.body.find("\n" + series + " ");
  return at == std::string::npos ? -1 : std::atof(r.body.c_str() + at + series.size() + 2);
}

TEST_F(ObsRequestTest, ValidatedRequestsCountAsRequestsNotGenerations) {
  const std::string ok = "zerolayer_http_requests_total{route=\"/v1/messages\",status=\"200\"}";
  const std::string ttft = "engine_time_to_first_token_seconds_count";
  ASSERT_EQ(post("/v1/messages", anthropic_body("hi", false)).status, 200);  // one real request first
  ASSERT_TRUE(test::wait_until([&] { return metric(port(), ok) == 1; }));
  const double ttft0 = metric(port(), ttft);
  const double generated0 = metric(port(), "engine_generation_tokens_total");
  const std::string e2e = "engine_request_duration_seconds_count";  // generations' durations
  const double e2e0 = metric(port(), e2e);
  EXPECT_GT(generated0, 0);
  EXPECT_EQ(e2e0, 1);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(post("/v1/messages", anthropic_body("hi", i % 2 == 1), {"X-Engine-Mode: validate"}).status, 200);
  }
  ASSERT_TRUE(test::wait_until([&] { return metric(port(), ok) == 4; }));
  EXPECT_EQ(metric(port(), ttft), ttft0);
  EXPECT_EQ(metric(port(), "engine_generation_tokens_total"), generated0);
  EXPECT_EQ(metric(port(), e2e), e2e0);
}

TEST_F(ObsRequestTest, ValidateModeNeedsTheKeyLikeAnyRequest) {
  // A server with keys: no key is a 401 with or without the header.
  ApiConfig cfg;
  cfg.api_keys = {"k1"};
  test::FakeApiServer keyed(fake::FakeEngineConfig{}, cfg, http::ServerConfig{});
  ASSERT_TRUE(keyed.listening());
  HttpReply r = test::fetch(keyed.port(), "POST", "/v1/messages", anthropic_body("hi", false),
                            {"X-Engine-Mode: validate"}, kWaitMs);
  EXPECT_EQ(r.status, 401);
  r = test::fetch(keyed.port(), "POST", "/v1/messages", anthropic_body("hi", false),
                  {"X-Engine-Mode: validate", "x-api-key: k1"}, kWaitMs);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(test::parse_obj(r.body)["status"].as_string(), "validated");
}

}  // namespace
}  // namespace zl::api
