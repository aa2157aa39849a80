#include "api/anthropic/messages.h"


#include "api/context_policy.h"
#include "api/speculative.h"
#include "api/json_fields.h"
#include "api/structured_output.h"
#include "api/template_vars.h"
#include "api/json_util.h"
#include "api/thinking.h"
#include "core/json_text.h"
#include "core/random_id.h"
#include "http/sse.h"

namespace zl::api::anthropic {
namespace json = boost::json;
namespace {

// Text of a content value: a string, or text blocks joined by newlines.
// Non-text blocks are handled by the caller (parse_message).
std::string text_of(const json::value& content, const std::string& param) {
  if (content.is_string()) return std::string(content.get_string());
  const auto& blocks = json_array(content, param);
  std::string out;
  for (size_t j = 0; j < blocks.size(); ++j) {
    const std::string bp = index_param(param, j);
    const auto& b = json_object(blocks[j], bp);
    const std::string type = json_string(require_field(b, "type", bp + ".type"), bp + ".type");
    if (type == "text") {
      if (!out.empty()) out += '\n';
      out += json_string(require_field(b, "text", bp + ".text"), bp + ".text");
    } else if (type == "image" || type == "document") {
      throw_field_error(bp + ".type", "'" + type + "' content is not supported by this model", ErrorReason::kUnsupportedContent);
    }
    // Other block types (thinking, search results, …) carry nothing for the prompt.
  }
  return out;
}

// A thinking or redacted_thinking block of an assistant turn.
ThinkingBlock parse_thinking(const json::object& b, const std::string& type, const std::string& bp) {
  ThinkingBlock t{.redacted = type == "redacted_thinking"};
  if (t.redacted) return t;
  if (const auto* f = find_field(b, "thinking")) t.text = json_string(*f, bp + ".thinking");
  if (const auto* f = find_field(b, "signature")) t.signature = json_string(*f, bp + ".signature");
  return t;
}

// One `messages` entry; tool_result blocks become role "tool" messages placed
// before the turn's own text.
void parse_message(const json::value& v, const std::string& param, std::vector<ChatMessage>* out) {
  const auto& m = json_object(v, param);
  const std::string role = json_string(require_field(m, "role", param + ".role"), param + ".role");
  if (role != "user" && role != "assistant" && role != "system") {
    throw_field_error(param + ".role", "must be 'user', 'assistant' or 'system', not '" + role + "'", ErrorReason::kInvalidRole);
  }
  const json::value& content = require_field(m, "content", param + ".content");
  ChatMessage msg{.role = role};
  if (content.is_string()) {
    msg.content = std::string(content.get_string());
    out->push_back(std::move(msg));
    return;
  }
  const auto& blocks = json_array(content, param + ".content");
  for (size_t j = 0; j < blocks.size(); ++j) {
    const std::string bp = index_param(param + ".content", j);
    const auto& b = json_object(blocks[j], bp);
    const std::string type = json_string(require_field(b, "type", bp + ".type"), bp + ".type");
    if (type == "text") {
      if (!msg.content.empty()) msg.content += '\n';
      msg.content += json_string(require_field(b, "text", bp + ".text"), bp + ".text");
    } else if (type == "tool_use") {
      const auto* input = find_field(b, "input");
      msg.tool_calls.push_back(ToolCall{
          .id = b.contains("id") ? json_string(b.at("id"), bp + ".id") : "",
          .name = json_string(require_field(b, "name", bp + ".name"), bp + ".name"),
          .arguments_json = input ? json_text(*input) : "{}"});
    } else if (type == "tool_result") {
      ChatMessage tool{.role = "tool"};
      tool.tool_call_id = json_string(require_field(b, "tool_use_id", bp + ".tool_use_id"), bp + ".tool_use_id");
      if (const auto* c = find_field(b, "content")) tool.content = text_of(*c, bp + ".content");
      if (const auto* e = find_field(b, "is_error"); e && json_bool(*e, bp + ".is_error")) {
        tool.content = "Error: " + tool.content;
      }
      out->push_back(std::move(tool));
    } else if ((type == "thinking" || type == "redacted_thinking") && role == "assistant") {
      msg.thinking.push_back(parse_thinking(b, type, bp));
    } else if (type == "image" || type == "document") {
      throw_field_error(bp + ".type", "'" + type + "' content is not supported by this model", ErrorReason::kUnsupportedContent);
    }
    // search_result, server tool blocks (and thinking outside assistant turns): nothing for the prompt.
  }
  if (!msg.content.empty() || !msg.tool_calls.empty() || !msg.thinking.empty() || blocks.empty()) {
    out->push_back(std::move(msg));
  }
}

// One client tool entry as OpenAI writes a function tool (ToolDef): the
// input_schema is its "parameters".
ToolDef parse_tool(const json::object& t, const std::string& param) {
  ToolDef def{.name = json_string(require_field(t, "name", param + ".name"), param + ".name")};
  check_tool_name(def.name, param + ".name");
  json::object fn;
  fn["name"] = def.name;
  if (const auto* d = find_field(t, "description")) fn["description"] = json_string(*d, param + ".description");
  if (const auto* schema = find_field(t, "input_schema")) fn["parameters"] = json_object(*schema, param + ".input_schema");
  json::object tool;
  tool["type"] = "function";
  tool["function"] = std::move(fn);
  def.json = json_text(tool);
  return def;
}

// Template variables (api/template_vars.h): output_config.effort is the
// variable reasoning_effort (gpt-oss's "Reasoning: high"; Anthropic's own
// effort levels are passed as sent), and chat_template_kwargs is accepted
// as on the OpenAI route (extension).
void parse_template_fields(const json::object& o, ChatRequest* r) {
  std::string effort;
  if (const auto* oc = find_field(o, "output_config"); oc && oc->is_object()) {
    if (const auto* e = find_field(oc->get_object(), "effort")) {
      effort = json_string(*e, "output_config.effort");
      if (effort != "low" && effort != "medium" && effort != "high" && effort != "max") {
        throw_field_error("output_config.effort", "must be 'low', 'medium', 'high' or 'max'", ErrorReason::kInvalidValue);
      }
    }
  }
  parse_template_vars(o, effort, r);
}

// The fields count_tokens and messages share: model, system, messages, tools,
// the template variables.
void parse_conversation(const json::object& o, ChatRequest* r) {
  r->model = json_string(require_field(o, "model", "model"), "model");
  if (const auto* s = find_field(o, "system")) {
    std::string sys = text_of(*s, "system");
    r->messages.push_back(ChatMessage{.role = "system", .content = std::move(sys)});
  }
  const auto& msgs = json_array(require_field(o, "messages", "messages"), "messages");
  if (msgs.empty()) throw_field_error("messages", "must contain at least one message", ErrorReason::kEmptyMessages);
  for (size_t i = 0; i < msgs.size(); ++i) {
    const size_t before = r->messages.size();
    parse_message(msgs[i], index_param("messages", i), &r->messages);
    for (size_t j = before; j < r->messages.size(); ++j) r->messages[j].source_index = static_cast<int32_t>(i);
  }
  // An assistant turn at the end is a prefill: the answer continues it.
  const json::object& last = msgs.back().get_object();
  r->continue_final_message = last.at("role").get_string() == "assistant";

  if (const auto* tools = find_field(o, "tools")) {
    // Server tools (a `type` other than "custom": web_search_20250305,
    // code_execution_*, bash_*, text_editor_*, …) run on Anthropic's side
    // and have no input_schema: accepted, so clients that always send them
    // keep working, but neither rendered into the prompt nor callable.
    const auto& arr = json_array(*tools, "tools");
    json::array client_tools;
    for (size_t i = 0; i < arr.size(); ++i) {
      const std::string tp = index_param("tools", i);
      const json::object& t = json_object(arr[i], tp);
      if (const auto* type = find_field(t, "type"); type && json_string(*type, tp + ".type") != "custom") continue;
      r->tools.push_back(parse_tool(t, tp));
      client_tools.push_back(arr[i]);
    }
    if (!client_tools.empty()) r->tools_json = json_text(client_tools);
  }
  if (const auto* tc = find_field(o, "tool_choice")) {
    const auto& c = json_object(*tc, "tool_choice");
    const std::string type = json_string(require_field(c, "type", "tool_choice.type"), "tool_choice.type");
    if (type == "tool") {
      const std::string name = json_string(require_field(c, "name", "tool_choice.name"), "tool_choice.name");
      check_tool_name(name, "tool_choice.name");
      r->tool_choice = "tool:" + name;
    } else if (type == "auto" || type == "any" || type == "none") {
      r->tool_choice = type;
    } else {
      throw_field_error("tool_choice.type", "must be 'auto', 'any', 'tool' or 'none'", ErrorReason::kInvalidValue);
    }
    if (const auto* d = find_field(c, "disable_parallel_tool_use")) {
      r->parallel_tool_calls = !json_bool(*d, "tool_choice.disable_parallel_tool_use");
    }
  }
  check_tool_choice(*r, "tool_choice.name");
  if (const auto* cm = find_field(o, "context_management")) {
    r->context_management = parse_context_management(*cm, "context_management");
  }
  parse_template_fields(o, r);
}

void parse_generation_fields(const json::object& o, ChatRequest* r) {
  r->max_tokens = json_int(require_field(o, "max_tokens", "max_tokens"), "max_tokens", 1, INT32_MAX);
  r->sampling.temperature = 1.0f;  // the Anthropic default
  if (const auto* f = find_field(o, "temperature")) {
    r->sampling.temperature = static_cast<float>(json_number(*f, "temperature", 0.0, 2.0));
  }
  if (const auto* f = find_field(o, "top_p")) {
    r->sampling.top_p = static_cast<float>(json_number(*f, "top_p", 0.0, 1.0));
    if (r->sampling.top_p <= 0) throw_field_error("top_p", "must be greater than 0", ErrorReason::kOutOfRange);
  }
  if (const auto* f = find_field(o, "top_k")) r->sampling.top_k = static_cast<int32_t>(json_int(*f, "top_k", 0, 1 << 30));
  // Extension (as on the OpenAI routes): the same seed, the same tokens.
  if (const auto* f = find_field(o, "seed")) {
    r->sampling.seed = static_cast<uint64_t>(json_int(*f, "seed", INT64_MIN, INT64_MAX));
  }
  if (const auto* f = find_field(o, "stop_sequences")) {
    const auto& arr = json_array(*f, "stop_sequences");
    for (size_t i = 0; i < arr.size(); ++i) {
      std::string s = json_string(arr[i], index_param("stop_sequences", i));
      if (s.empty()) throw_field_error(index_param("stop_sequences", i), "must not be empty", ErrorReason::kInvalidValue);
      r->stop.push_back(std::move(s));
    }
  }
  if (const auto* f = find_field(o, "metadata")) {
    const auto& md = json_object(*f, "metadata");
    if (const auto* u = find_field(md, "user_id")) r->user = json_string(*u, "metadata.user_id");
  }
  if (const auto* f = find_field(o, "stream")) r->stream = json_bool(*f, "stream");
  if (const auto* f = find_field(o, "stream_options")) {
    if (!r->stream) throw_field_error("stream_options", "only allowed with stream: true", ErrorReason::kInvalidValue);
    r->shape = parse_stream_options(*f, nullptr);
  }
  if (const auto* f = find_field(o, "thinking")) r->thinking = parse_anthropic_thinking(*f, r->max_tokens);
  parse_context_policy_field(o, r);  // extension (api/context_policy.h)
  parse_speculative_field(o, r);     // extension (api/speculative.h)
  parse_anthropic_output_format(o, r);  // structured outputs (api/structured_output.h)
}

void append_usage(std::string& out, const Usage& u) {
  out += "{\"input_tokens\":";
  append_json_int(out, u.n_prompt_tokens - u.n_cached_tokens);
  out += ",\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":";
  append_json_int(out, u.n_cached_tokens);
  out += ",\"output_tokens\":";
  append_json_int(out, u.n_generated_tokens);
  out += '}';
}

void append_stop(std::string& out, const Completion& c) {
  out += "\"stop_reason\":";
  append_json_string(out, stop_reason(c));
  out += ",\"stop_sequence\":";
  if (c.finish == FinishReason::kStopSequence) {
    append_json_string(out, c.stop_sequence);
  } else {
    out += "null";
  }
}

// Content blocks: a stream opens text block 0 at its start, as it always
// has, unless the request offered tools (lazy_blocks): then a block opens
// when it has something, text or a tool call, so an answer that is only a
// call has no empty text block before it. Indices follow the blocks' order.
class MessagesFormatter final : public EventFormatter {
 public:
  MessagesFormatter(std::string model, std::string request_id, bool lazy_blocks, ContextEditReport edits)
      : model_(std::move(model)), request_id_(std::move(request_id)), id_(random_id("msg_")), lazy_blocks_(lazy_blocks),
        edits_(std::move(edits)) {}

