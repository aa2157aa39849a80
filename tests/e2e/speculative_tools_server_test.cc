// Speculative decoding of requests that carry tools, through `zerolayer serve` on stories260K
// with the ChatML template (its tool-call syntax: the call's grammar waits for <tool_call>):
// the text before any call speculates on both APIs, with the same answer as without
// speculation; a forced tool call (masked from its first token) does not.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <string>

#include "support/http_client.h"
#include "support/json_object.h"
#include "support/json_path.h"
#include "support/process.h"
#include "support/prom_text.h"
#include "support/real_model.h"

namespace zl::test {
namespace {

namespace json = boost::json;

int port() {
  static LazyServers servers;
  return servers.real("chatml", {"--ctx", "1024", "--chat-template", "chatml", "--speculative", "ngram"}).port();
}

const std::string kText = "Once upon a time there was a girl named Lily. Once upon a time there was a girl named Lily.";
const std::string kOpenAiTools =
    R"("tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",)"
    R"("properties":{"city":{"type":"string"}},"required":["city"]}}}])";
const std::string kAnthropicTools =
    R"("tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}},)"
    R"("required":["city"]}}])";

double drafts() {
  HttpReply r = fetch(port(), "GET", "/metrics");
  EXPECT_EQ(r.status, 200);
  return parse_prom_text(r.body).value("engine_spec_draft_tokens_total");
}

// The answer's JSON; `drafted`: the draft tokens the request added to the counter.
json::object post(const std::string& path, const std::string& extra, double* drafted) {
  const std::string body = R"({"model":"m","temperature":0,"max_tokens":100,"messages":[{"role":"user","content":)" +
                           jquote(kText) + "}]," + extra + "}";
  const double before = drafts();
  HttpReply r = fetch(port(), "POST", path, body, {}, 60000);
  EXPECT_EQ(r.status, 200) << r.body;
  *drafted = drafts() - before;
  return r.status == 200 ? parse_obj(r.body) : json::object{};
}

TEST(SpeculativeToolsServer, TextBeforeAToolCallSpeculatesOnBothApis) {
  REQUIRE_MODEL();
  ASSERT_GT(port(), 0);
  double with = 0, without = 0;
  const json::object a = post("/v1/chat/completions", kOpenAiTools, &with);
  const json::object b = post("/v1/chat/completions", kOpenAiTools + R"(,"speculative":false)", &without);
  EXPECT_GT(with, 0);
  EXPECT_EQ(without, 0);
  EXPECT_EQ(json::serialize(a.at("choices")), json::serialize(b.at("choices")));
  EXPECT_EQ(a.at("usage").at("completion_tokens"), b.at("usage").at("completion_tokens"));

  const json::object c = post("/v1/messages", kAnthropicTools, &with);
  const json::object d = post("/v1/messages", kAnthropicTools + R"(,"speculative":false)", &without);
  EXPECT_GT(with, 0);
  EXPECT_EQ(without, 0);
  EXPECT_EQ(json::serialize(c.at("content")), json::serialize(d.at("content")));
  EXPECT_EQ(c.at("stop_reason"), d.at("stop_reason"));
  EXPECT_EQ(c.at("usage").at("output_tokens"), d.at("usage").at("output_tokens"));
}

TEST(SpeculativeToolsServer, AForcedToolCallIsDecodedPlainly) {
  REQUIRE_MODEL();
  ASSERT_GT(port(), 0);
  double drafted = 0;
  const json::object a = post("/v1/chat/completions", kOpenAiTools + R"(,"tool_choice":"required")", &drafted);
  EXPECT_EQ(drafted, 0);
  ASSERT_TRUE(a.contains("choices")) << json::serialize(a);
  EXPECT_EQ(a.at("choices").as_array().at(0).as_object().at("finish_reason"), "tool_calls");
}

}  // namespace
}  // namespace zl::test
