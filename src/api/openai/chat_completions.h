// The OpenAI Chat Completions and (legacy) Completions APIs: request JSON ->
// ChatRequest, engine events -> JSON / `data:` chunks (API-REFERENCE.md §2).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "api/chat.h"
#include "api/errors.h"
#include "api/fan_out.h"
#include "api/generation.h"

namespace zl::api::openai {

// The most choices one request may ask for: n, times the prompts of a completion.
inline constexpr int64_t kMaxChoices = 128;

// POST /v1/chat/completions
ApiResult<ChatRequest> parse_chat_request(std::string_view body);
// POST /v1/completions (prompt: a string, token ids, or an array of either)
ApiResult<ChatRequest> parse_completion_request(std::string_view body);

// "stop", "tool_calls" (the turn ended after a tool call), "length", "content_filter".
std::string_view finish_reason(const Completion& c);

enum class Kind { kChat, kCompletion };

// One choice of an answer with several (n, several prompts; api/fan_out.h): its index, and
// the answer's id and creation time, which every choice shares.
struct ChoiceSlot {
  int index = 0;
  std::string id;
  int64_t created = 0;
};
// A fresh answer id: chatcmpl-… or cmpl-….
std::string new_answer_id(Kind kind);

// `logprobs`: the request asked for them (Request::logprobs >= 0).
// echo (completions): the prompt's text, written before the answer's (a stream's first chunk).
// slot: one choice of several; its stream then ends with its last chunk (no usage chunk, no
// [DONE]: fan_out_format's stream_tail follows the last choice's).
std::unique_ptr<EventFormatter> make_formatter(Kind kind, std::string model, bool include_usage, bool logprobs = false,
                                               std::optional<std::string> echo = std::nullopt,
                                               std::optional<ChoiceSlot> slot = std::nullopt);

// How the choices of one answer join (api/fan_out.h): the whole answers' choices in order
// with the joined usage, and the stream's tail (the usage chunk, [DONE]).
FanOutFormat fan_out_format(Kind kind, std::string model, bool include_usage, std::string id, int64_t created);

}  // namespace zl::api::openai
