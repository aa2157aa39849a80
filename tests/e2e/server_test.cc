// End-to-end tests of `zerolayer_test_server serve --fake-engine` (the
// product's serve path with the fake engine, tests/support/test_server_main.cc)
// on a free port, spoken to over raw sockets so that status lines, headers,
// chunking and SSE framing are checked byte for byte.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "support/fake_engine.h"  // kStory
#include "support/http_client.h"
#include "support/json_object.h"
#include "support/wait.h"

namespace zl::test {
namespace {

namespace json = boost::json;

// Main server: a huge window (150 KB prompts fit), 1 ms per token, short header timeout.
ServerProcess* g_main = nullptr;
// Small window, API keys.
ServerProcess* g_small = nullptr;

class ServerEnv : public ::testing::Environment {
 public:
  void SetUp() override {
    g_main = new ServerProcess({"--fake-engine", "--fake-ctx", "400000", "--fake-step-us", "1000",
                                "--header-timeout-ms", "500", "--model-alias", "fake-model"}, ZL_TEST_SERVER);
    g_small = new ServerProcess({"--fake-engine", "--fake-ctx", "256", "--fake-step-us", "500", "--api-key", "k1",
                                 "--api-key", "k2"}, ZL_TEST_SERVER);
  }
  void TearDown() override {
    delete g_main;
    delete g_small;
  }
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new ServerEnv);

int port() { return g_main->port(); }

std::string msg_body(const std::string& extra, const std::string& content = "Hi") {
  std::string content_json = json::serialize(json::value(content));
  return R"({"model":"claude-x","max_tokens":200,"messages":[{"role":"user","content":)" + content_json + "}]" +
         (extra.empty() ? "" : "," + extra) + "}";
}

std::string str(const json::value& v) { return v.is_string() ? std::string(v.get_string()) : ""; }

void expect_anthropic_error(const HttpReply& r, int status, const std::string& type, const std::string& reason = "") {
  EXPECT_EQ(r.status, status) << r.body;
  EXPECT_EQ(r.header("content-type"), "application/json");
  auto o = parse_obj(r.body);
  EXPECT_EQ(str(o["type"]), "error") << r.body;
  auto& e = o["error"].as_object();
  EXPECT_EQ(str(e["type"]), type) << r.body;
  EXPECT_FALSE(str(e["message"]).empty());
  if (!reason.empty()) {
    EXPECT_EQ(str(e["detail"].as_object()["reason"]), reason) << r.body;
  }
  EXPECT_EQ(str(o["request_id"]), r.header("request-id"));
}

// Text of an Anthropic SSE stream, checking the event grammar on the way.
std::string check_anthropic_stream(const std::string& body, json::object* final_delta = nullptr) {
  std::vector<SseEvent> ev = parse_sse(body);
  std::string text;
  std::vector<std::string> names;
  for (const auto& e : ev) {
    EXPECT_FALSE(e.event.empty()) << "frame without an event: line";
    auto o = parse_obj(e.data);
    EXPECT_EQ(str(o["type"]), e.event);
    names.push_back(e.event);
    if (e.event == "content_block_delta") {
      EXPECT_EQ(o["index"].as_int64(), 0);
      EXPECT_EQ(str(o["delta"].as_object()["type"]), "text_delta");
      text += str(o["delta"].as_object()["text"]);
    }
    if (e.event == "message_delta" && final_delta) *final_delta = o;
  }
  EXPECT_GE(names.size(), 6u);
  if (names.size() >= 6) {
    EXPECT_EQ(names[0], "message_start");
    EXPECT_EQ(names[1], "content_block_start");
    EXPECT_EQ(names[names.size() - 3], "content_block_stop");
    EXPECT_EQ(names[names.size() - 2], "message_delta");
    EXPECT_EQ(names.back(), "message_stop");
  }
  return text;
}

int64_t metric(const std::string& name) {
  HttpReply r = fetch(port(), "GET", "/metrics");
  const size_t at = r.body.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::atoll(r.body.c_str() + at + name.size() + 2);
}

TEST(ServerTest, StartupLineAndBasics) {
  ASSERT_TRUE(g_main->ok()) << g_main->startup_line();
  EXPECT_NE(g_main->startup_line().find("fake-model"), std::string::npos);
  HttpReply head = fetch(port(), "HEAD", "/");
  EXPECT_EQ(head.status, 200);
  EXPECT_FALSE(head.header("request-id").empty());
  EXPECT_EQ(head.header("request-id"), head.header("x-request-id"));
  HttpReply h = fetch(port(), "GET", "/health");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.header("content-type"), "application/json");
  EXPECT_EQ(fetch(port(), "GET", "/ready").status, 200);
  HttpReply m = fetch(port(), "GET", "/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_NE(m.body.find("zerolayer_http_requests_total{route=\"/health\",status=\"200\"}"), std::string::npos);
  EXPECT_NE(m.body.find("engine_kv_blocks_capacity"), std::string::npos);
}

TEST(ServerTest, ToolCallMetrics) {
  // The fake model calls get_weather and then get_stock, which is not offered: one call, one fallback.
  const std::string series = "engine_tool_calls_total{api=\"anthropic\"}";
  const std::string fallback = "engine_tool_call_fallbacks_total{api=\"anthropic\",reason=\"unknown_tool\"}";
  const int64_t n_calls = metric(series);
  const int64_t n_fallbacks = metric(fallback);
  ASSERT_GE(n_calls, 0);
  ASSERT_GE(n_fallbacks, 0);
  HttpReply r = fetch(port(), "POST", "/v1/messages",
                      msg_body(R"("tools":[{"name":"get_weather","input_schema":{"type":"object"}}])",
                               "[[fake:tool=get_weather:{}]][[fake:tool=get_stock:{}]]"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(str(parse_obj(r.body)["stop_reason"]), "tool_use") << r.body;
  EXPECT_EQ(metric(series), n_calls + 1);
  EXPECT_EQ(metric(fallback), n_fallbacks + 1);
  HttpReply m = fetch(port(), "GET", "/metrics");
  EXPECT_NE(m.body.find("# TYPE engine_tool_calls_total counter\n"), std::string::npos);
  EXPECT_NE(m.body.find("# TYPE engine_tool_call_fallbacks_total counter\n"), std::string::npos);
}

TEST(ServerTest, UnknownRouteAndWrongMethod) {
  expect_anthropic_error(fetch(port(), "GET", "/v1/nope"), 404, "not_found_error", "route_not_found");
  HttpReply r = fetch(port(), "GET", "/v1/messages");
  expect_anthropic_error(r, 405, "invalid_request_error", "method_not_allowed");
  HttpReply o = fetch(port(), "GET", "/v1/chat/completions");
  EXPECT_EQ(o.status, 405);
  auto obj = parse_obj(o.body);
  EXPECT_TRUE(obj["error"].is_object());
  EXPECT_EQ(str(obj["error"].as_object()["code"]), "method_not_allowed");
}

TEST(ServerTest, KeepAliveServesManyRequestsOnOneConnection) {
  RawClient c(port());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(c.send_raw(http_request("POST", "/v1/messages", msg_body(""))));
    HttpReply r = c.read_response();
    ASSERT_TRUE(r.complete);
    EXPECT_EQ(r.status, 200);
    EXPECT_TRUE(r.header("connection").empty());
  }
}

TEST(ServerTest, PipelinedRequestsAreAnsweredInOrder) {
  RawClient c(port());
  std::string all = http_request("POST", "/v1/messages", msg_body(R"("stream":true)", "[[fake:slow]]")) +
                    http_request("GET", "/health", "") +
                    http_request("POST", "/v1/messages", msg_body(R"("max_tokens":3)")) +
                    http_request("GET", "/v1/models", "");
  ASSERT_TRUE(c.send_raw(all));
  HttpReply a = c.read_response(20000);
  EXPECT_EQ(a.header("content-type"), "text/event-stream");
  EXPECT_EQ(check_anthropic_stream(a.body).substr(0, 4), "Once");
  HttpReply b = c.read_response();
  EXPECT_EQ(b.body, R"({"status":"ok"})");
  HttpReply d = c.read_response();
  EXPECT_EQ(str(parse_obj(d.body)["stop_reason"]), "max_tokens");
  HttpReply e = c.read_response();
  EXPECT_EQ(str(parse_obj(e.body)["object"]), "list");
}

TEST(ServerTest, BodyPastTheLimitIs413AndTheConnectionCloses) {
  RawClient c(port());
  ASSERT_TRUE(c.send_raw("POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         "Content-Length: 40000000\r\n\r\n{\"model\":"));
  HttpReply r = c.read_response();
  expect_anthropic_error(r, 413, "request_too_large", "request_too_large");
  EXPECT_EQ(r.header("connection"), "close");
  EXPECT_TRUE(c.wait_closed(3000));
}

TEST(ServerTest, SlowLorisIsCutAtTheHeaderDeadline) {
  RawClient c(port());
  ASSERT_TRUE(c.send_raw("POST /v1/messages HTTP/1.1\r\nHost: x\r\n"));
  const auto t0 = std::chrono::steady_clock::now();
  bool closed = false;
  for (int i = 0; i < 30 && !closed; ++i) {
    c.send_raw("X");  // one byte every 100 ms never completes the headers
    closed = c.wait_closed(100);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(closed);
  EXPECT_LT(s, 2.0);
}

TEST(ServerTest, MalformedHttpIs400) {
  RawClient c(port());
  ASSERT_TRUE(c.send_raw("THIS IS NOT HTTP\r\n\r\n"));
  HttpReply r = c.read_response();
  EXPECT_EQ(r.status, 400);
}

TEST(ServerTest, StopReasonsAreExact) {
  auto o = parse_obj(fetch(port(), "POST", "/v1/messages", msg_body("")).body);
  EXPECT_EQ(str(o["stop_reason"]), "end_turn");
  EXPECT_TRUE(o["stop_sequence"].is_null());
  EXPECT_EQ(str(o["content"].as_array()[0].as_object()["text"]),
            "Once upon a time, there was a little girl named Lily. She loved to play outside. \"Hi!\" she said.\nThe end.");
  o = parse_obj(fetch(port(), "POST", "/v1/messages", msg_body(R"("max_tokens":4)")).body);
  EXPECT_EQ(str(o["stop_reason"]), "max_tokens");
  EXPECT_EQ(o["usage"].as_object()["output_tokens"].as_int64(), 4);
  o = parse_obj(fetch(port(), "POST", "/v1/messages", msg_body(R"("stop_sequences":["girl"," play"])")).body);
  EXPECT_EQ(str(o["stop_reason"]), "stop_sequence");
  EXPECT_EQ(str(o["stop_sequence"]), "girl");
  EXPECT_EQ(str(o["content"].as_array()[0].as_object()["text"]), "Once upon a time, there was a little ");
}

TEST(ServerTest, StreamingMatchesNonStreaming) {
  for (const std::string& extra : {std::string(R"("temperature":0)"), std::string(R"("stop_sequences":["Lily"])")}) {
    auto full = parse_obj(fetch(port(), "POST", "/v1/messages", msg_body(extra)).body);
    HttpReply s = fetch(port(), "POST", "/v1/messages?beta=true", msg_body(extra + R"(,"stream":true)"));
    EXPECT_EQ(s.status, 200);
    EXPECT_EQ(s.header("content-type"), "text/event-stream");
    EXPECT_EQ(s.header("cache-control"), "no-cache");
    EXPECT_EQ(s.header("x-accel-buffering"), "no");
    EXPECT_FALSE(s.header("request-id").empty());
    json::object delta;
    EXPECT_EQ(check_anthropic_stream(s.body, &delta), str(full["content"].as_array()[0].as_object()["text"]));
    EXPECT_EQ(str(delta["delta"].as_object()["stop_reason"]), str(full["stop_reason"]));
    EXPECT_EQ(delta["usage"].as_object()["output_tokens"], full["usage"].as_object()["output_tokens"]);
  }
}

TEST(ServerTest, StreamShaperBoundsEventSize) {
  HttpReply s = fetch(port(), "POST", "/v1/messages",
                      msg_body(R"("stream":true,"stream_options":{"max_buffer_size":4,"min_delay_ms":1})"));
  ASSERT_EQ(s.status, 200) << s.body;
  std::string text;
  for (const auto& e : parse_sse(s.body)) {
    if (e.event != "content_block_delta") continue;
    auto t = str(parse_obj(e.data)["delta"].as_object()["text"]);
    EXPECT_LE(t.size(), 4u);
    text += t;
  }
  EXPECT_EQ(text.substr(0, 9), "Once upon");
  EXPECT_EQ(fetch(port(), "POST", "/v1/messages", msg_body(R"("stream_options":{"min_delay_ms":5})")).status, 400);
  expect_anthropic_error(
      fetch(port(), "POST", "/v1/messages", msg_body(R"("stream":true,"stream_options":{"max_buffer_size":-1})")), 400,
      "invalid_request_error", "out_of_range");
}

TEST(ServerTest, AgentShapedRequestsWork) {
  // Block system prompt, system entries inside messages (even last), a
  // prefill, unknown fields and betas, a query string, a 150 KB body.
  const std::string big(150 * 1024, 'a');
  std::string body = R"({"model":"claude-sonnet-4","max_tokens":64000,"system":[{"type":"text","text":")" + big +
                     R"(","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]},)"
                     R"({"role":"system","content":"be brief"},{"role":"assistant","content":"Once"},{"role":"system","content":"x"}],)"
                     R"("thinking":{"type":"enabled","budget_tokens":2048},"context_management":{},"output_config":{"effort":"low"},)"
                     R"("metadata":{"user_id":"u1"},"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"a":{"anyOf":[{"type":"string"}]}}}}],)"
                     R"("tool_choice":{"type":"tool","name":"get_weather"},"temperature":0.5,"top_p":0.9,"top_k":40,"stream":true})";
  HttpReply r = fetch(port(), "POST", "/v1/messages?beta=true", body,
                      {"anthropic-beta: claude-code-20250219,effort-2025-11-24,made-up-2099", "anthropic-version: 2023-06-01",
                       "x-stainless-retry-count: 0"});
  EXPECT_EQ(r.status, 200) << r.body;
  // tool_choice names the tool: the answer is that call alone (the fake
  // codec has the Hermes syntax; the prompt opens the call, the fake model
  // closes it with empty arguments), in a lazily opened block 0.
  std::vector<SseEvent> ev = parse_sse(r.body);
  std::vector<std::string> names;
  for (const auto& e : ev) names.push_back(e.event);
  EXPECT_EQ(names, (std::vector<std::string>{"message_start", "ping", "content_block_start", "content_block_delta",
                                             "content_block_stop", "message_delta", "message_stop"}))
      << r.body;
  if (ev.size() == 7) {
    auto block = parse_obj(ev[2].data)["content_block"].as_object();
    EXPECT_EQ(str(block["type"]), "tool_use");
    EXPECT_EQ(str(block["name"]), "get_weather");
    EXPECT_EQ(str(parse_obj(ev[3].data)["delta"].as_object()["partial_json"]), "{}");
    EXPECT_EQ(str(parse_obj(ev[5].data)["delta"].as_object()["stop_reason"]), "tool_use");
  }
}

