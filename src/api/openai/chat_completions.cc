#include "api/openai/chat_completions.h"

#include <ctime>

#include "api/context_policy.h"
#include "api/speculative.h"
#include "api/json_fields.h"
#include "api/json_util.h"
#include "api/openai/logprobs.h"
#include "api/structured_output.h"
#include "api/template_vars.h"
#include "core/json_text.h"
#include "core/random_id.h"
#include "http/sse.h"

namespace zl::api::openai {
namespace json = boost::json;
namespace {

// A message's content: a string, null, or an array of parts ({type:"text"}).
std::string content_text(const json::value* content, const std::string& param) {
  if (!content) return "";
  if (content->is_string()) return std::string(content->get_string());
  const auto& parts = json_array(*content, param);
  std::string out;
  for (size_t j = 0; j < parts.size(); ++j) {
    const std::string pp = index_param(param, j);
    const auto& p = json_object(parts[j], pp);
    const std::string type = json_string(require_field(p, "type", pp + ".type"), pp + ".type");
    if (type == "text") {
      if (!out.empty()) out += '\n';
      out += json_string(require_field(p, "text", pp + ".text"), pp + ".text");
    } else if (type == "image_url" || type == "input_audio" || type == "file") {
      throw_field_error(pp + ".type", "'" + type + "' content is not supported by this model", ErrorReason::kUnsupportedContent);
    }
  }
  return out;
}

ChatMessage parse_message(const json::value& v, const std::string& param) {
  const auto& m = json_object(v, param);
  ChatMessage msg;
  msg.role = json_string(require_field(m, "role", param + ".role"), param + ".role");
  if (msg.role == "developer") msg.role = "system";
  if (msg.role != "system" && msg.role != "user" && msg.role != "assistant" && msg.role != "tool") {
    throw_field_error(param + ".role", "must be 'system', 'developer', 'user', 'assistant' or 'tool'", ErrorReason::kInvalidRole);
  }
  msg.content = content_text(find_field(m, "content"), param + ".content");
  if (const auto* rc = find_field(m, "reasoning_content"); rc && msg.role == "assistant" && !rc->is_null()) {
    std::string text = json_string(*rc, param + ".reasoning_content");
    if (!text.empty()) msg.thinking.push_back(ThinkingBlock{.text = std::move(text)});
  }
  if (msg.role == "tool") {
    if (const auto* id = find_field(m, "tool_call_id")) msg.tool_call_id = json_string(*id, param + ".tool_call_id");
  }
  if (const auto* calls = find_field(m, "tool_calls")) {
    const auto& arr = json_array(*calls, param + ".tool_calls");
    for (size_t i = 0; i < arr.size(); ++i) {
      const std::string cp = index_param(param + ".tool_calls", i);
      const auto& c = json_object(arr[i], cp);
      const auto& fn = json_object(require_field(c, "function", cp + ".function"), cp + ".function");
      ToolCall tc;
      if (const auto* id = find_field(c, "id")) tc.id = json_string(*id, cp + ".id");
      tc.name = json_string(require_field(fn, "name", cp + ".function.name"), cp + ".function.name");
      if (const auto* a = find_field(fn, "arguments")) tc.arguments_json = json_string(*a, cp + ".function.arguments");
      msg.tool_calls.push_back(std::move(tc));
    }
  }
  return msg;
}

// Reasoning switches (api/thinking.h): chat_template_kwargs.enable_thinking
// (llama.cpp, vLLM) and reasoning_effort "none" turn the template's
// thinking off; other efforts keep it on. reasoning_effort is also the
// template variable of that name, and every chat_template_kwargs key a
// template variable (api/template_vars.h). thinking_budget_tokens: the
// engine's budget, as Anthropic's thinking.budget_tokens.
void parse_thinking_switch(const json::object& o, ChatRequest* r) {
  std::string effort;
  if (const auto* f = find_field(o, "reasoning_effort")) {
    effort = json_string(*f, "reasoning_effort");
    if (effort != "none" && effort != "minimal" && effort != "low" && effort != "medium" && effort != "high" &&
        effort != "xhigh") {
      throw_field_error("reasoning_effort", "must be 'none', 'minimal', 'low', 'medium', 'high' or 'xhigh'",
                        ErrorReason::kInvalidValue);
    }
    r->thinking.enabled = effort != "none";
  }
  // llama.cpp's extension: the thinking budget in tokens (no minimum).
  if (const auto* f = find_field(o, "thinking_budget_tokens")) {
    r->thinking.budget_tokens = static_cast<int32_t>(json_int(*f, "thinking_budget_tokens", 1, INT32_MAX));
  }
  parse_template_vars(o, effort, r);
}

// vLLM's stop extensions (ChatRequest::stop_token_ids, ignore_eos, min_tokens); after max_tokens.
void parse_vllm_stop_fields(const json::object& o, ChatRequest* r) {
  constexpr size_t kMaxStopTokenIds = 256;
  if (const auto* f = find_field(o, "stop_token_ids"); f && !f->is_null()) {
    const auto& arr = json_array(*f, "stop_token_ids");
    if (arr.size() > kMaxStopTokenIds) {
      throw_field_error("stop_token_ids", "must have at most " + std::to_string(kMaxStopTokenIds) + " ids",
                        ErrorReason::kInvalidValue);
    }
    for (size_t i = 0; i < arr.size(); ++i) {
      r->stop_token_ids.push_back(static_cast<int32_t>(json_int(arr[i], index_param("stop_token_ids", i), 0, INT32_MAX)));
    }
  }
  if (const auto* f = find_field(o, "ignore_eos"); f && !f->is_null()) r->ignore_eos = json_bool(*f, "ignore_eos");
  if (const auto* f = find_field(o, "min_tokens"); f && !f->is_null()) {
    r->min_tokens = static_cast<int32_t>(json_int(*f, "min_tokens", 0, INT32_MAX));
    if (r->max_tokens && r->min_tokens > *r->max_tokens) {
      throw_field_error("min_tokens", "must not exceed max_tokens (" + std::to_string(*r->max_tokens) + ")",
                        ErrorReason::kInvalidValue);
    }
  }
}

// Fields of vLLM's and llama-server's OpenAI routes whose meaning this server does not
// implement: a 400 naming the field when the value asks for something (a neutral value —
// null, false, best_of 1, ... — is accepted), never a different answer given silently.
void refuse_unsupported_extensions(const json::object& o) {
  const auto refuse = [](std::string_view field, std::string why) {
    throw_field_error(std::string(field), std::move(why), ErrorReason::kUnsupportedValue);
  };
  for (const char* field : {"functions", "function_call"}) {  // OpenAI's deprecated function calling
    if (const auto* f = find_field(o, field); f && !f->is_null()) refuse(field, "is not supported; use tools and tool_choice");
  }
  if (const auto* f = find_field(o, "prompt_logprobs"); f && !f->is_null()) {
    refuse("prompt_logprobs", "is not supported; /v1/completions gives the prompt's logprobs with echo: true and logprobs");
  }
  if (const auto* f = find_field(o, "best_of"); f && !f->is_null() && json_int(*f, "best_of", 1, 128) != 1) {
    refuse("best_of", "only best_of = 1 is supported");
  }
  if (const auto* f = find_field(o, "use_beam_search"); f && !f->is_null() && json_bool(*f, "use_beam_search")) {
    refuse("use_beam_search", "beam search is not supported");
  }
  if (const auto* f = find_field(o, "include_stop_str_in_output");
      f && !f->is_null() && json_bool(*f, "include_stop_str_in_output")) {
    refuse("include_stop_str_in_output", "a matched stop string is never part of the output");
  }
  if (const auto* f = find_field(o, "truncate_prompt_tokens"); f && !f->is_null()) {
    refuse("truncate_prompt_tokens", "is not supported; see context_policy");
  }
  if (const auto* f = find_field(o, "suffix"); f && !f->is_null() && !(f->is_string() && f->get_string().empty())) {
    refuse("suffix", "is not supported (no fill-in-the-middle)");
  }
  for (const auto& [field, neutral] : {std::pair<const char*, double>{"typical_p", 1}, {"mirostat", 0}, {"dry_multiplier", 0},
                                       {"xtc_probability", 0}, {"top_n_sigma", -1}}) {
    if (const auto* f = find_field(o, field); f && !f->is_null() && json_number(*f, field, -1e9, 1e9) != neutral) {
      refuse(field, "this sampler is not supported");
    }
  }
}

// Sampling, stop and stream fields shared by both endpoints. min_max_tokens: 0 for a
// completion that echoes its prompt (the prompt alone), else 1.
void parse_common(const json::object& o, ChatRequest* r, int64_t min_max_tokens = 1) {
  r->model = json_string(require_field(o, "model", "model"), "model");
  if (const auto* f = find_field(o, "max_completion_tokens")) {
    r->max_tokens = json_int(*f, "max_completion_tokens", min_max_tokens, INT32_MAX);
  } else if (const auto* f = find_field(o, "max_tokens")) {
    r->max_tokens = json_int(*f, "max_tokens", min_max_tokens, INT32_MAX);
  }
  if (const auto* f = find_field(o, "n"); f && !f->is_null()) r->n = static_cast<int32_t>(json_int(*f, "n", 1, kMaxChoices));
  SamplingParams& s = r->sampling;
  if (const auto* f = find_field(o, "temperature")) s.temperature = static_cast<float>(json_number(*f, "temperature", 0, 2));
  if (const auto* f = find_field(o, "top_p")) {
    s.top_p = static_cast<float>(json_number(*f, "top_p", 0, 1));
    if (s.top_p <= 0) throw_field_error("top_p", "must be greater than 0", ErrorReason::kOutOfRange);
  }
  if (const auto* f = find_field(o, "top_k")) s.top_k = static_cast<int32_t>(json_int(*f, "top_k", 0, 1 << 30));
  if (const auto* f = find_field(o, "min_p")) s.min_p = static_cast<float>(json_number(*f, "min_p", 0, 1));
  if (const auto* f = find_field(o, "presence_penalty")) {
    s.presence_penalty = static_cast<float>(json_number(*f, "presence_penalty", -2, 2));
  }
  if (const auto* f = find_field(o, "frequency_penalty")) {
    s.frequency_penalty = static_cast<float>(json_number(*f, "frequency_penalty", -2, 2));
  }
  if (const auto* f = find_field(o, "repetition_penalty")) {
    s.repetition_penalty = static_cast<float>(json_number(*f, "repetition_penalty", 0.01, 10));
  }
  if (const auto* f = find_field(o, "seed")) s.seed = static_cast<uint64_t>(json_int(*f, "seed", INT64_MIN, INT64_MAX));
  if (const auto* f = find_field(o, "logit_bias")) {
    for (const auto& [k, v] : json_object(*f, "logit_bias")) {
      const std::string p = "logit_bias." + std::string(k);
      char* end = nullptr;
      const std::string key(k);
      const long id = std::strtol(key.c_str(), &end, 10);
      if (key.empty() || *end != '\0' || id < 0 || id > INT32_MAX) throw_field_error(p, "keys must be token ids", ErrorReason::kInvalidValue);
      s.logit_bias[static_cast<int32_t>(id)] = static_cast<float>(json_number(v, p, -100, 100));
    }
  }
  if (const auto* f = find_field(o, "stop")) {
    if (f->is_string()) {
      r->stop.push_back(std::string(f->get_string()));
    } else {
      const auto& arr = json_array(*f, "stop");
      for (size_t i = 0; i < arr.size(); ++i) r->stop.push_back(json_string(arr[i], index_param("stop", i)));
    }
    for (size_t i = 0; i < r->stop.size(); ++i) {
      if (r->stop[i].empty()) throw_field_error(index_param("stop", i), "must not be empty", ErrorReason::kInvalidValue);
    }
  }
  parse_vllm_stop_fields(o, r);
  refuse_unsupported_extensions(o);
  parse_speculative_field(o, r);  // extension (api/speculative.h)
  if (const auto* f = find_field(o, "user")) r->user = json_string(*f, "user");
  if (const auto* f = find_field(o, "stream")) r->stream = json_bool(*f, "stream");
  if (const auto* f = find_field(o, "stream_options")) {
    if (!r->stream) throw_field_error("stream_options", "only allowed with stream: true", ErrorReason::kInvalidValue);
    r->shape = parse_stream_options(*f, &r->include_usage);
  }
}

void append_usage(std::string& out, const Usage& u) {
  out += "{\"prompt_tokens\":";
  append_json_int(out, u.n_prompt_tokens);
  out += ",\"completion_tokens\":";
  append_json_int(out, u.n_generated_tokens);
  out += ",\"total_tokens\":";
  append_json_int(out, u.n_prompt_tokens + u.n_generated_tokens);
  out += ",\"prompt_tokens_details\":{\"cached_tokens\":";
  append_json_int(out, u.n_cached_tokens);
  out += "}}";
}

// {"id":…,"object":…,"created":…,"model":…,   (open: the caller continues)
std::string answer_head(Kind kind, bool chunk, const std::string& id, int64_t created, const std::string& model) {
  std::string d = "{\"id\":\"" + id + "\",\"object\":\"";
  d += kind == Kind::kChat ? (chunk ? "chat.completion.chunk" : "chat.completion") : "text_completion";
  d += "\",\"created\":" + std::to_string(created) + ",\"model\":";
  append_json_string(d, model);
  d += ",\"system_fingerprint\":null,";
  return d;
}

// A stream's end: the usage chunk (stream_options.include_usage), then [DONE].
void append_stream_tail(std::string& out, Kind kind, bool include_usage, const std::string& id, int64_t created,
                        const std::string& model, const Usage& usage) {
  if (include_usage) {
    std::string d = answer_head(kind, /*chunk=*/true, id, created, model);
    d += "\"choices\":[],\"usage\":";
    append_usage(d, usage);
    d += '}';
    http::append_sse_data(out, d);
  }
  http::append_sse_data(out, "[DONE]");
}

class Formatter final : public EventFormatter {
 public:
  Formatter(Kind kind, std::string model, bool include_usage, bool logprobs, std::optional<std::string> echo,
            std::optional<ChoiceSlot> slot)
      : kind_(kind), model_(std::move(model)), include_usage_(include_usage), logprobs_(logprobs),
        echo_(std::move(echo)), index_(slot ? slot->index : 0), fan_out_(slot.has_value()),
        id_(slot ? slot->id : new_answer_id(kind)), created_(slot ? slot->created : std::time(nullptr)) {}

