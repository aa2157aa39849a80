// Anthropic context editing (`context_management: {"edits": [...]}`, beta
// context-management-2025-06-27): the server changes what the model sees of
// a long conversation, never what the client keeps, and reports what it did.
//
//   clear_thinking_20251015: the thinking blocks of earlier assistant turns
//     are dropped; the last `keep` turns with thinking keep theirs ("all":
//     nothing is dropped).
//   clear_tool_uses_20250919: when the prompt exceeds `trigger`, the results
//     of the oldest tool uses (and, with clear_tool_inputs, the calls'
//     inputs) are replaced by a short placeholder, oldest first; the most
//     recent `keep` tool uses and those of `exclude_tools` never are. With
//     `clear_at_least` T the edit clears at least T tokens or nothing.
//
// Cache rule. Clearing a block changes the prompt from that block on, so the
// prefix cache misses from there. Clearing "all but the last keep" on every
// request of a growing conversation would clear one more tool use per turn
// and re-prefill the last `keep` results each time. With clear_at_least T
// the cleared part is instead rounded to steps of T: let A be what clearing
// every eligible tool use saves; the edit clears the shortest prefix of
// eligible uses (oldest first) that saves at least floor(A / T) * T tokens.
// What a prefix saves depends only on the old turns, so the cleared prefix
// stays the same from turn to turn until the conversation has grown by
// another T tokens of clearable results: consecutive requests render the
// same prompt prefix and hit the cache. Without clear_at_least every
// eligible use is cleared (the API's documented default).
//
// Counts are exact: each candidate prompt is rendered through the chat
// template and tokenized (PromptCodec). Cost: no work without
// context_management; otherwise one render of the prompt, one more per edit
// that clears, and for clear_at_least a binary search over the eligible
// uses (about log2(n_uses) renders). Thread-safe (no shared state).
#pragma once

#include <boost/json/value.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "api/chat.h"
#include "api/errors.h"
#include "api/prompt_codec.h"

namespace zl::api {

// What replaces a cleared tool result, and a cleared call's input (a JSON
// object, so every template can render it as arguments).
inline constexpr std::string_view kClearedToolResult = "[tool result cleared to save context]";
inline constexpr std::string_view kClearedToolInput = R"({"cleared":"tool input cleared to save context"})";

// One edit that changed the prompt (Anthropic `applied_edits` entry).
struct AppliedEdit {
  enum class Kind { kClearThinking, kClearToolUses };
  Kind kind = Kind::kClearToolUses;
  int64_t n_cleared = 0;         // tool uses, or thinking turns
  int64_t n_cleared_tokens = 0;  // exact: the prompt before minus after this edit
};

struct ContextEditReport {
  bool requested = false;          // the request carried context_management
  int64_t n_original_tokens = 0;   // the prompt as sent (requested only)
  int64_t n_tokens = 0;            // the prompt the model sees (requested only)
  std::vector<AppliedEdit> applied;  // in the order applied (thinking first)
};

// Parses `context_management` (inside an API parser: a bad field throws
// FieldError naming it, e.g. "context_management.edits[0].keep.value").
// Unknown edit types, wrong shapes, a repeated edit type and
// clear_thinking_20251015 after clear_tool_uses_20250919 are 400s; unknown
// fields are ignored, as everywhere.
ContextManagement parse_context_management(const boost::json::value& v, const std::string& param);

// Applies chat->context_management to chat->messages in place. Without
// context_management: nothing, no render, an empty report. A prompt that
// cannot be rendered is the error prepare_request() would give.
ApiResult<ContextEditReport> apply_context_edits(ChatRequest* chat, const PromptCodec& codec);

// `"context_management":{"applied_edits":[...]}` (with a leading comma) for
// a message or the stream's final message_delta; nothing when not requested.
void append_applied_edits(std::string& out, const ContextEditReport& report);

}  // namespace zl::api
