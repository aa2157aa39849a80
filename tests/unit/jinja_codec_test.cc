// JinjaCodec (api/jinja_codec.h): a request through a Jinja chat template —
// the context, the BOS text dropped, an Anthropic prefill continued, a
// forced tool call's prefill, arguments as objects or text, and message
// text kept apart from markup.
#include <gtest/gtest.h>

#include "api/anthropic/messages.h"
#include "api/jinja_codec.h"
#include "api/openai/chat_completions.h"

namespace zl::api {
namespace {

constexpr const char* kChatml =
    "{{ bos_token }}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}"
    "{% for c in m.tool_calls %}<tool_call>\n{\"name\": \"{{ c.function.name }}\", \"arguments\": "
    "{{ c.function.arguments|tojson }}}\n</tool_call>{% endfor %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

JinjaCodec codec(const char* source) {
  auto t = tmpl::Template::parse(source, "t.jinja");
  EXPECT_TRUE(t.ok()) << t.status().message();
  return JinjaCodec(nullptr, std::move(*t), "t.jinja");
}

ChatRequest openai(const std::string& body) {
  auto r = openai::parse_chat_request(body);
  EXPECT_TRUE(r.ok()) << r.error().message;
  return r.value();
}

TEST(JinjaCodec, RendersTheTemplateWithoutTheLeadingBos) {
  auto r = codec(kChatml).render_text(openai(R"({"model":"m","messages":[{"role":"user","content":"Hi"}]})"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(JinjaCodec, AnthropicPrefillIsContinued) {
  auto chat = anthropic::parse_messages_request(
      R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Once upon"}]})");
  ASSERT_TRUE(chat.ok());
  auto r = codec(kChatml).render_text(chat.value());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nOnce upon");
}

TEST(JinjaCodec, ForcedToolCallOpensTheCall) {
  const JinjaCodec c = codec(kChatml);
  EXPECT_EQ(c.tool_syntax(), ToolSyntax::kHermes);
  auto r = c.render_text(openai(
      R"({"model":"m","messages":[{"role":"user","content":"Hi"}],"tool_choice":{"type":"function","function":{"name":"f"}},)"
      R"("tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]})"));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->ends_with("<|im_start|>assistant\n<tool_call>\n{\"name\": \"f\", \"arguments\":")) << *r;
}

// enable_thinking when the request does not say: on where the switch shows
// in the generation prompt (Qwen3's empty thought), off where it only
// changes earlier text (Apertus's "Deliberation:" line), as llama.cpp.
TEST(JinjaCodec, ThinkingDefaultFollowsWhereTheTemplateShowsIt) {
  const char* tail =
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
      "<|im_start|>assistant\n{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}";
  const char* system =
      "<|developer|>Deliberation: {% if enable_thinking is defined and enable_thinking %}enabled{% else %}disabled{% endif %}"
      "{% for m in messages %}<|user|>{{ m.content }}{% endfor %}<|assistant|>";
  const std::string plain = R"({"model":"m","messages":[{"role":"user","content":"Hi"}]})";
  const std::string on =
      R"({"model":"m","messages":[{"role":"user","content":"Hi"}],"chat_template_kwargs":{"enable_thinking":true}})";
  const std::string off =
      R"({"model":"m","messages":[{"role":"user","content":"Hi"}],"chat_template_kwargs":{"enable_thinking":false}})";
  EXPECT_EQ(*codec(tail).render_text(openai(plain)), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(*codec(tail).render_text(openai(off)), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  // Where the prompt leaves the thought: closed already (the answer comes
  // next, a response format applies from its first token), or not opened.
  EXPECT_EQ(codec(tail).prompt_thought(openai(off)), PromptThought::kClosed);
  EXPECT_EQ(codec(tail).prompt_thought(openai(plain)), PromptThought::kNone);
  const char* opens =
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
      "<|im_start|>assistant\n<think>\n{% if enable_thinking is defined and enable_thinking is false %}\n</think>\n\n{% endif %}";
  EXPECT_EQ(codec(opens).prompt_thought(openai(plain)), PromptThought::kOpen);
  EXPECT_EQ(codec(opens).prompt_thought(openai(off)), PromptThought::kClosed);
  EXPECT_EQ(*codec(system).render_text(openai(plain)), "<|developer|>Deliberation: disabled<|user|>Hi<|assistant|>");
  EXPECT_EQ(*codec(system).render_text(openai(on)), "<|developer|>Deliberation: enabled<|user|>Hi<|assistant|>");
}

TEST(JinjaCodec, ArgumentsAreObjectsUnlessTheTemplateNeedsText) {
  const std::string body =
      R"({"model":"m","messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"","tool_calls":)"
      R"([{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\": [1, 2]}"}}]},)"
      R"({"role":"tool","tool_call_id":"c1","content":"ok"}]})";
  auto objects = codec(kChatml).render_text(openai(body));
  ASSERT_TRUE(objects.ok());
  EXPECT_NE(objects->find(R"("arguments": {"a": [1, 2]}})"), std::string::npos) << *objects;
  // Functionary-style concatenation: only text works, so text it gets.
  auto text = codec("{% for m in messages %}{% for c in m.tool_calls %}{{ '>>>' + c.function.name + '\\n' + "
                    "c.function.arguments }}{% endfor %}{% endfor %}")
                  .render_text(openai(body));
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_EQ(*text, ">>>f\n{\"a\": [1, 2]}");
}

TEST(JinjaCodec, MessageTextIsNotMarkup) {
  auto r = codec(kChatml).render(openai(R"({"model":"m","messages":[{"role":"user","content":"<|im_end|>x"}]})"));
  ASSERT_TRUE(r.ok());
  bool found = false;
  for (const auto& p : r->parts) {
    if (p.text == "<|im_end|>x") found = p.from_input;
  }
  EXPECT_TRUE(found);
}

TEST(JinjaCodec, RaiseExceptionIsAnInvalidPrompt) {
  auto r = codec("{{ raise_exception('no system role') }}")
               .render_text(openai(R"({"model":"m","messages":[{"role":"user","content":"x"}]})"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().reason(), ErrorReason::kInvalidPrompt);
  EXPECT_EQ(r.status().message(), "no system role");
}

}  // namespace
}  // namespace zl::api
