// Tool calls through the real API routes, in process: the fake engine
// writes what a ChatML model writes to call a tool ([[fake:tool=NAME:ARGS]],
// tests/support/fake_engine.h) and the fake codec has the Hermes syntax. Checks
// the exact JSON and SSE frames of both APIs, streaming and not, the stop
// reasons, and the fallbacks (a call cut by max_tokens, an unknown tool,
// tool_choice none).
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <memory>
#include <regex>
#include <thread>

#include "api/anthropic/messages.h"
#include "api/service.h"
#include "support/fake_engine.h"
#include "http/router.h"
#include "http/server.h"
#include "support/fake_api_server.h"
#include "support/http_client.h"  // fetch, parse_sse
#include "support/json_object.h"  // parse_obj
#include "support/wait.h"

namespace zl::api {
namespace {

namespace json = boost::json;
using test::HttpReply;

constexpr int kWaitMs = 20000;

class ToolTest : public ::testing::Test {
 protected:
  explicit ToolTest(ToolSyntax syntax = ToolSyntax::kHermes) : syntax_(syntax) {}

  void SetUp() override {
    ApiConfig cfg;
    cfg.sse_ping_interval = std::chrono::milliseconds(0);  // no keep-alive frames: exact streams
    http::ServerConfig scfg;
    scfg.max_body_bytes = 1 << 20;
    api_ = std::make_unique<test::FakeApiServer>(
        fake::FakeEngineConfig{.n_ctx = 8192, .step_time = std::chrono::microseconds(500)}, cfg, scfg,
        fake::FakeCodec(syntax_));
    ASSERT_TRUE(api_->listening());
  }
  void TearDown() override { api_.reset(); }

  HttpReply post(const std::string& path, const std::string& body) {
    HttpReply r = test::fetch(api_->port(), "POST", path, body, {}, kWaitMs);
    EXPECT_TRUE(r.complete);
    EXPECT_EQ(r.status, 200) << r.body;
    return r;
  }

  // A request the API must refuse: 400 invalid_request_error; the error object.
  json::object rejected(const std::string& path, const std::string& body) {
    HttpReply r = test::fetch(api_->port(), "POST", path, body, {}, kWaitMs);
    EXPECT_EQ(r.status, 400) << body << "\n" << r.body;
    json::object e = test::parse_obj(r.body)["error"].as_object();
    EXPECT_EQ(e["type"], "invalid_request_error") << r.body;
    return e;
  }

  ToolSyntax syntax_;
  std::unique_ptr<test::FakeApiServer> api_;
};

constexpr const char* kWeatherTool =
    R"({"name":"get_weather","description":"Weather now","input_schema":{"type":"object","properties":{"location":{"type":"string"}}}})";
constexpr const char* kCall = R"([[fake:tool=get_weather:{\"location\": \"Paris\"}]])";

// An Anthropic request; `extra` is spliced in as more fields.
std::string anthropic(const std::string& content, const std::string& extra = "", bool stream = false) {
  return std::string(R"({"model":"m","max_tokens":200,)") + (stream ? R"("stream":true,)" : "") +
         R"("tools":[)" + kWeatherTool + "]," + extra + R"("messages":[{"role":"user","content":")" + content + R"("}]})";
}

std::string openai(const std::string& content, const std::string& extra = "", bool stream = false) {
  return std::string(R"({"model":"gpt","max_tokens":200,)") + (stream ? R"("stream":true,)" : "") +
         R"("tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],)" + extra +
         R"("messages":[{"role":"user","content":")" + content + R"("}]})";
}

// Random ids and times out: msg_X, toolu_X, call_X, chatcmpl-X, "created":0.
std::string normalized(const std::string& s) {
  std::string out = std::regex_replace(s, std::regex("(msg_|toolu_|call_|chatcmpl-)[0-9A-Za-z]{24}"), "$1X");
  return std::regex_replace(out, std::regex(R"("created":[0-9]+)"), R"("created":0)");
}

bool has_id(const std::string& s, const std::string& prefix) {
  return std::regex_search(s, std::regex("\"" + prefix + "[0-9A-Za-z]{24}\""));
}

std::string str(const json::value& v) { return v.is_string() ? std::string(v.get_string()) : std::string(); }

// Both tools, and a prompt whose fake model calls both: get_weather({}), then get_time({"tz":"CET"}).
const std::string kTwoTools = std::string(R"("tools":[)") + kWeatherTool +
                              R"(,{"name":"get_time","input_schema":{"type":"object"}}],)";
const std::string kOpenAITwoTools =
    R"("tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}},)"
    R"({"type":"function","function":{"name":"get_time","parameters":{"type":"object"}}}],)";
constexpr const char* kTwoCalls = R"([[fake:tool=get_weather:{}]][[fake:tool=get_time:{\"tz\":\"CET\"}]])";

std::string anthropic_two(const std::string& content, const std::string& extra = "", bool stream = false) {
  return std::string(R"({"model":"m","max_tokens":200,)") + (stream ? R"("stream":true,)" : "") + kTwoTools + extra +
         R"("messages":[{"role":"user","content":")" + content + R"("}]})";
}
std::string openai_two(const std::string& content, const std::string& extra = "", bool stream = false) {
  return std::string(R"({"model":"gpt","max_tokens":200,)") + (stream ? R"("stream":true,)" : "") + kOpenAITwoTools +
         extra + R"("messages":[{"role":"user","content":")" + content + R"("}]})";
}

// The fake model's tokens (3 bytes each) up to the end of `answer_prefix`.
int64_t tokens_through(const std::string& answer_prefix) { return static_cast<int64_t>((answer_prefix.size() + 2) / 3); }

// An Anthropic stream's content blocks as "<index>:<type>[:<name>]" in
// content_block_start order, checking that each block's deltas and stop
// carry its index and come before the next block starts.
std::vector<std::string> anthropic_blocks(const std::string& body) {
  std::vector<std::string> blocks;
  int open = -1;
  for (const test::SseEvent& e : test::parse_sse(body)) {
    if (e.event != "content_block_start" && e.event != "content_block_delta" && e.event != "content_block_stop") continue;
    json::object o = test::parse_obj(e.data);
    const int index = static_cast<int>(o["index"].as_int64());
    if (e.event == "content_block_start") {
      EXPECT_EQ(open, -1) << "a block starts before the previous one stopped";
      EXPECT_EQ(index, static_cast<int>(blocks.size()));
      open = index;
      json::object b = o["content_block"].as_object();
      std::string block = std::to_string(index) + ":" + str(b["type"]);
      if (b.contains("name")) block.append(":").append(str(b["name"]));
      blocks.push_back(std::move(block));
    } else {
      EXPECT_EQ(index, open) << e.data;
      if (e.event == "content_block_stop") open = -1;
    }
  }
  EXPECT_EQ(open, -1);
  return blocks;
}

// An Anthropic stream's tool_use blocks as "<name> <partial_json pieces joined>".
std::vector<std::string> anthropic_inputs(const std::string& body) {
  std::vector<std::string> calls;
  int tool_index = -1;
  for (const test::SseEvent& e : test::parse_sse(body)) {
    if (e.event != "content_block_start" && e.event != "content_block_delta") continue;
    json::object o = test::parse_obj(e.data);
    if (e.event == "content_block_start") {
      json::object b = o["content_block"].as_object();
      tool_index = str(b["type"]) == "tool_use" ? static_cast<int>(o["index"].as_int64()) : -1;
      if (tool_index >= 0) calls.push_back(str(b["name"]) + " ");
    } else if (tool_index >= 0 && o["index"].as_int64() == tool_index) {
      calls.back() += str(o["delta"].as_object()["partial_json"]);
    }
  }
  return calls;
}

