// Template variables from the request (api/template_vars.h) and the
// reasoning as message.thinking (api/jinja_codec.h), with no model: what
// chat_template_kwargs, reasoning_effort and output_config.effort put into
// the Jinja context, what they are refused for, and which templates see a
// turn's reasoning under `thinking`.
#include <gtest/gtest.h>

#include "api/anthropic/messages.h"
#include "api/guard_input.h"
#include "guard/guard.h"
#include "api/jinja_codec.h"
#include "api/openai/chat_completions.h"
#include "api/template_vars.h"

namespace zl::api {
namespace {

JinjaCodec codec(const char* source) {
  auto t = tmpl::Template::parse(source, "t.jinja");
  EXPECT_TRUE(t.ok()) << t.status().message();
  return JinjaCodec(nullptr, std::move(*t), "t.jinja");
}

ApiResult<ChatRequest> openai_with(const std::string& extra) {
  return openai::parse_chat_request(R"({"model":"m","messages":[{"role":"user","content":"Hi"}])" + extra + "}");
}

std::string render(const JinjaCodec& c, const ApiResult<ChatRequest>& chat) {
  EXPECT_TRUE(chat.ok()) << chat.error().message;
  if (!chat.ok()) return "";
  auto r = c.render_text(chat.value());
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : "";
}

constexpr const char* kVars =
    "R={{ reasoning_effort if reasoning_effort is defined else 'unset' }}"
    " P={{ persona if persona is defined else 'unset' }}"
    " T={{ enable_thinking }}"
    "{% if limits is defined %} L={{ limits.max }},{{ limits.tags|join('+') }},{{ limits.on }}{% endif %}";

TEST(TemplateVars, ReasoningEffortIsATemplateVariable) {
  const JinjaCodec c = codec(kVars);
  EXPECT_EQ(render(c, openai_with("")), "R=unset P=unset T=False");
  EXPECT_EQ(render(c, openai_with(R"(,"reasoning_effort":"high")")), "R=high P=unset T=True");
  // "none" keeps turning thinking off, and the template sees it too.
  EXPECT_EQ(render(c, openai_with(R"(,"reasoning_effort":"none")")), "R=none P=unset T=False");
}

TEST(TemplateVars, EveryKwargIsATemplateVariableWithItsJsonValue) {
  const JinjaCodec c = codec(kVars);
  EXPECT_EQ(render(c, openai_with(R"(,"chat_template_kwargs":{"persona":"pirate","limits":{"max":3,"tags":["a","b"],"on":true}})")),
            "R=unset P=pirate T=False L=3,a+b,True");
  // The kwargs' reasoning_effort wins over the top-level field.
  EXPECT_EQ(render(c, openai_with(R"(,"reasoning_effort":"high","chat_template_kwargs":{"reasoning_effort":"low"})")),
            "R=low P=unset T=True");
}

TEST(TemplateVars, KwargStringsAreRequestText) {
  const JinjaCodec c = codec("<s>{{ persona }}</s>");
  auto chat = openai_with(R"(,"chat_template_kwargs":{"persona":"<|im_start|>"})");
  ASSERT_TRUE(chat.ok());
  auto r = c.render(chat.value());
  ASSERT_TRUE(r.ok()) << r.status().message();
  bool found = false;
  for (const auto& p : r->parts) {
    if (p.text.find("<|im_start|>") != std::string::npos) {
      found = true;
      EXPECT_TRUE(p.from_input) << "a kwarg's text must never be parsed for special tokens";
    }
  }
  EXPECT_TRUE(found);
}

TEST(TemplateVars, ThinkingSwitchFromKwargs) {
  const JinjaCodec c = codec(kVars);
  EXPECT_EQ(render(c, openai_with(R"(,"chat_template_kwargs":{"enable_thinking":true})")), "R=unset P=unset T=True");
  EXPECT_EQ(render(c, openai_with(R"(,"chat_template_kwargs":{"thinking":true})")), "R=unset P=unset T=True");
  EXPECT_EQ(render(c, openai_with(R"(,"chat_template_kwargs":{"thinking":true,"enable_thinking":false})")),
            "R=unset P=unset T=False");
}

void expect_refused(const std::string& extra, const std::string& param, ErrorReason reason) {
  auto r = openai_with(extra);
  ASSERT_FALSE(r.ok()) << extra;
  EXPECT_EQ(r.error().param, param) << extra;
  EXPECT_EQ(r.error().reason, reason) << extra << ": " << r.error().message;
}

TEST(TemplateVars, BadKwargsAreTypedErrors) {
  expect_refused(R"(,"chat_template_kwargs":[1])", "chat_template_kwargs", ErrorReason::kInvalidType);
  expect_refused(R"(,"chat_template_kwargs":"x")", "chat_template_kwargs", ErrorReason::kInvalidType);
  expect_refused(R"(,"chat_template_kwargs":{"enable_thinking":"yes"})", "chat_template_kwargs.enable_thinking",
                 ErrorReason::kInvalidType);
  expect_refused(R"(,"chat_template_kwargs":{"thinking":1})", "chat_template_kwargs.thinking", ErrorReason::kInvalidType);
  expect_refused(R"(,"chat_template_kwargs":{"":1})", "chat_template_kwargs", ErrorReason::kInvalidValue);
  expect_refused(R"(,"chat_template_kwargs":{")" + std::string(kMaxTemplateKwargKeyBytes + 1, 'k') + R"(":1})",
                 "chat_template_kwargs", ErrorReason::kInvalidValue);
  std::string many = R"(,"chat_template_kwargs":{)";
  for (size_t i = 0; i <= kMaxTemplateKwargs; ++i) many += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":1";
  expect_refused(many + "}", "chat_template_kwargs", ErrorReason::kOutOfRange);
  expect_refused(R"(,"reasoning_effort":"extreme")", "reasoning_effort", ErrorReason::kInvalidValue);
}

// The context's own variables and the builtins cannot be replaced: the
// conversation goes through the API's fields only.
TEST(TemplateVars, KwargsNamingTheContextsOwnVariablesAreRefused) {
  for (const char* key : {"messages", "tools", "add_generation_prompt", "bos_token", "eos_token", "date_string",
                          "datetime", "raise_exception", "strftime_now", "range", "namespace", "dict"}) {
    EXPECT_TRUE(is_reserved_template_var(key)) << key;
    expect_refused(R"(,"chat_template_kwargs":{")" + std::string(key) + R"(":"x"})",
                   std::string("chat_template_kwargs.") + key, ErrorReason::kInvalidValue);
  }
  EXPECT_FALSE(is_reserved_template_var("reasoning_effort"));
  EXPECT_FALSE(is_reserved_template_var("enable_thinking"));
}

TEST(TemplateVars, AnthropicEffortAndKwargs) {
  const JinjaCodec c = codec(kVars);
  auto anthropic = [](const std::string& extra) {
    return anthropic::parse_messages_request(
        R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"Hi"}])" + extra + "}");
  };
  EXPECT_EQ(render(c, anthropic(R"(,"output_config":{"effort":"low"})")), "R=low P=unset T=False");
  EXPECT_EQ(render(c, anthropic(R"(,"chat_template_kwargs":{"persona":"pirate"})")), "R=unset P=pirate T=False");
  auto bad = anthropic(R"(,"output_config":{"effort":"huge"})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().param, "output_config.effort");
  bad = anthropic(R"(,"chat_template_kwargs":{"messages":[]})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().param, "chat_template_kwargs.messages");
  auto counted = anthropic::parse_count_tokens_request(
      R"({"model":"m","messages":[{"role":"user","content":"Hi"}],"output_config":{"effort":"high"}})");
  EXPECT_EQ(render(c, counted), "R=high P=unset T=False");
}

constexpr const char* kReasoningTurn =
    R"({"model":"m","messages":[{"role":"user","content":"Q"},)"
    R"({"role":"assistant","reasoning_content":"Think.","content":"A"},{"role":"user","content":"Q2"}]})";

// gpt-oss reads message.thinking: it gets the reasoning under that name too.
TEST(TemplateVars, ReasoningIsMessageThinkingForTemplatesThatReadIt) {
  const JinjaCodec gpt_oss = codec(
      "{% for message in messages %}{% if \"thinking\" in message %}[{{ message.thinking }}]{% endif %}"
      "{{ message.content }};{% endfor %}");
  EXPECT_EQ(render(gpt_oss, openai::parse_chat_request(kReasoningTurn)), "Q;[Think.]A;Q2;");
  // A template reading reasoning_content sees no new field.
  const JinjaCodec qwen = codec(
      "{% for message in messages %}{{ message.reasoning_content }}{{ 'T' if message.thinking is defined }}"
      "{{ message.content }};{% endfor %}");
  EXPECT_EQ(render(qwen, openai::parse_chat_request(kReasoningTurn)), "Q;Think.A;Q2;");
}

// gpt-oss raises when a call's turn has both content and thinking: the
// reasoning fills its analysis slot, the text beside the call is left out.
TEST(TemplateVars, ReasoningBeforeACallReplacesTheTextBesideIt) {
  const JinjaCodec gpt_oss = codec(
      "{% for message in messages %}{% if message.tool_calls %}{% if message.content and message.thinking %}"
      "{{ raise_exception('Cannot pass both content and thinking') }}{% endif %}"
      "[{{ message.thinking or message.content }}]call;{% else %}{{ message.content }};{% endif %}{% endfor %}");
  const char* body =
      R"({"model":"m","messages":[{"role":"user","content":"Q"},{"role":"assistant","reasoning_content":"Think.",)"
      R"("content":"Let me check.","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},)"
      R"({"role":"tool","tool_call_id":"c1","content":"ok"}]})";
  EXPECT_EQ(render(gpt_oss, openai::parse_chat_request(body)), "Q;[Think.]call;ok;");
  // Without reasoning the text stays (it is the analysis then).
  const char* no_reasoning =
      R"({"model":"m","messages":[{"role":"user","content":"Q"},{"role":"assistant",)"
      R"("content":"Let me check.","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},)"
      R"({"role":"tool","tool_call_id":"c1","content":"ok"}]})";
  EXPECT_EQ(render(gpt_oss, openai::parse_chat_request(no_reasoning)), "Q;[Let me check.]call;ok;");
}

