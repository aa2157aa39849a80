// Reasoning models: the thought in a model's output, as both APIs return it
// (Anthropic `thinking` blocks, OpenAI `reasoning_content`), and the request
// side (the prompt switch and the engine's budget).
//
// Models that think in text (Qwen3, QwQ, DeepSeek-R1 and its distills) write
// "<think>\n…\n</think>\n\n" before their answer; their chat templates
// (tokenizer/chat_template.h, ThinkingFormat) may open the thought in the
// generation prompt, in which case the output starts inside it. The API
// layer finds the markers in the detokenized text, like the tool-call parser
// (api/tool_calls.h); the engine only sees a generic budgeted span
// (engine/request.h, SpanBudget).
//
// ThinkingParser streaming contract: text in, pieces out, each either
// thought or answer, in order; nothing is emitted and then taken back.
//   - Starting inside (the prompt opened the thought): everything up to the
//     first "</think>" is thought. Otherwise a thought exists only when the
//     output's first non-whitespace text is "<think>" (held back while it can
//     still be that; prose that mentions the tag later is answer text).
//   - Held back inside a thought: a suffix that is a prefix of "</think>",
//     and trailing whitespace (dropped when the thought ends: the template
//     puts "\n" before the close); leading whitespace of the thought and
//     leading newlines of the answer after it are dropped, as the templates
//     strip them.
//   - An unterminated thought (max_tokens, a stop string, the window) is
//     thought to the end: finish() releases what was held as thought.
// Costs: O(bytes) over the output; holds at most |"</think>"| bytes plus a
// run of whitespace. Not thread-safe: one per generation.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/chat.h"
#include "api/errors.h"
#include "engine/request.h"

namespace boost::json {
class value;
}

namespace zl::api {

class PromptCodec;

struct ThoughtPiece {
  bool thought = false;  // false: answer text
  std::string text;
};

class ThinkingParser {
 public:
  explicit ThinkingParser(bool starts_inside);
  void push(std::string_view text, std::vector<ThoughtPiece>* out);
  // The output is complete: what is still held, decided.
  void finish(std::vector<ThoughtPiece>* out);
  bool in_thought() const { return state_ == State::kInside; }

 private:
  enum class State { kStart, kInside, kAnswerStart, kAnswer };
  void push_start(std::string_view text, std::vector<ThoughtPiece>* out);
  void push_inside(std::string_view text, std::vector<ThoughtPiece>* out);
  static void add(std::vector<ThoughtPiece>* out, bool thought, std::string_view text);

  State state_;
  bool thought_started_ = false;  // leading newlines of the thought are dropped until then
  std::string held_;              // kStart: the output so far; kInside: undecided tail
};

// How a request's output is read for a thought (Prepared::thinking).
struct ThinkingPlan {
  bool active = false;         // the template writes thoughts: parse the output
  bool starts_inside = false;  // the prompt opened the thought
};

// The plan for `chat` on `codec`'s template, and, with a budget, the
// engine's span (StopParams::span: "\n</think>\n\n" forced at the budget).
// An inactive plan without a span when the template has no thinking.
ApiResult<ThinkingPlan> plan_thinking(const ChatRequest& chat, const PromptCodec& codec, StopParams* stop);

// Anthropic's signature of a thinking block: "zl1." + base64(SHA-256(text)).
// Clients must send it back unmodified; the server does not require it.
class ThoughtSigner {
 public:
  ThoughtSigner();
  ~ThoughtSigner();
  ThoughtSigner(const ThoughtSigner&) = delete;
  ThoughtSigner& operator=(const ThoughtSigner&) = delete;
  void update(std::string_view text);
  std::string signature();  // once, at the end

 private:
  void* ctx_;  // EVP_MD_CTX
};
std::string thought_signature(std::string_view text);

// Anthropic `thinking` ({"type":"enabled","budget_tokens":B} B >= 1024 and
// < max_tokens, {"type":"disabled"}, {"type":"adaptive"}): throws the
// field's 400 (json_fields.h) on a bad value. max_tokens: nullopt for
// count_tokens (no upper bound on the budget).
ThinkingOptions parse_anthropic_thinking(const boost::json::value& v, std::optional<int64_t> max_tokens);
inline constexpr int32_t kMinThinkingBudget = 1024;

}  // namespace zl::api