// An OpenAI stream's tool calls accumulated by index: "<index>:<name> <arguments>".
std::vector<std::string> openai_streamed_calls(const std::string& body, std::string* finish = nullptr) {
  std::vector<std::string> names, args, ids;
  for (const test::SseEvent& e : test::parse_sse(body)) {
    if (e.data == "[DONE]") continue;
    json::object o = test::parse_obj(e.data);
    if (!o.contains("choices")) continue;  // an error frame
    for (const json::value& c : o["choices"].as_array()) {
      const json::object& choice = c.as_object();
      if (finish && !choice.at("finish_reason").is_null()) *finish = str(choice.at("finish_reason"));
      const json::object& delta = choice.at("delta").as_object();
      if (!delta.contains("tool_calls")) continue;
      for (const json::value& tv : delta.at("tool_calls").as_array()) {
        const json::object& tc = tv.as_object();
        const size_t i = static_cast<size_t>(tc.at("index").as_int64());
        if (tc.contains("id")) {
          EXPECT_EQ(i, names.size()) << "a new call's index is the next one";
          names.push_back(str(tc.at("function").as_object().at("name")));
          ids.push_back(str(tc.at("id")));
          args.emplace_back();
        }
        EXPECT_LT(i, names.size()) << e.data;
        if (i < args.size()) args[i] += str(tc.at("function").as_object().at("arguments"));
      }
    }
  }
  std::vector<std::string> calls;
  for (size_t i = 0; i < names.size(); ++i) calls.push_back(std::to_string(i) + ":" + names[i] + " " + args[i]);
  for (size_t i = 1; i < ids.size(); ++i) EXPECT_NE(ids[i], ids[i - 1]);
  return calls;
}

// ---- Anthropic ----

TEST_F(ToolTest, AnthropicToolUseNonStreaming) {
  HttpReply r = post("/v1/messages", anthropic(std::string("Weather in Paris? ") + kCall));
  EXPECT_TRUE(has_id(r.body, "toolu_")) << r.body;
  json::object o = test::parse_obj(r.body);
  const int64_t in = o["usage"].as_object()["input_tokens"].as_int64();
  const int64_t out = o["usage"].as_object()["output_tokens"].as_int64();
  EXPECT_EQ(normalized(r.body),
            R"({"id":"msg_X","type":"message","role":"assistant","model":"m","content":[)"
            R"({"type":"text","text":"Let me check."},)"
            R"({"type":"tool_use","id":"toolu_X","name":"get_weather","input":{"location":"Paris"}}],)"
            R"("stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":)" +
                std::to_string(in) + R"(,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":)" +
                std::to_string(out) + "}}");
  // "Let me check.\n<tool_call>\n{…}\n</tool_call>" in 3-byte tokens.
  EXPECT_EQ(out, 33);
}

TEST_F(ToolTest, AnthropicToolUseStreamingFrames) {
  HttpReply r = post("/v1/messages", anthropic(std::string("Weather? ") + kCall, "", /*stream=*/true));
  EXPECT_EQ(r.header("content-type"), "text/event-stream");
  std::vector<test::SseEvent> ev = test::parse_sse(r.body);
  ASSERT_GE(ev.size(), 2u) << r.body;
  const int64_t in = test::parse_obj(ev[0].data)["message"].as_object()["usage"].as_object()["input_tokens"].as_int64();
  auto frame = [](const std::string& event, const std::string& data) { return "event: " + event + "\ndata: " + data + "\n\n"; };
  auto text = [&](const std::string& t) {
    return frame("content_block_delta",
                 R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":")" + t + R"("}})");
  };
  auto args = [&](const std::string& piece) {
    return frame("content_block_delta",
                 R"({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":)" +
                     json::serialize(json::string(piece)) + "}}");
  };
  // No text block before there is text (tools were offered); the text
  // before the call streams as the tokens come, and so do the call's
  // arguments once its name is known: a piece per token (3 bytes of
  // `"arguments": {"location": "Paris"}}` here), minified.
  const std::string expected =
      frame("message_start",
            R"({"type":"message_start","message":{"id":"msg_X","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":)" +
                std::to_string(in) + R"(,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}})") +
      frame("ping", R"({"type":"ping"})") +
      frame("content_block_start", R"({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}})") +
      text("Let") + text(" me") + text(" ch") + text("eck") + text(".") +
      frame("content_block_stop", R"({"type":"content_block_stop","index":0})") +
      frame("content_block_start",
            R"({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_X","name":"get_weather","input":{}}})") +
      args(R"({"l)") + args("oca") + args("tio") + args(R"(n":)") + args(R"("P)") + args("ari") + args(R"(s"})") +
      frame("content_block_stop", R"({"type":"content_block_stop","index":1})") +
      frame("message_delta",
            R"({"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"input_tokens":)" +
                std::to_string(in) + R"(,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":33}})") +
      frame("message_stop", R"({"type":"message_stop"})");
  EXPECT_EQ(normalized(r.body), expected);
}

TEST_F(ToolTest, AnthropicForcedToolHasOnlyTheCall) {
  // tool_choice names the tool: the prompt opens the call, the model writes the arguments.
  const std::string extra = R"("tool_choice":{"type":"tool","name":"get_weather"},)";
  HttpReply r = post("/v1/messages", anthropic(std::string("Paris ") + kCall, extra));
  json::object o = test::parse_obj(r.body);
  const json::array& content = o["content"].as_array();
  ASSERT_EQ(content.size(), 1u) << r.body;  // no empty text block
  EXPECT_EQ(normalized(json::serialize(content[0])),
            R"({"type":"tool_use","id":"toolu_X","name":"get_weather","input":{"location":"Paris"}})");
  EXPECT_EQ(str(o["stop_reason"]), "tool_use");
  // Without a script the fake model still has to finish the call it was given.
  r = post("/v1/messages", anthropic("Paris", extra, /*stream=*/true));
  std::vector<test::SseEvent> ev = test::parse_sse(r.body);
  std::vector<std::string> names;
  for (const auto& e : ev) names.push_back(e.event);
  EXPECT_EQ(names, (std::vector<std::string>{"message_start", "ping", "content_block_start", "content_block_delta",
                                             "content_block_stop", "message_delta", "message_stop"}))
      << r.body;
  EXPECT_EQ(normalized(ev[2].data),
            R"({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_X","name":"get_weather","input":{}}})");
  EXPECT_EQ(str(test::parse_obj(ev[3].data)["delta"].as_object()["partial_json"]), "{}");
  EXPECT_EQ(str(test::parse_obj(ev[5].data)["delta"].as_object()["stop_reason"]), "tool_use");
}