TEST(ServerTest, InvalidRequestsAre400NamingTheField) {
  struct Case {
    std::string body;
    std::string param;
  };
  const std::vector<Case> cases = {
      {R"({"model":"m","messages":[{"role":"user","content":"x"}]})", "max_tokens"},
      {R"({"model":"m","max_tokens":0,"messages":[{"role":"user","content":"x"}]})", "max_tokens"},
      {R"({"model":"m","max_tokens":-5,"messages":[{"role":"user","content":"x"}]})", "max_tokens"},
      {R"({"model":"m","max_tokens":1e12,"messages":[{"role":"user","content":"x"}]})", "max_tokens"},
      {R"({"model":"m","max_tokens":"10","messages":[{"role":"user","content":"x"}]})", "max_tokens"},
      {R"({"model":"m","max_tokens":10,"messages":[]})", "messages"},
      {R"({"model":"m","max_tokens":10})", "messages"},
      {R"({"max_tokens":10,"messages":[{"role":"user","content":"x"}]})", "model"},
      {R"({"model":"m","max_tokens":10,"messages":[{"role":"bot","content":"x"}]})", "messages[0].role"},
      {R"({"model":"m","max_tokens":10,"messages":[{"role":"user"}]})", "messages[0].content"},
      {R"({"model":"m","max_tokens":10,"temperature":-1,"messages":[{"role":"user","content":"x"}]})", "temperature"},
      {R"({"model":"m","max_tokens":10,"temperature":1e999,"messages":[{"role":"user","content":"x"}]})", "temperature"},
      {R"({"model":"m","max_tokens":10,"top_p":0,"messages":[{"role":"user","content":"x"}]})", "top_p"},
      {R"({"model":"m","max_tokens":10,"stop_sequences":"x","messages":[{"role":"user","content":"x"}]})", "stop_sequences"},
      {R"({"model":"m","max_tokens":10,"tool_choice":{"type":"tool"},"messages":[{"role":"user","content":"x"}]})", "tool_choice.name"},
      {R"({"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]})", "messages[0].content[0].type"},
  };
  for (const auto& c : cases) {
    HttpReply r = fetch(port(), "POST", "/v1/messages", c.body);
    EXPECT_EQ(r.status, 400) << c.body;
    auto o = parse_obj(r.body);
    if (!o.contains("error")) continue;
    auto& detail = o["error"].as_object()["detail"].as_object();
    EXPECT_EQ(str(detail["param"]), c.param) << r.body;
    EXPECT_NE(str(o["error"].as_object()["message"]).find(c.param), std::string::npos) << r.body;
  }
  expect_anthropic_error(fetch(port(), "POST", "/v1/messages", "{not json"), 400, "invalid_request_error", "invalid_json");
  expect_anthropic_error(fetch(port(), "POST", "/v1/messages", "[1,2]"), 400, "invalid_request_error", "invalid_json");
}

