// The soak test's answer checks: what a well-formed answer of each API looks
// like on the wire, and which 5xx answers are allowed (the typed overload:
// 529 overloaded_error, or 503 during a drain, in the API's error envelope).
// Each check returns an empty string when the answer is good, else what is
// wrong with it (the soak test records it as a failure).
#pragma once

#include <boost/json.hpp>
#include <string>
#include <vector>

#include "support/http_client.h"

namespace zl::soak {

namespace json = boost::json;

enum class Api { kAnthropic, kOpenAIChat, kOpenAICompletion };

// Parses `text` into `out`; false when it is not a JSON object.
inline bool parse_object(std::string_view text, json::object& out) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec || !v.is_object()) return false;
  out = std::move(v.get_object());
  return true;
}

inline std::string str_of(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

inline const json::object* obj_of(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_object() ? &v->get_object() : nullptr;
}

inline int64_t int_of(const json::object& o, std::string_view key, int64_t missing = -1) {
  const json::value* v = o.if_contains(key);
  return v && v->is_int64() ? v->get_int64() : missing;
}

inline std::string snippet(const std::string& s) { return s.size() > 300 ? s.substr(0, 300) + "..." : s; }

// The error type and reason of an error envelope of either API ("" when the
// body is not one). Anthropic: {"type":"error","error":{"type",..,"detail":{"reason"}}};
// OpenAI: {"error":{"type","code",...}}.
struct ErrorInfo {
  std::string type;
  std::string reason;
};
inline bool error_info(const json::object& o, ErrorInfo& out) {
  const json::object* e = obj_of(o, "error");
  if (!e) return false;
  out.type = str_of(*e, "type");
  if (const json::object* d = obj_of(*e, "detail")) out.reason = str_of(*d, "reason");
  if (out.reason.empty()) out.reason = str_of(*e, "code");
  return !out.type.empty() && !str_of(*e, "message").empty();
}

// True for a typed overload answer: 529 overloaded_error (or 503 during a
// drain) with an error envelope of the API.
inline bool typed_overload(const test::HttpReply& r) {
  if (r.status != 529 && r.status != 503) return false;
  json::object o;
  ErrorInfo e;
  return parse_object(r.body, o) && error_info(o, e) && (e.type == "overloaded_error" || e.reason == "overloaded");
}

// An error answer with status `status` and the API's envelope; `reason` must
// match when given.
inline std::string check_error(const test::HttpReply& r, int status, const std::string& reason = "") {
  if (!r.complete) return "no complete answer (status " + std::to_string(r.status) + ")";
  if (r.status != status) return "status " + std::to_string(r.status) + " (want " + std::to_string(status) + "): " + snippet(r.body);
  json::object o;
  ErrorInfo e;
  if (!parse_object(r.body, o) || !error_info(o, e)) return "not an error envelope: " + snippet(r.body);
  if (!reason.empty() && e.reason != reason) return "reason '" + e.reason + "' (want " + reason + "): " + snippet(r.body);
  return "";
}

inline std::string check_usage_bound(int64_t n_out, int max_tokens) {
  if (n_out < 0 || n_out > max_tokens) {
    return "output tokens " + std::to_string(n_out) + " outside [0, " + std::to_string(max_tokens) + "]";
  }
  return "";
}

inline std::string check_anthropic_message(const json::object& o, int max_tokens) {
  if (str_of(o, "type") != "message" || str_of(o, "role") != "assistant") return "not a message";
  const json::value* content = o.if_contains("content");
  if (!content || !content->is_array()) return "no content array";
  for (const json::value& b : content->get_array()) {
    if (!b.is_object() || str_of(b.get_object(), "type") != "text") return "a content block is not text";
  }
  const std::string stop = str_of(o, "stop_reason");
  if (stop != "end_turn" && stop != "max_tokens" && stop != "stop_sequence" && stop != "model_context_window_exceeded") {
    return "stop_reason '" + stop + "'";
  }
  const json::object* u = obj_of(o, "usage");
  if (!u || int_of(*u, "input_tokens") <= 0) return "no usage.input_tokens";
  return check_usage_bound(int_of(*u, "output_tokens"), max_tokens);
}

inline std::string check_openai_object(const json::object& o, Api api, int max_tokens) {
  const bool chat = api == Api::kOpenAIChat;
  if (str_of(o, "object") != (chat ? "chat.completion" : "text_completion")) return "object '" + str_of(o, "object") + "'";
  const json::value* choices = o.if_contains("choices");
  if (!choices || !choices->is_array() || choices->get_array().size() != 1) return "not one choice";
  const json::object& c = choices->get_array()[0].as_object();
  if (chat) {
    const json::object* m = obj_of(c, "message");
    if (!m || str_of(*m, "role") != "assistant" || !m->if_contains("content")) return "no assistant message";
  } else if (!c.if_contains("text") || !c.at("text").is_string()) {
    return "no text";
  }
  const std::string finish = str_of(c, "finish_reason");
  if (finish != "stop" && finish != "length") return "finish_reason '" + finish + "'";
  const json::object* u = obj_of(o, "usage");
  if (!u || int_of(*u, "prompt_tokens") <= 0) return "no usage.prompt_tokens";
  return check_usage_bound(int_of(*u, "completion_tokens"), max_tokens);
}

// An Anthropic SSE body: message_start first, message_stop last, every frame
// an event whose data is an object of that type, a final message_delta with
// a stop reason. An `error` event sets *overloaded when it is the typed overload.
inline std::string check_anthropic_stream(const std::string& body, int max_tokens, bool* overloaded) {
  const std::vector<test::SseEvent> ev = test::parse_sse(body);
  if (ev.size() < 2) return "fewer than 2 events";
  std::string stop_reason;
  for (const test::SseEvent& e : ev) {
    json::object o;
    if (e.event.empty() || !parse_object(e.data, o) || str_of(o, "type") != e.event) return "bad frame: " + snippet(e.data);
    if (e.event == "error") {
      ErrorInfo info;
      error_info(o, info);
      *overloaded = info.type == "overloaded_error";
      return *overloaded ? "" : "error event: " + snippet(e.data);
    }
    if (e.event == "message_delta") {
      const json::object* d = obj_of(o, "delta");
      stop_reason = d ? str_of(*d, "stop_reason") : "";
      const json::object* u = obj_of(o, "usage");
      if (!u) return "message_delta without usage";
      if (std::string bad = check_usage_bound(int_of(*u, "output_tokens"), max_tokens); !bad.empty()) return bad;
    }
  }
  if (ev.front().event != "message_start") return "first event " + ev.front().event;
  if (ev.back().event != "message_stop") return "last event " + ev.back().event;
  if (stop_reason.empty()) return "no stop_reason in message_delta";
  return "";
}

// An OpenAI SSE body: data-only frames of chunk objects, one finish_reason,
// then `data: [DONE]`.
inline std::string check_openai_stream(const std::string& body, Api api, bool* overloaded) {
  const std::vector<test::SseEvent> ev = test::parse_sse(body);
  if (ev.empty() || ev.back().data != "[DONE]") return "no [DONE] at the end";
  const std::string want = api == Api::kOpenAIChat ? "chat.completion.chunk" : "text_completion";
  int n_finish = 0;
  for (size_t i = 0; i + 1 < ev.size(); ++i) {
    if (ev[i].data.empty()) continue;  // `: ping` comments
    json::object o;
    if (!parse_object(ev[i].data, o)) return "bad frame: " + snippet(ev[i].data);
    ErrorInfo info;
    if (error_info(o, info)) {
      *overloaded = info.reason == "overloaded" || info.type == "overloaded_error";
      return *overloaded ? "" : "error frame: " + snippet(ev[i].data);
    }
    if (str_of(o, "object") != want) return "object '" + str_of(o, "object") + "'";
    const json::value* choices = o.if_contains("choices");
    if (!choices || !choices->is_array()) return "no choices";
    for (const json::value& c : choices->get_array()) {
      if (c.is_object() && !str_of(c.get_object(), "finish_reason").empty()) ++n_finish;
    }
  }
  if (n_finish != 1) return std::to_string(n_finish) + " finish reasons";
  return "";
}

}  // namespace zl::soak