  void stream_start(const Usage&, std::string& out) override {
    if (kind_ == Kind::kChat) chunk(out, R"({"role":"assistant","content":""})", nullptr);
    if (kind_ == Kind::kCompletion && echo_) {  // the prompt first, with its tokens' logprobs
      std::string delta;
      append_json_string(delta, *echo_);
      chunk(out, delta, nullptr);
    }
  }

  void stream_text(std::string_view text, std::string& out) override {
    std::string delta;
    if (kind_ == Kind::kChat) {
      delta = "{\"content\":";
      append_json_string(delta, text);
      delta += '}';
    } else {
      append_json_string(delta, text);
    }
    chunk(out, delta, nullptr);
  }

  // As OpenAI streams a call: its head (index, id, type, name) with empty
  // arguments, then chunks with pieces of the arguments.
  void stream_tool_call_start(std::string_view name, std::string& out) override {
    call_index_ = n_calls_++;
    std::string d = "{\"tool_calls\":[{\"index\":" + std::to_string(call_index_) + ",\"id\":\"" + random_id("call_") +
                    "\",\"type\":\"function\",\"function\":{\"name\":";
    append_json_string(d, name);
    d += ",\"arguments\":\"\"}}]}";
    chunk(out, d, nullptr);
  }

  void stream_tool_call_delta(std::string_view arguments, std::string& out) override {
    std::string d = "{\"tool_calls\":[{\"index\":" + std::to_string(call_index_) + ",\"function\":{\"arguments\":";
    append_json_string(d, arguments);
    d += "}}]}";
    chunk(out, d, nullptr);
  }