TEST(ServerTest, ContextWindowErrorsAndClamping) {
  const std::vector<std::string> key = {"x-api-key: k1"};
  // 300 prompt tokens > 256.
  HttpReply r = fetch(g_small->port(), "POST", "/v1/messages", msg_body("", std::string(300, 'x')), key);
  expect_anthropic_error(r, 400, "invalid_request_error", "context_length_exceeded");
  auto detail = parse_obj(r.body)["error"].as_object()["detail"].as_object();
  EXPECT_GT(detail["n_prompt_tokens"].as_int64(), 300);
  EXPECT_EQ(detail["n_ctx"].as_int64(), 256);
  EXPECT_EQ(str(detail["param"]), "messages") << r.body;  // the field that holds the prompt
  // max_tokens far above the window: clamped; the window stops it.
  auto o = parse_obj(fetch(g_small->port(), "POST", "/v1/messages",
                           R"({"model":"m","max_tokens":1000000000,"messages":[{"role":"user","content":"[[fake:long]]"}]})",
                           key)
                         .body);
  EXPECT_EQ(str(o["stop_reason"]), "model_context_window_exceeded");
  auto& u = o["usage"].as_object();
  EXPECT_EQ(u["input_tokens"].as_int64() + u["output_tokens"].as_int64(), 256);
  // OpenAI: the same is "length", and the error has the OpenAI envelope.
  auto c = parse_obj(fetch(g_small->port(), "POST", "/v1/chat/completions",
                           R"({"model":"m","messages":[{"role":"user","content":"[[fake:long]]"}]})", key)
                         .body);
  EXPECT_EQ(str(c["choices"].as_array()[0].as_object()["finish_reason"]), "length");
  HttpReply e = fetch(g_small->port(), "POST", "/v1/chat/completions",
                      R"({"model":"m","messages":[{"role":"user","content":")" + std::string(300, 'x') + "\"}]}", key);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(str(parse_obj(e.body)["error"].as_object()["code"]), "context_length_exceeded");
  EXPECT_EQ(str(parse_obj(e.body)["error"].as_object()["param"]), "messages") << e.body;  // as OpenAI names it
  // /v1/completions: the prompt is "prompt".
  e = fetch(g_small->port(), "POST", "/v1/completions", R"({"model":"m","prompt":")" + std::string(300, 'x') + "\"}",
            key);
  EXPECT_EQ(e.status, 400) << e.body;
  EXPECT_EQ(str(parse_obj(e.body)["error"].as_object()["code"]), "context_length_exceeded") << e.body;
  EXPECT_EQ(str(parse_obj(e.body)["error"].as_object()["param"]), "prompt") << e.body;
}

