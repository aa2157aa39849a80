#include "api/context_policy.h"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "api/generation.h"  // context_length_error
#include "api/json_fields.h"

namespace zl::api {
namespace {

// cut[i] (0 < i < n): a unit may begin at messages[i] — no client message
// and no tool call/result pair spans the boundary before it.
std::vector<bool> allowed_cuts(const std::vector<ChatMessage>& messages) {
  const size_t n = messages.size();
  std::vector<int> span(n + 1, 0);                  // difference array of the call -> result spans
  std::unordered_map<std::string, size_t> call_at;  // call id -> its assistant turn (latest so far)
  std::optional<size_t> last_call;                  // the nearest assistant turn with calls so far
  for (size_t i = 0; i < n; ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "assistant" && !m.tool_calls.empty()) {
      for (const ToolCall& tc : m.tool_calls) {
        if (!tc.id.empty()) call_at[tc.id] = i;
      }
      last_call = i;
    } else if (m.role == "tool") {
      std::optional<size_t> c = last_call;
      if (auto it = call_at.find(m.tool_call_id); !m.tool_call_id.empty() && it != call_at.end())
        c = it->second;
      if (c) {  // no cut in (c, i]
        ++span[*c + 1];
        --span[i + 1];
      }
    }
  }
  std::vector<bool> cut(n, false);
  int open = 0;
  for (size_t i = 0; i < n; ++i) {
    open += span[i];
    const bool same_source = i > 0 && messages[i].source_index >= 0 &&
                             messages[i].source_index == messages[i - 1].source_index;
    cut[i] = i > 0 && open == 0 && !same_source;
  }
  return cut;
}

bool is_user_turn(const ChatMessage& m) {
  return m.role == "user";
}
bool is_call_turn(const ChatMessage& m) {
  return m.role == "assistant" && !m.tool_calls.empty();
}

size_t leading_systems(const std::vector<ChatMessage>& messages) {
  size_t i = 0;
  while (i < messages.size() && messages[i].role == "system") ++i;
  return i;
}

// What a message puts into the prompt, in bytes (text, calls, ids): the
// estimate's weight only; template markup is not counted.
size_t message_bytes(const ChatMessage& m) {
  size_t n = m.content.size() + m.tool_call_id.size();
  for (const ToolCall& tc : m.tool_calls)
    n += tc.id.size() + tc.name.size() + tc.arguments_json.size();
  return n;
}

// The first guess of the units to drop, in [1, m]: the fewest whose bytes,
// at the prompt's tokens per byte, cover `excess` tokens. O(messages + m).
size_t guess_units(const ChatRequest& chat, const std::vector<DropUnit>& units, bool middle,
                   int64_t n_prompt, int64_t excess) {
  size_t total = chat.tools_json.size();
  for (const ChatMessage& m : chat.messages) total += message_bytes(m);
  const double per_byte =
      static_cast<double>(n_prompt) / static_cast<double>(std::max<size_t>(total, 1));
  const size_t m = units.size();
  std::vector<double> prefix(m + 1, 0.0);  // estimated tokens of units [0, u)
  for (size_t u = 0; u < m; ++u) {
    size_t bytes = 0;
    for (size_t i = units[u].begin; i < units[u].end; ++i) bytes += message_bytes(chat.messages[i]);
    prefix[u + 1] = prefix[u] + static_cast<double>(bytes) * per_byte;
  }
  for (size_t k = 1; k < m; ++k) {
    const size_t s = middle ? (m - k) / 2 : 0;
    if (prefix[s + k] - prefix[s] >= static_cast<double>(excess)) return k;
  }
  return m;
}

// The fewest units in [1, m] whose dropping fits (probe(k) -> ApiResult<bool>
// encodes and says), starting from `guess`: a step down (or up) that doubles
// until the answer is bracketed, then bisection. Usually 2-3 probes; at most
// about 2 log2(m). 0 when even m units do not fit. Dropping none is known
// not to fit.
template <typename Probe>
ApiResult<size_t> search_units(size_t m, size_t guess, Probe&& probe) {
  size_t lo = 0, hi = 0;  // lo: known not to fit; hi: known to fit (0: none known yet)
  ApiResult<bool> f = probe(guess);
  if (!f.ok()) return f.error();
  if (f.value()) {
    hi = guess;
    for (size_t step = 1; hi > lo + step; step *= 2) {
      ApiResult<bool> g = probe(hi - step);
      if (!g.ok()) return g.error();
      if (!g.value()) {
        lo = hi - step;
        break;
      }
      hi -= step;
    }
  } else {
    lo = guess;
    for (size_t step = 1; hi == 0; step *= 2) {
      if (lo == m) return size_t{0};
      const size_t k = std::min(m, lo + step);
      ApiResult<bool> g = probe(k);
      if (!g.ok()) return g.error();
      (g.value() ? hi : lo) = k;
    }
  }
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    ApiResult<bool> g = probe(mid);
    if (!g.ok()) return g.error();
    (g.value() ? hi : lo) = mid;
  }
  return hi;
}

}  // namespace

std::string_view context_policy_name(ContextPolicy policy) {
  switch (policy) {
    case ContextPolicy::kError:
      return "error";
    case ContextPolicy::kDropOldest:
      return "drop_oldest";
    case ContextPolicy::kMiddleOut:
      return "middle_out";
  }
  return "error";
}

