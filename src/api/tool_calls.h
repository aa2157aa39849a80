// Tool calls in a model's output: detokenized text deltas in, text pieces
// and complete tool calls out, in order, as the model wrote them.
//
// Syntaxes (the model family's own, api/tool_prompt.h renders the prompt side):
//   kHermes     ChatML models (Qwen2.5, Qwen3, SmolLM3, Hermes):
//               <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
//               anywhere in the answer, any number of times, text around them.
//   kLlama3Json Llama 3.1/3.2/3.3 custom tools: the whole answer is the call,
//               {"name": "f", "parameters": {...}} (Llama 3.2 1B/3B
//               often start it {"type": "function", "name": …}), optionally after
//               <|python_tag|>; several calls separated by ';' or whitespace.
//   kNone       no parsing: every delta passes through as text.
//
// Streaming contract: text that could still turn out to be part of a call is
// held back until it is decided, so nothing is ever emitted and then taken
// back. Held back: a suffix that is a prefix of "<tool_call>" (Hermes) and the
// whitespace before it (whitespace next to a call is dropped: it separates
// text from calls); a call from its opening marker until the closing one,
// but only while it looks like a call: an opening marker whose next
// non-whitespace character is not `{` is text at once, and so is a body
// longer than kMaxCallBytes (its first kMaxCallBytes bytes at once, the rest
// parsed as text again), so a model that writes the tag in prose, or never
// closes it, does not stall the stream. For Llama 3 the start of the answer
// is held while it can still be `{"name"`, `{"type": "function", "name"` or
// <|python_tag|>; once it is, the JSON objects are followed as they come
// (strings, brace depth), and all that is held becomes text as soon as it
// cannot be an answer of calls: an object that is not a valid call, one
// longer than kMaxCallBytes, or anything but whitespace, ';' or `{` after a
// complete object. A call is emitted when it is complete and valid: a JSON object
// with a "name" that is one of the offered tools and an "arguments" (or
// "parameters") object, which may be absent ({}). Anything else (invalid
// JSON, an unknown name, a call cut short by the end of the output) is
// emitted as the text it was, so the concatenated text pieces plus the raw
// text of accepted calls is the model's output exactly, minus the dropped
// whitespace. Costs: O(bytes) over the whole output (every byte is scanned
// a bounded number of times; held whitespace is never rescanned).
//
// A seed is text the answer is known to start with but that the model did
// not generate: the prompt's assistant prefill that forces a call (tool_choice
// "any" or a named tool). It is parsed as if generated, and it never reaches
// the output as text: when the forced call fails (the model ends its turn,
// writes prose, is cut short), the text is only what the model wrote. The
// seed is prompt markup the model never said (`<tool_call>\n{"name": "f",
// "arguments":`); shown as the answer it would read as the model's own words
// and, sent back in the history, teach the model half-written calls.
//
// Single call (ToolParserOptions::single_call: Anthropic
// tool_choice.disable_parallel_tool_use, OpenAI parallel_tool_calls false):
// the first call that is complete and valid ends the answer. The parser is
// then done(): what came after the call in the same delta, and everything
// pushed later, is dropped, neither text nor calls, and finish() adds
// nothing. A Llama 3 call is then final as soon as its object closes (the
// answer it ends is only that call). The caller stops the generation there.
//
// Not thread-safe: one per generation.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/chat.h"

namespace boost::json {
class value;
}

namespace zl::api {

enum class ToolSyntax { kNone, kHermes, kLlama3Json };

// Why output that started like a tool call (Hermes: <tool_call> then `{` or
// anything else; Llama 3: the answer's start matched `{"name"`, `{"type":
// "function", "name"` or <|python_tag|>) was not one and went out as text.
enum class ToolFallback {
  kInvalidJson,  // not a JSON object (a marker followed by prose included)
  kInvalidCall,  // JSON, but not {"name": string, "arguments"|"parameters": object}
  kUnknownTool,  // a name that is not one of the offered tools
  kTooLarge,     // longer than ToolCallParser::kMaxCallBytes
  kIncomplete,   // the output ended inside it (max_tokens, a stop string, the window)
};
inline constexpr int kNumToolFallbacks = 5;
// "invalid_json", "invalid_call", "unknown_tool", "too_large", "incomplete":
// the metric label.
std::string_view tool_fallback_name(ToolFallback reason);

// One piece of an answer: text, or a complete tool call (call.id is empty:
// the API formatter names it toolu_… / call_…).
struct AnswerPart {
  enum class Kind { kText, kToolCall };
  Kind kind = Kind::kText;
  std::string text;  // kText
  ToolCall call;     // kToolCall: name and arguments_json (a JSON object, compact)
};

struct ToolParserOptions {
  bool single_call = false;  // at most one call: the first one ends the answer
};

class ToolCallParser {
 public:
  // `tool_names`: the callable tools; a call to any other name stays text.
  ToolCallParser(ToolSyntax syntax, std::vector<std::string> tool_names, std::string_view seed = {},
                 ToolParserOptions options = {});

