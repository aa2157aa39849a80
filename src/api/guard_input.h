// The guard's input rules on a parsed chat request, before the template, the
// tokenizer and admission (DESIGN.md §2: "guard.input").
//
// Every text the model would see is screened: each message's content (the
// system prompt, user and assistant turns, tool results), the arguments of
// earlier tool calls, and a raw completion prompt. Tool definitions are not
// (their schemas are the client's code, not conversation).
//   - a match of a rule with input = "block" refuses the request: a 400
//     invalid_request_error, error.detail.reason "safety_violation",
//     error.detail.rule the rule's name; nothing is queued;
//   - matches of rules with input = "redact" are replaced in place by
//     "[REDACTED:<kind or rule>]", so the prompt, count_tokens and usage all
//     count what the model sees.
// Each action is counted (obs::EngineSink::on_guard_action, direction
// "input": one per redacted match, one per block) and logged with the request
// id, the rule and the number of matches, never the matched text.
//
// Cost: O(bytes of the texts) (guard::Guard::screen_input). Thread-safe
// (the Guard is immutable).
#pragma once

#include <optional>
#include <string_view>

#include "api/chat.h"
#include "api/errors.h"
#include "guard/guard.h"
#include "obs/engine_sink.h"
#include "obs/metrics.h"

namespace zl::api {

// Screens `chat` in place. Returns the error to answer when a block rule
// matched (then `chat` is left partly redacted and must not be used).
// `guard` null: nothing to do. `sink` may be null.
std::optional<ApiError> guard_chat_input(const guard::Guard* guard, ChatRequest& chat, std::string_view request_id,
                                         obs::EngineSink* sink);

// Lists the series of `actions` (engine_guard_actions_total{rule,direction,
// action}) that the policy can produce, at 0, so that dashboards see them
// before the first action.
void register_guard_metrics(const guard::Guard& guard, obs::Family& actions);

}  // namespace zl::api