TEST_F(ToolTest, ForcedCallTheModelNeverWrites) {
  // The model ends its turn at once. The forced call's start is prompt
  // markup the model never wrote (<tool_call>\n{"name": "get_weather",
  // "arguments":): it is not the answer, which is empty, as a model that
  // writes nothing gives without tools: one empty text block, end_turn.
  const std::string extra = R"("tool_choice":{"type":"tool","name":"get_weather"},)";
  HttpReply r = post("/v1/messages", anthropic("[[fake:empty]]", extra, /*stream=*/true));
  std::vector<test::SseEvent> ev = test::parse_sse(r.body);
  std::vector<std::string> names;
  for (const auto& e : ev) names.push_back(e.event);
  ASSERT_EQ(names, (std::vector<std::string>{"message_start", "ping", "content_block_start", "content_block_stop",
                                             "message_delta", "message_stop"}))
      << r.body;
  EXPECT_EQ(r.body.find("tool_call"), std::string::npos) << r.body;
  EXPECT_EQ(normalized(ev[2].data), R"({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}})");
  EXPECT_EQ(str(test::parse_obj(ev[4].data)["delta"].as_object()["stop_reason"]), "end_turn");
  json::object o = test::parse_obj(post("/v1/messages", anthropic("[[fake:empty]]", extra)).body);
  EXPECT_EQ(json::serialize(o["content"]), R"([{"type":"text","text":""}])");
  EXPECT_EQ(str(o["stop_reason"]), "end_turn");
  // Nothing at all (no tools): one empty text block, as always.
  r = post("/v1/messages", R"({"model":"m","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"[[fake:empty]]"}]})");
  EXPECT_NE(r.body.find(R"({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}})"), std::string::npos);
  EXPECT_EQ(r.body.find("content_block_delta"), std::string::npos);
  o = test::parse_obj(post("/v1/messages", anthropic("[[fake:empty]]")).body);
  EXPECT_EQ(json::serialize(o["content"]), R"([{"type":"text","text":""}])");
}

TEST_F(ToolTest, AnthropicTwoCalls) {
  const std::string tools = std::string(R"("tools":[)") + kWeatherTool +
                            R"(,{"name":"get_time","input_schema":{"type":"object"}}],)";
  const std::string body = std::string(R"({"model":"m","max_tokens":200,)") + tools +
                           R"("messages":[{"role":"user","content":"[[fake:tool=get_weather:{}]][[fake:tool=get_time:{\"tz\":\"CET\"}]]"}]})";
  json::object o = test::parse_obj(post("/v1/messages", body).body);
  const json::array& c = o["content"].as_array();
  ASSERT_EQ(c.size(), 3u) << json::serialize(o);
  EXPECT_EQ(str(c[1].as_object().at("name")), "get_weather");
  EXPECT_EQ(str(c[2].as_object().at("name")), "get_time");
  EXPECT_EQ(json::serialize(c[2].as_object().at("input")), R"({"tz":"CET"})");
  EXPECT_NE(c[1].as_object().at("id"), c[2].as_object().at("id"));
  EXPECT_EQ(str(o["stop_reason"]), "tool_use");
}

TEST_F(ToolTest, AnthropicFallbacksAreText) {
  const std::string raw = "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n</tool_call>";
  // Cut by max_tokens inside the call: text, max_tokens.
  std::string body = anthropic(std::string("x ") + kCall);
  body.replace(body.find("\"max_tokens\":200"), 16, "\"max_tokens\":10");
  json::object o = test::parse_obj(post("/v1/messages", body).body);
  EXPECT_EQ(str(o["stop_reason"]), "max_tokens");
  ASSERT_EQ(o["content"].as_array().size(), 1u);
  EXPECT_EQ(str(o["content"].as_array()[0].as_object().at("text")), raw.substr(0, 30));
  // A tool that was not offered: the call stays text, the turn ended normally.
  o = test::parse_obj(post("/v1/messages", anthropic("[[fake:tool=get_stock:{}]]")).body);
  EXPECT_EQ(str(o["stop_reason"]), "end_turn");
  EXPECT_EQ(str(o["content"].as_array()[0].as_object().at("text")),
            "Let me check.\n<tool_call>\n{\"name\": \"get_stock\", \"arguments\": {}}\n</tool_call>");
  // tool_choice none: tools are not offered, the output is not parsed, and
  // the stream opens its text block at once, as without tools.
  HttpReply r = post("/v1/messages", anthropic(std::string("x ") + kCall, R"("tool_choice":{"type":"none"},)", true));
  std::vector<test::SseEvent> ev = test::parse_sse(r.body);
  ASSERT_GE(ev.size(), 3u);
  EXPECT_EQ(ev[1].event, "content_block_start");
  EXPECT_EQ(ev[2].event, "ping");
  std::string text;
  for (const auto& e : ev) {
    if (e.event == "content_block_delta") text += str(test::parse_obj(e.data)["delta"].as_object()["text"]);
  }
  EXPECT_EQ(text, raw);
  EXPECT_EQ(r.body.find("tool_use"), std::string::npos);
}

TEST_F(ToolTest, AnthropicTextAnswerWithToolsOffered) {
  // Tools offered, no call: the story as text, end_turn; the text block opens with the first text.
  HttpReply r = post("/v1/messages", anthropic("Hi", "", /*stream=*/true));
  std::vector<test::SseEvent> ev = test::parse_sse(r.body);
  ASSERT_GE(ev.size(), 4u);
  EXPECT_EQ(ev[1].event, "ping");
  EXPECT_EQ(ev[2].event, "content_block_start");
  std::string text;
  for (const auto& e : ev) {
    if (e.event == "content_block_delta") text += str(test::parse_obj(e.data)["delta"].as_object()["text"]);
  }
  std::string story;
  for (const std::string& t : fake::kStory) story += t;
  EXPECT_EQ(text, story);
  EXPECT_NE(r.body.find(R"("stop_reason":"end_turn")"), std::string::npos);
}

TEST_F(ToolTest, AnthropicFollowUpAndCountTokens) {
  // The agent sends the call and its result back; the fake model then answers in text.
  const std::string conv = std::string(R"({"model":"m","tools":[)") + kWeatherTool +
                           R"(],"messages":[{"role":"user","content":"Weather? )" + kCall +
                           R"("},{"role":"assistant","content":[{"type":"text","text":"Let me check."},)"
                           R"({"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"location":"Paris"}}]},)"
                           R"({"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"sunny"}]}]})";
  std::string body = conv;
  body.insert(1, R"("max_tokens":100,)");
  json::object o = test::parse_obj(post("/v1/messages", body).body);
  EXPECT_EQ(str(o["stop_reason"]), "end_turn");
  EXPECT_EQ(str(o["content"].as_array()[0].as_object().at("type")), "text");
  json::object count = test::parse_obj(post("/v1/messages/count_tokens", conv).body);
  EXPECT_EQ(count["input_tokens"], o["usage"].as_object()["input_tokens"]);
  // A forced call's prefill is part of the prompt: counted too.
  std::string forced = conv;
  forced.insert(1, R"("tool_choice":{"type":"tool","name":"get_weather"},)");
  std::string forced_body = forced;
  forced_body.insert(1, R"("max_tokens":100,)");
  json::object fo = test::parse_obj(post("/v1/messages", forced_body).body);
  EXPECT_EQ(test::parse_obj(post("/v1/messages/count_tokens", forced).body)["input_tokens"],
            fo["usage"].as_object()["input_tokens"]);
  EXPECT_GT(fo["usage"].as_object()["input_tokens"].as_int64(), o["usage"].as_object()["input_tokens"].as_int64());
  // A tool_choice naming a tool that is not offered is a 400.
  std::string bad = conv;
  bad.insert(1, R"("max_tokens":100,"tool_choice":{"type":"tool","name":"nope"},)");
  HttpReply e = test::fetch(api_->port(), "POST", "/v1/messages", bad, {}, kWaitMs);
  EXPECT_EQ(e.status, 400);
  EXPECT_NE(e.body.find("tool_choice.name"), std::string::npos) << e.body;
}

