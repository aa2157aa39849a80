// Chat templates: a message list -> the prompt text a model was trained on.
//
// We do not run Jinja. The GGUF's `tokenizer.chat_template` is recognised by
// markers and rendered by one of the built-in families below (override by
// name: the server's --chat-template option). Rendering returns the prompt as
// parts: template markup (special-token text such as <|eot_id|> is honoured
// when tokenizing) and message content (never parsed for special tokens, so a
// user cannot inject an end-of-turn). Tokenize with
//   tokenizer.encode(prompt.segments(), /*add_special=*/true)
// so that the vocabulary's BOS is added: the rendered text never starts with
// a BOS of its own.
//
// Formats (S system, U user, A assistant; "\n" is a newline; [gen] is what
// add_generation_prompt appends; a prefill is a final assistant message
// rendered open, with continue_final_message):
//   llama2   [INST] <<SYS>>\nS\n<</SYS>>\n\nU [/INST] A </s><s>[INST] U [/INST]
//            contents trimmed; [gen] = nothing; prefill " A"
//   llama3   <|start_header_id|>R<|end_header_id|>\n\nC<|eot_id|> per message,
//            contents trimmed; [gen] = <|start_header_id|>assistant<|end_header_id|>\n\n;
//            role "ipython" (tool results) too
//   chatml   <|im_start|>R\nC<|im_end|>\n per message; [gen] = <|im_start|>assistant\n
//            (Qwen, SmolLM; no default system message is inserted)
//   mistral  [INST] S\n\nU [/INST]A</s>[INST] U [/INST]   (v0.1; [gen] = nothing)
//   phi3     <|R|>\nC<|end|>\n per message; [gen] = <|assistant|>\n
//   gemma    <start_of_turn>user\nS\n\nU<end_of_turn>\n<start_of_turn>model\nA<end_of_turn>\n
//            contents trimmed, assistant is "model"; [gen] = <start_of_turn>model\n
//   zephyr   <|R|>\nC</s>\n per message; [gen] = <|assistant|>\n
//   plain    (no or unrecognised template) "System: S\n\nUser: U\n\nAssistant: A\n\n";
//            [gen] = "Assistant:"; prefill "Assistant: A"
// llama2, mistral and gemma have no system turn: a leading system message is
// folded into the first user message; a system message elsewhere is an error.
// <s>/</s> above are the vocabulary's BOS/EOS texts when built for_vocab().
//
// Immutable; render() is thread-safe.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/tokenizer.h"

namespace zl {

enum class ChatTemplateKind { kPlain, kLlama2, kLlama3, kChatml, kMistral, kPhi3, kGemma, kZephyr };

// "plain", "llama2", "llama3", "chatml", "mistral", "phi3", "gemma", "zephyr".
const char* chat_template_name(ChatTemplateKind kind);
// Accepts the names above plus aliases (qwen, qwen2, smollm -> chatml; llama-2,
// llama-3 ...). InvalidArgument for anything else, listing the names.
Result<ChatTemplateKind> chat_template_from_name(std::string_view name);
// Recognises a Jinja template by its markers; kPlain if empty or unknown.
ChatTemplateKind detect_chat_template(std::string_view jinja);

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant" (llama3: also "ipython")
  std::string content;
  // Rendered as it is, where the family trims contents: text the caller has
  // already put in the family's own shape (tool prompts, tool results).
  bool verbatim = false;
};

struct ChatRenderOptions {
  bool add_generation_prompt = true;    // open an assistant turn at the end
  bool continue_final_message = false;  // last message is an assistant prefill: leave it open
};

struct ChatPrompt {
  struct Part {
    std::string text;
    bool is_markup;  // true: template text (special tokens honoured); false: message content
  };
  std::vector<Part> parts;

  std::string text() const;  // all parts concatenated
  // Views into `parts` for Tokenizer::encode (valid while this object lives).
  std::vector<TextSegment> segments() const;
};

class ChatTemplate {
 public:
  explicit ChatTemplate(ChatTemplateKind kind, std::string bos_text = "<s>", std::string eos_text = "</s>")
      : kind_(kind), bos_text_(std::move(bos_text)), eos_text_(std::move(eos_text)) {}
  // The template of a vocabulary: detected from its tokenizer.chat_template
  // (or `override_name` if non-empty), with its BOS/EOS texts.
  static Result<ChatTemplate> for_vocab(const Vocab& vocab, std::string_view override_name = {});

  ChatTemplateKind kind() const { return kind_; }
  const char* name() const { return chat_template_name(kind_); }

  // InvalidArgument for an empty list, an unknown role, a misplaced system
  // message (families without a system turn), or continue_final_message
  // without a final assistant message.
  Result<ChatPrompt> render(std::span<const ChatMessage> messages, const ChatRenderOptions& opts = {}) const;

 private:
  ChatTemplateKind kind_;
  std::string bos_text_;
  std::string eos_text_;
};

}  // namespace zl
