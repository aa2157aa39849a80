// What the API layer needs of the tokenizer: the prompt of a chat (through
// the model's chat template) as token ids, and raw text as token ids. The
// real implementation wraps src/tokenizer (api/tokenizer_codec.h); tests use
// a byte-level one (tests/support/).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "api/chat.h"
#include "api/tool_calls.h"
#include "core/status.h"
#include "tokenizer/chat_template.h"  // ThinkingFormat

namespace zl::api {

class PromptCodec {
 public:
  virtual ~PromptCodec() = default;
  // The whole prompt of `chat` (BOS as the model wants; special-token text in
  // message contents is not honoured). When chat.continue_final_message the
  // prompt ends inside the last (assistant) turn. Thread-safe.
  virtual Result<std::vector<int32_t>> encode_chat(const ChatRequest& chat) const = 0;
  // The prompt text encode_chat tokenizes (no BOS: the tokenizer adds it as
  // the vocabulary says). Thread-safe.
  virtual Result<std::string> render_text(const ChatRequest& chat) const {
    return unsupported("this codec cannot show its prompt as text");
  }
  // Raw text as a prompt (BOS as the model wants). Thread-safe.
  virtual Result<std::vector<int32_t>> encode_text(std::string_view text) const = 0;
  // A prompt sent as token ids, as text (special tokens rendered): what the guard screens and
  // echo returns. An id outside the vocabulary is an InvalidArgument naming it. Thread-safe.
  virtual Result<std::string> decode_prompt(std::span<const int32_t> ids) const {
    return unsupported("this codec cannot decode token ids");
  }
  // Text as token ids with the caller's choice of BOS/EOS (add_special, as
  // the vocabulary says) and of special-token text (parse_special: it
  // becomes the control token), for /tokenize. Thread-safe.
  virtual Result<std::vector<int32_t>> encode_with(std::string_view text, bool add_special, bool parse_special) const {
    return unsupported("this codec cannot tokenize text with options");
  }
  // Per id: its bytes as the output would show them (special tokens
  // rendered), and its string in the vocabulary. An id outside the
  // vocabulary is an InvalidArgument naming its index. Thread-safe.
  virtual Result<std::vector<std::string>> token_pieces(std::span<const int32_t> ids) const {
    return unsupported("this codec cannot show token pieces");
  }
  virtual Result<std::vector<std::string>> token_strings(std::span<const int32_t> ids) const {
    return unsupported("this codec cannot show token strings");
  }
  // The tool-call syntax of the model's chat format: how encode_chat renders
  // tools (with plan_tools(), api/tool_prompt.h) and how the output is
  // parsed. kNone: tools are rendered generically and never parsed.
  virtual ToolSyntax tool_syntax() const { return ToolSyntax::kNone; }
  // The chat template's name (validate mode reports it); "" when unknown.
  virtual std::string template_name() const { return {}; }
  // Reasoning models (api/thinking.h): how the template writes a thought
  // (ThinkingFormat{}: it does not), where the prompt of `chat` leaves
  // one (opened, or closed already), and template markup as token ids (special-token text honoured, no
  // BOS: what the engine forces at a thinking budget). Thread-safe.
  virtual ThinkingFormat thinking_format() const { return {}; }
  virtual PromptThought prompt_thought(const ChatRequest& chat) const { return PromptThought::kNone; }
  virtual Result<std::vector<int32_t>> encode_markup(std::string_view text) const {
    return unsupported("this codec cannot encode template markup");
  }
};

}  // namespace zl::api
