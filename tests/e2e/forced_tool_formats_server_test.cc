// Forced tool calls on a real model (stories260K) rendered with the chat
// templates of the block tool-call syntaxes (../shared/templates, skipped
// when absent): Mistral (Ministral 3: [TOOL_CALLS]f[ARGS]{…}), Qwen3-Coder XML
// (Qwen3.5: <function=f><parameter=p>…) and DeepSeek (V3.1). A model that
// knows nothing of tools still answers OpenAI tool_choice "required" / a
// named function with `tool_calls`, and Anthropic tool_choice any / tool with
// a `tool_use` block, whose arguments validate against the tool's schema
// (tests/support/schema_validator.h) — string enum values that read as
// numbers ("1") included, which Qwen3-Coder writes raw; tool_choice "none"
// stays text.
// stories260K spells the markers byte by byte (DeepSeek's take ~150 tokens),
// hence max_tokens 400; an answer cut by it is skipped, most must complete.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "support/http_client.h"
#include "support/json_object.h"
#include "support/real_model.h"
#include "support/schema_validator.h"

namespace zl::test {
namespace {

namespace json = boost::json;

const char* kSchema = R"({"type":"object","properties":{"city":{"type":"string"},
  "days":{"type":"integer","minimum":1,"maximum":14},"unit":{"enum":["1","2"]}},
  "required":["city","days","unit"],"additionalProperties":false})";

std::string template_file(const char* name) { return shared_dir() + "/templates/" + name + ".jinja"; }

int port(const char* name) {
  static LazyServers servers;
  return servers.real(name, {"--chat-template-file", template_file(name), "--ctx", "2048"}).port();
}

class ForcedToolFormatServerTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    REQUIRE_MODEL();
    if (!file_exists(template_file(GetParam()))) GTEST_SKIP() << "SKIPPED: " << template_file(GetParam()) << " is absent";
  }
};

TEST_P(ForcedToolFormatServerTest, OpenAiRequiredAndNamedReturnToolCalls) {
  const json::value schema = json::parse(kSchema);
  int n_calls = 0, n_tries = 0;
  for (const std::string choice : {R"("required")", R"({"type":"function","function":{"name":"forecast"}})"}) {
    for (int seed = 1; seed <= 4; ++seed) {
      ++n_tries;
      const std::string body = R"({"model":"m","temperature":1.0,"seed":)" + std::to_string(seed) +
                               R"(,"max_tokens":400,"messages":[{"role":"user","content":"Weather in Oslo?"}],)"
                               R"("tool_choice":)" + choice +
                               R"(,"tools":[{"type":"function","function":{"name":"forecast","parameters":)" + kSchema +
                               R"(}},{"type":"function","function":{"name":"noop","parameters":{"type":"object","properties":{}}}}]})";
      HttpReply r = fetch(port(GetParam()), "POST", "/v1/chat/completions", body, {}, 60000);
      ASSERT_EQ(r.status, 200) << r.body;
      const json::object o = parse_obj(r.body);
      const json::object& choice0 = o.at("choices").get_array()[0].get_object();
      const json::object& msg = choice0.at("message").get_object();
      if (choice0.at("finish_reason").get_string() == "length") continue;  // cut inside the call
      ASSERT_TRUE(msg.contains("tool_calls")) << r.body;
      EXPECT_EQ(choice0.at("finish_reason").get_string(), "tool_calls") << r.body;
      const json::array& calls = msg.at("tool_calls").get_array();
      ASSERT_EQ(calls.size(), 1u) << r.body;
      const json::object& fn = calls[0].at("function").get_object();
      const json::value args = json::parse(std::string(fn.at("arguments").get_string()));
      if (fn.at("name").get_string() == "forecast") {
        EXPECT_EQ(zl::testing::validate_schema(args, schema, schema), "") << r.body;
      } else {
        EXPECT_EQ(choice, R"("required")") << r.body;
        EXPECT_EQ(args, json::parse("{}")) << r.body;
      }
      // No markup of the syntax leaks into the text.
      if (const json::value* c = msg.if_contains("content"); c && c->is_string()) {
        EXPECT_EQ(c->get_string(), "");
      }
      ++n_calls;
    }
  }
  EXPECT_GE(n_calls, n_tries / 2) << "most forced answers end inside max_tokens";
}

TEST_P(ForcedToolFormatServerTest, AnthropicToolChoiceReturnsToolUse) {
  const json::value schema = json::parse(kSchema);
  int n_calls = 0, n_tries = 0;
  for (const std::string choice : {R"({"type":"tool","name":"forecast"})", R"({"type":"any"})"}) {
    for (int seed = 1; seed <= 4; ++seed) {
      ++n_tries;
      const std::string body =
          R"({"model":"m","temperature":1.0,"max_tokens":400,"metadata":{"user_id":"u)" + std::to_string(seed) +
          R"("},"messages":[{"role":"user","content":"Weather in Oslo?"}],"tool_choice":)" + choice +
          R"(,"tools":[{"name":"forecast","input_schema":)" + kSchema +
          R"(},{"name":"noop","input_schema":{"type":"object","properties":{}}}]})";
      HttpReply r = fetch(port(GetParam()), "POST", "/v1/messages", body, {}, 60000);
      ASSERT_EQ(r.status, 200) << r.body;
      const json::object o = parse_obj(r.body);
      const json::array& content = o.at("content").get_array();
      if (o.at("stop_reason").get_string() == "max_tokens") continue;
      ASSERT_EQ(content.size(), 1u) << r.body;
      const json::object& block = content[0].get_object();
      ASSERT_EQ(block.at("type").get_string(), "tool_use") << r.body;
      EXPECT_EQ(o.at("stop_reason").get_string(), "tool_use") << r.body;
      if (block.at("name").get_string() == "forecast") {
        EXPECT_EQ(zl::testing::validate_schema(block.at("input"), schema, schema), "") << r.body;
      } else {
        EXPECT_EQ(choice, R"({"type":"any"})") << r.body;
      }
      ++n_calls;
    }
  }
  // The Messages API has no seed: these answers are random, and a long raw
  // string can run past max_tokens; one in four completing is the floor.
  EXPECT_GE(n_calls, n_tries / 4);
}

TEST_P(ForcedToolFormatServerTest, NoneStaysText) {
  const std::string body = R"({"model":"m","temperature":0,"max_tokens":16,"tool_choice":"none",)"
                           R"("messages":[{"role":"user","content":"Weather in Oslo?"}],)"
                           R"("tools":[{"type":"function","function":{"name":"forecast","parameters":)" +
                           std::string(kSchema) + "}}]}";
  HttpReply r = fetch(port(GetParam()), "POST", "/v1/chat/completions", body, {}, 60000);
  ASSERT_EQ(r.status, 200) << r.body;
  const json::object o = parse_obj(r.body);
  const json::object& msg = o.at("choices").get_array()[0].at("message").get_object();
  EXPECT_FALSE(msg.contains("tool_calls") && !msg.at("tool_calls").is_null()) << r.body;
}

INSTANTIATE_TEST_SUITE_P(Templates, ForcedToolFormatServerTest,
                         ::testing::Values("mistralai-Ministral-3-14B-Reasoning-2512", "Qwen3.5-4B",
                                           "deepseek-ai-DeepSeek-V3.1"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           std::string n;
                           for (const char* c = i.param; *c; ++c) n += std::isalnum(static_cast<unsigned char>(*c)) ? *c : '_';
                           return n;
                         });

}  // namespace
}  // namespace zl::test
