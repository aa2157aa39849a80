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
//   deepseek {S}<｜User｜>U<｜Assistant｜>A<｜end▁of▁sentence｜> (DeepSeek-R1 and its
//            distills; every system text at the start, in order); [gen] = <｜Assistant｜>
// llama2, mistral and gemma have no system turn: a leading system message is
// folded into the first user message; a system message elsewhere is an error.
// <s>/</s> above are the vocabulary's BOS/EOS texts when built for_vocab().
//
// Immutable; render() is thread-safe.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/tokenizer.h"

namespace zl {

enum class ChatTemplateKind { kPlain, kLlama2, kLlama3, kChatml, kMistral, kPhi3, kGemma, kZephyr, kDeepseek };

// "plain", "llama2", "llama3", "chatml", "mistral", "phi3", "gemma", "zephyr", "deepseek".
const char* chat_template_name(ChatTemplateKind kind);
// Accepts the names above plus aliases (qwen, qwen2, smollm -> chatml; llama-2,
// llama-3 ...; the reasoning templates qwen3, qwen3.5, qwq -> chatml and
// deepseek-r1 -> deepseek, see thinking_format_for_name). InvalidArgument
// for anything else, listing the names.
Result<ChatTemplateKind> chat_template_from_name(std::string_view name);
// Recognises a Jinja template by its markers; kPlain if empty or unknown.
ChatTemplateKind detect_chat_template(std::string_view jinja);

// How a reasoning model's template writes its thought (<think>…</think>).
// Detected from the Jinja source, or set by a reasoning template's name.
//   gen_on   what the generation prompt adds while thinking is on: "<think>\n"
//            (QwQ, Qwen3.5, DeepSeek-R1: the model starts inside its
//            thought) or "" (Qwen3: the model opens it itself)
//   gen_off  what it adds with enable_thinking=false: Qwen3's empty thought
//            "<think>\n\n</think>\n\n"; "" where the template has no switch
//   keeps_recent  history: the reasoning of assistant turns after the last
//            user query is rendered "<think>\nR\n</think>\n\nC" (Qwen3,
//            Qwen3.5); earlier turns' reasoning, and every turn's where
//            false (QwQ, R1: they strip it), is dropped
//   recent_needs_reasoning  Qwen3 (not 3.5): a turn after the last query
//            without reasoning, other than the last message, is rendered
//            without the (empty) thought
struct ThinkingFormat {
  bool enabled = false;  // the template has thinking markers at all
  std::string gen_on;
  std::string gen_off;
  bool keeps_recent = false;
  bool recent_needs_reasoning = false;
  static constexpr std::string_view kOpen = "<think>";
  static constexpr std::string_view kClose = "</think>";
};
// Where the generation prompt leaves the model's thought: not opened
// (kNone), opened so that the output starts inside it (kOpen), or opened
// and closed already, empty (kClosed: thinking switched off by a template
// such as Qwen3's; the output is the answer from its first token).
enum class PromptThought { kNone, kOpen, kClosed };

// From a Jinja template's source (its markers and literals).
ThinkingFormat detect_thinking_format(ChatTemplateKind kind, std::string_view jinja);
// For a template name: qwen3, qwen3.5, qwq, deepseek-r1; none for the others.
ThinkingFormat thinking_format_for_name(std::string_view name);

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant" (llama3: also "ipython")
  std::string content;
  // Assistant turns: the reasoning, rendered as ThinkingFormat says (never
  // when the template has none).
  std::string reasoning;
  // Rendered as it is, where the family trims contents: text the caller has
  // already put in the family's own shape (tool prompts, tool results).
  bool verbatim = false;
};

struct ChatRenderOptions {
  bool add_generation_prompt = true;    // open an assistant turn at the end
  bool continue_final_message = false;  // last message is an assistant prefill: leave it open
  // Thinking templates (ThinkingFormat): false renders gen_off where there
  // is one; nullopt/true gen_on.
  std::optional<bool> enable_thinking;
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
  explicit ChatTemplate(ChatTemplateKind kind, std::string bos_text = "<s>", std::string eos_text = "</s>",
                        ThinkingFormat thinking = {})
      : kind_(kind), bos_text_(std::move(bos_text)), eos_text_(std::move(eos_text)), thinking_(std::move(thinking)) {}
  // The template of a vocabulary: detected from its tokenizer.chat_template
  // (or `override_name` if non-empty), with its BOS/EOS texts.
  static Result<ChatTemplate> for_vocab(const Vocab& vocab, std::string_view override_name = {});

  ChatTemplateKind kind() const { return kind_; }
  const char* name() const { return chat_template_name(kind_); }
  const ThinkingFormat& thinking() const { return thinking_; }
  // Where the generation prompt leaves the thought: kOpen when thinking is
  // on and gen_on holds the open marker, kClosed when it is off and gen_off
  // holds the close marker.
  PromptThought prompt_thought(const ChatRenderOptions& opts) const;

  // InvalidArgument for an empty list, an unknown role, a misplaced system
  // message (families without a system turn), or continue_final_message
  // without a final assistant message.
  Result<ChatPrompt> render(std::span<const ChatMessage> messages, const ChatRenderOptions& opts = {}) const;

 private:
  ChatTemplateKind kind_;
  std::string bos_text_;
  std::string eos_text_;
  ThinkingFormat thinking_;
};

}  // namespace zl
