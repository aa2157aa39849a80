// Truncation policies (issue 25): what the server does with a chat whose
// prompt plus the output reserved for it does not fit the window.
//
//   error        a 400 context_length_exceeded when the prompt alone leaves
//                no room (as without a policy; the reserve plays no part).
//   drop_oldest  drops the oldest droppable units until it fits.
//   middle_out   drops a run of units from the middle (centred), keeping
//                the beginning and the end of the conversation.
//
// Units (drop_units()). The system prompt (the leading system messages)
// and the tools are never dropped. The conversation after them is split
// into exchanges, each starting at a user turn (the client's user message
// with text) and running to the next one; an exchange is dropped whole,
// so the conversation always resumes at a user turn and roles keep the
// order the templates need. The last exchange holds the last user turn and
// is never dropped whole; inside it, each tool round trip (an assistant
// turn with tool calls, its results, and whatever follows before the next
// call) but the last is a unit of its own, so a long agent loop under one
// user instruction sheds its oldest round trips and keeps the instruction
// and the latest results. A tool call and its result are never separated
// (no cut between an assistant turn with calls and the last result that
// answers one of them, matched by id, else the nearest call before), nor is
// one client message (ChatMessage::source_index: an Anthropic turn with
// tool_result blocks and text). A system message inside the conversation
// goes with the unit before it.
//
// Exact counts: each candidate is rendered and tokenized by the PromptCodec,
// never estimated. The number k of dropped units (of m) is searched for:
// a first guess from the units' bytes at the prompt's tokens per byte, a
// step down (or up) from it that doubles until k is bracketed by a measured
// fit and a measured miss, then bisection. A truncation thus costs usually
// 2-3 encodings of at most the original prompt, at most about 2 log2(m),
// never one per unit. The prompt kept is the one with the fewest dropped
// units that fits (token counts fall as more units go; should a template
// make them rise by a token somewhere, the search still ends on a
// candidate that was measured to fit).
//
// Fit: n_prompt + reserve <= window, where reserve = min(max_tokens,
// --context-reserve) (at least 1; no max_tokens: --context-reserve) and
// window = min(n_ctx, the KV cache's capacity when it is smaller: what
// KV-aware admission, limits/kv_admission.h, lets one sequence hold). When
// even dropping every unit does not make room for the reserve, the
// shortest prompt is used as long as it leaves one token of the context
// window (max_tokens is then clamped as usual, and KV admission decides
// about the cache); else the 400 context_length_exceeded with its count.
//
// Thread-safety: free functions on their arguments; safe from any thread
// as the PromptCodec is.
#pragma once

#include <boost/json/object.hpp>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "api/chat.h"
#include "api/errors.h"
#include "api/prompt_codec.h"

namespace zl::api {

// The default of --context-reserve: tokens kept free for the answer.
inline constexpr int64_t kDefaultContextReserve = 256;

std::string_view context_policy_name(ContextPolicy policy);  // "error", "drop_oldest", "middle_out"
std::optional<ContextPolicy> parse_context_policy(std::string_view name);

// The body's `context_policy` (both APIs), when present: one of the names,
// else a 400 naming the field (invalid_value). For the API parsers: throws
// FieldError (api/json_fields.h).
void parse_context_policy_field(const boost::json::object& body, ChatRequest* chat);

// What prepare_request() needs: the request's policy, the reserve and the
// KV-limited window.
struct ContextOptions {
  ContextPolicy policy = ContextPolicy::kError;
  int64_t reserve = kDefaultContextReserve;  // --context-reserve (>= 1)
  // Tokens one sequence may hold when fewer than n_ctx (a KV cache smaller
  // than a context); <= 0: n_ctx.
  int64_t n_window = 0;
};

// A truncation that happened (the header x-engine-context-truncated, the
// request log, the metric).
struct ContextTruncation {
  ContextPolicy policy = ContextPolicy::kError;
  int n_messages = 0;    // client messages dropped
  int64_t n_tokens = 0;  // prompt tokens removed (original - kept)
  bool applied() const { return n_messages > 0; }
  std::string header_value() const;  // "messages=<n>, tokens=<t>"
};

// A range [begin, end) of ChatRequest::messages that is dropped as one.
struct DropUnit {
  size_t begin = 0;
  size_t end = 0;
};

// The droppable units of `messages`, oldest first (see the design comment).
// O(messages).
std::vector<DropUnit> drop_units(const std::vector<ChatMessage>& messages);

// The messages left after dropping units[first, first + count), and the
// client messages that removes (their distinct source indices).
std::vector<ChatMessage> without_units(const std::vector<ChatMessage>& messages,
                                       const std::vector<DropUnit>& units, size_t first,
                                       size_t count, int* n_client_messages);

struct FittedPrompt {
  std::vector<int32_t> ids;  // the kept prompt, encoded
  ContextTruncation truncation;
};

// Applies `options.policy` to `chat`, whose whole prompt is `ids`, for a
// context of n_ctx tokens. Returns `ids` untouched (nothing applied) when
// the policy is kError, n_ctx <= 0, the chat is a raw prompt or it fits;
// else the truncated prompt, or the 400 context_length_exceeded when even
// the shortest one leaves no token of the window. Encoding errors pass
// through. Cost: see the design comment.
ApiResult<FittedPrompt> fit_context(const ChatRequest& chat, const PromptCodec& codec,
                                    std::vector<int32_t> ids, int64_t n_ctx,
                                    const ContextOptions& options);

}  // namespace zl::api
