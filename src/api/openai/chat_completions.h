// The OpenAI Chat Completions and (legacy) Completions APIs: request JSON ->
// ChatRequest, engine events -> JSON / `data:` chunks (API-REFERENCE.md §2).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "api/chat.h"
#include "api/errors.h"
#include "api/generation.h"

namespace zl::api::openai {

// POST /v1/chat/completions
ApiResult<ChatRequest> parse_chat_request(std::string_view body);
// POST /v1/completions (prompt: a string or an array of one string)
ApiResult<ChatRequest> parse_completion_request(std::string_view body);

// "stop", "tool_calls" (the turn ended after a tool call), "length", "content_filter".
std::string_view finish_reason(const Completion& c);

enum class Kind { kChat, kCompletion };
// `logprobs`: the request asked for them (Request::logprobs >= 0).
// echo (completions): the prompt's text, written before the answer's (a stream's first chunk).
std::unique_ptr<EventFormatter> make_formatter(Kind kind, std::string model, bool include_usage, bool logprobs = false,
                                               std::optional<std::string> echo = std::nullopt);

}  // namespace zl::api::openai