TEST_F(ToolTest, AnthropicShapedStreamSendsTheTextBeforeTheCall) {
  // A 1 s coalescing window: the text would wait, the call makes it go first.
  HttpReply r = post("/v1/messages", anthropic(std::string("x ") + kCall, R"("stream_options":{"min_delay_ms":1000},)", true));
  std::vector<test::SseEvent> ev = test::parse_sse(r.body);
  std::vector<std::string> kinds;
  std::string text;
  for (const auto& e : ev) {
    if (e.event != "content_block_delta") continue;
    json::object d = test::parse_obj(e.data)["delta"].as_object();
    kinds.push_back(str(d["type"]));
    if (kinds.back() == "text_delta") text += str(d["text"]);
  }
  ASSERT_FALSE(kinds.empty());
  EXPECT_EQ(kinds.back(), "input_json_delta");
  EXPECT_EQ(text, "Let me check.");
}

// ---- OpenAI ----

TEST_F(ToolTest, OpenAIToolCallsNonStreaming) {
  HttpReply r = post("/v1/chat/completions", openai(std::string("Weather? ") + kCall));
  EXPECT_TRUE(has_id(r.body, "call_")) << r.body;
  json::object o = test::parse_obj(r.body);
  const std::string usage = json::serialize(o["usage"]);
  EXPECT_EQ(normalized(r.body),
            R"({"id":"chatcmpl-X","object":"chat.completion","created":0,"model":"gpt","system_fingerprint":null,)"
            R"("choices":[{"index":0,"message":{"role":"assistant","content":"Let me check.",)"
            R"("tool_calls":[{"id":"call_X","type":"function","function":{"name":"get_weather","arguments":"{\"location\":\"Paris\"}"}}],)"
            R"("refusal":null},"logprobs":null,"finish_reason":"tool_calls"}],"usage":)" +
                usage + "}");
  // Only a call (forced): content is null.
  r = post("/v1/chat/completions",
           openai(std::string("x ") + kCall, R"("tool_choice":{"type":"function","function":{"name":"get_weather"}},)"));
  json::object m = test::parse_obj(r.body)["choices"].as_array()[0].as_object()["message"].as_object();
  EXPECT_TRUE(m["content"].is_null()) << r.body;
  EXPECT_EQ(str(m["tool_calls"].as_array()[0].as_object()["function"].as_object()["arguments"]), R"({"location":"Paris"})");
  // "required" is "any": the call is forced open, the model names the tool.
  r = post("/v1/chat/completions", openai(std::string("x ") + kCall, R"("tool_choice":"required",)"));
  EXPECT_EQ(str(test::parse_obj(r.body)["choices"].as_array()[0].as_object()["finish_reason"]), "tool_calls") << r.body;
}

TEST_F(ToolTest, OpenAIToolCallsStreamingChunks) {
  HttpReply r = post("/v1/chat/completions", openai(std::string("Weather? ") + kCall, "", /*stream=*/true));
  const std::string head = R"(data: {"id":"chatcmpl-X","object":"chat.completion.chunk","created":0,"model":"gpt","system_fingerprint":null,"choices":[{"index":0,"delta":)";
  auto chunk = [&](const std::string& delta, const std::string& finish = "null") {
    return head + delta + R"(,"logprobs":null,"finish_reason":)" + finish + "}]}\n\n";
  };
  auto text = [&](const std::string& t) { return chunk(R"({"content":")" + t + R"("})"); };
  auto args = [&](const std::string& piece) {
    return chunk(R"({"tool_calls":[{"index":0,"function":{"arguments":)" + json::serialize(json::string(piece)) + "}}]}");
  };
  EXPECT_EQ(normalized(r.body),
            chunk(R"({"role":"assistant","content":""})") + text("Let") + text(" me") + text(" ch") + text("eck") +
                text(".") +
                chunk(R"({"tool_calls":[{"index":0,"id":"call_X","type":"function","function":{"name":"get_weather","arguments":""}}]})") +
                args(R"({"l)") + args("oca") + args("tio") + args(R"(n":)") + args(R"("P)") + args("ari") +
                args(R"(s"})") + chunk("{}", R"("tool_calls")") + "data: [DONE]\n\n");
}

// ---- Parallel tool use ----

TEST_F(ToolTest, ParallelCallsAreSeparateBlocksAndEntries) {
  // Anthropic: streamed, a text block then one tool_use block per call.
  HttpReply r = post("/v1/messages", anthropic_two(kTwoCalls, "", /*stream=*/true));
  EXPECT_EQ(anthropic_blocks(r.body),
            (std::vector<std::string>{"0:text", "1:tool_use:get_weather", "2:tool_use:get_time"}));
  EXPECT_NE(r.body.find(R"("stop_reason":"tool_use")"), std::string::npos);
  // OpenAI: streamed, tool_calls entries 0 and 1; and not streamed.
  std::string finish;
  r = post("/v1/chat/completions", openai_two(kTwoCalls, "", /*stream=*/true));
  EXPECT_EQ(openai_streamed_calls(r.body, &finish),
            (std::vector<std::string>{"0:get_weather {}", R"(1:get_time {"tz":"CET"})"}));
  EXPECT_EQ(finish, "tool_calls");
  json::object m = test::parse_obj(post("/v1/chat/completions", openai_two(kTwoCalls)).body)["choices"]
                       .as_array()[0].as_object()["message"].as_object();
  const json::array& calls = m["tool_calls"].as_array();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(str(calls[0].at("function").at("name")), "get_weather");
  EXPECT_EQ(str(calls[1].at("function").at("arguments")), R"({"tz":"CET"})");
  EXPECT_NE(calls[0].at("id"), calls[1].at("id"));
  // parallel_tool_calls: true and disable_parallel_tool_use: false are the default.
  r = post("/v1/chat/completions", openai_two(kTwoCalls, R"("parallel_tool_calls":true,)", true));
  EXPECT_EQ(openai_streamed_calls(r.body).size(), 2u);
  json::object o = test::parse_obj(
      post("/v1/messages", anthropic_two(kTwoCalls, R"("tool_choice":{"type":"auto","disable_parallel_tool_use":false},)")).body);
  EXPECT_EQ(o["content"].as_array().size(), 3u);
}

// What the fake Hermes model writes up to the end of its first call to get_weather({}).
const std::string kFirstHermesCall =
    "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>";