TEST(ServerTest, AuthenticationByEitherHeader) {
  const int p = g_small->port();
  const std::string body = msg_body("", "hi");
  expect_anthropic_error(fetch(p, "POST", "/v1/messages", body), 401, "authentication_error", "missing_api_key");
  expect_anthropic_error(fetch(p, "POST", "/v1/messages", body, {"x-api-key: nope"}), 401, "authentication_error",
                         "invalid_api_key");
  EXPECT_EQ(fetch(p, "POST", "/v1/messages", body, {"x-api-key: k1"}).status, 200);
  EXPECT_EQ(fetch(p, "POST", "/v1/messages", body, {"Authorization: Bearer k2"}).status, 200);
  EXPECT_EQ(fetch(p, "GET", "/v1/models", "", {"Authorization: Bearer k1"}).status, 200);
  EXPECT_EQ(fetch(p, "GET", "/v1/models").status, 401);
  HttpReply o = fetch(p, "POST", "/v1/chat/completions", R"({"model":"m","messages":[{"role":"user","content":"x"}]})");
  EXPECT_EQ(o.status, 401);
  EXPECT_EQ(str(parse_obj(o.body)["error"].as_object()["type"]), "authentication_error");
  EXPECT_EQ(fetch(p, "GET", "/health").status, 200);
  EXPECT_EQ(fetch(p, "HEAD", "/").status, 200);
}

