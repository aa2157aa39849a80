#include "api/tokenizer_codec.h"

namespace zl::api {
namespace {

bool has_system_turn(ChatTemplateKind k) {
  return k != ChatTemplateKind::kLlama2 && k != ChatTemplateKind::kMistral && k != ChatTemplateKind::kGemma;
}

}  // namespace

std::vector<zl::ChatMessage> TokenizerCodec::to_template_messages(const ChatRequest& chat) const {
  std::vector<zl::ChatMessage> out;
  size_t i = 0;
  std::string system;
  for (; i < chat.messages.size() && chat.messages[i].role == "system"; ++i) {
    if (!system.empty()) system += "\n\n";
    system += chat.messages[i].content;
  }
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
      out.push_back({m.role, std::move(content)});
    }
  }
  return out;
}

Result<std::vector<int32_t>> TokenizerCodec::encode_chat(const ChatRequest& chat) const {
  const std::vector<zl::ChatMessage> messages = to_template_messages(chat);
  ChatRenderOptions opts;
  opts.continue_final_message = chat.continue_final_message && !messages.empty() && messages.back().role == "assistant";
  opts.add_generation_prompt = !opts.continue_final_message;
  ASSIGN_OR_RETURN(ChatPrompt prompt, template_.render(messages, opts));
  const std::vector<TextSegment> segments = prompt.segments();
  return tokenizer_->encode(segments, /*add_special=*/true);
}

Result<std::vector<int32_t>> TokenizerCodec::encode_text(std::string_view text) const {
  return tokenizer_->encode(text, EncodeOptions{.add_special = true, .parse_special = false});
}

}  // namespace zl::api