TEST_F(ToolTest, DisableParallelToolUseStopsAfterTheFirstCall) {
  const std::string single = R"("tool_choice":{"type":"auto","disable_parallel_tool_use":true},)";
  const int64_t n_cancelled = api_->engine().n_cancelled();
  json::object o = test::parse_obj(post("/v1/messages", anthropic_two(kTwoCalls, single)).body);
  EXPECT_EQ(normalized(json::serialize(o["content"])),
            R"([{"type":"text","text":"Let me check."},{"type":"tool_use","id":"toolu_X","name":"get_weather","input":{}}])");
  EXPECT_EQ(str(o["stop_reason"]), "tool_use");
  // The tokens up to the one that completed the call: not the whole script's.
  EXPECT_EQ(o["usage"].as_object()["output_tokens"].as_int64(), tokens_through(kFirstHermesCall));
  // The rest of the generation was cancelled.
  EXPECT_TRUE(test::wait_until([&] { return api_->engine().n_cancelled() > n_cancelled; }))
      << "the rest of the generation was not cancelled";

  // Streaming: the same blocks, nothing after the call, the same usage.
  HttpReply r = post("/v1/messages", anthropic_two(kTwoCalls, single, /*stream=*/true));
  EXPECT_EQ(anthropic_blocks(r.body), (std::vector<std::string>{"0:text", "1:tool_use:get_weather"}));
  EXPECT_EQ(r.body.find("get_time"), std::string::npos) << r.body;
  std::vector<test::SseEvent> ev = test::parse_sse(r.body);
  ASSERT_GE(ev.size(), 3u);
  EXPECT_EQ(ev[ev.size() - 3].event, "content_block_stop");
  json::object delta = test::parse_obj(ev[ev.size() - 2].data);
  EXPECT_EQ(str(delta["delta"].as_object()["stop_reason"]), "tool_use");
  EXPECT_EQ(delta["usage"].as_object()["output_tokens"].as_int64(), tokens_through(kFirstHermesCall));
  // The other tool_choice types take the flag too.
  o = test::parse_obj(post("/v1/messages", anthropic_two(kTwoCalls, R"("tool_choice":{"type":"any","disable_parallel_tool_use":true},)")).body);
  EXPECT_EQ(o["content"].as_array().size(), 1u) << json::serialize(o);
  EXPECT_EQ(str(o["stop_reason"]), "tool_use");
}

TEST_F(ToolTest, ParallelToolCallsFalseStopsAfterTheFirstCall) {
  const std::string single = R"("parallel_tool_calls":false,)";
  json::object o = test::parse_obj(post("/v1/chat/completions", openai_two(kTwoCalls, single)).body);
  json::object c = o["choices"].as_array()[0].as_object();
  EXPECT_EQ(str(c["finish_reason"]), "tool_calls");
  json::object m = c["message"].as_object();
  EXPECT_EQ(str(m["content"]), "Let me check.");
  ASSERT_EQ(m["tool_calls"].as_array().size(), 1u);
  EXPECT_EQ(str(m["tool_calls"].as_array()[0].at("function").at("name")), "get_weather");
  EXPECT_EQ(o["usage"].as_object()["completion_tokens"].as_int64(), tokens_through(kFirstHermesCall));
  std::string finish;
  HttpReply r = post("/v1/chat/completions",
                     openai_two(kTwoCalls, single + R"("stream_options":{"include_usage":true},)", /*stream=*/true));
  EXPECT_EQ(openai_streamed_calls(r.body, &finish), (std::vector<std::string>{"0:get_weather {}"}));
  EXPECT_EQ(finish, "tool_calls");
  EXPECT_EQ(r.body.find("get_time"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find(R"("completion_tokens":)" + std::to_string(tokens_through(kFirstHermesCall)) + ","),
            std::string::npos)
      << r.body;
  // One call in the answer anyway: the same answer as with parallel calls.
  o = test::parse_obj(post("/v1/chat/completions", openai(std::string("x ") + kCall, single)).body);
  EXPECT_EQ(str(o["choices"].as_array()[0].at("finish_reason")), "tool_calls");
}

TEST_F(ToolTest, ParallelFlagsMustBeBooleans) {
  for (const char* v : {"1", R"("true")", "{}", "[]"}) {
    json::object e = rejected("/v1/messages",
                              anthropic("x", std::string(R"("tool_choice":{"type":"auto","disable_parallel_tool_use":)") + v + "},"));
    EXPECT_TRUE(str(e["message"]).starts_with("tool_choice.disable_parallel_tool_use: ")) << str(e["message"]);
    e = rejected("/v1/chat/completions", openai("x", std::string(R"("parallel_tool_calls":)") + v + ","));
    EXPECT_EQ(str(e["param"]), "parallel_tool_calls") << v;
  }
  // null is "not given".
  post("/v1/chat/completions", openai("x", R"("parallel_tool_calls":null,)"));
  post("/v1/messages", anthropic("x", R"("tool_choice":{"type":"auto","disable_parallel_tool_use":null},)"));
}

// ---- Streamed arguments ----

// What the fake Hermes model writes before get_weather's arguments begin.
const std::string kBeforeArgs = "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ";

TEST_F(ToolTest, AStreamedCallThatBreaksEndsTheStreamWithAnErrorEvent) {
  // The arguments stop being JSON after the call has begun streaming.
  const std::string broken = R"(x [[fake:tool=get_weather:{\"location\": \"Paris\",, \"x\": 1}]])";
  HttpReply r = post("/v1/messages", anthropic(broken, "", /*stream=*/true));
  std::vector<test::SseEvent> ev = test::parse_sse(r.body);
  ASSERT_GE(ev.size(), 4u) << r.body;
  // The call went out as far as it was valid JSON; then the error, last.
  EXPECT_EQ(anthropic_inputs(r.body), (std::vector<std::string>{R"(get_weather {"location":"Paris",)"}));
  EXPECT_EQ(ev.back().event, "error") << r.body;
  json::object err = test::parse_obj(ev.back().data);
  EXPECT_EQ(str(err["type"]), "error");
  json::object e = err["error"].as_object();
  EXPECT_EQ(str(e["type"]), "api_error");
  EXPECT_EQ(str(e["detail"].as_object()["reason"]), "invalid_tool_call");
  EXPECT_NE(str(e["message"]).find("get_weather"), std::string::npos) << str(e["message"]);
  EXPECT_TRUE(str(err["request_id"]).starts_with("req_")) << ev.back().data;
  // The block is not closed and the message does not end: no client can take the call as complete.
  EXPECT_EQ(r.body.find("message_delta"), std::string::npos) << r.body;
  EXPECT_EQ(r.body.find("message_stop"), std::string::npos) << r.body;
  EXPECT_EQ(r.body.find(R"({"type":"content_block_stop","index":1})"), std::string::npos) << r.body;

  // OpenAI: the error frame ends the stream; no finish_reason, no [DONE].
  r = post("/v1/chat/completions", openai(broken, "", /*stream=*/true));
  EXPECT_EQ(openai_streamed_calls(r.body), (std::vector<std::string>{R"(0:get_weather {"location":"Paris",)"}));
  ev = test::parse_sse(r.body);
  ASSERT_FALSE(ev.empty());
  json::object oerr = test::parse_obj(ev.back().data)["error"].as_object();
  EXPECT_EQ(str(oerr["code"]), "invalid_tool_call") << ev.back().data;
  EXPECT_EQ(r.body.find("[DONE]"), std::string::npos);
  EXPECT_EQ(r.body.find("\"finish_reason\":\"tool_calls\""), std::string::npos);

  // Not streamed, the same output is text: nothing had gone out.
  json::object o = test::parse_obj(post("/v1/messages", anthropic(broken)).body);
  EXPECT_EQ(str(o["stop_reason"]), "end_turn");
  ASSERT_EQ(o["content"].as_array().size(), 1u);
  EXPECT_NE(str(o["content"].as_array()[0].at("text")).find("<tool_call>"), std::string::npos);

  // All three count as fallbacks (invalid_json).
  HttpReply m = test::fetch(api_->port(), "GET", "/metrics");
  EXPECT_NE(m.body.find("engine_tool_call_fallbacks_total{api=\"anthropic\",reason=\"invalid_json\"} 2\n"), std::string::npos);
  EXPECT_NE(m.body.find("engine_tool_call_fallbacks_total{api=\"openai\",reason=\"invalid_json\"} 1\n"), std::string::npos);
  EXPECT_NE(m.body.find("engine_tool_calls_total{api=\"anthropic\"} 0\n"), std::string::npos);

  // The generation is cancelled, not left running: here a model that would go on for ever.
  const int64_t n_cancelled = api_->engine().n_cancelled();
  std::string endless = anthropic(broken + " [[fake:long]]", "", /*stream=*/true);
  endless.replace(endless.find("\"max_tokens\":200"), 16, "\"max_tokens\":1000000");
  r = post("/v1/messages", endless);
  EXPECT_EQ(test::parse_sse(r.body).back().event, "error");
  EXPECT_TRUE(test::wait_until([&] { return api_->engine().n_cancelled() > n_cancelled; }))
      << "the generation was left running";
  EXPECT_EQ(api_->engine().n_cancelled(), n_cancelled + 1);
}

TEST_F(ToolTest, AStreamedCallCutByMaxTokensEndsWithAnErrorEvent) {
  // max_tokens ends the output inside the arguments, after the call opened.
  const int64_t cut = tokens_through(kBeforeArgs + "{\"loc");
  auto with_max = [&](std::string body) {
    body.replace(body.find("\"max_tokens\":200"), 16, "\"max_tokens\":" + std::to_string(cut));
    return body;
  };
  HttpReply r = post("/v1/messages", with_max(anthropic(std::string("x ") + kCall, "", /*stream=*/true)));
  std::vector<test::SseEvent> ev = test::parse_sse(r.body);
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev.back().event, "error") << r.body;
  const std::string message = str(test::parse_obj(ev.back().data)["error"].as_object()["message"]);
  EXPECT_NE(message.find("ended inside it"), std::string::npos) << message;
  const std::vector<std::string> inputs = anthropic_inputs(r.body);
  ASSERT_EQ(inputs.size(), 1u);
  EXPECT_TRUE(std::string(R"(get_weather {"location":"Paris"})").starts_with(inputs[0])) << inputs[0];
  r = post("/v1/chat/completions", with_max(openai(std::string("x ") + kCall, "", /*stream=*/true)));
  EXPECT_NE(r.body.find(R"("code":"invalid_tool_call")"), std::string::npos) << r.body;
  // Not streamed: text, max_tokens.
  json::object o = test::parse_obj(post("/v1/messages", with_max(anthropic(std::string("x ") + kCall))).body);
  EXPECT_EQ(str(o["stop_reason"]), "max_tokens");
  EXPECT_EQ(o["content"].as_array().size(), 1u);
  HttpReply m = test::fetch(api_->port(), "GET", "/metrics");
  EXPECT_NE(m.body.find("engine_tool_call_fallbacks_total{api=\"anthropic\",reason=\"incomplete\"} 2\n"), std::string::npos);
}

