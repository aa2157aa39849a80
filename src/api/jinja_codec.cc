#include "api/jinja_codec.h"

#include <functional>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <ctime>

#include "api/json_util.h"
#include "api/template_vars.h"
#include "api/tokenizer_codec.h"
#include "api/tool_prompt.h"

namespace zl::api {
namespace json = boost::json;
namespace {

using tmpl::Dict;
using tmpl::List;
using tmpl::Value;

// Request text enters the template context with the control-token texts in
// it fenced by U+E000 … U+E001 (private-use characters; the request's own are
// removed first). A template concatenates message text with its markup, and
// the string it builds can no longer say which bytes came from the request;
// the fences survive that, and unfence() turns each fenced span back into
// text that is never parsed for special tokens (an injected "<|im_start|>"
// stays text, as with the built-in families).
constexpr std::string_view kFenceOpen = "\xEE\x80\x80";   // U+E000
constexpr std::string_view kFenceClose = "\xEE\x80\x81";  // U+E001
using Fence = std::function<std::string(std::string_view)>;

void fence_json(json::value& v, const Fence& fence) {
  if (v.is_string()) {
    v = json::string(fence(v.get_string()));
  } else if (v.is_array()) {
    for (json::value& x : v.get_array()) fence_json(x, fence);
  } else if (v.is_object()) {
    json::object o;
    for (auto& kv : v.get_object()) {
      json::value x = kv.value();
      fence_json(x, fence);
      o[fence(kv.key())] = std::move(x);
    }
    v = std::move(o);
  }
}

// Parsed JSON of the request (its strings are request input), or null.
std::optional<Value> parse_json(std::string_view text, const Fence& fence) {
  boost::system::error_code ec;
  json::parse_options opts;
  opts.max_depth = kMaxJsonDepth;
  json::value v = json::parse(text, ec, json::storage_ptr(), opts);
  if (ec) return std::nullopt;
  fence_json(v, fence);
  return tmpl::from_json(v, /*strings_from_input=*/true);
}

Value tool_call_value(const ToolCall& tc, bool object_arguments, const Fence& fence) {
  Dict fn;
  fn.set("name", Value(fence(tc.name), true));
  const std::string_view args = tc.arguments_json.empty() ? std::string_view("{}") : tc.arguments_json;
  std::optional<Value> parsed = object_arguments ? parse_json(args, fence) : std::nullopt;
  fn.set("arguments", parsed ? std::move(*parsed) : Value(fence(args), true));
  Dict call;
  call.set("id", Value(fence(tc.id), true));
  call.set("type", Value("function"));
  call.set("function", Value(std::move(fn)));
  return Value(std::move(call));
}

// How the template's context carries a message (JinjaCodec::context).
struct MessageForm {
  bool object_arguments = true;  // tool-call arguments as objects (else their JSON text)
  bool thinking_field = false;   // the reasoning also as `thinking` (gpt-oss)
};

Value message_value(const ChatMessage& m, MessageForm form, const Fence& fence) {
  std::string reasoning;
  for (const ThinkingBlock& b : m.thinking) {
    if (b.redacted || b.text.empty()) continue;
    if (!reasoning.empty()) reasoning += '\n';
    reasoning += b.text;
  }
  // gpt-oss has one analysis slot before a call, filled from content or
  // from thinking, and raises when both are set: the reasoning fills it and
  // the text beside the call is left out, as llama.cpp does (its PR 19702).
  const bool reasoning_replaces_content = form.thinking_field && !reasoning.empty() && !m.tool_calls.empty();
  Dict d;
  d.set("role", Value(m.role));
  d.set("content", Value(reasoning_replaces_content ? std::string() : fence(m.content), true));
  if (!m.tool_calls.empty()) {
    List calls;
    for (const ToolCall& tc : m.tool_calls) calls.push_back(tool_call_value(tc, form.object_arguments, fence));
    d.set("tool_calls", Value(std::move(calls)));
  }
  if (m.role == "tool" && !m.tool_call_id.empty()) d.set("tool_call_id", Value(fence(m.tool_call_id), true));
  if (!reasoning.empty()) {
    d.set("reasoning_content", Value(fence(reasoning), true));
    if (form.thinking_field) d.set("thinking", Value(fence(reasoning), true));
  }
  return Value(std::move(d));
}

// The rendered parts with the fences taken out: a fenced span is request
// text (never parsed for special tokens) wherever the template put it.
void unfence(tmpl::Rendered& r) {
  std::vector<tmpl::Rendered::Part> out;
  auto add = [&out](std::string_view t, bool from_input) {
    if (t.empty()) return;
    if (!out.empty() && out.back().from_input == from_input) {
      out.back().text.append(t);
    } else {
      out.push_back({std::string(t), from_input});
    }
  };
  bool fenced = false;
  for (const tmpl::Rendered::Part& p : r.parts) {
    const std::string_view t = p.text;
    size_t i = 0;
    while (i <= t.size()) {
      const size_t open = t.find(kFenceOpen, i);
      const size_t close = t.find(kFenceClose, i);
      const size_t next = std::min(open, close);
      add(t.substr(i, next == std::string_view::npos ? std::string_view::npos : next - i), p.from_input || fenced);
      if (next == std::string_view::npos) break;
      fenced = next == open;  // a close outside a fence is dropped
      i = next + kFenceOpen.size();
    }
  }
  r.parts = std::move(out);
}

bool contains(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }

// Whether a template reads an assistant turn's reasoning from a `thinking`
// field of the message and never from `reasoning_content` (gpt-oss and its
// fine-tunes: "<|channel|>analysis<|message|>" + message.thinking). Such a
// template gets the reasoning under both names, as llama.cpp copies it for
// gpt-oss; a template reading reasoning_content sees no new field.
bool reads_message_thinking(std::string_view src) {
  if (contains(src, "reasoning_content")) return false;
  for (std::string_view form : {"message.thinking", "message['thinking']", "message[\"thinking\"]",
                                "'thinking' in message", "\"thinking\" in message", "message.get('thinking')",
                                "message.get(\"thinking\")"}) {
    if (contains(src, form)) return true;
  }
  return false;
}

// Cuts `r` just after the last occurrence of `final_text` (HF's
// continue_final_message: the prompt ends inside the final message).
Status cut_after(tmpl::Rendered& r, std::string_view final_text) {
  const std::string text = r.text();
  const size_t at = final_text.empty() ? std::string::npos : text.rfind(final_text);
  if (at == std::string::npos) {
    return invalid_argument("the chat template does not render the final assistant message's text, so it cannot be continued",
                            {.reason = ErrorReason::kInvalidPrompt});
  }
  size_t keep = at + final_text.size();
  for (size_t i = 0; i < r.parts.size(); ++i) {
    if (keep <= r.parts[i].text.size()) {
      r.parts[i].text.resize(keep);
      r.parts.resize(i + 1);
      break;
    }
    keep -= r.parts[i].text.size();
  }
  return Status::ok_status();
}

std::string_view trim_space(std::string_view s) {
  auto space = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

ToolSyntax detect_tool_syntax(std::string_view src) {
  // Each family by the markers its template writes calls with, the more
  // specific first.
  if (contains(src, "[TOOL_CALLS]")) return ToolSyntax::kMistral;
  // Llama 3.2/3.3 pythonic and Llama 4 templates describe [func_name(params_name=params_value)].
  if (contains(src, "<|python_start|>") || contains(src, "func_name1(") || contains(src, "(params_name1=")) {
    return ToolSyntax::kLlama3Pythonic;
  }
  // <tool_call> around XML bodies (Qwen3-Coder, Qwen3.5: <function=…><parameter=…>).
  if (contains(src, "<tool_call>") && contains(src, "<function=")) return ToolSyntax::kQwen3CoderXml;
  if (contains(src, "<|channel|>") && (contains(src, "to=functions") || contains(src, "<|call|>"))) {
    return ToolSyntax::kHarmony;
  }
  if (contains(src, "tool\u2581calls\u2581begin") || contains(src, "tool▁calls▁begin")) return ToolSyntax::kDeepSeek;
  if (contains(src, "<|tool_call|>")) return ToolSyntax::kGranite;
  if (contains(src, "functools") || (contains(src, "<|tool|>") && contains(src, "<|/tool|>"))) return ToolSyntax::kPhi;
  // <tool_call> around JSON (Hermes, Qwen2.5/QwQ, Granite 4); not GLM's
  // XML (<arg_key>).
  if (contains(src, "<tool_call>")) return contains(src, "<arg_key>") ? ToolSyntax::kNone : ToolSyntax::kHermes;
  if (contains(src, "<|python_tag|>") || (contains(src, "<|start_header_id|>") && contains(src, "\"parameters\""))) {
    return ToolSyntax::kLlama3Json;
  }
  return ToolSyntax::kNone;
}

JinjaCodec::JinjaCodec(const Tokenizer* tokenizer, tmpl::Template jinja, std::string name)
    : TokenizerBackedCodec(tokenizer), jinja_(std::move(jinja)), name_(std::move(name)), bos_text_("<s>"), eos_text_("</s>") {
  if (tokenizer_) {
    const Vocab& v = tokenizer_->vocab();
    bos_text_ = v.bos() != kNoToken ? v.text(v.bos()) : "";
    eos_text_ = v.eos() != kNoToken ? v.text(v.eos()) : "";
  }
  syntax_ = detect_tool_syntax(jinja_.source());
  thinking_field_ = reads_message_thinking(jinja_.source());
  object_arguments_ = probe_object_arguments();
  thinking_default_ = probe_thinking_default();
  thinking_ = detect_thinking_format(detect_chat_template(jinja_.source()), jinja_.source());
}

// A template renders a call's arguments as an object (tojson, items, is
// mapping: most) or as the JSON text (string concatenation: Functionary).
// Objects unless a conversation with an object fails to render or loses
// the arguments where one with the text renders them.
bool JinjaCodec::probe_object_arguments() {
  ChatRequest probe;
  probe.messages.push_back({.role = "user", .content = "probe"});
  probe.messages.push_back({.role = "assistant",
                            .tool_calls = {{.id = "a1b2c3d4e", .name = "probe_tool",
                                            .arguments_json = R"({"argument_needle": "needle_value"})"}}});
  probe.messages.push_back({.role = "tool", .content = "ok", .tool_call_id = "a1b2c3d4e"});
  probe.tools.push_back({.name = "probe_tool",
                         .json = R"({"type": "function", "function": {"name": "probe_tool", "description": "probe", )"
                                 R"("parameters": {"type": "object", "properties": {"argument_needle": {"type": "string"}}, )"
                                 R"("required": ["argument_needle"]}}})"});
  auto renders_needle = [&](bool objects) {
    object_arguments_ = objects;
    auto r = jinja_.render(context(probe));
    return r.ok() && r->text().find("needle_value") != std::string::npos;
  };
  if (renders_needle(true)) return true;
  return !renders_needle(false);
}

// Whether thinking is on when the request does not say, as llama.cpp
// decides it: on for a template whose reasoning switch shows in the
// generation prompt (an opened or an empty, closed thought after the last
// user turn: Qwen3, QwQ, DeepSeek V3.1, GLM, Command R7B, Gemma 4), off for
// one where enable_thinking only changes earlier text (Apertus's
// "Deliberation: enabled" system line): such a template has no thought
// markers the output can be parsed by, so llama-server leaves thinking off.
bool JinjaCodec::probe_thinking_default() {
  static constexpr std::string_view kNeedle = "thinking_probe_needle";
  ChatRequest probe;
  probe.messages.push_back({.role = "user", .content = std::string(kNeedle)});
  auto tail = [&](bool on) -> std::optional<std::string> {
    probe.thinking.enabled = on;
    auto r = jinja_.render(context(probe));
    if (!r.ok()) return std::nullopt;
    std::string text = r->text();
    const size_t at = text.rfind(kNeedle);
    if (at == std::string::npos) return std::nullopt;
    return text.substr(at + kNeedle.size());
  };
  thinking_default_ = true;  // context() reads it; the probe sets the request's own value
  const std::optional<std::string> on = tail(true);
  const std::optional<std::string> off = tail(false);
  return on && off && *on != *off;
}

std::string JinjaCodec::fence_request_text(std::string_view text) const {
  std::string clean;
  clean.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const std::string_view rest = text.substr(i);
    if (rest.starts_with(kFenceOpen) || rest.starts_with(kFenceClose)) {
      i += kFenceOpen.size();
      continue;
    }
    clean.push_back(text[i++]);
  }
  if (!tokenizer_) return clean;
  const std::vector<std::pair<size_t, size_t>> spans = tokenizer_->control_token_spans(clean);
  if (spans.empty()) return clean;
  std::string out;
  out.reserve(clean.size() + spans.size() * 2 * kFenceOpen.size());
  size_t at = 0;
  for (const auto& [pos, len] : spans) {
    out.append(clean, at, pos - at).append(kFenceOpen).append(clean, pos, len).append(kFenceClose);
    at = pos + len;
  }
  out.append(clean, at);
  return out;
}

Value JinjaCodec::context(const ChatRequest& chat) const {
  Dict ctx;
  List messages;
  messages.reserve(chat.messages.size());
  const Fence fence = [this](std::string_view text) { return fence_request_text(text); };
  const MessageForm form{.object_arguments = object_arguments_, .thinking_field = thinking_field_};
  for (const ChatMessage& m : chat.messages) messages.push_back(message_value(m, form, fence));
  ctx.set("messages", Value(std::move(messages)));
  if (!chat.tools.empty()) {
    List tools;
    for (const ToolDef& t : chat.tools) {
      std::optional<Value> v = parse_json(t.json, fence);
      if (v) tools.push_back(std::move(*v));
    }
    ctx.set("tools", Value(std::move(tools)));
  }
  ctx.set("add_generation_prompt", Value(chat.add_generation_prompt && !chat.continue_final_message));
  ctx.set("bos_token", Value(bos_text_));
  ctx.set("eos_token", Value(eos_text_));
  // As the request says, else the template's default (probe_thinking_default;
  // Qwen3, QwQ, Command R7B read enable_thinking; DeepSeek V3.1 reads thinking).
  const bool thinking = chat.thinking.enabled.value_or(thinking_default_);
  ctx.set("enable_thinking", Value(thinking));
  ctx.set("thinking", Value(thinking));
  // Today, as Llama 3.x (date_string) and Firefunction (datetime) read it.
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[64];
  ctx.set("date_string", Value(std::string(buf, std::strftime(buf, sizeof buf, "%d %b %Y", &tm))));
  ctx.set("datetime", Value(std::string(buf, std::strftime(buf, sizeof buf, "%b %d %Y", &tm))));
  // The request's chat_template_kwargs and reasoning effort
  // (api/template_vars.h); its parser already refused the names above.
  if (std::optional<Value> vars = parse_json(chat.template_vars_json, fence); vars && vars->is_dict()) {
    for (const auto& [name, value] : vars->dict().items) {
      if (!is_reserved_template_var(name)) ctx.set(name, value);
    }
  }
  return Value(std::move(ctx));
}

Result<tmpl::Rendered> JinjaCodec::render(const ChatRequest& chat) const {
  if (chat.messages.empty()) {
    return invalid_argument("messages must not be empty", {.reason = ErrorReason::kEmptyMessages});
  }
  ASSIGN_OR_RETURN(tmpl::Rendered r, jinja_.render(context(chat)));
  unfence(r);
  if (!bos_text_.empty() && !r.parts.empty() && !r.parts[0].from_input && r.parts[0].text.starts_with(bos_text_)) {
    r.parts[0].text.erase(0, bos_text_.size());
  }
  if (chat.continue_final_message && chat.messages.back().role == "assistant") {
    RETURN_IF_ERROR(cut_after(r, trim_space(chat.messages.back().content)));
  }
  const ToolPlan plan = plan_tools(chat, syntax_);
  if (!plan.prefill.empty()) {
    // A forced call is the answer, not a thought: a generation prompt that
    // opens one (DeepSeek R1 "<think>\n", V3.1 "<think>", Qwen3.5) has it
    // closed first, as the templates write an empty thought.
    const std::string text = r.text();
    const std::string_view t = trim_space(text);
    if (t.ends_with(ThinkingFormat::kOpen)) {
      const bool newline = text.size() > static_cast<size_t>(t.data() - text.data()) + t.size();
      r.parts.push_back({newline ? "\n</think>\n\n" : std::string(ThinkingFormat::kClose), false});
    }
    r.parts.push_back({plan.prefill, false});
  }
  return r;
}

Result<std::string> JinjaCodec::render_text(const ChatRequest& chat) const {
  ASSIGN_OR_RETURN(tmpl::Rendered r, render(chat));
  return r.text();
}

PromptThought JinjaCodec::prompt_thought(const ChatRequest& chat) const {
  if (!thinking_.enabled || chat.continue_final_message || !chat.add_generation_prompt ||
      !plan_tools(chat, syntax_).prefill.empty()) {
    return PromptThought::kNone;
  }
  auto r = render(chat);
  if (!r.ok()) return PromptThought::kNone;
  const std::string text = r->text();
  const std::string_view t = trim_space(text);
  if (t.ends_with(ThinkingFormat::kOpen)) return PromptThought::kOpen;
  // An empty thought closed by the template itself (`enable_thinking`
  // false): the answer comes next.
  return t.ends_with(ThinkingFormat::kClose) ? PromptThought::kClosed : PromptThought::kNone;
}

Result<std::vector<int32_t>> JinjaCodec::encode_chat(const ChatRequest& chat) const {
  ASSIGN_OR_RETURN(tmpl::Rendered r, render(chat));
  std::vector<TextSegment> segments;
  segments.reserve(r.parts.size());
  for (const auto& p : r.parts) segments.push_back({p.text, !p.from_input});
  return tokenizer_->encode(segments, /*add_special=*/true);
}

}  // namespace zl::api
