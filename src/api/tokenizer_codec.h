// PromptCodec on the model's own tokenizer and chat template
// (src/tokenizer). Message contents are never parsed for special tokens.
//
// Mapping of the API-neutral chat onto the template's roles:
//   - leading system messages are joined into one system message;
//   - a system message later in the conversation (Claude Code sends them)
//     stays a system turn where the template has one, and becomes a user
//     turn "[system] …" where it has none (llama2, mistral, gemma);
//   - a tool result becomes a user turn "[tool result <id>] …"; assistant
//     tool calls are appended to the assistant text as
//     "[tool call <name>] <arguments json>" (a template family with real tool
//     syntax can replace this later);
//   - tools are listed in the system message when given.
#pragma once

#include <memory>

#include "api/prompt_codec.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace zl::api {

class TokenizerCodec final : public PromptCodec {
 public:
  // `tokenizer` must outlive the codec.
  TokenizerCodec(const Tokenizer* tokenizer, ChatTemplate chat_template)
      : tokenizer_(tokenizer), template_(std::move(chat_template)) {}

  Result<std::vector<int32_t>> encode_chat(const ChatRequest& chat) const override;
  Result<std::vector<int32_t>> encode_text(std::string_view text) const override;

  // The template's view of `chat` (exposed for tests).
  std::vector<zl::ChatMessage> to_template_messages(const ChatRequest& chat) const;

 private:
  const Tokenizer* tokenizer_;
  ChatTemplate template_;
};

}  // namespace zl::api
