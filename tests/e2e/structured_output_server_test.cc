// Structured output through the real server on the built-in demo model
// (rendered as ChatML with --chat-template chatml, so tools use the Hermes
// syntax), at temperature 1.0 over many seeds: OpenAI response_format
// answers parse and validate, Anthropic forced tool calls have an `input`
// that validates against input_schema, unsupported schema keywords are a 400
// naming them, and max_tokens that cuts an answer short says so.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "support/http_client.h"
#include "support/json_object.h"
#include "support/real_model.h"
#include "support/schema_validator.h"

namespace zl::test {
namespace {

namespace json = boost::json;

const std::string kDemo = std::string(ZL_SOURCE_DIR) + "/models/zerolayer-demo.gguf";

int port() {
  static LazyServers servers;
  return servers
      .get("chatml",
           [] {
             return std::make_unique<ServerProcess>(std::vector<std::string>{
                 "--model", kDemo, "--threads", "1", "--request-log", "false", "--chat-template", "chatml", "--ctx", "1024"});
           })
      .port();
}

const char* kSchema = R"({"type":"object","properties":{"city":{"type":"string","minLength":1,"maxLength":12},
  "days":{"type":"integer","minimum":1,"maximum":14},"unit":{"enum":["c","f"]},
  "alerts":{"type":"array","items":{"type":"string","maxLength":6},"maxItems":2}},
  "required":["city","days","unit"],"additionalProperties":false})";

TEST(StructuredOutputServerTest, OpenAiJsonSchemaAnswersValidate) {
  if (!file_exists(kDemo)) GTEST_SKIP() << "SKIPPED: " << kDemo << " not found";
  const json::value schema = json::parse(kSchema);
  int n_valid = 0;
  for (int seed = 1; seed <= 12; ++seed) {
    const std::string body = R"({"model":"m","temperature":1.0,"seed":)" + std::to_string(seed) +
                             R"(,"max_tokens":200,"messages":[{"role":"user","content":"Forecast please"}],
        "response_format":{"type":"json_schema","json_schema":{"name":"forecast","strict":true,"schema":)" +
                             kSchema + "}}}";
    HttpReply r = fetch(port(), "POST", "/v1/chat/completions", body, {}, 60000);
    ASSERT_EQ(r.status, 200) << r.body;
    const json::object o = parse_obj(r.body);
    const auto& choice = o.at("choices").get_array()[0].get_object();
    const std::string content(choice.at("message").get_object().at("content").get_string());
    const std::string finish(choice.at("finish_reason").get_string());
    if (finish == "stop") {
      EXPECT_EQ(zl::testing::parse_and_validate(content, schema), "") << content;
      ++n_valid;
    } else {
      EXPECT_EQ(finish, "length") << content;
    }
  }
  EXPECT_GT(n_valid, 6);
}

TEST(StructuredOutputServerTest, AnthropicForcedToolInputValidates) {
  if (!file_exists(kDemo)) GTEST_SKIP() << "SKIPPED: " << kDemo << " not found";
  const json::value schema = json::parse(kSchema);
  int n_calls = 0;
  for (const std::string choice : {R"({"type":"tool","name":"forecast"})", R"({"type":"any"})"}) {
    for (int seed = 1; seed <= 8; ++seed) {
      const std::string body =
          R"({"model":"m","temperature":1.0,"max_tokens":200,"metadata":{"user_id":"u)" + std::to_string(seed) +
          R"("},"messages":[{"role":"user","content":"Weather in Oslo?"}],"tool_choice":)" + choice +
          R"(,"tools":[{"name":"forecast","input_schema":)" + kSchema +
          R"(},{"name":"noop","input_schema":{"type":"object","properties":{}}}]})";
      HttpReply r = fetch(port(), "POST", "/v1/messages", body, {}, 60000);
      ASSERT_EQ(r.status, 200) << r.body;
      const json::object o = parse_obj(r.body);
      const json::array& content = o.at("content").get_array();
      ASSERT_FALSE(content.empty()) << r.body;
      const json::object& first = content[0].get_object();
      if (o.at("stop_reason").get_string() == "max_tokens" && first.at("type").get_string() == "text") continue;  // cut
      ASSERT_EQ(first.at("type").get_string(), "tool_use") << r.body;
      // The forced call is the whole answer: it ends there.
      EXPECT_EQ(o.at("stop_reason").get_string(), "tool_use") << r.body;
      EXPECT_EQ(content.size(), 1u) << r.body;
      ++n_calls;
      if (first.at("name").get_string() == "forecast") {
        EXPECT_EQ(zl::testing::validate_schema(first.at("input"), schema, schema), "") << r.body;
      } else {
        EXPECT_EQ(choice, R"({"type":"any"})");
      }
    }
  }
  EXPECT_GT(n_calls, 12);
}

