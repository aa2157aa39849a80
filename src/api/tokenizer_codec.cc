#include "api/tokenizer_codec.h"

namespace zl::api {
namespace {

bool has_system_turn(ChatTemplateKind k) {
  return k != ChatTemplateKind::kLlama2 && k != ChatTemplateKind::kMistral && k != ChatTemplateKind::kGemma;
}

std::string_view trim_space(std::string_view s) {
  auto space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

// The leading system messages joined; *next is the index after them.
std::string leading_system(const ChatRequest& chat, size_t* next) {
  std::string system;
  size_t i = 0;
  for (; i < chat.messages.size() && chat.messages[i].role == "system"; ++i) {
    if (!system.empty()) system += "\n\n";
    system += chat.messages[i].content;
  }
  *next = i;
  return system;
}

// The reasoning of an assistant turn as the template sees it.
std::string reasoning_of(const ChatMessage& m) {
  std::string r;
  for (const ThinkingBlock& b : m.thinking) {
    if (b.redacted || b.text.empty()) continue;
    if (!r.empty()) r += '\n';
    r += b.text;
  }
  return r;
}

}  // namespace

ToolSyntax TokenizerCodec::tool_syntax() const { return tool_syntax_for(template_.kind()); }

std::vector<zl::ChatMessage> TokenizerCodec::generic_messages(const ChatRequest& chat) const {
  std::vector<zl::ChatMessage> out;
  size_t i = 0;
  std::string system = leading_system(chat, &i);
  if (!chat.tools_json.empty()) {
    if (!system.empty()) system += "\n\n";
    system += "Tools available (JSON): " + chat.tools_json;
    if (!chat.tool_choice.empty()) system += "\nTool choice: " + chat.tool_choice;
  }
  if (!system.empty()) out.push_back({"system", std::move(system)});
  for (; i < chat.messages.size(); ++i) {
    const ChatMessage& m = chat.messages[i];
    if (m.role == "system") {
      if (has_system_turn(template_.kind())) {
        out.push_back({"system", m.content});
      } else {
        out.push_back({"user", "[system] " + m.content});
      }
    } else if (m.role == "tool") {
      out.push_back({"user", "[tool result " + m.tool_call_id + "] " + m.content});
    } else {
      std::string content = m.content;
      for (const ToolCall& tc : m.tool_calls) {
        if (!content.empty()) content += "\n";
        content += "[tool call " + tc.name + "] " + tc.arguments_json;
      }
      out.push_back({.role = m.role, .content = std::move(content), .reasoning = reasoning_of(m)});
    }
  }
  return out;
}

std::vector<zl::ChatMessage> TokenizerCodec::hermes_messages(const ChatRequest& chat, const ToolPlan& plan) const {
  std::vector<zl::ChatMessage> out;
  size_t i = 0;
  std::string system = leading_system(chat, &i);
  if (plan.active()) system = system.empty() ? hermes_tools_section(chat.tools)
                                             : system + "\n\n" + hermes_tools_section(chat.tools);
  if (!system.empty()) out.push_back({"system", std::move(system)});
  bool in_tool_turn = false;  // the last turn holds tool results: the next one joins it
  for (; i < chat.messages.size(); ++i) {
    const ChatMessage& m = chat.messages[i];
    if (m.role == "tool") {
      if (in_tool_turn) {
        out.back().content.append("\n").append(hermes_tool_response(m.content));
      } else {
        out.push_back({"user", hermes_tool_response(m.content)});
      }
      in_tool_turn = true;
      continue;
    }
    in_tool_turn = false;
    std::string content = m.content;
    for (const ToolCall& tc : m.tool_calls) {
      if (!content.empty()) content += "\n";
      content += hermes_call(tc);
    }
    out.push_back({.role = m.role, .content = std::move(content), .reasoning = reasoning_of(m)});
  }
  return out;
}

std::vector<zl::ChatMessage> TokenizerCodec::llama3_messages(const ChatRequest& chat, const ToolPlan& plan) const {
  std::vector<zl::ChatMessage> out;
  size_t i = 0;
  std::string system = leading_system(chat, &i);
  const bool tools_in_user = plan.active() && i < chat.messages.size() && chat.messages[i].role == "user";
  // Meta's template trims the system text and the first user message but
  // not the text put before them, nor tool results (hence verbatim).
  if (plan.active()) {
    std::string s = llama3_system_head();
    if (!tools_in_user) s += llama3_tools_system(chat.tools);
    s.append(trim_space(system));
    out.push_back({.role = "system", .content = std::move(s), .verbatim = true});
  } else if (!system.empty()) {
    out.push_back({"system", std::move(system)});
  }
  for (size_t first = i; i < chat.messages.size(); ++i) {
    const ChatMessage& m = chat.messages[i];
    if (m.role == "tool") {
      out.push_back({.role = "ipython", .content = m.content, .verbatim = true});
    } else if (!m.tool_calls.empty()) {
      std::string calls;
      for (const ToolCall& tc : m.tool_calls) calls.append(calls.empty() ? "" : "; ").append(llama3_call(tc));
      out.push_back({"assistant", std::move(calls)});
    } else if (i == first && tools_in_user) {
      std::string content = llama3_tools_preamble(chat.tools);
      content.append(trim_space(m.content));
      out.push_back({.role = "user", .content = std::move(content), .verbatim = true});
    } else {
      out.push_back({m.role, m.content});
    }
  }
  return out;
}

std::vector<zl::ChatMessage> TokenizerCodec::to_template_messages(const ChatRequest& chat) const {
  const ToolSyntax native = tool_syntax();
  if (native == ToolSyntax::kNone) return generic_messages(chat);
  const ToolPlan plan = plan_tools(chat, native);
  std::vector<zl::ChatMessage> out =
      native == ToolSyntax::kHermes ? hermes_messages(chat, plan) : llama3_messages(chat, plan);
  if (!plan.prefill.empty()) out.push_back({"assistant", plan.prefill});
  return out;
}

Result<ChatPrompt> TokenizerCodec::render(const ChatRequest& chat) const {
  const std::vector<zl::ChatMessage> messages = to_template_messages(chat);
  const bool forced_call = !plan_tools(chat, tool_syntax()).prefill.empty();
  ChatRenderOptions opts;
  opts.continue_final_message = (chat.continue_final_message || forced_call) && !messages.empty() &&
                                messages.back().role == "assistant";
  opts.add_generation_prompt = chat.add_generation_prompt && !opts.continue_final_message;
  opts.enable_thinking = chat.thinking.enabled;
  return template_.render(messages, opts);
}

Result<std::string> TokenizerCodec::render_text(const ChatRequest& chat) const {
  ASSIGN_OR_RETURN(ChatPrompt prompt, render(chat));
  return prompt.text();
}

PromptThought TokenizerCodec::prompt_thought(const ChatRequest& chat) const {
  if (chat.continue_final_message || !chat.add_generation_prompt || !plan_tools(chat, tool_syntax()).prefill.empty()) {
    return PromptThought::kNone;
  }
  return template_.prompt_thought(ChatRenderOptions{.enable_thinking = chat.thinking.enabled});
}

Result<std::vector<int32_t>> TokenizerCodec::encode_chat(const ChatRequest& chat) const {
  ASSIGN_OR_RETURN(ChatPrompt prompt, render(chat));
  const std::vector<TextSegment> segments = prompt.segments();
  return tokenizer_->encode(segments, /*add_special=*/true);
}

namespace {

// OK when every id is in the vocabulary, else an InvalidArgument naming the
// first one that is not ("prompt[3] = ...": the service renames the field).
Status check_ids(const Tokenizer& tokenizer, std::span<const int32_t> ids) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!tokenizer.vocab().is_valid(ids[i])) {
      return invalid_argument("prompt[" + std::to_string(i) + "] = " + std::to_string(ids[i]) +
                                  " is not a token id of this model (0 to " +
                                  std::to_string(tokenizer.vocab().n_tokens() - 1) + ")",
                              {.reason = ErrorReason::kInvalidValue});
    }
  }
  return Status();
}

}  // namespace

