// Reasoning through the real server: stories260K served with the qwen3.5
// thinking template (the generation prompt opens "<think>\n", so the model
// starts inside its thought; stories never closes it, so the budget is what
// ends it). Both APIs, streamed and not: the thought is a thinking block
// (signed) / reasoning_content before the answer, the SSE events come in
// the order the SDKs expect, the budget closes the thought, `disabled`
// switches it off in the prompt, history blocks are rendered or dropped as
// the template says, and bad `thinking` fields are 400s naming the field.
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json.hpp>
#include <string>
#include <vector>

#include "support/http_client.h"
#include "support/process.h"
#include "support/real_model.h"

namespace zl::test {
namespace {

namespace json = boost::json;

int port() {
  static LazyServers servers;
  return servers.real("main", {"--chat-template", "qwen3.5"}).port();
}

json::object post(const std::string& target, const std::string& body, int* status = nullptr) {
  HttpReply r = fetch(port(), "POST", target, body, {}, 120000);
  EXPECT_TRUE(r.complete) << body;
  if (status) *status = r.status;
  json::error_code ec;
  json::value v = json::parse(r.body, ec);
  return !ec && v.is_object() ? v.get_object() : json::object{};
}

std::string sv(const json::value& v) { return std::string(v.as_string()); }

constexpr const char* kQuestion = R"({"role":"user","content":"Once upon a time"})";

std::string anthropic_body(const std::string& extra) {
  return std::string(R"({"model":"m","temperature":0,"messages":[)") + kQuestion + "]," + extra + "}";
}

TEST(ThinkingServerTest, AnthropicThinkingBlockThenTextStreamedAndNot) {
  REQUIRE_MODEL();
  const std::string fields = R"("max_tokens":1100,"thinking":{"type":"enabled","budget_tokens":1024})";
  int status = 0;
  json::object whole = post("/v1/messages", anthropic_body(fields), &status);
  ASSERT_EQ(status, 200) << json::serialize(whole);
  const json::array& content = whole.at("content").as_array();
  ASSERT_EQ(content.size(), 2u) << json::serialize(whole);
  const json::object& thought = content[0].as_object();
  EXPECT_EQ(sv(thought.at("type")), "thinking");
  EXPECT_FALSE(sv(thought.at("thinking")).empty());
  EXPECT_TRUE(sv(thought.at("signature")).starts_with("zl1."));
  EXPECT_EQ(sv(content[1].at("type")), "text");
  const std::string answer = sv(content[1].at("text"));
  EXPECT_FALSE(answer.empty());
  EXPECT_EQ(sv(thought.at("thinking")).find("</think>"), std::string::npos);
  EXPECT_LE(whole.at("usage").at("output_tokens").as_int64(), 1100);

  HttpReply r = fetch(port(), "POST", "/v1/messages", anthropic_body(fields + R"(,"stream":true)"), {}, 120000);
  ASSERT_EQ(r.status, 200);
  std::vector<std::string> order;  // the block events, compressed: one entry per kind in a row
  std::string thinking, text, signature;
  for (const SseEvent& e : parse_sse(r.body)) {
    if (e.event == "ping") continue;
    const json::object d = json::parse(e.data).as_object();
    std::string key = e.event;
    if (e.event == "content_block_start") {
      key += ":" + std::to_string(d.at("index").as_int64()) + ":" + sv(d.at("content_block").at("type"));
    } else if (e.event == "content_block_delta") {
      const std::string type = sv(d.at("delta").at("type"));
      key += ":" + std::to_string(d.at("index").as_int64()) + ":" + type;
      if (type == "thinking_delta") thinking += sv(d.at("delta").at("thinking"));
      if (type == "text_delta") text += sv(d.at("delta").at("text"));
      if (type == "signature_delta") signature = sv(d.at("delta").at("signature"));
    } else if (e.event == "content_block_stop") {
      key += ":" + std::to_string(d.at("index").as_int64());
    }
    if (order.empty() || order.back() != key) order.push_back(key);
  }
  EXPECT_EQ(order, (std::vector<std::string>{"message_start", "content_block_start:0:thinking",
                                             "content_block_delta:0:thinking_delta",
                                             "content_block_delta:0:signature_delta", "content_block_stop:0",
                                             "content_block_start:1:text", "content_block_delta:1:text_delta",
                                             "content_block_stop:1", "message_delta", "message_stop"}));
  EXPECT_EQ(thinking, sv(thought.at("thinking")));
  EXPECT_EQ(signature, sv(thought.at("signature")));
  EXPECT_EQ(text, answer);
}

// stream_options shapes the thought as it shapes text: no thinking_delta
// carries more than max_buffer_size bytes, and the thought is the same.
TEST(ThinkingServerTest, StreamOptionsSplitTheThoughtToo) {
  REQUIRE_MODEL();
  const std::string fields = R"("max_tokens":1100,"thinking":{"type":"enabled","budget_tokens":1024},"stream":true)";
  auto thought_of = [&](const std::string& extra, size_t* longest) {
    HttpReply r = fetch(port(), "POST", "/v1/messages", anthropic_body(fields + extra), {}, 120000);
    EXPECT_EQ(r.status, 200);
    std::string thinking;
    for (const SseEvent& e : parse_sse(r.body)) {
      if (e.event != "content_block_delta") continue;
      const json::object d = json::parse(e.data).as_object();
      if (sv(d.at("delta").at("type")) != "thinking_delta") continue;
      const std::string piece = sv(d.at("delta").at("thinking"));
      *longest = std::max(*longest, piece.size());
      thinking += piece;
    }
    return thinking;
  };
  size_t longest_plain = 0, longest_shaped = 0;
  const std::string plain = thought_of("", &longest_plain);
  const std::string shaped = thought_of(R"(,"stream_options":{"max_buffer_size":4,"min_delay_ms":1})", &longest_shaped);
  EXPECT_EQ(shaped, plain);
  EXPECT_FALSE(plain.empty());
  EXPECT_GT(longest_plain, 4u);  // (so the split is the shaper's)
  EXPECT_LE(longest_shaped, 4u);
}

TEST(ThinkingServerTest, OpenAiReasoningContentStreamedAndNot) {
  REQUIRE_MODEL();
  const std::string body = std::string(R"({"model":"m","temperature":0,"max_tokens":40,"thinking_budget_tokens":12,)") +
                           R"("messages":[)" + kQuestion + "]";
  int status = 0;
  json::object whole = post("/v1/chat/completions", body + "}", &status);
  ASSERT_EQ(status, 200) << json::serialize(whole);
  const json::object& msg = whole.at("choices").at(0).at("message").as_object();
  const std::string reasoning = sv(msg.at("reasoning_content"));
  const std::string content = sv(msg.at("content"));
  EXPECT_FALSE(reasoning.empty());
  EXPECT_FALSE(content.empty());

  HttpReply r = fetch(port(), "POST", "/v1/chat/completions", body + R"(,"stream":true})", {}, 120000);
  ASSERT_EQ(r.status, 200);
  std::string s_reasoning, s_content;
  bool content_before_reasoning_ended = false;
  for (const SseEvent& e : parse_sse(r.body)) {
    if (e.data == "[DONE]" || e.data.empty()) continue;
    const json::object d = json::parse(e.data).as_object();
    const json::object& delta = d.at("choices").at(0).at("delta").as_object();
    if (const auto* rc = delta.if_contains("reasoning_content")) {
      if (!s_content.empty()) content_before_reasoning_ended = true;
      s_reasoning += sv(*rc);
    }
    if (const auto* c = delta.if_contains("content"); c && c->is_string()) s_content += sv(*c);
  }
  EXPECT_FALSE(content_before_reasoning_ended);
  EXPECT_EQ(s_reasoning, reasoning);
  EXPECT_EQ(s_content, content);
}

TEST(ThinkingServerTest, DisabledClosesTheThoughtInThePrompt) {
  REQUIRE_MODEL();
  auto count = [](const std::string& thinking) {
    json::object o = post("/v1/messages/count_tokens",
                          std::string(R"({"model":"m","messages":[)") + kQuestion + "]" + thinking + "}");
    return o.at("input_tokens").as_int64();
  };
  const int64_t on = count("");
  const int64_t off = count(R"(,"thinking":{"type":"disabled"})");
  EXPECT_GT(off, on);  // "<think>\n\n</think>\n\n" instead of "<think>\n"
  int status = 0;
  json::object whole = post("/v1/messages", anthropic_body(R"("max_tokens":20,"thinking":{"type":"disabled"})"), &status);
  ASSERT_EQ(status, 200);
  EXPECT_EQ(sv(whole.at("content").at(0).at("type")), "text");
}

// Thinking off closes an empty thought in the prompt ("<think>\n\n</think>\n\n"):
// the answer starts at once, so a response format constrains it from its
// first token (before, the grammar waited for a "</think>" that never came).
TEST(ThinkingServerTest, DisabledThinkingConstrainsTheAnswerFromItsFirstToken) {
  REQUIRE_MODEL();
  const std::string ask = std::string(R"("model":"m","temperature":0,"max_tokens":300,"messages":[)") + kQuestion + "]";
  for (const std::string& off : {std::string(R"("chat_template_kwargs":{"enable_thinking":false})"),
                                 std::string(R"("reasoning_effort":"none")")}) {
    for (bool stream : {false, true}) {
      SCOPED_TRACE(off + (stream ? " stream" : ""));
      const std::string body = "{" + ask + "," + off + R"(,"guided_choice":["yes","no"])" +
                               (stream ? R"(,"stream":true)" : "") + "}";
      HttpReply r = fetch(port(), "POST", "/v1/chat/completions", body, {}, 120000);
      ASSERT_EQ(r.status, 200) << r.body;
      std::string text;
      if (!stream) {
        const json::value v = json::parse(r.body);
        text = sv(v.at("choices").at(0).at("message").at("content"));
        EXPECT_EQ(sv(v.at("choices").at(0).at("finish_reason")), "stop");
      } else {
        for (const SseEvent& e : parse_sse(r.body)) {
          if (e.data == "[DONE]" || e.data.empty()) continue;
          const json::value v = json::parse(e.data);
          const json::array& choices = v.at("choices").as_array();
          if (choices.empty()) continue;
          if (const auto* c = choices[0].at("delta").as_object().if_contains("content"); c && c->is_string()) {
            text += sv(*c);
          }
        }
      }
      EXPECT_TRUE(text == "yes" || text == "no") << text;
    }
  }
  int status = 0;
  json::object whole = post("/v1/messages",
                            anthropic_body(R"("max_tokens":300,"thinking":{"type":"disabled"},)"
                                           R"("output_format":{"type":"json_schema","schema":{"type":"object",)"
                                           R"("properties":{"a":{"type":"integer"}},"required":["a"],)"
                                           R"("additionalProperties":false}})"),
                            &status);
  ASSERT_EQ(status, 200) << json::serialize(whole);
  const std::string text = sv(whole.at("content").at(0).at("text"));
  json::error_code ec;
  const json::value parsed = json::parse(text, ec);
  ASSERT_FALSE(ec) << text;
  EXPECT_TRUE(parsed.at("a").is_int64()) << text;
  EXPECT_EQ(sv(whole.at("stop_reason")), "end_turn") << text;
}

TEST(ThinkingServerTest, HistoryBlocksAreRenderedOrDroppedAsTheTemplateSays) {
  REQUIRE_MODEL();
  auto count = [](const std::string& messages) {
    json::object o = post("/v1/messages/count_tokens", R"({"model":"m","tools":[{"name":"f","input_schema":{"type":"object"}}],"messages":)" + messages + "}");
    return o.at("input_tokens").as_int64();
  };
  const std::string think = R"({"type":"thinking","thinking":"I should look it up","signature":"zl1.x"},)";
  // An earlier turn (before the last user query): qwen3.5 drops its reasoning.
  auto earlier = [&](const std::string& t) {
    return R"([{"role":"user","content":"a"},{"role":"assistant","content":[)" + t +
           R"({"type":"text","text":"b"}]},{"role":"user","content":"c"}])";
  };
  EXPECT_EQ(count(earlier(think)), count(earlier("")));
  // The current tool loop (after the last query): rendered.
  auto recent = [&](const std::string& t) {
    return R"([{"role":"user","content":"a"},{"role":"assistant","content":[)" + t +
           R"({"type":"tool_use","id":"t1","name":"f","input":{}}]},
             {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"9"}]}])";
  };
  EXPECT_GT(count(recent(think)), count(recent("")));
}

TEST(ThinkingServerTest, BadThinkingFieldsAre400sNamingTheField) {
  REQUIRE_MODEL();
  for (const auto& [fields, param] : std::vector<std::pair<std::string, std::string>>{
           {R"("max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":100})", "thinking.budget_tokens"},
           {R"("max_tokens":1024,"thinking":{"type":"enabled","budget_tokens":1024})", "thinking.budget_tokens"},
           {R"("max_tokens":2000,"thinking":{"type":"maybe"})", "thinking.type"}}) {
    int status = 0;
    json::object o = post("/v1/messages", anthropic_body(fields), &status);
    EXPECT_EQ(status, 400) << fields;
    EXPECT_EQ(sv(o.at("error").at("type")), "invalid_request_error");
    EXPECT_NE(sv(o.at("error").at("message")).find(param), std::string::npos) << json::serialize(o);
  }
}

}  // namespace
}  // namespace zl::test
