#include "tokenizer/chat_template.h"

namespace zl {
namespace {

std::string_view trim(std::string_view s) {
  auto space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

// Accumulates parts, merging neighbours of the same kind and dropping empties.
class PromptBuilder {
 public:
  void markup(std::string_view s) { add(s, true); }
  void content(std::string_view s) { add(s, false); }
  ChatPrompt take() { return std::move(prompt_); }

 private:
  void add(std::string_view s, bool is_markup) {
    if (s.empty()) return;
    if (!prompt_.parts.empty() && prompt_.parts.back().is_markup == is_markup) {
      prompt_.parts.back().text.append(s);
    } else {
      prompt_.parts.push_back({std::string(s), is_markup});
    }
  }
  ChatPrompt prompt_;
};

std::string_view lstrip_newlines(std::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  return s;
}

// The index of the last user query: a user turn that is not only a tool
// response (Qwen3's last_query_index); size() - 1 when there is none.
size_t last_query_index(std::span<const ChatMessage> messages) {
  for (size_t i = messages.size(); i-- > 0;) {
    if (messages[i].role != "user") continue;
    const std::string_view c = trim(messages[i].content);
    if (!(c.starts_with("<tool_response>") && c.ends_with("</tool_response>"))) return i;
  }
  return messages.size() - 1;
}

// An assistant turn's content under a thinking template: a thought the
// client left in the text is stripped (QwQ/R1 split on </think>), and after
// the last user query (keeps_recent) the reasoning is rendered before it.
void assistant_with_thought(PromptBuilder& b, const ThinkingFormat& f, const ChatMessage& m, bool recent, bool last) {
  std::string_view c = m.content;
  const size_t close = c.rfind(ThinkingFormat::kClose);
  if (close != std::string_view::npos) c = lstrip_newlines(c.substr(close + ThinkingFormat::kClose.size()));
  if (f.keeps_recent && recent && (!f.recent_needs_reasoning || last || !trim(m.reasoning).empty())) {
    b.markup("<think>\n");
    b.content(trim(m.reasoning));
    b.markup("\n</think>\n\n");
    c = lstrip_newlines(c);
  }
  b.content(c);
}

bool folds_system(ChatTemplateKind k) {
  return k == ChatTemplateKind::kLlama2 || k == ChatTemplateKind::kMistral || k == ChatTemplateKind::kGemma;
}

}  // namespace

const char* chat_template_name(ChatTemplateKind kind) {
  switch (kind) {
    case ChatTemplateKind::kPlain: return "plain";
    case ChatTemplateKind::kLlama2: return "llama2";
    case ChatTemplateKind::kLlama3: return "llama3";
    case ChatTemplateKind::kChatml: return "chatml";
    case ChatTemplateKind::kMistral: return "mistral";
    case ChatTemplateKind::kPhi3: return "phi3";
    case ChatTemplateKind::kGemma: return "gemma";
    case ChatTemplateKind::kZephyr: return "zephyr";
    case ChatTemplateKind::kDeepseek: return "deepseek";
  }
  return "?";
}

Result<ChatTemplateKind> chat_template_from_name(std::string_view name) {
  struct Entry {
    std::string_view name;
    ChatTemplateKind kind;
  };
  static constexpr Entry kNames[] = {
      {"plain", ChatTemplateKind::kPlain},     {"llama2", ChatTemplateKind::kLlama2},
      {"llama-2", ChatTemplateKind::kLlama2},  {"llama3", ChatTemplateKind::kLlama3},
      {"llama-3", ChatTemplateKind::kLlama3},  {"chatml", ChatTemplateKind::kChatml},
      {"qwen", ChatTemplateKind::kChatml},     {"qwen2", ChatTemplateKind::kChatml},
      {"smollm", ChatTemplateKind::kChatml},   {"mistral", ChatTemplateKind::kMistral},
      {"phi3", ChatTemplateKind::kPhi3},       {"phi-3", ChatTemplateKind::kPhi3},
      {"gemma", ChatTemplateKind::kGemma},     {"zephyr", ChatTemplateKind::kZephyr},
      {"qwen3", ChatTemplateKind::kChatml},    {"qwen3.5", ChatTemplateKind::kChatml},
      {"qwq", ChatTemplateKind::kChatml},      {"deepseek", ChatTemplateKind::kDeepseek},
      {"deepseek-r1", ChatTemplateKind::kDeepseek},
  };
  for (const Entry& e : kNames) {
    if (e.name == name) return e.kind;
  }
  return invalid_argument("unknown chat template '" + std::string(name) +
                          "' (known: plain, llama2, llama3, chatml, mistral, phi3, gemma, zephyr, deepseek;"
                          " reasoning: qwen3, qwen3.5, qwq, deepseek-r1)");
}

ChatTemplateKind detect_chat_template(std::string_view jinja) {
  auto has = [&](std::string_view marker) { return jinja.find(marker) != std::string_view::npos; };
  if (jinja.empty()) return ChatTemplateKind::kPlain;
  if (has("<|start_header_id|>")) return ChatTemplateKind::kLlama3;
  if (has("<|im_start|>")) return ChatTemplateKind::kChatml;
  if (has("<start_of_turn>")) return ChatTemplateKind::kGemma;
  if (has("[INST]")) return has("<<SYS>>") ? ChatTemplateKind::kLlama2 : ChatTemplateKind::kMistral;
  if (has("<|user|>")) return has("<|end|>") ? ChatTemplateKind::kPhi3 : ChatTemplateKind::kZephyr;
  // DeepSeek-R1 and its distills (V3.1's hybrid template writes its
  // thought differently and stays unrecognised).
  if (has("<｜User｜>") && has("<｜Assistant｜><think>\\n")) return ChatTemplateKind::kDeepseek;
  return ChatTemplateKind::kPlain;
}

ThinkingFormat detect_thinking_format(ChatTemplateKind kind, std::string_view jinja) {
  auto has = [&](std::string_view marker) { return jinja.find(marker) != std::string_view::npos; };
  // Only families whose turns we render can carry a thought.
  if ((kind != ChatTemplateKind::kChatml && kind != ChatTemplateKind::kDeepseek) || !has("<think>") ||
      !has("</think>")) {
    return {};
  }
  ThinkingFormat f{.enabled = true};
  // The generation prompt is what follows the last add_generation_prompt
  // test (Qwen3 also writes "\n<think>\n" for history turns, earlier).
  const size_t gen = jinja.rfind("add_generation_prompt");
  const std::string_view tail = gen == std::string_view::npos ? std::string_view() : jinja.substr(gen);
  auto tail_has = [&](std::string_view marker) { return tail.find(marker) != std::string_view::npos; };
  // Sources write newlines as the two characters \n inside string literals.
  if (tail_has("<think>\\n'") || tail_has("<think>\\n\"")) f.gen_on = "<think>\n";
  if (tail_has("<think>\\n\\n</think>\\n\\n")) {
    f.gen_off = "<think>\n\n</think>\n\n";
  } else if (has("enable_thinking") && !f.gen_on.empty()) {
    f.gen_off = f.gen_on + "</think>";  // QwQ: closes the opened thought at once
  }
  f.keeps_recent = has("reasoning_content");
  f.recent_needs_reasoning = has("not loop.last and reasoning_content");
  return f;
}

ThinkingFormat thinking_format_for_name(std::string_view name) {
  if (name == "qwen3") {
    return {.enabled = true, .gen_off = "<think>\n\n</think>\n\n", .keeps_recent = true, .recent_needs_reasoning = true};
  }
  if (name == "qwen3.5") {
    return {.enabled = true, .gen_on = "<think>\n", .gen_off = "<think>\n\n</think>\n\n", .keeps_recent = true};
  }
  if (name == "qwq") return {.enabled = true, .gen_on = "<think>\n", .gen_off = "<think>\n</think>"};
  if (name == "deepseek-r1" || name == "deepseek") return {.enabled = true, .gen_on = "<think>\n"};
  return {};
}

PromptThought ChatTemplate::prompt_thought(const ChatRenderOptions& opts) const {
  if (!thinking_.enabled) return PromptThought::kNone;
  const bool off = opts.enable_thinking == false && !thinking_.gen_off.empty();
  const std::string& gen = off ? thinking_.gen_off : thinking_.gen_on;
  if (gen.find(ThinkingFormat::kClose) != std::string::npos) return PromptThought::kClosed;
  return gen.find(ThinkingFormat::kOpen) != std::string::npos ? PromptThought::kOpen : PromptThought::kNone;
}

std::string ChatPrompt::text() const {
  std::string s;
  for (const Part& p : parts) s += p.text;
  return s;
}

std::vector<TextSegment> ChatPrompt::segments() const {
  std::vector<TextSegment> segs;
  segs.reserve(parts.size());
  for (const Part& p : parts) segs.push_back({p.text, p.is_markup});
  return segs;
}

Result<ChatTemplate> ChatTemplate::for_vocab(const Vocab& vocab, std::string_view override_name) {
  ChatTemplateKind kind = detect_chat_template(vocab.chat_template());
  ThinkingFormat thinking = detect_thinking_format(kind, vocab.chat_template());
  if (!override_name.empty()) {
    ASSIGN_OR_RETURN(kind, chat_template_from_name(override_name));
    thinking = thinking_format_for_name(override_name);
  }
  std::string bos = vocab.bos() != kNoToken ? vocab.text(vocab.bos()) : "<s>";
  std::string eos = vocab.eos() != kNoToken ? vocab.text(vocab.eos()) : "</s>";
  return ChatTemplate(kind, std::move(bos), std::move(eos), std::move(thinking));
}

Result<ChatPrompt> ChatTemplate::render(std::span<const ChatMessage> messages, const ChatRenderOptions& opts) const {
  if (messages.empty()) return invalid_argument("chat: no messages");
  for (const ChatMessage& m : messages) {
    const bool ipython = m.role == "ipython" && kind_ == ChatTemplateKind::kLlama3;
    if (m.role != "system" && m.role != "user" && m.role != "assistant" && !ipython) {
      return invalid_argument("chat: unknown role '" + m.role + "' (system, user or assistant; llama3 also ipython)");
    }
  }
  if (opts.continue_final_message && messages.back().role != "assistant") {
    return invalid_argument("chat: continue_final_message needs a final assistant message");
  }
  // Families without a system turn fold a leading system message into the first user turn.
  std::string_view system;
  bool pending_system = false;
  if (folds_system(kind_)) {
    if (messages[0].role == "system") {
      system = messages[0].content;
      pending_system = true;
      messages = messages.subspan(1);
      if (messages.empty() || messages[0].role != "user") {
        return invalid_argument(std::string("chat: ") + name() + " needs a user message after the system message");
      }
    }
    for (const ChatMessage& m : messages) {
      if (m.role == "system") {
        return invalid_argument(std::string("chat: ") + name() + " takes a system message only at the start");
      }
    }
  }

  PromptBuilder b;
  bool first_user = true;
  const size_t last_query = last_query_index(messages);
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    const bool user = m.role == "user";
    const bool open = opts.continue_final_message && i + 1 == messages.size();
    const std::string_view c = m.content;
    switch (kind_) {
      case ChatTemplateKind::kLlama2:
        if (user) {
          if (!first_user) b.markup(bos_text_);
          b.markup("[INST] ");
          if (pending_system) {
            b.markup("<<SYS>>\n");
            b.content(trim(system));
            b.markup("\n<</SYS>>\n\n");
          }
          b.content(trim(c));
          b.markup(" [/INST]");
        } else {
          b.markup(" ");
          b.content(open ? c : trim(c));
          if (!open) b.markup(" " + eos_text_);
        }
        break;
      case ChatTemplateKind::kMistral:
        if (user) {
          b.markup("[INST] ");
          if (pending_system) {
            b.content(system);
            b.markup("\n\n");
          }
          b.content(c);
          b.markup(" [/INST]");
        } else {
          b.content(c);
          if (!open) b.markup(eos_text_);
        }
        break;
      case ChatTemplateKind::kGemma:
        b.markup(user ? "<start_of_turn>user\n" : "<start_of_turn>model\n");
        if (user && pending_system) {
          b.content(trim(system));
          b.markup("\n\n");
        }
        b.content(open ? c : trim(c));
        if (!open) b.markup("<end_of_turn>\n");
        break;
      case ChatTemplateKind::kLlama3:
        b.markup("<|start_header_id|>" + m.role + "<|end_header_id|>\n\n");
        b.content(open || m.verbatim ? c : trim(c));
        if (!open) b.markup("<|eot_id|>");
        break;
      case ChatTemplateKind::kChatml:
        b.markup("<|im_start|>" + m.role + "\n");
        if (thinking_.enabled && m.role == "assistant") {
          assistant_with_thought(b, thinking_, m, i > last_query, i + 1 == messages.size());
        } else {
          b.content(c);
        }
        if (!open) b.markup("<|im_end|>\n");
        break;
      case ChatTemplateKind::kDeepseek:
        if (m.role == "assistant") {
          b.markup("<｜Assistant｜>");
          assistant_with_thought(b, thinking_, m, i > last_query, i + 1 == messages.size());
          if (!open) b.markup("<｜end▁of▁sentence｜>");
        } else {
          if (user) b.markup("<｜User｜>");
          b.content(c);  // a system text stands alone, where it was sent
        }
        break;
      case ChatTemplateKind::kPhi3:
      case ChatTemplateKind::kZephyr:
        b.markup("<|" + m.role + "|>\n");
        b.content(c);
        if (!open) b.markup(kind_ == ChatTemplateKind::kPhi3 ? std::string("<|end|>\n") : eos_text_ + "\n");
        break;
      case ChatTemplateKind::kPlain: {
        const char* role = m.role == "system" ? "System: " : user ? "User: " : "Assistant: ";
        b.markup(role);
        b.content(c);
        if (!open) b.markup("\n\n");
        break;
      }
    }
    if (user) {
      first_user = false;
      pending_system = false;
    }
  }

  if (opts.add_generation_prompt && !opts.continue_final_message) {
    switch (kind_) {
      case ChatTemplateKind::kLlama2:
      case ChatTemplateKind::kMistral: break;  // "[/INST]" already hands over
      case ChatTemplateKind::kLlama3: b.markup("<|start_header_id|>assistant<|end_header_id|>\n\n"); break;
      case ChatTemplateKind::kChatml: b.markup("<|im_start|>assistant\n"); break;
      case ChatTemplateKind::kDeepseek: b.markup("<｜Assistant｜>"); break;
      case ChatTemplateKind::kPhi3:
      case ChatTemplateKind::kZephyr: b.markup("<|assistant|>\n"); break;
      case ChatTemplateKind::kGemma: b.markup("<start_of_turn>model\n"); break;
      case ChatTemplateKind::kPlain: b.markup("Assistant:"); break;
    }
    if (thinking_.enabled) {
      const bool off = opts.enable_thinking == false && !thinking_.gen_off.empty();
      b.markup(off ? thinking_.gen_off : thinking_.gen_on);
    }
  }
  return b.take();
}

}  // namespace zl