TEST(ServerTest, ClientDisconnectCancelsTheRequest) {
  for (bool stream : {true, false}) {
    {
      RawClient c(port());
      const std::string extra = stream ? R"("stream":true,"max_tokens":100000)" : R"("max_tokens":100000)";
      ASSERT_TRUE(c.send_raw(http_request("POST", "/v1/messages", msg_body(extra, "[[fake:long]]"))));
      if (stream) {
        ASSERT_TRUE(c.read_until([](const std::string& b) { return b.find("content_block_delta") != std::string::npos; }));
      }
      EXPECT_TRUE(wait_until([] { return metric("engine_requests_running") >= 1; }, kDefaultWait,
                             std::chrono::milliseconds(10)))
          << "the request never ran";
      c.abort_now();
    }
    EXPECT_TRUE(wait_until([] { return metric("engine_requests_running") == 0; }, kDefaultWait,
                           std::chrono::milliseconds(10)))
        << (stream ? "stream" : "non-stream") << " kept generating after the client left";
  }
}

TEST(ServerTest, ConcurrentStreams) {
  constexpr int kN = 48;
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kN; ++i) {
    threads.emplace_back([&, i] {
      const bool anthropic = i % 2 == 0;
      HttpReply r = anthropic
                        ? fetch(port(), "POST", "/v1/messages", msg_body(R"("stream":true)"), {}, 20000)
                        : fetch(port(), "POST", "/v1/chat/completions",
                                R"({"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]})", {}, 20000);
      const bool good = r.status == 200 && (anthropic ? r.body.find("event: message_stop") != std::string::npos
                                                      : r.body.find("data: [DONE]") != std::string::npos);
      if (good) ok.fetch_add(1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), kN);
}

