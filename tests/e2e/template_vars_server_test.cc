// Template variables and reasoning in history from outside, through
// `zerolayer render` and the server on the demo model with
// --chat-template-file: a gpt-oss-like template (written here) that reads a
// turn's reasoning as message.thinking, reasoning_effort and a custom
// chat_template_kwargs key; both APIs; the typed 400s. Needs ../shared.
#include <gtest/gtest.h>

#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>
#include <fstream>

#include "support/http_client.h"
#include "support/process.h"
#include "support/real_model.h"
#include "tokenizer/tokenizer.h"

namespace zl::test {
namespace {

namespace json = boost::json;

// gpt-oss's shape, shortened: the analysis message before a call comes from
// message.thinking, "Reasoning:" from reasoning_effort (default medium).
constexpr const char* kTemplate =
    "<|start|>system<|message|>Reasoning: {{ reasoning_effort if reasoning_effort is defined else 'medium' }}\n"
    "{% if persona is defined %}Persona: {{ persona.name }} x{{ persona.level }}\n{% endif %}<|end|>"
    "{%- for message in messages -%}"
    "{%- if message.role == 'assistant' and message.tool_calls -%}"
    "{%- if message.thinking %}<|start|>assistant<|channel|>analysis<|message|>{{ message.thinking }}<|end|>{% endif -%}"
    "<|start|>assistant to=functions.{{ message.tool_calls[0].function.name }}<|channel|>commentary json<|message|>"
    "{{ message.tool_calls[0].function.arguments|tojson }}<|call|>"
    "{%- elif message.role == 'tool' -%}<|start|>functions to=assistant<|channel|>commentary<|message|>{{ message.content }}<|end|>"
    "{%- else -%}<|start|>{{ message.role }}<|message|>{{ message.content }}<|end|>{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt %}<|start|>assistant{% endif %}";

constexpr const char* kAnalysis =
    "<|start|>assistant<|channel|>analysis<|message|>I should call the tool.<|end|>"
    "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\"}<|call|>";

std::string openai_body(const std::string& extra = "") {
  return R"({"model":"m","max_tokens":1,"tools":[{"type":"function","function":{"name":"get_weather",)"
         R"("parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],"messages":[)"
         R"({"role":"user","content":"Weather in Paris?"},{"role":"assistant","reasoning_content":"I should call the tool.",)"
         R"("content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather",)"
         R"("arguments":"{\"city\":\"Paris\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":"18C"}])" +
         extra + "}";
}

std::string anthropic_body(const std::string& extra = "") {
  return R"({"model":"m","max_tokens":1,"tools":[{"name":"get_weather","input_schema":{"type":"object",)"
         R"("properties":{"city":{"type":"string"}}}}],"messages":[{"role":"user","content":"Weather in Paris?"},)"
         R"({"role":"assistant","content":[{"type":"thinking","thinking":"I should call the tool.","signature":"x"},)"
         R"({"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},)"
         R"({"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"18C"}]}])" +
         extra + "}";
}

class TemplateVarsServerTest : public testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_MODEL();
    // Per process: CTest runs this file's tests side by side.
    dir_ = testing::TempDir() + "/template_vars_" + std::to_string(getpid());
    std::filesystem::create_directories(dir_);
    template_ = dir_ + "/gpt_oss_like.jinja";
    std::ofstream(template_, std::ios::binary) << kTemplate;
  }

  CommandResult render(const std::string& body, const std::string& api = "openai") {
    const std::string path = dir_ + "/body.json";
    std::ofstream(path, std::ios::binary) << body;
    return run_command(zerolayer_bin() + " render --api " + api + " --model " + model_path() +
                       " --chat-template-file " + template_ + " < " + path + " 2>&1");
  }

  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  std::string dir_;
  std::string template_;
};

TEST_F(TemplateVarsServerTest, ReasoningBeforeAToolCallIsTheAnalysisMessageOnBothApis) {
  const auto o = render(openai_body());
  const auto a = render(anthropic_body(), "anthropic");
  ASSERT_EQ(o.exit_code, 0) << o.out;
  ASSERT_EQ(a.exit_code, 0) << a.out;
  EXPECT_NE(o.out.find(kAnalysis), std::string::npos) << o.out;
  EXPECT_EQ(o.out, a.out);
}

TEST_F(TemplateVarsServerTest, ReasoningEffortAndKwargsReachTheTemplate) {
  auto reasoning_line = [&](const std::string& body, const std::string& api = "openai") {
    const auto r = render(body, api);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return r.out.substr(0, r.out.find("<|end|>"));
  };
  EXPECT_EQ(reasoning_line(openai_body()), "<|start|>system<|message|>Reasoning: medium\n");
  EXPECT_EQ(reasoning_line(openai_body(R"(,"reasoning_effort":"high")")), "<|start|>system<|message|>Reasoning: high\n");
  EXPECT_EQ(reasoning_line(openai_body(R"(,"reasoning_effort":"high","chat_template_kwargs":{"reasoning_effort":"low",)"
                                       R"("persona":{"name":"Ada","level":3}})")),
            "<|start|>system<|message|>Reasoning: low\nPersona: Ada x3\n");
  EXPECT_EQ(reasoning_line(anthropic_body(R"(,"output_config":{"effort":"low"})"), "anthropic"),
            "<|start|>system<|message|>Reasoning: low\n");
}