  void stream_start(const Usage& usage, std::string& out) override {
    std::string d = "{\"type\":\"message_start\",\"message\":{\"id\":\"" + id_ +
                    "\",\"type\":\"message\",\"role\":\"assistant\",\"model\":";
    append_json_string(d, model_);
    d += ",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":";
    append_usage(d, usage);
    d += "}}";
    http::append_sse_event(out, "message_start", d);
    if (!lazy_blocks_) open_text_block(out);
    http::append_sse_event(out, "ping", R"({"type":"ping"})");
  }

  void stream_text(std::string_view text, std::string& out) override {
    if (text_index_ < 0) open_text_block(out);
    std::string d = "{\"type\":\"content_block_delta\",\"index\":" + std::to_string(text_index_) +
                    ",\"delta\":{\"type\":\"text_delta\",\"text\":";
    append_json_string(d, text);
    d += "}}";
    http::append_sse_event(out, "content_block_delta", d);
  }

  // A thinking block: start with empty thinking and signature,
  // thinking_delta pieces, then the signature (signature_delta) and stop.
  void stream_thinking(std::string_view text, std::string& out) override {
    if (thinking_index_ < 0) {
      thinking_index_ = n_blocks_++;
      http::append_sse_event(out, "content_block_start",
                             "{\"type\":\"content_block_start\",\"index\":" + std::to_string(thinking_index_) +
                                 ",\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}");
    }
    signer_.update(text);
    std::string d = "{\"type\":\"content_block_delta\",\"index\":" + std::to_string(thinking_index_) +
                    ",\"delta\":{\"type\":\"thinking_delta\",\"thinking\":";
    append_json_string(d, text);
    d += "}}";
    http::append_sse_event(out, "content_block_delta", d);
  }