  void stream_tool_call_end(std::string&) override {}

  // llama.cpp's and DeepSeek's field: delta.reasoning_content.
  void stream_thinking(std::string_view text, std::string& out) override {
    if (kind_ != Kind::kChat) return;
    std::string d = "{\"reasoning_content\":";
    append_json_string(d, text);
    d += '}';
    chunk(out, d, nullptr);
  }

  // One choice of several ends with its last chunk: the fan-out writes the tail.
  void stream_finish(const Completion& c, std::string& out) override {
    chunk(out, kind_ == Kind::kChat ? "{}" : "\"\"", &c);
    if (!fan_out_) append_stream_tail(out, kind_, include_usage_, id_, created_, model_, c.usage);
  }

  void stream_error(const ApiError& e, std::string& out) override { http::append_sse_data(out, openai_error_json(e)); }

  // An SSE comment line. OpenAI streams have no keep-alive event, and a
  // data frame would reach the SDK as a chunk; the openai SDK's SSE decoder
  // skips lines that start with ':' and yields nothing for a frame that had
  // neither event nor data (SSEDecoder.decode in
  // tests/sdk/node_modules/openai/src/core/streaming.ts), as the SSE spec says.
  void stream_ping(std::string& out) override { http::append_sse_comment(out, "ping"); }