TEST(ServerTest, EngineErrorsBeforeAndAfterTheStatus) {
  // Before any token: a typed HTTP error (529 overloaded, retry-after).
  HttpReply o = fetch(port(), "POST", "/v1/messages", msg_body(R"("stream":true)", "[[fake:overload]]"));
  expect_anthropic_error(o, 529, "overloaded_error", "overloaded");
  EXPECT_FALSE(o.header("retry-after").empty());
  // After the 200: an SSE error event in the envelope the SDK parses.
  HttpReply s = fetch(port(), "POST", "/v1/messages", msg_body(R"("stream":true)", "[[fake:error]]"));
  EXPECT_EQ(s.status, 200);
  auto ev = parse_sse(s.body);
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev.back().event, "error");
  auto e = parse_obj(ev.back().data);
  EXPECT_EQ(str(e["type"]), "error");
  EXPECT_EQ(str(e["error"].as_object()["type"]), "api_error");
  // Non-streaming: 500 envelope.
  expect_anthropic_error(fetch(port(), "POST", "/v1/messages", msg_body("", "[[fake:error]]")), 500, "api_error");
  // OpenAI stream: data: {"error":…}
  HttpReply os = fetch(port(), "POST", "/v1/chat/completions",
                       R"({"model":"m","stream":true,"messages":[{"role":"user","content":"[[fake:error]]"}]})");
  auto oev = parse_sse(os.body);
  ASSERT_FALSE(oev.empty());
  EXPECT_TRUE(parse_obj(oev.back().data)["error"].is_object());
}