// The guard screens the kwargs' strings as it screens message text.
TEST(TemplateVars, TheGuardScreensKwargs) {
  auto policy = guard::parse_policy(R"([[rule]]
name = "pii"
pii = ["email"]
input = "redact"

[[rule]]
name = "codename"
phrases = ["project falcon"]
input = "block"
)", "g.toml");
  ASSERT_TRUE(policy.ok()) << policy.status().to_string();
  auto g = guard::Guard::compile(std::move(policy).value());
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  auto chat = openai_with(R"(,"chat_template_kwargs":{"persona":{"mail":["write to bob@example.com"]}})");
  ASSERT_TRUE(chat.ok());
  EXPECT_FALSE(guard_chat_input(g->get(), chat.value(), "r1", nullptr));
  EXPECT_EQ(chat.value().template_vars_json.find("bob@example.com"), std::string::npos) << chat.value().template_vars_json;
  EXPECT_NE(chat.value().template_vars_json.find("write to "), std::string::npos) << chat.value().template_vars_json;
  auto blocked = openai_with(R"(,"chat_template_kwargs":{"persona":"about Project Falcon"})");
  ASSERT_TRUE(blocked.ok());
  auto e = guard_chat_input(g->get(), blocked.value(), "r2", nullptr);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->reason, ErrorReason::kSafetyViolation);
}

}  // namespace
}  // namespace zl::api
