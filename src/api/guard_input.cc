#include "api/guard_input.h"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <map>
#include <string>

#include "core/log.h"

namespace zl::api {
namespace {

// What screening found across the request's texts.
struct Screening {
  std::optional<uint32_t> blocked_by;
  std::map<uint32_t, int64_t> n_redacted;  // rule -> matches replaced
};

// Screens one text in place; false when a block rule matched.
bool screen(const guard::Guard& guard, std::string& text, Screening& s) {
  if (text.empty()) return true;
  guard::InputDecision d = guard.screen_input(text);
  if (d.blocked_by) {
    s.blocked_by = d.blocked_by;
    return false;
  }
  for (const guard::Match& m : d.matches) {
    if (guard.rule(m).input == guard::InputAction::kRedact) ++s.n_redacted[m.rule];
  }
  text = std::move(d.text);
  return true;
}

// Tool-call arguments as the model will see them: JSON escapes decoded
// (an OpenAI client sends the arguments as a JSON string it wrote itself, in
// which "\u0040" is "@"), so that an escape cannot hide a match. Arguments
// that are not JSON are screened as sent.
std::string decoded_arguments(const std::string& arguments_json) {
  boost::system::error_code ec;
  const boost::json::value v = boost::json::parse(arguments_json, ec);
  return ec ? arguments_json : boost::json::serialize(v);
}

// Every string in a JSON value, screened in place (a redaction stays
// inside its string, so the JSON stays well formed).
bool screen_json(const guard::Guard& guard, boost::json::value& v, Screening& s) {
  if (v.is_string()) {
    std::string text(v.get_string());
    if (!screen(guard, text, s)) return false;
    if (text != v.get_string()) v = text;
  } else if (v.is_array()) {
    for (boost::json::value& x : v.get_array()) {
      if (!screen_json(guard, x, s)) return false;
    }
  } else if (v.is_object()) {
    for (auto& kv : v.get_object()) {
      if (!screen_json(guard, kv.value(), s)) return false;
    }
  }
  return true;
}

bool screen_chat(const guard::Guard& guard, ChatRequest& chat, Screening& s) {
  if (!screen(guard, chat.prompt, s)) return false;
  for (ChatMessage& m : chat.messages) {
    if (!screen(guard, m.content, s)) return false;
    for (ToolCall& call : m.tool_calls) {
      std::string args = decoded_arguments(call.arguments_json);
      const std::string decoded = args;
      if (!screen(guard, args, s)) return false;
      if (args != decoded) call.arguments_json = std::move(args);  // redacted: the decoded form, redacted
    }
    // Thinking sent back in the history: a template may render it.
    for (ThinkingBlock& t : m.thinking) {
      if (!t.redacted && !screen(guard, t.text, s)) return false;
    }
  }
  // chat_template_kwargs: a template may render any of them.
  if (!chat.template_vars_json.empty()) {
    boost::system::error_code ec;
    boost::json::value vars = boost::json::parse(chat.template_vars_json, ec);
    if (!ec) {
      if (!screen_json(guard, vars, s)) return false;
      chat.template_vars_json = boost::json::serialize(vars);
    }
  }
  return true;
}

void report(std::string_view request_id, const std::string& rule, std::string_view action, int64_t n_matches,
            obs::EngineSink* sink) {
  if (sink) {
    for (int64_t i = 0; i < n_matches; ++i) sink->on_guard_action(rule, "input", action);
  }
  log::info("guard action", {{"request_id", request_id}, {"rule", rule}, {"direction", "input"},
                             {"action", action}, {"n_matches", n_matches}});
}

}  // namespace

std::optional<ApiError> guard_chat_input(const guard::Guard* guard, ChatRequest& chat, std::string_view request_id,
                                         obs::EngineSink* sink) {
  if (!guard || !guard->has_input_rules()) return std::nullopt;
  Screening s;
  if (!screen_chat(*guard, chat, s)) {
    const std::string& rule = guard->policy().rules[*s.blocked_by].name;
    report(request_id, rule, "block", 1, sink);
    return ApiError{.reason = ErrorReason::kSafetyViolation,
                    .message = "the request was refused by the guard rule '" + rule + "'",
                    .labels = {.rule = rule}};
  }
  for (const auto& [index, n] : s.n_redacted) report(request_id, guard->policy().rules[index].name, "redact", n, sink);
  return std::nullopt;
}

void register_guard_metrics(const guard::Guard& guard, obs::Family& actions) {
  for (const guard::Rule& r : guard.policy().rules) {
    if (r.input != guard::InputAction::kAllow) actions.counter({r.name, "input", std::string(input_action_name(r.input))});
    if (r.output != guard::OutputAction::kAllow) {
      actions.counter({r.name, "output", std::string(output_action_name(r.output))});
    }
  }
}

}  // namespace zl::api