TEST(ServerTest, CountTokensEqualsUsageInputTokens) {
  const std::string conv = R"("system":"be nice","messages":[{"role":"user","content":"Hello there"}])";
  auto n = parse_obj(fetch(port(), "POST", "/v1/messages/count_tokens?beta=true", R"({"model":"m",)" + conv + "}").body);
  auto m = parse_obj(fetch(port(), "POST", "/v1/messages", R"({"model":"m","max_tokens":2,)" + conv + "}").body);
  EXPECT_EQ(n["input_tokens"].as_int64(), m["usage"].as_object()["input_tokens"].as_int64());
  EXPECT_GT(n["input_tokens"].as_int64(), 10);
}

TEST(ServerTest, ModelsList) {
  auto l = parse_obj(fetch(port(), "GET", "/v1/models?limit=20").body);
  EXPECT_EQ(str(l["object"]), "list");
  EXPECT_FALSE(l["has_more"].as_bool());
  auto& m = l["data"].as_array()[0].as_object();
  EXPECT_EQ(str(m["id"]), "fake-model");
  EXPECT_EQ(str(m["type"]), "model");
  EXPECT_EQ(str(m["object"]), "model");
  EXPECT_EQ(fetch(port(), "GET", "/v1/models/fake-model").status, 200);
  expect_anthropic_error(fetch(port(), "GET", "/v1/models/other"), 404, "not_found_error", "model_not_found");
}

TEST(ServerTest, OpenAIStreamingChunks) {
  HttpReply r = fetch(port(), "POST", "/v1/chat/completions",
                      R"({"model":"gpt-x","stream":true,"stream_options":{"include_usage":true},"max_tokens":5,"messages":[{"role":"system","content":"s"},{"role":"user","content":"x"}]})");
  EXPECT_EQ(r.status, 200);
  auto ev = parse_sse(r.body);
  ASSERT_GE(ev.size(), 4u);
  EXPECT_EQ(ev.back().data, "[DONE]");
  std::string id, text;
  for (size_t i = 0; i + 1 < ev.size(); ++i) {
    EXPECT_TRUE(ev[i].event.empty());
    auto o = parse_obj(ev[i].data);
    if (id.empty()) id = str(o["id"]);
    EXPECT_EQ(str(o["id"]), id);
    EXPECT_EQ(str(o["object"]), "chat.completion.chunk");
    auto& ch = o["choices"].as_array();
    if (i + 2 == ev.size()) {
      EXPECT_TRUE(ch.empty());
      EXPECT_EQ(o["usage"].as_object()["completion_tokens"].as_int64(), 5);
    } else {
      EXPECT_TRUE(o["usage"].is_null());
      auto& d = ch[0].as_object()["delta"].as_object();
      if (d.contains("content")) text += str(d["content"]);
      if (i + 3 == ev.size()) {
        EXPECT_EQ(str(ch[0].as_object()["finish_reason"]), "length");
      }
    }
  }
  EXPECT_EQ(text, "Once upon a time,");
  auto full = parse_obj(fetch(port(), "POST", "/v1/chat/completions",
                              R"({"model":"gpt-x","max_tokens":5,"messages":[{"role":"user","content":"x"}]})")
                            .body);
  EXPECT_EQ(str(full["object"]), "chat.completion");
  EXPECT_EQ(str(full["choices"].as_array()[0].as_object()["message"].as_object()["content"]), text);
  auto comp = parse_obj(fetch(port(), "POST", "/v1/completions", R"({"model":"m","prompt":"Once","max_tokens":3})").body);
  EXPECT_EQ(str(comp["object"]), "text_completion");
  EXPECT_EQ(str(comp["choices"].as_array()[0].as_object()["text"]), "Once upon a");
}

// ---- SIGTERM/SIGINT: graceful drain (--drain-timeout) ----

// `[[fake:long]]` streams `max_tokens` tokens of the repeated story.
std::string long_stream_request(int max_tokens) {
  return http_request("POST", "/v1/messages",
                      msg_body(R"("stream":true,"max_tokens":)" + std::to_string(max_tokens), "[[fake:long]]"));
}