  void stream_thinking_end(std::string& out) override {
    if (thinking_index_ < 0) return;
    const std::string index = std::to_string(thinking_index_);
    std::string d = "{\"type\":\"content_block_delta\",\"index\":" + index +
                    ",\"delta\":{\"type\":\"signature_delta\",\"signature\":";
    append_json_string(d, signer_.signature());
    d += "}}";
    http::append_sse_event(out, "content_block_delta", d);
    http::append_sse_event(out, "content_block_stop", "{\"type\":\"content_block_stop\",\"index\":" + index + "}");
    thinking_index_ = -1;
  }

  // A tool_use block: start with `input: {}`, input_json_delta pieces, stop.
  void stream_tool_call_start(std::string_view name, std::string& out) override {
    close_text_block(out);
    tool_index_ = n_blocks_++;
    std::string d = "{\"type\":\"content_block_start\",\"index\":" + std::to_string(tool_index_) +
                    ",\"content_block\":{\"type\":\"tool_use\",\"id\":\"" + random_id("toolu_") + "\",\"name\":";
    append_json_string(d, name);
    d += ",\"input\":{}}}";
    http::append_sse_event(out, "content_block_start", d);
  }

  void stream_tool_call_delta(std::string_view arguments, std::string& out) override {
    std::string d = "{\"type\":\"content_block_delta\",\"index\":" + std::to_string(tool_index_) +
                    ",\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":";
    append_json_string(d, arguments);
    d += "}}";
    http::append_sse_event(out, "content_block_delta", d);
  }