TEST_F(ToolTest, ShapedStreamsSplitTheArgumentsLikeText) {
  // stream_options.max_buffer_size bounds argument pieces as it bounds text.
  const std::string shape = R"("stream_options":{"max_buffer_size":4},)";
  const std::string call = R"(x [[fake:tool=get_weather:{\"location\": \"Paris, the capital of France\"}]])";
  HttpReply r = post("/v1/messages", anthropic(call, shape, /*stream=*/true));
  size_t n_pieces = 0;
  for (const test::SseEvent& e : test::parse_sse(r.body)) {
    if (e.event != "content_block_delta") continue;
    json::object d = test::parse_obj(e.data)["delta"].as_object();
    const std::string piece = str(d["type"]) == "input_json_delta" ? str(d["partial_json"]) : str(d["text"]);
    EXPECT_LE(piece.size(), 4u) << piece;
    n_pieces += str(d["type"]) == "input_json_delta";
  }
  EXPECT_GE(n_pieces, 10u);
  EXPECT_EQ(anthropic_inputs(r.body), (std::vector<std::string>{R"(get_weather {"location":"Paris, the capital of France"})"}));
  r = post("/v1/chat/completions", openai(call, shape, /*stream=*/true));
  EXPECT_EQ(openai_streamed_calls(r.body), (std::vector<std::string>{R"(0:get_weather {"location":"Paris, the capital of France"})"}));
  for (const test::SseEvent& e : test::parse_sse(r.body)) {
    if (e.data.find("\"arguments\":\"") == std::string::npos) continue;
    json::object chunk = test::parse_obj(e.data);  // `a` refers into it
    const json::value& a = chunk["choices"].as_array()[0].at("delta").at("tool_calls").at(0).at("function").at("arguments");
    EXPECT_LE(a.as_string().size(), 4u) << e.data;
  }
}

