// PromptCodec on the model's own Jinja chat template (template/jinja.h):
// what llama-server --jinja, vLLM and transformers' apply_chat_template do.
//
// The request (either API: both parse into the same ChatRequest, so an
// Anthropic request renders exactly as the equivalent OpenAI one) becomes
// the context Hugging Face passes to the template:
//   messages   [{role, content, tool_calls?, tool_call_id?, reasoning_content?,
//              thinking?}] (`thinking`: the same reasoning, for templates
//              that read message.thinking and not reasoning_content: gpt-oss)
//              in order, as sent; a tool call is {id, type: "function",
//              function: {name, arguments}} with `arguments` the parsed JSON
//              object (a string when it is not JSON), or the JSON text for
//              templates that only render text (probed once at load)
//   tools      the tools as sent ({type: "function", function: {…}}); absent
//              when the request has none
//   add_generation_prompt  true, unless the last message is a prefill (or the
//                          request says false: /tokenize)
//   bos_token, eos_token   the vocabulary's texts
//   enable_thinking, thinking  as the request says (Anthropic thinking,
//              chat_template_kwargs.enable_thinking, reasoning_effort
//              "none"); otherwise true for templates whose generation prompt
//              shows the switch (an opened or empty thought after the last
//              user turn) and false for the others (Apertus), as llama.cpp
//              decides it (probed once at load)
//   date_string ("01 Dec 2026"), datetime ("Dec 01 2026")  today, as
//              llama.cpp passes them to Llama 3.x and Firefunction
//   reasoning_effort, and every key of chat_template_kwargs  as the request
//              sets them (api/template_vars.h); absent otherwise
// A forced tool call (tool_choice any / a named tool) is the ToolPlan's
// prefill, appended after the generation prompt (a thought the generation
// prompt opens, "<think>", is closed first: the call is the answer); a prefill of the client's
// own (continue_final_message) is rendered as the last assistant message
// and the prompt is cut after its content.
// A leading BOS text in the output is dropped (the tokenizer adds BOS as
// the vocabulary says); text from the request is never parsed for special
// tokens (template/value.h's from_input).
//
// Immutable; thread-safe.
#pragma once

#include "api/prompt_codec.h"
#include "api/tokenizer_codec.h"
#include "template/jinja.h"
#include "tokenizer/tokenizer.h"

namespace zl::api {

// Which tool-call syntax a Jinja template's models write (from the markers
// in its text; README "Tool formats"): Mistral [TOOL_CALLS], Llama 3.x
// pythonic, Qwen3-Coder XML, gpt-oss harmony, DeepSeek, Granite 3
// <|tool_call|>, Phi functools, Hermes JSON in <tool_call>, Llama 3 JSON;
// kNone for every other format (their calls stay text).
ToolSyntax detect_tool_syntax(std::string_view jinja);

class JinjaCodec final : public TokenizerBackedCodec {
 public:
  // `tokenizer` must outlive the codec (null: render() alone, BOS/EOS "<s>"/"</s>").
  JinjaCodec(const Tokenizer* tokenizer, tmpl::Template jinja, std::string name);

  Result<std::vector<int32_t>> encode_chat(const ChatRequest& chat) const override;
  Result<std::string> render_text(const ChatRequest& chat) const override;
  ToolSyntax tool_syntax() const override { return syntax_; }
  std::string template_name() const override { return name_; }
  ThinkingFormat thinking_format() const override { return thinking_; }
  PromptThought prompt_thought(const ChatRequest& chat) const override;

  // The prompt encode_chat tokenizes, in parts (request text / markup).
  Result<tmpl::Rendered> render(const ChatRequest& chat) const;
  // The template context of `chat` (exposed for tests).
  tmpl::Value context(const ChatRequest& chat) const;

 private:
  // `text` from the request with its control-token texts fenced (jinja_codec.cc).
  std::string fence_request_text(std::string_view text) const;
  bool probe_object_arguments();
  bool probe_thinking_default();

  tmpl::Template jinja_;
  std::string name_;
  std::string bos_text_;
  std::string eos_text_;
  ToolSyntax syntax_;
  ThinkingFormat thinking_;
  bool object_arguments_ = true;  // tool-call arguments as objects (else their JSON text)
  bool thinking_default_ = true;  // enable_thinking when the request does not say
  bool thinking_field_ = false;   // messages carry their reasoning as `thinking` too (gpt-oss)
};

}  // namespace zl::api