  void take_logprobs(std::span<const TokenLogprobs> logprobs) override {
    pending_logprobs_.insert(pending_logprobs_.end(), logprobs.begin(), logprobs.end());
  }

  // content is null when the answer is only tool calls.
  http::HttpResponse complete(const std::vector<AnswerPart>& answer, const Completion& c) override {
    http::HttpResponse r;
    std::string& d = r.body;
    std::string text;
    std::string reasoning;
    for (const AnswerPart& p : answer) (p.kind == AnswerPart::Kind::kThinking ? reasoning : text) += p.text;
    d = head();
    d += "\"choices\":[{\"index\":" + std::to_string(index_) + ',';
    if (kind_ == Kind::kChat) {
      d += "\"message\":{\"role\":\"assistant\",\"content\":";
      if (text.empty() && c.n_tool_calls > 0) {
        d += "null";
      } else {
        append_json_string(d, text);
      }
      if (c.n_tool_calls > 0) append_tool_calls(d, answer);
      if (!reasoning.empty()) {
        d += ",\"reasoning_content\":";
        append_json_string(d, reasoning);
      }
      d += ",\"refusal\":null},";
    } else {
      d += "\"text\":";
      append_json_string(d, echo_ ? *echo_ + text : text);
      d += ',';
    }
    d += "\"logprobs\":";
    append_logprobs(d, /*whole=*/true);
    d += ",\"finish_reason\":";
    append_json_string(d, finish_reason(c));
    d += "}],\"usage\":";
    append_usage(d, c.usage);
    d += '}';
    return r;
  }