std::optional<ContextPolicy> parse_context_policy(std::string_view name) {
  for (ContextPolicy p :
       {ContextPolicy::kError, ContextPolicy::kDropOldest, ContextPolicy::kMiddleOut}) {
    if (name == context_policy_name(p)) return p;
  }
  return std::nullopt;
}

void parse_context_policy_field(const boost::json::object& body, ChatRequest* chat) {
  const boost::json::value* f = find_field(body, "context_policy");
  if (!f) return;
  const std::string name = json_string(*f, "context_policy");
  const std::optional<ContextPolicy> p = parse_context_policy(name);
  if (!p) {
    throw_field_error("context_policy",
                      "must be 'error', 'drop_oldest' or 'middle_out', not '" + name + "'",
                      ErrorReason::kInvalidValue);
  }
  chat->context_policy = *p;
}

std::string ContextTruncation::header_value() const {
  return "messages=" + std::to_string(n_messages) + ", tokens=" + std::to_string(n_tokens);
}

std::vector<DropUnit> drop_units(const std::vector<ChatMessage>& messages) {
  const size_t n = messages.size();
  const size_t first = leading_systems(messages);
  if (first >= n) return {};
  const std::vector<bool> cut = allowed_cuts(messages);
  // Exchanges: from `first`, and from each user turn a unit may begin at.
  std::vector<size_t> starts = {first};
  for (size_t i = first + 1; i < n; ++i) {
    if (cut[i] && is_user_turn(messages[i])) starts.push_back(i);
  }
  std::vector<DropUnit> units;
  for (size_t k = 0; k + 1 < starts.size(); ++k) units.push_back({starts[k], starts[k + 1]});
  // The last exchange: its tool round trips but the last one.
  std::vector<size_t> trips;
  for (size_t i = starts.back() + 1; i < n; ++i) {
    if (cut[i] && is_call_turn(messages[i])) trips.push_back(i);
  }
  for (size_t k = 0; k + 1 < trips.size(); ++k) units.push_back({trips[k], trips[k + 1]});
  return units;
}

std::vector<ChatMessage> without_units(const std::vector<ChatMessage>& messages,
                                       const std::vector<DropUnit>& units, size_t first,
                                       size_t count, int* n_client_messages) {
  std::vector<ChatMessage> kept;
  kept.reserve(messages.size());
  int n_dropped = 0;
  int32_t last_source = -1;
  size_t u = first;
  const size_t u_end = std::min(units.size(), first + count);
  for (size_t i = 0; i < messages.size(); ++i) {
    while (u < u_end && units[u].end <= i) ++u;
    if (u < u_end && units[u].begin <= i) {
      const int32_t s = messages[i].source_index;
      if (s < 0 || s != last_source) ++n_dropped;
      last_source = s;
      continue;
    }
    kept.push_back(messages[i]);
  }
  if (n_client_messages) *n_client_messages = n_dropped;
  return kept;
}

ApiResult<FittedPrompt> fit_context(const ChatRequest& chat, const PromptCodec& codec,
                                    std::vector<int32_t> ids, int64_t n_ctx,
                                    const ContextOptions& options) {
  const ContextPolicy policy = options.policy;
  if (policy == ContextPolicy::kError || n_ctx <= 0 || chat.raw_prompt)
    return FittedPrompt{.ids = std::move(ids)};
  const int64_t window = options.n_window > 0 ? std::min(n_ctx, options.n_window) : n_ctx;
  const int64_t reserve =
      std::max<int64_t>(1, std::min(chat.max_tokens.value_or(options.reserve), options.reserve));
  auto fits = [&](const std::vector<int32_t>& p) {
    return static_cast<int64_t>(p.size()) + reserve <= window;
  };
  if (fits(ids)) return FittedPrompt{.ids = std::move(ids)};

  const int64_t n_original = static_cast<int64_t>(ids.size());
  const std::vector<DropUnit> units = drop_units(chat.messages);
  const size_t m = units.size();
  FittedPrompt best{
      .ids = std::move(ids)};  // the latest probe that fits (or, failing all, the shortest)
  if (m > 0) {
    ChatRequest candidate = chat;  // every field but the messages stays as sent
    // Encodes the chat without k units (oldest first, or centred).
    auto probe = [&](size_t k) -> ApiResult<bool> {
      int n_messages = 0;
      candidate.messages =
          without_units(chat.messages, units, policy == ContextPolicy::kMiddleOut ? (m - k) / 2 : 0,
                        k, &n_messages);
      Result<std::vector<int32_t>> r = codec.encode_chat(candidate);
      if (!r.ok()) return from_status(r.status());
      const bool ok = fits(r.value());
      if (ok || k == m) {
        best.ids = std::move(r).value();
        best.truncation.n_messages = n_messages;
      }
      return ok;
    };
    const size_t guess = guess_units(chat, units, policy == ContextPolicy::kMiddleOut, n_original,
                                     n_original + reserve - window);
    ApiResult<size_t> k = search_units(m, guess, probe);
    if (!k.ok()) return k.error();
  }
  const int64_t n_kept = static_cast<int64_t>(best.ids.size());
  if (n_kept >= n_ctx) {
    ApiError e = context_length_error(n_kept, n_ctx);
    e.param = prompt_param(chat);
    e.message += "; context_policy " + std::string(context_policy_name(policy)) +
                 " kept the system prompt, the tools "
                 "and the last user turn (" +
                 std::to_string(n_original) + " tokens before truncation)";
    return e;
  }
  best.truncation.policy = policy;
  best.truncation.n_tokens = n_original - n_kept;
  return best;
}

}  // namespace zl::api