  // Feeds the next text delta; appends what is now decided to `out`.
  void push(std::string_view delta, std::vector<AnswerPart>* out);
  // The output has ended: appends everything still held (as a call when it
  // is a complete valid one, else as text). Call once, last.
  void finish(std::vector<AnswerPart>* out);

  int n_calls() const { return n_calls_; }
  // Outputs that started like a call but were text in the end, by reason
  // (index: ToolFallback).
  const std::array<int, kNumToolFallbacks>& n_fallbacks() const { return n_fallbacks_; }
  // single_call: the call has been emitted; the answer is complete.
  bool done() const { return done_; }

 // The longest call body (Hermes: between the markers; Llama 3: one JSON
  // object) still taken for a call.
  static constexpr size_t kMaxCallBytes = 64 << 10;

 private:
  enum class Mode { kText, kCall, kLlamaStart };
  void run_hermes(std::vector<AnswerPart>* out);
  // Hermes kCall: false when the opening marker turned out to be text (and
  // mode_ is kText again), true while it is still a call.
  bool hermes_call_start(std::vector<AnswerPart>* out);
  void run_llama_start(std::vector<AnswerPart>* out);
  void run_llama_calls(std::vector<AnswerPart>* out);
  // Llama 3: all that is held is text after all; the rest of the answer too.
  void llama_give_up(std::vector<AnswerPart>* out);
  void emit_text(std::string_view text, std::vector<AnswerPart>* out);
  // One call object ({"name", "arguments"|"parameters"}); else why not.
  std::optional<ToolFallback> parse_call(const boost::json::value& v, ToolCall* call) const;
  // The same for the text of one call object.
  std::optional<ToolFallback> parse_call_text(std::string_view text, ToolCall* call) const;
  void count_fallback(ToolFallback reason) { ++n_fallbacks_[static_cast<int>(reason)]; }
  void emit_call(ToolCall call, std::vector<AnswerPart>* out);

  ToolSyntax syntax_;
  std::vector<std::string> names_;
  ToolParserOptions options_;
  bool done_ = false;
  std::vector<AnswerPart> seed_out_;  // what the seed decided (never anything for a call's start)
  Mode mode_ = Mode::kText;
  std::string buf_;          // undecided text (kText, kLlamaStart) or the call so far (kCall)
  // Hermes kText: buf_[0, held_ws_) is whitespace (held before a possible marker).
  size_t held_ws_ = 0;
  // Hermes kCall: buf_[0, scanned_) holds no start of a closing marker; before
  // the body's `{` is seen, the whitespace after the opening marker.
  size_t scanned_ = 0;
  bool body_started_ = false;  // Hermes kCall: the body's `{` was seen
  std::string call_prefix_;  // Hermes kCall: the raw text before the body (whitespace + opening marker)
  // Llama 3 kLlamaStart: buf_[0, start_pos_) matched the first start_tok_
  // tokens of a call's start (whitespace between them).
  size_t start_pos_ = 0;
  int start_tok_ = 0;
  unsigned start_live_ = ~0u;  // bit i: the start can still be kLlamaStarts[i]
  // Llama 3 kCall: buf_[0, scan_pos_) has been scanned; the object being
  // read starts at obj_start_ (depth_ > 0), its string state.
  size_t scan_pos_ = 0;
  size_t obj_start_ = 0;
  int depth_ = 0;
  bool in_string_ = false;
  bool escape_ = false;
  std::vector<ToolCall> llama_calls_;  // complete valid calls, emitted at finish()
  bool after_call_ = false;  // drop whitespace that follows an accepted call
  size_t seed_left_ = 0;     // bytes of the seed not yet skipped in the text emitted
  int n_calls_ = 0;
  std::array<int, kNumToolFallbacks> n_fallbacks_{};
};

}  // namespace zl::api