Result<std::vector<int32_t>> TokenizerBackedCodec::encode_text(std::string_view text) const {
  return encode_with(text, /*add_special=*/true, /*parse_special=*/false);
}

Result<std::vector<int32_t>> TokenizerBackedCodec::encode_markup(std::string_view text) const {
  return encode_with(text, /*add_special=*/false, /*parse_special=*/true);
}

Result<std::vector<int32_t>> TokenizerBackedCodec::encode_with(std::string_view text, bool add_special,
                                                               bool parse_special) const {
  return tokenizer_->encode(text, EncodeOptions{.add_special = add_special, .parse_special = parse_special});
}

Result<std::string> TokenizerBackedCodec::decode_prompt(std::span<const int32_t> ids) const {
  RETURN_IF_ERROR(check_ids(*tokenizer_, ids));
  return tokenizer_->decode(ids, DecodeOptions{.render_special = true});
}

Result<std::vector<std::string>> TokenizerBackedCodec::token_pieces(std::span<const int32_t> ids) const {
  RETURN_IF_ERROR(check_ids(*tokenizer_, ids));
  std::vector<std::string> out;
  out.reserve(ids.size());
  for (int32_t id : ids) out.push_back(tokenizer_->token_to_piece(id, /*render_special=*/true));
  return out;
}

Result<std::vector<std::string>> TokenizerBackedCodec::token_strings(std::span<const int32_t> ids) const {
  RETURN_IF_ERROR(check_ids(*tokenizer_, ids));
  std::vector<std::string> out;
  out.reserve(ids.size());
  for (int32_t id : ids) out.push_back(tokenizer_->vocab().text(id));
  return out;
}

}  // namespace zl::api