  http::HttpResponse error(const ApiError& e) override { return openai_error_response(e); }

 private:
  std::string head() const { return answer_head(kind_, streamed_object_, id_, created_, model_); }

  // ,"tool_calls":[{"id","type":"function","function":{"name","arguments":"<json>"}}…]
  static void append_tool_calls(std::string& d, const std::vector<AnswerPart>& answer) {
    d += ",\"tool_calls\":[";
    bool first = true;
    for (const AnswerPart& p : answer) {
      if (p.kind != AnswerPart::Kind::kToolCall) continue;
      if (!first) d += ',';
      first = false;
      d += "{\"id\":\"" + random_id("call_") + "\",\"type\":\"function\",\"function\":{\"name\":";
      append_json_string(d, p.call.name);
      d += ",\"arguments\":";
      append_json_string(d, p.call.arguments_json);
      d += "}}";
    }
    d += ']';
  }

  // The entries taken and not yet written, in the endpoint's shape; then none are pending.
  // null when there are none, except in a whole answer that asked for them (an empty list).
  void append_logprobs(std::string& d, bool whole) {
    if (pending_logprobs_.empty() && !(whole && logprobs_)) {
      d += "null";
      return;
    }
    if (kind_ == Kind::kChat) {
      d += "{\"content\":";
      append_chat_logprobs(d, pending_logprobs_);
      d += whole ? ",\"refusal\":null}" : "}";
    } else {
      append_completion_logprobs(d, pending_logprobs_, &text_offset_);
    }
    pending_logprobs_.clear();
  }