TEST(StructuredOutputServerTest, UnsupportedKeywordsAre400) {
  if (!file_exists(kDemo)) GTEST_SKIP() << "SKIPPED: " << kDemo << " not found";
  HttpReply a = fetch(port(), "POST", "/v1/chat/completions",
                      R"({"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema",
                          "json_schema":{"name":"n","schema":{"type":"object","properties":{"d":{"type":"string","format":"date"}}}}}})");
  EXPECT_EQ(a.status, 400) << a.body;
  const json::object ea = parse_obj(a.body).at("error").get_object();
  EXPECT_EQ(ea.at("type").get_string(), "invalid_request_error");
  EXPECT_EQ(ea.at("code").get_string(), "unsupported_value");
  EXPECT_NE(std::string(ea.at("message").get_string()).find("'format'"), std::string::npos) << a.body;

  HttpReply b = fetch(port(), "POST", "/v1/messages",
                      R"({"model":"m","max_tokens":20,"messages":[{"role":"user","content":"x"}],
                          "tool_choice":{"type":"any"},"tools":[{"name":"f","input_schema":{"type":"object",
                          "properties":{"n":{"type":"integer","multipleOf":2}}}}]})");
  EXPECT_EQ(b.status, 400) << b.body;
  const json::object eb = parse_obj(b.body).at("error").get_object();
  EXPECT_EQ(eb.at("type").get_string(), "invalid_request_error");
  EXPECT_NE(std::string(eb.at("message").get_string()).find("'multipleOf'"), std::string::npos) << b.body;

  HttpReply c = fetch(port(), "POST", "/v1/messages",
                      R"({"model":"m","max_tokens":20,"messages":[{"role":"user","content":"x"}],
                          "output_format":{"type":"json_schema","schema":{"type":"object","minProperties":1}}})");
  EXPECT_EQ(c.status, 400) << c.body;
  EXPECT_NE(c.body.find("minProperties"), std::string::npos) << c.body;
}

TEST(StructuredOutputServerTest, MaxTokensCutIsHonest) {
  if (!file_exists(kDemo)) GTEST_SKIP() << "SKIPPED: " << kDemo << " not found";
  HttpReply r = fetch(port(), "POST", "/v1/messages",
                      std::string(R"({"model":"m","max_tokens":4,"messages":[{"role":"user","content":"x"}],
                          "output_format":{"type":"json_schema","schema":)") + kSchema + "}}");
  ASSERT_EQ(r.status, 200) << r.body;
  const json::object o = parse_obj(r.body);
  EXPECT_EQ(o.at("stop_reason").get_string(), "max_tokens");
  HttpReply j = fetch(port(), "POST", "/v1/chat/completions",
                      R"({"model":"m","max_tokens":3,"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}})");
  ASSERT_EQ(j.status, 200) << j.body;
  EXPECT_NE(j.body.find("\"finish_reason\":\"length\""), std::string::npos) << j.body;
}

}  // namespace
}  // namespace zl::test