  void stream_tool_call_end(std::string& out) override {
    http::append_sse_event(out, "content_block_stop",
                           "{\"type\":\"content_block_stop\",\"index\":" + std::to_string(tool_index_) + "}");
    tool_index_ = -1;
  }

  void stream_finish(const Completion& c, std::string& out) override {
    if (n_blocks_ == 0) open_text_block(out);  // nothing at all: one empty text block, as without tools
    close_text_block(out);
    std::string d = "{\"type\":\"message_delta\",\"delta\":{";
    append_stop(d, c);
    d += "},\"usage\":";
    append_usage(d, c.usage);
    append_applied_edits(d, edits_);
    d += '}';
    http::append_sse_event(out, "message_delta", d);
    http::append_sse_event(out, "message_stop", R"({"type":"message_stop"})");
  }

  void stream_error(const ApiError& e, std::string& out) override {
    http::append_sse_event(out, "error", anthropic_error_json(e, request_id_));
  }

  // The API's own keep-alive; @anthropic-ai/sdk skips it (core/streaming.ts).
  void stream_ping(std::string& out) override { http::append_sse_event(out, "ping", R"({"type":"ping"})"); }

  // A thought first (a thinking block with its signature). Then, without
  // tool calls: one text block, even an empty one (as always; none after a
  // thought when the model wrote nothing else).
  // With calls: the non-empty text blocks and the tool_use blocks in order.
  http::HttpResponse complete(const std::vector<AnswerPart>& answer, const Completion& c) override {
    http::HttpResponse r;
    std::string& d = r.body;
    d = "{\"id\":\"" + id_ + "\",\"type\":\"message\",\"role\":\"assistant\",\"model\":";
    append_json_string(d, model_);
    d += ",\"content\":[";
    bool first = true;
    for (const AnswerPart& p : answer) {
      if (p.kind != AnswerPart::Kind::kThinking) continue;
      if (!first) d += ',';
      first = false;
      d += "{\"type\":\"thinking\",\"thinking\":";
      append_json_string(d, p.text);
      d += ",\"signature\":";
      append_json_string(d, thought_signature(p.text));
      d += '}';
    }
    if (c.n_tool_calls == 0) {
      std::string text;
      for (const AnswerPart& p : answer) {
        if (p.kind == AnswerPart::Kind::kText) text += p.text;
      }
      if (first || !text.empty()) {
        if (!first) d += ',';
        d += "{\"type\":\"text\",\"text\":";
        append_json_string(d, text);
        d += '}';
      }
    } else {
      for (const AnswerPart& p : answer) {
        if (p.kind == AnswerPart::Kind::kThinking) continue;
        if (p.kind == AnswerPart::Kind::kText && p.text.empty()) continue;
        if (!first) d += ',';
        first = false;
        if (p.kind == AnswerPart::Kind::kText) {
          d += "{\"type\":\"text\",\"text\":";
          append_json_string(d, p.text);
          d += '}';
        } else {
          d += "{\"type\":\"tool_use\",\"id\":\"" + random_id("toolu_") + "\",\"name\":";
          append_json_string(d, p.call.name);
          d += ",\"input\":" + p.call.arguments_json + '}';
        }
      }
    }
    d += "],";
    append_stop(d, c);
    d += ",\"usage\":";
    append_usage(d, c.usage);
    append_applied_edits(d, edits_);
    d += '}';
    return r;
  }