  // One chunk: `delta` is the chat delta object or the completion text.
  void chunk(std::string& out, std::string_view delta, const Completion* fin) {
    streamed_object_ = true;
    std::string d = head();
    d += "\"choices\":[{\"index\":" + std::to_string(index_) + ',';
    d += kind_ == Kind::kChat ? "\"delta\":" : "\"text\":";
    d += delta;
    // The tokens that arrived since the last chunk (take_logprobs), whatever this one says.
    d += ",\"logprobs\":";
    append_logprobs(d, /*whole=*/false);
    d += ",\"finish_reason\":";
    if (fin) {
      append_json_string(d, finish_reason(*fin));
    } else {
      d += "null";
    }
    d += "}]";
    if (include_usage_) d += ",\"usage\":null";
    d += '}';
    http::append_sse_data(out, d);
  }

  Kind kind_;
  std::string model_;
  bool include_usage_;
  bool logprobs_;  // asked for (Request::logprobs): a whole answer has them even when empty
  std::optional<std::string> echo_;  // completions echo: the prompt's text, before the answer's
  int index_;     // the choice's index
  bool fan_out_;  // one choice of several (ChoiceSlot): no stream tail
  std::vector<TokenLogprobs> pending_logprobs_;  // taken, not yet written
  int64_t text_offset_ = 0;  // completions: the next token's text_offset
  std::string id_;
  int64_t created_;
  bool streamed_object_ = false;
  int n_calls_ = 0;  // tool calls streamed so far: the next one's index
  int call_index_ = 0;  // the call being streamed
};

}  // namespace

// A prompt of token ids: a non-empty array of integers (the vocabulary is checked later, by
// PromptCodec::decode_prompt).
static std::vector<int32_t> parse_token_ids(const json::array& arr, const std::string& param) {
  if (arr.empty()) throw_field_error(param, "must not be empty", ErrorReason::kInvalidValue);
  std::vector<int32_t> ids;
  ids.reserve(arr.size());
  for (size_t i = 0; i < arr.size(); ++i) ids.push_back(static_cast<int32_t>(json_int(arr[i], index_param(param, i), 0, INT32_MAX)));
  return ids;
}

// Logprobs (Request::logprobs). Chat: `logprobs: true` turns them on, `top_logprobs` (0..20)
// asks for alternatives and needs them on. Completions: `logprobs` (0..5) is the number of
// alternatives, 0 the chosen token's only; false and null are off, as on OpenAI.
static void parse_logprobs(const json::object& o, bool chat, ChatRequest* r) {
  const auto* f = find_field(o, "logprobs");
  if (!chat) {
    if (!f || (f->is_bool() && !f->get_bool())) return;
    r->logprobs = static_cast<int32_t>(json_int(*f, "logprobs", 0, 5));
    return;
  }
  const bool on = f && json_bool(*f, "logprobs");
  int32_t n_top = 0;
  if (const auto* t = find_field(o, "top_logprobs")) {
    n_top = static_cast<int32_t>(json_int(*t, "top_logprobs", 0, 20));
    if (n_top > 0 && !on) {
      throw_field_error("top_logprobs", "requires logprobs: true", ErrorReason::kInvalidRequest);
    }
  }
  if (on) r->logprobs = n_top;
}

ApiResult<ChatRequest> parse_chat_request(std::string_view body) {
  return parse_object_with<ChatRequest>(body, [](const json::object& o, ChatRequest* r) {
    parse_common(o, r);
    parse_logprobs(o, /*chat=*/true, r);
    const auto& msgs = json_array(require_field(o, "messages", "messages"), "messages");
    if (msgs.empty()) throw_field_error("messages", "must contain at least one message", ErrorReason::kEmptyMessages);
    for (size_t i = 0; i < msgs.size(); ++i) {
      r->messages.push_back(parse_message(msgs[i], index_param("messages", i)));
      r->messages.back().source_index = static_cast<int32_t>(i);
    }
    parse_context_policy_field(o, r);  // extension (api/context_policy.h)
    r->continue_final_message = r->messages.back().role == "assistant";
    parse_thinking_switch(o, r);
    if (const auto* t = find_field(o, "tools")) {
      const auto& arr = json_array(*t, "tools");
      for (size_t i = 0; i < arr.size(); ++i) {
        const std::string tp = index_param("tools", i);
        const auto& tool = json_object(arr[i], tp);
        if (json_string(require_field(tool, "type", tp + ".type"), tp + ".type") != "function") {
          throw_field_error(tp + ".type", "must be 'function'", ErrorReason::kInvalidValue);
        }
        const auto& fn = json_object(require_field(tool, "function", tp + ".function"), tp + ".function");
        std::string name = json_string(require_field(fn, "name", tp + ".function.name"), tp + ".function.name");
        check_tool_name(name, tp + ".function.name");
        r->tools.push_back(ToolDef{.name = std::move(name), .json = json_text(tool)});
      }
      r->tools_json = json_text(*t);
    }
    if (const auto* tc = find_field(o, "tool_choice")) {
      if (tc->is_string()) {
        const std::string c(tc->get_string());
        if (c != "none" && c != "auto" && c != "required") {
          throw_field_error("tool_choice", "must be 'none', 'auto', 'required' or {\"type\": \"function\", ...}",
                            ErrorReason::kInvalidValue);
        }
        r->tool_choice = c == "required" ? "any" : c;
      } else {
        const auto& c = json_object(*tc, "tool_choice");
        if (json_string(require_field(c, "type", "tool_choice.type"), "tool_choice.type") != "function") {
          throw_field_error("tool_choice.type", "must be 'function'", ErrorReason::kInvalidValue);
        }
        const auto& fn = json_object(require_field(c, "function", "tool_choice.function"), "tool_choice.function");
        const std::string name = json_string(require_field(fn, "name", "tool_choice.function.name"),
                                             "tool_choice.function.name");
        check_tool_name(name, "tool_choice.function.name");
        r->tool_choice = "tool:" + name;
      }
    }
    if (const auto* f = find_field(o, "parallel_tool_calls")) r->parallel_tool_calls = json_bool(*f, "parallel_tool_calls");
    check_tool_choice(*r, "tool_choice.function.name");
    parse_openai_response_format(o, r);  // structured output (api/structured_output.h)
    parse_guided_decoding(o, r);  // vLLM's and llama-server's
  });
}

ApiResult<ChatRequest> parse_completion_request(std::string_view body) {
  return parse_object_with<ChatRequest>(body, [](const json::object& o, ChatRequest* r) {
    if (const auto* e = find_field(o, "echo")) r->echo = json_bool(*e, "echo");
    parse_common(o, r, r->echo ? 0 : 1);
    parse_logprobs(o, /*chat=*/false, r);
    if (r->echo) r->prompt_logprobs = r->logprobs;
    if (!r->max_tokens) r->max_tokens = 16;  // the OpenAI default for completions
    r->raw_prompt = true;
    // A string, token ids, or an array of prompts (strings or arrays of token ids), each
    // answered as n choices of its own.
    const json::value& p = require_field(o, "prompt", "prompt");
    if (p.is_string()) {
      r->prompt = std::string(p.get_string());
    } else {
      const auto& arr = json_array(p, "prompt");
      if (!arr.empty() && !arr[0].is_string() && !arr[0].is_array()) {
        r->prompt_ids = parse_token_ids(arr, "prompt");
      } else {
        if (arr.empty()) throw_field_error("prompt", "must not be empty", ErrorReason::kInvalidValue);
        if (static_cast<int64_t>(arr.size()) * r->n > kMaxChoices) {
          throw_field_error("prompt", "at most " + std::to_string(kMaxChoices) + " choices per request (prompts x n)",
                            ErrorReason::kInvalidValue);
        }
        for (size_t k = 0; k < arr.size(); ++k) {
          const std::string param = index_param("prompt", k);
          ChatRequest::RawPrompt one;
          if (arr[k].is_array()) {
            one.ids = parse_token_ids(arr[k].get_array(), param);
          } else {
            one.text = json_string(arr[k], param);
          }
          if (k == 0) {
            r->prompt = std::move(one.text), r->prompt_ids = std::move(one.ids);
          } else {
            r->more_prompts.push_back(std::move(one));
          }
        }
      }
    }
    parse_openai_response_format(o, r);  // structured output (api/structured_output.h)
    parse_guided_decoding(o, r);  // vLLM's and llama-server's
  });
}

std::string_view finish_reason(const Completion& c) {
  switch (c.finish) {
    case FinishReason::kEndOfSequence: return c.n_tool_calls > 0 ? "tool_calls" : "stop";
    case FinishReason::kMaxTokens:
    case FinishReason::kContextWindow: return "length";
    case FinishReason::kSafety: return "content_filter";
    default: return "stop";
  }
}

std::unique_ptr<EventFormatter> make_formatter(Kind kind, std::string model, bool include_usage, bool logprobs,
                                               std::optional<std::string> echo, std::optional<ChoiceSlot> slot) {
  return std::make_unique<Formatter>(kind, std::move(model), include_usage, logprobs, std::move(echo), std::move(slot));
}

std::string new_answer_id(Kind kind) { return random_id(kind == Kind::kChat ? "chatcmpl-" : "cmpl-"); }

// The choices' whole answers are this file's own bodies, `{head,"choices":[{"index":i,…}],
// "usage":{…}}`: spliced, not re-serialized (the choice's text is kept byte for byte). Inside
// a JSON string a quote is always escaped, so `],"usage":` only ever closes the choices.
FanOutFormat fan_out_format(Kind kind, std::string model, bool include_usage, std::string id, int64_t created) {
  FanOutFormat f;
  f.merge = [](const std::vector<std::string>& bodies, const Usage& usage) {
    constexpr std::string_view kOpen = "\"choices\":[", kClose = "],\"usage\":";
    std::string out;
    for (size_t i = 0; i < bodies.size(); ++i) {
      const std::string& b = bodies[i];
      const size_t open = b.find(kOpen), close = b.rfind(kClose);
      if (open == std::string::npos || close == std::string::npos || close < open) {
        throw std::logic_error("a choice's answer is not a chat.completion or text_completion body");
      }
      if (i == 0) {
        out.append(b, 0, open + kOpen.size());
      } else {
        out += ',';
      }
      out.append(b, open + kOpen.size(), close - open - kOpen.size());
    }
    out += kClose;
    append_usage(out, usage);
    out += '}';
    return out;
  };
  f.stream_tail = [kind, model = std::move(model), include_usage, id = std::move(id), created](const Usage& usage) {
    std::string out;
    append_stream_tail(out, kind, include_usage, id, created, model, usage);
    return out;
  };
  return f;
}

}  // namespace zl::api::openai