TEST_F(ToolTest, ArgumentsAreTheModelsNumbersNotReformatted) {
  // 21.5 stays 21.5 (Boost.JSON would write 2.15E1), in both APIs, streamed or not.
  const std::string call = R"(x [[fake:tool=get_weather:{\"t\": 21.5, \"p\": 0.1}]])";
  json::object o = test::parse_obj(post("/v1/messages", anthropic(call)).body);
  EXPECT_EQ(json::serialize(o["content"].as_array()[1].at("input")), R"({"t":2.15E1,"p":1E-1})");  // parsed back by the test's Boost
  HttpReply r = post("/v1/messages", anthropic(call));
  EXPECT_NE(r.body.find(R"("input":{"t":21.5,"p":0.1})"), std::string::npos) << r.body;
  r = post("/v1/chat/completions", openai(call));
  EXPECT_NE(r.body.find(R"("arguments":"{\"t\":21.5,\"p\":0.1}")"), std::string::npos) << r.body;
  r = post("/v1/chat/completions", openai(call, "", /*stream=*/true));
  EXPECT_EQ(openai_streamed_calls(r.body), (std::vector<std::string>{R"(0:get_weather {"t":21.5,"p":0.1})"}));
}

// ---- /metrics ----

TEST_F(ToolTest, ToolCallMetrics) {
  auto metrics = [&] { return test::fetch(api_->port(), "GET", "/metrics").body; };
  // One series' value; -1 when it is absent.
  auto metric = [&](const std::string& series) -> int64_t {
    const std::string body = metrics();
    const size_t at = body.find("\n" + series + " ");
    return at == std::string::npos ? -1 : std::atoll(body.c_str() + at + series.size() + 2);
  };
  const std::string body = metrics();
  EXPECT_NE(body.find("\n# HELP engine_tool_calls_total "), std::string::npos);
  EXPECT_NE(body.find("\n# TYPE engine_tool_calls_total counter\n"), std::string::npos);
  EXPECT_NE(body.find("\n# HELP engine_tool_call_fallbacks_total "), std::string::npos);
  EXPECT_NE(body.find("\n# TYPE engine_tool_call_fallbacks_total counter\n"), std::string::npos);
  const std::vector<std::string> apis = {"anthropic", "openai"};
  const std::vector<std::string> reasons = {"invalid_json", "invalid_call", "unknown_tool", "too_large", "incomplete"};
  auto calls = [&](const std::string& api) { return metric("engine_tool_calls_total{api=\"" + api + "\"}"); };
  auto fallbacks = [&](const std::string& api, const std::string& reason) {
    return metric("engine_tool_call_fallbacks_total{api=\"" + api + "\",reason=\"" + reason + "\"}");
  };
  // Every series exists from the start, at 0.
  for (const std::string& api : apis) {
    EXPECT_EQ(calls(api), 0) << api;
    for (const std::string& reason : reasons) EXPECT_EQ(fallbacks(api, reason), 0) << api << " " << reason;
  }

  post("/v1/messages", anthropic(std::string("x ") + kCall));                             // 1 call
  post("/v1/messages", anthropic_two(kTwoCalls, "", /*stream=*/true));                     // 2 calls
  post("/v1/messages", anthropic("[[fake:tool=get_stock:{}]]"));                           // unknown tool
  post("/v1/chat/completions", openai_two(kTwoCalls, R"("parallel_tool_calls":false,)"));  // 1 call (of 2 written)
  std::string cut = openai(std::string("x ") + kCall, "", /*stream=*/true);
  cut.replace(cut.find("\"max_tokens\":200"), 16, "\"max_tokens\":10");
  post("/v1/chat/completions", cut);                                                       // cut short
  post("/v1/chat/completions", openai("Hi"));                                              // text, no call
  EXPECT_EQ(calls("anthropic"), 3);
  EXPECT_EQ(calls("openai"), 1);
  for (const std::string& api : apis) {
    for (const std::string& reason : reasons) {
      const bool hit = (api == "anthropic" && reason == "unknown_tool") || (api == "openai" && reason == "incomplete");
      EXPECT_EQ(fallbacks(api, reason), hit ? 1 : 0) << api << " " << reason;
    }
  }
}

// ---- Request validation ----

TEST_F(ToolTest, ToolNamesMustMatchThePattern) {
  // Names as JSON string contents: a space, a dot, empty, too long, a quote, non-ASCII.
  const std::vector<std::string> bad = {"get weather", "a.b", "", std::string(65, 'a'), R"(a\"b)", "na\u00efve"};
  for (const std::string& name : bad) {
    SCOPED_TRACE(name);
    const std::string tool = R"({"name":")" + name + R"(","input_schema":{"type":"object"}})";
    json::object e = rejected("/v1/messages", R"({"model":"m","max_tokens":5,"tools":[)" + std::string(kWeatherTool) +
                                                  "," + tool + R"(],"messages":[{"role":"user","content":"x"}]})");
    EXPECT_TRUE(str(e["message"]).starts_with("tools[1].name: ")) << str(e["message"]);
    e = rejected("/v1/messages", anthropic("x", R"("tool_choice":{"type":"tool","name":")" + name + R"("},)"));
    EXPECT_TRUE(str(e["message"]).starts_with("tool_choice.name: ")) << str(e["message"]);
    const std::string fn = R"({"type":"function","function":{"name":")" + name + R"(","parameters":{"type":"object"}}})";
    e = rejected("/v1/chat/completions",
                 R"({"model":"gpt","tools":[)" + fn + R"(],"messages":[{"role":"user","content":"x"}]})");
    EXPECT_EQ(str(e["param"]), "tools[0].function.name");
    e = rejected("/v1/chat/completions",
                 openai("x", R"("tool_choice":{"type":"function","function":{"name":")" + name + R"("}},)"));
    EXPECT_EQ(str(e["param"]), "tool_choice.function.name");
  }
  // The longest name and every allowed character.
  const std::string good = "Az09_-" + std::string(58, 'x');
  post("/v1/messages", R"({"model":"m","max_tokens":5,"tools":[{"name":")" + good +
                           R"(","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"x"}]})");
  post("/v1/chat/completions", R"({"model":"gpt","max_tokens":5,"tools":[{"type":"function","function":{"name":")" + good +
                                   R"("}}],"messages":[{"role":"user","content":"x"}]})");
}

TEST_F(ToolTest, AnthropicServerToolsAreAcceptedButNotOffered) {
  // Server tools have no input_schema and run on Anthropic's side: no 400,
  // but neither in the prompt nor callable.
  const std::string server_tools =
      R"({"type":"web_search_20250305","name":"web_search","max_uses":5},)"
      R"({"type":"bash_20250124","name":"bash"},{"type":"code_execution_20250522","name":"code_execution"},)";
  auto with_tools = [](const std::string& tools, const std::string& content) {
    return R"({"model":"m","max_tokens":200,"tools":[)" + tools + R"(],"messages":[{"role":"user","content":")" +
           content + R"("}]})";
  };
  auto count = [&](const std::string& body) {
    return test::parse_obj(post("/v1/messages/count_tokens", body).body)["input_tokens"];
  };
  const std::string custom = R"({"type":"custom","name":"get_time","input_schema":{"type":"object"}})";
  EXPECT_EQ(count(with_tools(server_tools + kWeatherTool, "x")), count(with_tools(kWeatherTool, "x")));
  EXPECT_EQ(count(with_tools(server_tools + custom, "x")), count(with_tools(custom, "x")));
  EXPECT_EQ(count(with_tools(server_tools.substr(0, server_tools.size() - 1), "x")),
            count(R"({"model":"m","messages":[{"role":"user","content":"x"}]})"));
  // A call to a server tool stays text; the client tool beside it is callable.
  json::object o = test::parse_obj(post("/v1/messages", with_tools(server_tools + kWeatherTool, "[[fake:tool=web_search:{}]]")).body);
  EXPECT_EQ(str(o["stop_reason"]), "end_turn");
  EXPECT_EQ(o["content"].as_array().size(), 1u);
  o = test::parse_obj(post("/v1/messages", with_tools(server_tools + kWeatherTool, kCall)).body);
  EXPECT_EQ(str(o["stop_reason"]), "tool_use");
  // Server tool names are not checked against the client-tool pattern.
  post("/v1/messages", with_tools(R"({"type":"web_search_20250305","name":"web search"})", "x"));
}

