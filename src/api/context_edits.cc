#include "api/context_edits.h"

#include <algorithm>
#include <boost/json/object.hpp>
#include <initializer_list>
#include <string_view>
#include <unordered_map>

#include "api/json_fields.h"
#include "api/json_util.h"

namespace zl::api {
namespace json = boost::json;
namespace {

constexpr std::string_view kClearToolUses = "clear_tool_uses_20250919";
constexpr std::string_view kClearThinking = "clear_thinking_20251015";

// ---- parsing ----

// {"type": <expected>, "value": <integer >= min>}: the value.
int64_t typed_count(const json::value& v, const std::string& param, std::string_view expected, int64_t min) {
  const json::object& o = json_object(v, param);
  const std::string type = json_string(require_field(o, "type", param + ".type"), param + ".type");
  if (type != expected) throw_field_error(param + ".type", "must be '" + std::string(expected) + "'", ErrorReason::kInvalidValue);
  return json_int(require_field(o, "value", param + ".value"), param + ".value", min, INT64_MAX);
}

std::vector<std::string> tool_names(const json::value& v, const std::string& param) {
  std::vector<std::string> names;
  const json::array& arr = json_array(v, param);
  for (size_t i = 0; i < arr.size(); ++i) names.push_back(json_string(arr[i], index_param(param, i)));
  return names;
}

ClearToolUsesEdit parse_clear_tool_uses(const json::object& e, const std::string& param) {
  ClearToolUsesEdit edit;
  if (const auto* t = find_field(e, "trigger")) {
    const std::string tp = param + ".trigger";
    const json::object& o = json_object(*t, tp);
    const std::string type = json_string(require_field(o, "type", tp + ".type"), tp + ".type");
    if (type == "input_tokens") {
      edit.trigger = ClearToolUsesEdit::Trigger::kInputTokens;
    } else if (type == "tool_uses") {
      edit.trigger = ClearToolUsesEdit::Trigger::kToolUses;
    } else {
      throw_field_error(tp + ".type", "must be 'input_tokens' or 'tool_uses'", ErrorReason::kInvalidValue);
    }
    edit.trigger_value = json_int(require_field(o, "value", tp + ".value"), tp + ".value", 1, INT64_MAX);
  }
  if (const auto* k = find_field(e, "keep")) edit.keep_tool_uses = typed_count(*k, param + ".keep", "tool_uses", 0);
  if (const auto* c = find_field(e, "clear_at_least")) {
    edit.clear_at_least = typed_count(*c, param + ".clear_at_least", "input_tokens", 0);
  }
  if (const auto* c = find_field(e, "clear_tool_inputs")) {
    if (c->is_bool()) {
      edit.clear_all_inputs = c->get_bool();
    } else if (c->is_array()) {
      edit.clear_input_tools = tool_names(*c, param + ".clear_tool_inputs");
    } else {
      throw_field_error(param + ".clear_tool_inputs", "expected a boolean or an array of tool names",
                        ErrorReason::kInvalidType);
    }
  }
  if (const auto* x = find_field(e, "exclude_tools")) edit.exclude_tools = tool_names(*x, param + ".exclude_tools");
  return edit;
}

ClearThinkingEdit parse_clear_thinking(const json::object& e, const std::string& param) {
  ClearThinkingEdit edit;
  const json::value* k = find_field(e, "keep");
  if (!k) return edit;
  if (k->is_string()) {
    if (k->get_string() != "all") {
      throw_field_error(param + ".keep", "must be 'all' or {\"type\":\"thinking_turns\",\"value\":N}",
                        ErrorReason::kInvalidValue);
    }
    edit.keep_turns.reset();
  } else {
    edit.keep_turns = typed_count(*k, param + ".keep", "thinking_turns", 0);
  }
  return edit;
}

// ---- the conversation's tool uses ----

// A tool use: the assistant's call and the result that answers it (either
// may be absent), oldest first by the position of its first part.
struct ToolUse {
  size_t call_msg = SIZE_MAX, call_index = 0;  // messages[call_msg].tool_calls[call_index]
  size_t result_msg = SIZE_MAX;                // messages[result_msg] (role "tool")
  std::string name;                            // "" for a result without its call
};

// O(messages + calls): calls waiting for their result are found by id.
std::vector<ToolUse> collect_tool_uses(const ChatRequest& chat) {
  std::vector<ToolUse> uses;
  std::unordered_map<std::string_view, std::vector<size_t>> waiting;  // id -> unanswered uses, oldest first
  for (size_t i = 0; i < chat.messages.size(); ++i) {
    const ChatMessage& m = chat.messages[i];
    for (size_t j = 0; j < m.tool_calls.size(); ++j) {
      waiting[m.tool_calls[j].id].push_back(uses.size());
      uses.push_back(ToolUse{.call_msg = i, .call_index = j, .name = m.tool_calls[j].name});
    }
    if (m.role != "tool") continue;
    // The newest unanswered call with this id (ids repeat only in odd clients).
    auto it = waiting.find(m.tool_call_id);
    if (it != waiting.end() && !it->second.empty()) {
      uses[it->second.back()].result_msg = i;
      it->second.pop_back();
    } else {
      uses.push_back(ToolUse{.result_msg = i});
    }
  }
  return uses;
}

bool contains(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

// What clearing `u` replaces. A part no longer than its placeholder is left
// alone: replacing it would save nothing (this also keeps what a prefix of
// cleared uses saves growing with the prefix, which the step search needs).
struct Clearing {
  bool result = false;
  bool input = false;
};

Clearing clearing_of(const ChatRequest& chat, const ToolUse& u, const ClearToolUsesEdit& edit) {
  Clearing c;
  if (u.result_msg != SIZE_MAX) c.result = chat.messages[u.result_msg].content.size() > kClearedToolResult.size();
  if (u.call_msg != SIZE_MAX && (edit.clear_all_inputs || contains(edit.clear_input_tools, u.name))) {
    c.input = chat.messages[u.call_msg].tool_calls[u.call_index].arguments_json.size() > kClearedToolInput.size();
  }
  return c;
}

struct Eligible {
  ToolUse use;
  Clearing clearing;
};

// Oldest first: the uses before the last `keep`, not excluded, with something to clear.
std::vector<Eligible> eligible_uses(const ChatRequest& chat, const ClearToolUsesEdit& edit,
                                    const std::vector<ToolUse>& uses) {
  std::vector<Eligible> out;
  const size_t n_old = uses.size() > static_cast<size_t>(edit.keep_tool_uses)
                           ? uses.size() - static_cast<size_t>(edit.keep_tool_uses) : 0;
  for (size_t i = 0; i < n_old; ++i) {
    if (!uses[i].name.empty() && contains(edit.exclude_tools, uses[i].name)) continue;
    const Clearing c = clearing_of(chat, uses[i], edit);
    if (c.result || c.input) out.push_back(Eligible{.use = uses[i], .clearing = c});
  }
  return out;
}

// `chat` with the first n eligible uses cleared (a copy: the caller keeps
// the original for the next candidate).
ChatRequest with_cleared(const ChatRequest& chat, const std::vector<Eligible>& eligible, size_t n) {
  ChatRequest out = chat;
  for (size_t i = 0; i < n; ++i) {
    const Eligible& e = eligible[i];
    if (e.clearing.result) out.messages[e.use.result_msg].content = kClearedToolResult;
    if (e.clearing.input) out.messages[e.use.call_msg].tool_calls[e.use.call_index].arguments_json = kClearedToolInput;
  }
  return out;
}

ApiResult<int64_t> count_tokens(const ChatRequest& chat, const PromptCodec& codec) {
  Result<std::vector<int32_t>> ids = codec.encode_chat(chat);
  if (!ids.ok()) {
    ApiError e = from_status(ids.status());
    if (ids.status().reason() == ErrorReason::kUnspecified && e.type() == ErrorType::kInvalidRequest) {
      e.reason = ErrorReason::kInvalidPrompt;
    }
    return e;
  }
  return static_cast<int64_t>(ids->size());
}

// ---- the edits; each takes the prompt's current count and updates it ----

ApiResult<std::optional<AppliedEdit>> clear_thinking(ChatRequest* chat, const ClearThinkingEdit& edit,
                                                     const PromptCodec& codec, int64_t* n_tokens) {
  if (!edit.keep_turns) return std::optional<AppliedEdit>();  // "all"
  std::vector<size_t> turns;  // assistant messages with thinking, oldest first
  for (size_t i = 0; i < chat->messages.size(); ++i) {
    if (chat->messages[i].role == "assistant" && !chat->messages[i].thinking.empty()) turns.push_back(i);
  }
  const size_t keep = static_cast<size_t>(std::min<int64_t>(*edit.keep_turns, INT32_MAX));
  if (turns.size() <= keep) return std::optional<AppliedEdit>();
  const size_t n_clear = turns.size() - keep;
  for (size_t i = 0; i < n_clear; ++i) chat->messages[turns[i]].thinking.clear();
  ApiResult<int64_t> after = count_tokens(*chat, codec);
  if (!after.ok()) return after.error();
  AppliedEdit applied{.kind = AppliedEdit::Kind::kClearThinking,
                      .n_cleared = static_cast<int64_t>(n_clear),
                      .n_cleared_tokens = *n_tokens - after.value()};
  *n_tokens = after.value();
  return std::optional<AppliedEdit>(applied);
}

// The cache rule (context_edits.h): with clear_at_least T, the shortest
// prefix of `eligible` that saves floor(all / T) * T; binary search on
// exact counts, keeping hi a prefix that saves enough.
ApiResult<size_t> step_prefix(const ChatRequest& chat, const std::vector<Eligible>& eligible, const PromptCodec& codec,
                              int64_t n_tokens, int64_t target) {
  size_t lo = 0, hi = eligible.size();  // prefix lo saves < target, prefix hi saves >= target
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    ApiResult<int64_t> n = count_tokens(with_cleared(chat, eligible, mid), codec);
    if (!n.ok()) return n.error();
    (n_tokens - n.value() >= target ? hi : lo) = mid;
  }
  return hi;
}

ApiResult<std::optional<AppliedEdit>> clear_tool_uses(ChatRequest* chat, const ClearToolUsesEdit& edit,
                                                      const PromptCodec& codec, int64_t* n_tokens) {
  const std::vector<ToolUse> uses = collect_tool_uses(*chat);
  const int64_t measure = edit.trigger == ClearToolUsesEdit::Trigger::kInputTokens
                              ? *n_tokens : static_cast<int64_t>(uses.size());
  if (measure <= edit.trigger_value) return std::optional<AppliedEdit>();
  const std::vector<Eligible> eligible = eligible_uses(*chat, edit, uses);
  if (eligible.empty()) return std::optional<AppliedEdit>();
  ChatRequest all = with_cleared(*chat, eligible, eligible.size());
  ApiResult<int64_t> n_all = count_tokens(all, codec);
  if (!n_all.ok()) return n_all.error();
  const int64_t saved_all = *n_tokens - n_all.value();
  if (saved_all <= 0 || saved_all < edit.clear_at_least) return std::optional<AppliedEdit>();
  size_t n_clear = eligible.size();
  int64_t n_after = n_all.value();
  if (edit.clear_at_least > 0) {
    const int64_t target = saved_all / edit.clear_at_least * edit.clear_at_least;
    ApiResult<size_t> n = step_prefix(*chat, eligible, codec, *n_tokens, target);
    if (!n.ok()) return n.error();
    n_clear = n.value();
    if (n_clear < eligible.size()) {
      all = with_cleared(*chat, eligible, n_clear);
      ApiResult<int64_t> counted = count_tokens(all, codec);
      if (!counted.ok()) return counted.error();
      n_after = counted.value();
    }
  }
  *chat = std::move(all);
  AppliedEdit applied{.kind = AppliedEdit::Kind::kClearToolUses,
                      .n_cleared = static_cast<int64_t>(n_clear),
                      .n_cleared_tokens = *n_tokens - n_after};
  *n_tokens = n_after;
  return std::optional<AppliedEdit>(applied);
}

}  // namespace

ContextManagement parse_context_management(const json::value& v, const std::string& param) {
  ContextManagement cm;
  const json::object& o = json_object(v, param);
  const json::value* edits = find_field(o, "edits");
  if (!edits) return cm;
  const json::array& arr = json_array(*edits, param + ".edits");
  for (size_t i = 0; i < arr.size(); ++i) {
    const std::string ep = index_param(param + ".edits", i);
    const json::object& e = json_object(arr[i], ep);
    const std::string type = json_string(require_field(e, "type", ep + ".type"), ep + ".type");
    const bool repeated = (type == kClearThinking && cm.clear_thinking) || (type == kClearToolUses && cm.clear_tool_uses);
    if (repeated) throw_field_error(ep + ".type", "'" + type + "' is given twice", ErrorReason::kInvalidValue);
    if (type == kClearThinking) {
      if (cm.clear_tool_uses) {
        throw_field_error(ep + ".type", "clear_thinking_20251015 must come before clear_tool_uses_20250919 in edits",
                          ErrorReason::kInvalidValue);
      }
      cm.clear_thinking = parse_clear_thinking(e, ep);
    } else if (type == kClearToolUses) {
      cm.clear_tool_uses = parse_clear_tool_uses(e, ep);
    } else {
      throw_field_error(ep + ".type", "unknown edit type '" + type + "': must be 'clear_tool_uses_20250919' or "
                        "'clear_thinking_20251015'", ErrorReason::kInvalidValue);
    }
  }
  return cm;
}

ApiResult<ContextEditReport> apply_context_edits(ChatRequest* chat, const PromptCodec& codec) {
  ContextEditReport report;
  if (!chat->context_management) return report;
  report.requested = true;
  ApiResult<int64_t> n = count_tokens(*chat, codec);
  if (!n.ok()) return n.error();
  report.n_original_tokens = report.n_tokens = n.value();
  const ContextManagement& cm = *chat->context_management;
  if (cm.clear_thinking) {
    auto applied = clear_thinking(chat, *cm.clear_thinking, codec, &report.n_tokens);
    if (!applied.ok()) return applied.error();
    if (applied.value()) report.applied.push_back(*applied.value());
  }
  if (cm.clear_tool_uses) {
    auto applied = clear_tool_uses(chat, *cm.clear_tool_uses, codec, &report.n_tokens);
    if (!applied.ok()) return applied.error();
    if (applied.value()) report.applied.push_back(*applied.value());
  }
  return report;
}

void append_applied_edits(std::string& out, const ContextEditReport& report) {
  if (!report.requested) return;
  out += ",\"context_management\":{\"applied_edits\":[";
  for (size_t i = 0; i < report.applied.size(); ++i) {
    const AppliedEdit& e = report.applied[i];
    const bool tools = e.kind == AppliedEdit::Kind::kClearToolUses;
    if (i > 0) out += ',';
    out += "{\"type\":";
    append_json_string(out, tools ? kClearToolUses : kClearThinking);
    out += tools ? ",\"cleared_tool_uses\":" : ",\"cleared_thinking_turns\":";
    append_json_int(out, e.n_cleared);
    out += ",\"cleared_input_tokens\":";
    append_json_int(out, e.n_cleared_tokens);
    out += '}';
  }
  out += "]}";
}

}  // namespace zl::api
