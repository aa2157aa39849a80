// The Anthropic Messages API: request JSON -> ChatRequest, engine events ->
// Message JSON / SSE (API-REFERENCE.md §1).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "api/chat.h"
#include "api/context_edits.h"
#include "api/errors.h"
#include "api/generation.h"

namespace zl::api::anthropic {

// POST /v1/messages. 400 naming the field for missing/mistyped/out-of-range
// fields; unknown fields are ignored.
ApiResult<ChatRequest> parse_messages_request(std::string_view body);
// POST /v1/messages/count_tokens (no max_tokens; no sampling fields).
ApiResult<ChatRequest> parse_count_tokens_request(std::string_view body);

// "end_turn", "tool_use" (the turn ended after a tool call), "max_tokens",
// "stop_sequence", "model_context_window_exceeded", "refusal".
std::string_view stop_reason(const Completion& c);

// Formats one Messages answer. `model` is echoed as sent. lazy_blocks (the
// request offers tools): a stream opens each content block when it has
// something for it; else text block 0 opens with the stream. `edits`: the
// context editing the prompt went through (api/context_edits.h), reported as
// `context_management.applied_edits` on the message and on the stream's
// final message_delta when the request asked for it.
std::unique_ptr<EventFormatter> make_formatter(std::string model, std::string request_id, bool lazy_blocks = false,
                                               ContextEditReport edits = {});

}  // namespace zl::api::anthropic