TEST_F(ToolTest, OpenAIToolChoiceAndToolTypeAreChecked) {
  for (const char* choice : {R"("any")", R"("function")", R"("")", R"("Auto")"}) {
    json::object e = rejected("/v1/chat/completions", openai("x", std::string(R"("tool_choice":)") + choice + ","));
    EXPECT_EQ(str(e["param"]), "tool_choice") << choice;
  }
  json::object e = rejected("/v1/chat/completions",
                            openai("x", R"("tool_choice":{"type":"tool","function":{"name":"get_weather"}},)"));
  EXPECT_EQ(str(e["param"]), "tool_choice.type");
  e = rejected("/v1/chat/completions", openai("x", R"("tool_choice":{"function":{"name":"get_weather"}},)"));
  EXPECT_EQ(str(e["param"]), "tool_choice.type");
  for (const char* tool : {R"({"type":"custom","function":{"name":"f"}})", R"({"function":{"name":"f"}})",
                           R"({"type":1,"function":{"name":"f"}})"}) {
    e = rejected("/v1/chat/completions", std::string(R"({"model":"gpt","tools":[{"type":"function","function":{"name":"g"}},)") +
                                             tool + R"(],"messages":[{"role":"user","content":"x"}]})");
    EXPECT_EQ(str(e["param"]), "tools[1].type") << tool;
  }
  for (const char* choice : {R"("none")", R"("auto")", R"("required")",
                             R"({"type":"function","function":{"name":"get_weather"}})"}) {
    post("/v1/chat/completions", openai("x", std::string(R"("tool_choice":)") + choice + ","));
  }
  // A call required with no tools to call: refused on both APIs.
  e = rejected("/v1/chat/completions",
               R"({"model":"gpt","tool_choice":"required","messages":[{"role":"user","content":"x"}]})");
  EXPECT_EQ(str(e["param"]), "tool_choice");
  e = rejected("/v1/messages", R"({"model":"m","max_tokens":8,"tool_choice":{"type":"any"},)"
                               R"("messages":[{"role":"user","content":"x"}]})");
  EXPECT_NE(str(e["message"]).find("tool_choice"), std::string::npos) << str(e["message"]);
}

// ---- Llama 3 JSON: the fake codec with Llama's syntax ----

class Llama3ToolTest : public ToolTest {
 protected:
  Llama3ToolTest() : ToolTest(ToolSyntax::kLlama3Json) {}
};

TEST_F(Llama3ToolTest, ForcedCallsAreToolUseAndToolCalls) {
  // The prompt ends with {"name": "get_weather", "parameters": and the model writes the rest.
  const std::string forced = R"("tool_choice":{"type":"tool","name":"get_weather"},)";
  HttpReply r = post("/v1/messages", anthropic(std::string("x ") + kCall, forced, /*stream=*/true));
  std::vector<test::SseEvent> ev = test::parse_sse(r.body);
  ASSERT_GE(ev.size(), 7u) << r.body;
  EXPECT_EQ(normalized(ev[2].data),
            R"({"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_X","name":"get_weather","input":{}}})");
  // The arguments stream as the model writes them, in pieces.
  EXPECT_EQ(anthropic_inputs(r.body), (std::vector<std::string>{R"(get_weather {"location":"Paris"})"}));
  EXPECT_GE(std::count_if(ev.begin(), ev.end(), [](const test::SseEvent& e) { return e.event == "content_block_delta"; }), 3);
  EXPECT_EQ(ev[ev.size() - 3].event, "content_block_stop");
  EXPECT_EQ(str(test::parse_obj(ev[ev.size() - 2].data)["delta"].as_object()["stop_reason"]), "tool_use");
  // tool_choice any: the model names the tool too.
  json::object o = test::parse_obj(post("/v1/messages", anthropic(std::string("x ") + kCall, R"("tool_choice":{"type":"any"},)")).body);
  EXPECT_EQ(str(o["stop_reason"]), "tool_use");
  EXPECT_EQ(json::serialize(o["content"].as_array().at(0).as_object().at("input")), R"({"location":"Paris"})");
  // OpenAI: only a call, content null.
  r = post("/v1/chat/completions", openai(std::string("x ") + kCall, R"("tool_choice":"required",)"));
  json::object c = test::parse_obj(r.body)["choices"].as_array()[0].as_object();
  EXPECT_EQ(str(c["finish_reason"]), "tool_calls");
  EXPECT_TRUE(c["message"].as_object()["content"].is_null());
  EXPECT_EQ(str(c["message"].as_object()["tool_calls"].as_array()[0].as_object()["function"].as_object()["name"]),
            "get_weather");
}

TEST_F(Llama3ToolTest, OtherSyntaxIsText) {
  // A Llama answer that does not start with a call is text from its first
  // characters: Hermes markup included.
  json::object o = test::parse_obj(post("/v1/messages", anthropic(std::string("x ") + kCall)).body);
  EXPECT_EQ(str(o["stop_reason"]), "end_turn");
  ASSERT_EQ(o["content"].as_array().size(), 1u);
  EXPECT_EQ(str(o["content"].as_array()[0].as_object().at("text")),
            "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n</tool_call>");
}

TEST_F(Llama3ToolTest, ArgumentsStreamInPieces) {
  const std::string calls = std::string("[[fake:syntax=llama3]]") + kTwoCalls;
  HttpReply r = post("/v1/messages", anthropic_two(calls, "", /*stream=*/true));
  EXPECT_EQ(anthropic_inputs(r.body), (std::vector<std::string>{"get_weather {}", R"(get_time {"tz":"CET"})"}));
  size_t n_time_pieces = 0;
  for (const test::SseEvent& e : test::parse_sse(r.body)) {
    n_time_pieces += e.event == "content_block_delta" && e.data.find(R"("index":1)") != std::string::npos;
  }
  EXPECT_GE(n_time_pieces, 3u) << r.body;  // {"tz":"CET"} in pieces of the model's tokens
  r = post("/v1/chat/completions", openai_two(calls, "", /*stream=*/true));
  EXPECT_EQ(openai_streamed_calls(r.body), (std::vector<std::string>{"0:get_weather {}", R"(1:get_time {"tz":"CET"})"}));
}

TEST_F(Llama3ToolTest, ParallelCallsAndSingleCall) {
  const std::string calls = std::string("[[fake:syntax=llama3]]") + kTwoCalls;
  HttpReply r = post("/v1/messages", anthropic_two(calls, "", /*stream=*/true));
  EXPECT_EQ(anthropic_blocks(r.body), (std::vector<std::string>{"0:tool_use:get_weather", "1:tool_use:get_time"}));
  json::object o = test::parse_obj(post("/v1/messages", anthropic_two(calls)).body);
  EXPECT_EQ(normalized(json::serialize(o["content"])),
            R"([{"type":"tool_use","id":"toolu_X","name":"get_weather","input":{}},)"
            R"({"type":"tool_use","id":"toolu_X","name":"get_time","input":{"tz":"CET"}}])");
  r = post("/v1/chat/completions", openai_two(calls, "", /*stream=*/true));
  EXPECT_EQ(openai_streamed_calls(r.body), (std::vector<std::string>{"0:get_weather {}", R"(1:get_time {"tz":"CET"})"}));

  // One call: the answer ends with the first object.
  const std::string first = R"({"name": "get_weather", "parameters": {}})";
  o = test::parse_obj(post("/v1/messages", anthropic_two(calls, R"("tool_choice":{"type":"auto","disable_parallel_tool_use":true},)")).body);
  EXPECT_EQ(normalized(json::serialize(o["content"])),
            R"([{"type":"tool_use","id":"toolu_X","name":"get_weather","input":{}}])");
  EXPECT_EQ(str(o["stop_reason"]), "tool_use");
  EXPECT_EQ(o["usage"].as_object()["output_tokens"].as_int64(), tokens_through(first));
  std::string finish;
  r = post("/v1/chat/completions", openai_two(calls, R"("parallel_tool_calls":false,)", /*stream=*/true));
  EXPECT_EQ(openai_streamed_calls(r.body, &finish), (std::vector<std::string>{"0:get_weather {}"}));
  EXPECT_EQ(finish, "tool_calls");
}

}  // namespace
}  // namespace zl::api
