// A block tool syntax (api/tool_formats.h) through the server: the fake
// codec says Mistral (--fake-tool-syntax mistral), the fake engine writes
// [TOOL_CALLS]name[ARGS]{…}, and both APIs answer with the calls, streamed
// and not.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <string>

#include "support/http_client.h"

namespace zl {
namespace {

namespace json = boost::json;
using namespace zl::test;

const std::string kTools =
    R"("tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}},)"
    R"({"type":"function","function":{"name":"get_time","parameters":{"type":"object"}}}])";
const std::string kAsk = R"(Weather? [[fake:tool=get_weather:{\"location\":\"Oslo\"}]][[fake:tool=get_time:{}]][[fake:syntax=mistral]])";

std::string openai_body(bool stream) {
  return R"({"model":"m","max_tokens":64,"stream":)" + std::string(stream ? "true" : "false") +
         R"(,"messages":[{"role":"user","content":")" + kAsk + "\"}]," + kTools + "}";
}

TEST(ToolFormatsServerTest, MistralCallsOverOpenAIAndAnthropic) {
  ServerProcess server({"--fake-engine", "--fake-step-us", "100", "--fake-tool-syntax", "mistral"}, ZL_TEST_SERVER);
  ASSERT_TRUE(server.ok());

  HttpReply r = fetch(server.port(), "POST", "/v1/chat/completions", openai_body(false));
  ASSERT_EQ(r.status, 200) << r.body;
  const json::object msg = json::parse(r.body).at("choices").at(0).at("message").as_object();
  EXPECT_EQ(msg.at("content"), "Checking.");
  const json::array& calls = msg.at("tool_calls").as_array();
  ASSERT_EQ(calls.size(), 2u) << r.body;
  EXPECT_EQ(calls[0].at("function").at("name"), "get_weather");
  EXPECT_EQ(json::parse(std::string(calls[0].at("function").at("arguments").as_string())), json::parse(R"({"location":"Oslo"})"));
  EXPECT_EQ(calls[1].at("function").at("name"), "get_time");
  EXPECT_EQ(json::parse(r.body).at("choices").at(0).at("finish_reason"), "tool_calls");

  r = fetch(server.port(), "POST", "/v1/chat/completions", openai_body(true));
  ASSERT_EQ(r.status, 200);
  std::string names, text;
  for (const SseEvent& e : parse_sse(r.body)) {
    if (e.data == "[DONE]" || e.data.empty()) continue;
    const json::value v = json::parse(e.data);
    const json::array& choices = v.at("choices").as_array();
    if (choices.empty()) continue;
    const json::object& delta = choices[0].at("delta").as_object();
    if (const json::value* c = delta.if_contains("content"); c && c->is_string()) text += c->as_string();
    if (const json::value* tc = delta.if_contains("tool_calls")) {
      for (const json::value& call : tc->as_array()) {
        if (const json::value* fn = call.as_object().if_contains("function"); fn && fn->as_object().contains("name")) {
          names += std::string(fn->at("name").as_string()) + " ";
        }
      }
    }
  }
  EXPECT_EQ(text, "Checking.");
  EXPECT_EQ(names, "get_weather get_time ");
  EXPECT_EQ(r.body.find("[TOOL_CALLS]"), std::string::npos);

  const std::string anthropic = R"({"model":"m","max_tokens":64,"messages":[{"role":"user","content":")" + kAsk +
                                R"("}],"tools":[{"name":"get_weather","input_schema":{"type":"object"}},)"
                                R"({"name":"get_time","input_schema":{"type":"object"}}]})";
  r = fetch(server.port(), "POST", "/v1/messages", anthropic);
  ASSERT_EQ(r.status, 200) << r.body;
  const json::value a = json::parse(r.body);
  EXPECT_EQ(a.at("stop_reason"), "tool_use");
  const json::array& content = a.at("content").as_array();
  ASSERT_EQ(content.size(), 3u) << r.body;
  EXPECT_EQ(content[0].at("text"), "Checking.");
  EXPECT_EQ(content[1].at("name"), "get_weather");
  EXPECT_EQ(content[1].at("input"), json::parse(R"({"location":"Oslo"})"));
  EXPECT_EQ(content[2].at("name"), "get_time");
}

}  // namespace
}  // namespace zl