  http::HttpResponse error(const ApiError& e) override { return anthropic_error_response(e, request_id_); }

 private:
  void open_text_block(std::string& out) {
    text_index_ = n_blocks_++;
    http::append_sse_event(out, "content_block_start",
                           "{\"type\":\"content_block_start\",\"index\":" + std::to_string(text_index_) +
                               ",\"content_block\":{\"type\":\"text\",\"text\":\"\"}}");
  }
  void close_text_block(std::string& out) {
    if (text_index_ < 0) return;
    http::append_sse_event(out, "content_block_stop",
                           "{\"type\":\"content_block_stop\",\"index\":" + std::to_string(text_index_) + "}");
    text_index_ = -1;
  }

  std::string model_;
  std::string request_id_;
  std::string id_;
  bool lazy_blocks_;
  ContextEditReport edits_;
  int n_blocks_ = 0;     // blocks opened so far: the next one's index
  int text_index_ = -1;  // the open text block, -1: none
  int tool_index_ = -1;  // the open tool_use block, -1: none
  int thinking_index_ = -1;  // the open thinking block, -1: none
  ThoughtSigner signer_;     // over the streamed thought
};

}  // namespace

ApiResult<ChatRequest> parse_messages_request(std::string_view body) {
  return parse_object_with<ChatRequest>(body, [](const json::object& o, ChatRequest* r) {
    parse_conversation(o, r);
    parse_generation_fields(o, r);
  });
}

ApiResult<ChatRequest> parse_count_tokens_request(std::string_view body) {
  return parse_object_with<ChatRequest>(body, [](const json::object& o, ChatRequest* r) {
    parse_conversation(o, r);
    // (it changes the prompt where the template has a switch)
    if (const auto* f = find_field(o, "thinking")) r->thinking = parse_anthropic_thinking(*f, std::nullopt);
  });
}

std::string_view stop_reason(const Completion& c) {
  switch (c.finish) {
    case FinishReason::kEndOfSequence: return c.n_tool_calls > 0 ? "tool_use" : "end_turn";
    case FinishReason::kMaxTokens: return c.max_tokens_clamped ? "model_context_window_exceeded" : "max_tokens";
    case FinishReason::kStopSequence: return "stop_sequence";
    case FinishReason::kContextWindow: return "model_context_window_exceeded";
    case FinishReason::kSafety: return "refusal";
    default: return "end_turn";
  }
}

std::unique_ptr<EventFormatter> make_formatter(std::string model, std::string request_id, bool lazy_blocks,
                                               ContextEditReport edits) {
  return std::make_unique<MessagesFormatter>(std::move(model), std::move(request_id), lazy_blocks, std::move(edits));
}

}  // namespace zl::api::anthropic
