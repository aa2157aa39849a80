// PromptCodec on the model's own tokenizer and chat template
// (src/tokenizer). Message contents are never parsed for special tokens.
//
// Mapping of the API-neutral chat onto the template's roles:
//   - leading system messages are joined into one system message;
//   - a system message later in the conversation (Claude Code sends them)
//     stays a system turn where the template has one, and becomes a user
//     turn "[system] …" where it has none (llama2, mistral, gemma);
//   - tools, tool calls and tool results: in the family's native format
//     where it has one (chatml: Hermes, llama3: Llama 3 JSON; see
//     api/tool_prompt.h), with the output parsed for calls (api/tool_calls.h);
//   - every other family keeps a generic rendering and its output is never
//     parsed: the tools array as sent is appended to the system message as
//     "Tools available (JSON): [...]" (plus "\nTool choice: <choice>" when
//     one was given), an assistant tool call is appended to the assistant
//     text as "[tool call <name>] <arguments json>", and a tool result is a
//     user turn "[tool result <id>] …";
//   - a forced call (tool_choice "any" / a named tool, ToolPlan::prefill)
//     opens the assistant turn the prompt ends with;
//   - thinking blocks of assistant turns (non-redacted, joined by "\n") are
//     the turn's reasoning, which the template renders or drops
//     (ThinkingFormat); ChatRequest::thinking.enabled is enable_thinking.
#pragma once

#include <memory>

#include "api/prompt_codec.h"
#include "api/tool_prompt.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace zl::api {

// The PromptCodec calls that need only the tokenizer (raw text, ids, pieces),
// shared by the codecs that wrap one (TokenizerCodec, JinjaCodec).
// `tokenizer` must outlive the codec; it may be null for rendering alone,
// and then these calls must not be made.
class TokenizerBackedCodec : public PromptCodec {
 public:
  explicit TokenizerBackedCodec(const Tokenizer* tokenizer) : tokenizer_(tokenizer) {}

  Result<std::vector<int32_t>> encode_text(std::string_view text) const override;
  Result<std::string> decode_prompt(std::span<const int32_t> ids) const override;
  Result<std::vector<int32_t>> encode_markup(std::string_view text) const override;
  Result<std::vector<int32_t>> encode_with(std::string_view text, bool add_special, bool parse_special) const override;
  Result<std::vector<std::string>> token_pieces(std::span<const int32_t> ids) const override;
  Result<std::vector<std::string>> token_strings(std::span<const int32_t> ids) const override;

 protected:
  const Tokenizer* tokenizer_;
};

class TokenizerCodec final : public TokenizerBackedCodec {
 public:
  // `tokenizer` must outlive the codec (it may be null for to_template_messages/render alone).
  TokenizerCodec(const Tokenizer* tokenizer, ChatTemplate chat_template)
      : TokenizerBackedCodec(tokenizer), template_(std::move(chat_template)) {}

  Result<std::vector<int32_t>> encode_chat(const ChatRequest& chat) const override;
  Result<std::string> render_text(const ChatRequest& chat) const override;
  ToolSyntax tool_syntax() const override;
  std::string template_name() const override { return template_.name(); }
  ThinkingFormat thinking_format() const override { return template_.thinking(); }
  PromptThought prompt_thought(const ChatRequest& chat) const override;

  // The template's view of `chat`, a forced call's prefill last (exposed for tests).
  std::vector<zl::ChatMessage> to_template_messages(const ChatRequest& chat) const;
  // The rendered prompt that encode_chat tokenizes.
  Result<ChatPrompt> render(const ChatRequest& chat) const;

 private:
  std::vector<zl::ChatMessage> generic_messages(const ChatRequest& chat) const;
  std::vector<zl::ChatMessage> hermes_messages(const ChatRequest& chat, const ToolPlan& plan) const;
  std::vector<zl::ChatMessage> llama3_messages(const ChatRequest& chat, const ToolPlan& plan) const;

  ChatTemplate template_;
};

}  // namespace zl::api