std::string repeated_story(int n_tokens) {
  std::string text;
  for (int i = 0; i < n_tokens; ++i) text += fake::kStory[i % fake::kStory.size()];
  return text;
}

bool read_first_delta(RawClient& c) {
  return c.read_until([](const std::string& b) { return b.find("content_block_delta") != std::string::npos; }, 20000);
}

// The stream was cut: the connection ended without the stream's end.
void expect_cut(RawClient& c) {
  HttpReply r = c.read_response(20000);
  EXPECT_FALSE(r.complete);
  EXPECT_EQ(r.body.find("message_stop"), std::string::npos);
  EXPECT_TRUE(c.eof());
}

TEST(ServerTest, SigtermDrainsTheStreamInProgress) {
  // 200 tokens at 5 ms: about a second of stream, most of it after SIGTERM.
  ServerProcess s({"--fake-engine", "--fake-step-us", "5000", "--request-log", "false"}, ZL_TEST_SERVER);
  ASSERT_TRUE(s.ok());
  RawClient idle(s.port());  // keep-alive, one answer behind it
  ASSERT_TRUE(idle.send_raw(http_request("GET", "/health", "")));
  ASSERT_EQ(idle.read_response(20000).status, 200);
  RawClient c(s.port());
  ASSERT_TRUE(c.send_raw(long_stream_request(200)));
  ASSERT_TRUE(read_first_delta(c));
  s.signal(SIGTERM);
  EXPECT_TRUE(wait_refused(s.port()));
  EXPECT_TRUE(idle.wait_closed(20000));
  HttpReply r = c.read_response(30000);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200);
  json::object delta;
  EXPECT_EQ(check_anthropic_stream(r.body, &delta), repeated_story(200));
  EXPECT_EQ(str(delta["delta"].as_object()["stop_reason"]), "max_tokens");
  EXPECT_EQ(delta["usage"].as_object()["output_tokens"].as_int64(), 200);
  EXPECT_TRUE(c.wait_closed(20000));
  EXPECT_EQ(s.wait_exit(30000), 0);
}

TEST(ServerTest, SecondSignalStopsTheDrainAtOnce) {
  ServerProcess s({"--fake-engine", "--fake-step-us", "5000", "--drain-timeout", "600"}, ZL_TEST_SERVER);
  ASSERT_TRUE(s.ok());
  RawClient c(s.port());
  ASSERT_TRUE(c.send_raw(long_stream_request(100000)));  // minutes of stream
  ASSERT_TRUE(read_first_delta(c));
  s.signal(SIGTERM);
  // The listener closed while the stream runs: the drain has begun (so the
  // second signal cannot merge with the first one while both are pending).
  ASSERT_TRUE(wait_refused(s.port()));
  const size_t seen = c.buffer().size();
  ASSERT_TRUE(c.read_until(
      [&](const std::string& b) { return b.find("content_block_delta", seen) != std::string::npos; }, 20000))
      << "the stream stopped at the first signal";
  s.signal(SIGINT);
  EXPECT_EQ(s.wait_exit(30000), 0);
  expect_cut(c);
}

TEST(ServerTest, DrainTimeoutCutsWhatIsLeft) {
  ServerProcess s({"--fake-engine", "--fake-step-us", "5000", "--drain-timeout", "1"}, ZL_TEST_SERVER);
  ASSERT_TRUE(s.ok());
  RawClient c(s.port());
  ASSERT_TRUE(c.send_raw(long_stream_request(100000)));
  ASSERT_TRUE(read_first_delta(c));
  s.signal(SIGTERM);
  EXPECT_EQ(s.wait_exit(30000), 0);
  expect_cut(c);
}

TEST(ServerTest, DrainTimeoutZeroStopsAtOnce) {
  ServerProcess s({"--fake-engine", "--drain-timeout", "0"}, ZL_TEST_SERVER);
  ASSERT_TRUE(s.ok());
  RawClient c(s.port());
  ASSERT_TRUE(c.send_raw(long_stream_request(100000)));
  ASSERT_TRUE(read_first_delta(c));
  s.signal(SIGTERM);
  EXPECT_EQ(s.wait_exit(20000), 0);  // a drain would last 30 s
  expect_cut(c);
}

}  // namespace
}  // namespace zl::test