TEST_F(TemplateVarsServerTest, ServerPromptIsTheRenderedOneAndBadKwargsAreTyped400s) {
  ServerProcess server(real_model_args({"--chat-template-file", template_}));
  ASSERT_TRUE(server.ok());
  auto tok = Tokenizer::load(model_path());
  ASSERT_TRUE(tok.ok());
  auto post = [&](const std::string& target, const std::string& body, int want_status) {
    HttpReply r = fetch(server.port(), "POST", target, body, {}, 60000);
    EXPECT_EQ(r.status, want_status) << target << " " << body << "\n" << r.body;
    json::error_code ec;
    json::value v = json::parse(r.body, ec);
    return !ec && v.is_object() ? v.get_object() : json::object{};
  };
  // The server's prompt is exactly what `render` prints, kwargs included.
  const std::string with = openai_body(R"(,"reasoning_effort":"high","chat_template_kwargs":{"persona":{"name":"Ada","level":3}})");
  const auto rendered = render(with);
  ASSERT_EQ(rendered.exit_code, 0) << rendered.out;
  ASSERT_NE(rendered.out.find("Persona: Ada x3"), std::string::npos);
  const int64_t n_rendered =
      static_cast<int64_t>((*tok)->encode(rendered.out, {.add_special = true, .parse_special = true}).size());
  json::object answered = post("/v1/chat/completions", with, 200);
  ASSERT_TRUE(answered.contains("usage"));
  EXPECT_EQ(answered.at("usage").at("prompt_tokens").as_int64(), n_rendered);
  json::object plain = post("/v1/chat/completions", openai_body(), 200);
  ASSERT_TRUE(plain.contains("usage"));
  EXPECT_NE(plain.at("usage").at("prompt_tokens").as_int64(), n_rendered);
  // Anthropic: count_tokens and messages see output_config.effort alike.
  const std::string anth = anthropic_body(R"(,"output_config":{"effort":"high"},"chat_template_kwargs":{"persona":{"name":"Ada","level":3}})");
  json::object counted = post("/v1/messages/count_tokens", anth, 200);
  json::object messaged = post("/v1/messages", anth, 200);
  ASSERT_TRUE(counted.contains("input_tokens") && messaged.contains("usage"));
  // (the same prompt as the OpenAI one above: its prefix is cached now)
  const json::object& usage = messaged.at("usage").as_object();
  EXPECT_EQ(counted.at("input_tokens").as_int64(),
            usage.at("input_tokens").as_int64() + usage.at("cache_read_input_tokens").as_int64());
  EXPECT_EQ(counted.at("input_tokens").as_int64(), n_rendered);

  struct Bad {
    const char* extra;
    const char* param;
  };
  for (const Bad& b : {Bad{R"(,"chat_template_kwargs":[1])", "chat_template_kwargs"},
                       Bad{R"(,"chat_template_kwargs":"persona")", "chat_template_kwargs"},
                       Bad{R"(,"chat_template_kwargs":{"messages":[]})", "chat_template_kwargs.messages"},
                       Bad{R"(,"chat_template_kwargs":{"add_generation_prompt":false})", "chat_template_kwargs.add_generation_prompt"},
                       Bad{R"(,"chat_template_kwargs":{"enable_thinking":"no"})", "chat_template_kwargs.enable_thinking"}}) {
    for (const bool openai : {true, false}) {
      json::object e = post(openai ? "/v1/chat/completions" : "/v1/messages",
                            openai ? openai_body(b.extra) : anthropic_body(b.extra), 400);
      ASSERT_TRUE(e.contains("error")) << b.extra;
      EXPECT_EQ(std::string(e.at("error").at("type").as_string()), "invalid_request_error") << json::serialize(e);
      if (openai) {
        EXPECT_EQ(std::string(e.at("error").at("param").as_string()), b.param) << json::serialize(e);
      }
    }
  }
  json::object e = post("/v1/messages", anthropic_body(R"(,"output_config":{"effort":"huge"})"), 400);
  EXPECT_NE(json::serialize(e).find("output_config.effort"), std::string::npos) << json::serialize(e);
  // /v1/completions has no template: the field changes nothing there.
  post("/v1/completions", R"({"model":"m","prompt":"Once","max_tokens":1,"chat_template_kwargs":{"persona":"x"}})", 200);
}

}  // namespace
}  // namespace zl::test
