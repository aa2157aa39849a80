// libFuzzer target fuzz_chat_template: chat template rendering
// (tokenizer/chat_template.h) over random conversations, alone and through
// the API's codec (api/tokenizer_codec.h: tools, tool calls and results).
// Input: byte 0 picks the family (bits 0-2) and the options (bit 3
// add_generation_prompt, bit 4 continue_final_message), byte 1 the codec and
// whether the request offers tools (bit 7); then messages, each a role byte
// (low 3 bits: system, user, assistant, ipython, tool, an unknown role; bit 7
// verbatim, bit 6 an assistant tool call) and its content up to a 0 byte.
// Invariants: a render is a prompt or an InvalidArgument with a message;
// every content part comes from a message; tokenizing the prompt gives valid
// ids and exactly the special tokens of its markup (message text never turns
// into a control token); the codec's prompt gives valid ids.
#include <string>
#include <vector>

#include "fuzz/fuzz_support.h"

namespace {

constexpr const char* kRoles[] = {"system", "user", "assistant", "ipython", "tool", "moderator", "user", "assistant"};

int count_special(const zl::Tokenizer& t, const std::vector<zl::TokenId>& ids) {
  int n = 0;
  for (zl::TokenId id : ids) {
    FUZZ_CHECK(t.vocab().is_valid(id));
    n += t.vocab().is_control(id);
  }
  return n;
}

void check_render(const std::vector<zl::ChatMessage>& messages, zl::ChatTemplateKind kind,
                  const zl::ChatRenderOptions& opts) {
  const zl::Tokenizer& t = zl::fuzz::fuzz_tokenizer();
  const zl::Vocab& v = t.vocab();
  const zl::ChatTemplate tmpl(kind, v.bos() != zl::kNoToken ? v.text(v.bos()) : "<s>",
                              v.eos() != zl::kNoToken ? v.text(v.eos()) : "</s>");
  auto r = tmpl.render(messages, opts);
  if (!r.ok()) {
    FUZZ_CHECK(r.status().kind() == zl::ErrorKind::kInvalidArgument && !r.status().message().empty());
    return;
  }
  // Message text replaced by a letter: the markup alone, at the same places.
  zl::ChatPrompt markup_only = *r;
  for (const auto& part : r->parts) {
    if (part.is_markup) continue;
    bool from_message = false;
    for (const zl::ChatMessage& m : messages) from_message |= m.content.find(part.text) != std::string::npos;
    FUZZ_CHECK(from_message);
  }
  for (auto& part : markup_only.parts) {
    if (!part.is_markup) part.text.assign(1, 'x');  // (not = "x": GCC 12 misreports it, -Wrestrict)
  }
  const auto ids = t.encode(r->segments(), /*add_special=*/true);
  const auto markup_ids = t.encode(markup_only.segments(), /*add_special=*/true);
  FUZZ_CHECK(count_special(t, ids) == count_special(t, markup_ids));
}

void check_codec(const std::vector<zl::ChatMessage>& messages, bool continue_final, bool tools, size_t codec) {
  zl::api::ChatRequest chat;
  chat.continue_final_message = continue_final;
  if (tools) {
    chat.tools.push_back({.name = "get_weather",
                          .json = R"({"type":"function","function":{"name":"get_weather","parameters":{}}})"});
    chat.tools_json = "[" + chat.tools[0].json + "]";
    chat.tool_choice = continue_final ? "tool:get_weather" : "auto";
  }
  for (const zl::ChatMessage& m : messages) {
    zl::api::ChatMessage cm{.role = m.role, .content = m.content};
    if (m.role == "ipython") cm.role = "tool";
    if (cm.role == "tool") cm.tool_call_id = "call_1";
    if (m.verbatim && m.role == "assistant") {
      cm.tool_calls.push_back({.id = "call_1", .name = "get_weather", .arguments_json = R"({"city":"Paris"})"});
    }
    chat.messages.push_back(std::move(cm));
  }
  auto ids = zl::fuzz::fuzz_codec(codec).encode_chat(chat);
  if (!ids.ok()) {
    FUZZ_CHECK(!ids.status().message().empty());
    return;
  }
  for (int32_t id : *ids) FUZZ_CHECK(zl::fuzz::fuzz_tokenizer().vocab().is_valid(id));
}

}  // namespace

ZL_FUZZ_TARGET(fuzz_chat_template) {
  if (size < 2) return 0;
  const auto kind = static_cast<zl::ChatTemplateKind>(data[0] & 7);
  const zl::ChatRenderOptions opts{.add_generation_prompt = (data[0] & 8) != 0,
                                   .continue_final_message = (data[0] & 16) != 0};
  std::vector<zl::ChatMessage> messages;
  for (size_t i = 2; i < size;) {
    const uint8_t role = data[i++];
    size_t end = i;
    while (end < size && data[end] != 0) ++end;
    messages.push_back({.role = kRoles[role & 7],
                        .content = std::string(reinterpret_cast<const char*>(data + i), end - i),
                        .verbatim = (role & 0x80) != 0});
    i = end + 1;
  }
  check_render(messages, kind, opts);
  check_codec(messages, opts.continue_final_message, (data[1] & 0x80) != 0, data[1]);
  return 0;
}
