// Tool calls in a model's output: detokenized text deltas in, text pieces
// and tool calls out, in order, as the model wrote them.
//
// Syntaxes (the model family's own, api/tool_prompt.h renders the prompt side):
//   kHermes     ChatML models (Qwen2.5, Qwen3, SmolLM3, Hermes):
//               <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
//               anywhere in the answer, any number of times, text around them.
//   kLlama3Json Llama 3.1/3.2/3.3 custom tools: the answer starts with the
//               call, {"name": "f", "parameters": {...}} (Llama 3.2 1B/3B
//               often start it {"type": "function", "name": …}), optionally after
//               <|python_tag|>; several calls separated by ';' or whitespace.
//   kMistral, kLlama3Pythonic, kQwen3CoderXml, kHarmony, kDeepSeek, kGranite,
//               kPhi: block syntaxes (api/tool_formats.h): a marker opens a
//               block, held until it closes, then parsed whole; its calls go
//               out as kToolCall (also with stream_arguments), or, when it is
//               not a valid block of calls to offered tools, its text.
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
// closes it, does not stall the stream. A Hermes body ends at the first
// "</tool_call>", as the model family's own parsers have it. For Llama 3 the
// start of the answer is held while it can still be `{"name"`,
// `{"type": "function", "name"` or <|python_tag|>; once it is, the JSON
// objects are followed as they come (JsonScanner), each one a call as soon
// as it closes and is valid; what follows the calls that is not another
// object (whitespace and ';' between them dropped) is text, and so is, from
// its first byte on, an object that is not a valid call or is longer than
// kMaxCallBytes. A call is emitted when it is complete and valid: a JSON
// object with a "name" that is one of the offered tools and an "arguments"
// (or "parameters") object, which may be absent ({}). Anything else (invalid
// JSON, an unknown name, a call cut short by the end of the output) is
// emitted as the text it was, so the concatenated text pieces plus the raw
// text of accepted calls is the model's output exactly, minus the dropped
// whitespace and separators. A call's arguments_json is the model's own JSON
// with the whitespace outside strings removed (numbers stay as written).
// Costs: O(bytes) over the whole output (every byte is scanned a bounded
// number of times; held whitespace is never rescanned).
//
// Streamed arguments (ToolParserOptions::stream_arguments): a call is
// emitted as it is written: kToolCallStart once its name is complete and one
// of the offered tools and its arguments object has begun ("name" before
// "arguments"/"parameters", as both families write calls), then
// kToolCallDelta pieces, the arguments so far minified, each byte validated
// by JsonScanner before it goes out, then kToolCallEnd when the call is
// complete and valid (the same verdict as without streaming, and the deltas
// concatenate to its arguments_json exactly). A call written otherwise (the
// arguments first, or as a JSON string) comes whole as kToolCall. A call
// that fails after its start (its JSON turns invalid, it passes
// kMaxCallBytes, the output ends inside it, its final form contradicts what
// was streamed) cannot be taken back: the parser emits kToolCallAbort with
// the reason and stops (aborted(): nothing more, not even text); the caller
// ends the answer with an error. Without stream_arguments that same output
// is text, as above.
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
// nothing. The caller stops the generation there.
//
// Not thread-safe: one per generation.
#pragma once

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "api/chat.h"
#include "api/json_scan.h"
#include "api/tool_formats.h"

namespace boost::json {
class value;
}

namespace zl::api {

enum class ToolSyntax {
  kNone,
  kHermes,
  kLlama3Json,
  kMistral,
  kLlama3Pythonic,
  kQwen3CoderXml,
  kHarmony,
  kDeepSeek,
  kGranite,
  kPhi,
};

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

// One piece of an answer: text, or a tool call, whole or streamed (call.id
// is empty: the API formatter names it toolu_… / call_…).
struct AnswerPart {
  enum class Kind {
    kText,           // text
    kToolCall,       // a complete call (call: name and arguments_json, a compact JSON object)
    kToolCallStart,  // a streamed call opens (call.name)
    kToolCallDelta,  // the next piece of its arguments (text, never empty)
    kToolCallEnd,    // it is complete and valid (call: the whole call)
    kToolCallAbort,  // it turned out not to be a valid call (abort_reason); nothing follows
    kThinking,       // the model's thought (text; api/thinking.h), before the answer
  };
  Kind kind = Kind::kText;
  std::string text;
  ToolCall call;
  ToolFallback abort_reason = ToolFallback::kInvalidJson;
};

struct ToolParserOptions {
  bool single_call = false;       // at most one call: the first one ends the answer
  bool stream_arguments = false;  // calls as kToolCallStart, kToolCallDelta…, kToolCallEnd
  // The block syntaxes that write values raw (Qwen3-Coder XML): the
  // parameters whose values stay strings (tool_formats::StringParams).
  std::shared_ptr<const tool_formats::StringParams> string_params;
};

// One call object as it arrives, byte by byte from its `{` (both syntaxes):
// validated by a JsonScanner, its top-level members followed, so that the
// name is known as soon as its string closes and the arguments object can be
// streamed as it is written. Costs: O(1) per byte; keeps the name and
// argument members' text (minified), nothing else.
class CallObjectScanner {
 public:
  // False once the bytes so far are not a prefix of valid JSON (for good).
  bool feed(char c);
  bool done() const { return json_.done(); }  // the object has closed
  bool failed() const { return json_.failed(); }
  size_t size() const { return n_bytes_; }     // bytes fed
  // The last "name" member that ended with a string value (decoded); empty
  // before (and when the last one was not a string).
  const std::string& name() const { return name_; }
  // The streamable arguments: the first "arguments" or "parameters" member
  // whose value is an object and that follows a "name" member. Its value so
  // far, minified ("" before its `{`; only bytes that were valid), whether it
  // has ended, and the name as it was when it began.
  std::string_view streamed_args() const { return streamed_; }
  const std::string& streamed_name() const { return streamed_name_; }
  bool streamed_args_complete() const { return streamed_done_; }
  // Once done(): the last "arguments" / "parameters" member's value, minified ("" when none).
  const std::string& last_arguments() const { return last_arguments_; }
  const std::string& last_parameters() const { return last_parameters_; }

 private:
  enum class Member { kOther, kName, kArguments, kParameters };
  void end_member();

  JsonScanner json_;
  size_t n_bytes_ = 0;
  std::string key_;        // the top-level key being read, its quotes included
  bool in_value_ = false;  // between a top-level ':' and the member's end
  Member member_ = Member::kOther;
  bool streaming_ = false;  // this member is the streamed arguments
  std::string value_;      // the member's value so far, minified (name and argument members only)
  std::string name_;
  std::string streamed_;
  std::string streamed_name_;
  bool streamed_done_ = false;
  std::string last_arguments_, last_parameters_;
};

class ToolCallParser {
 public:
  // `tool_names`: the callable tools; a call to any other name stays text.
  ToolCallParser(ToolSyntax syntax, std::vector<std::string> tool_names, std::string_view seed = {},
                 ToolParserOptions options = {});

  // Feeds the next text delta; appends what is now decided to `out`.
  void push(std::string_view delta, std::vector<AnswerPart>* out);
  // The output has ended: appends everything still held (as a call when it
  // is a complete valid one, else as text; a streamed call that is not
  // complete aborts). Call once, last.
  void finish(std::vector<AnswerPart>* out);

  int n_calls() const { return n_calls_; }
  // Outputs that started like a call but were text in the end, by reason
  // (index: ToolFallback).
  const std::array<int, kNumToolFallbacks>& n_fallbacks() const { return n_fallbacks_; }
  // single_call: the call has been emitted; the answer is complete.
  bool done() const { return done_; }
  // stream_arguments: a streamed call failed (kToolCallAbort was emitted).
  bool aborted() const { return aborted_; }

  // The longest call body (Hermes: between the markers; Llama 3: one JSON
  // object) still taken for a call.
  static constexpr size_t kMaxCallBytes = 64 << 10;

 private:
  enum class Mode { kText, kCall, kLlamaStart, kBlock };
  bool stopped() const { return done_ || aborted_; }
  void run_hermes(std::vector<AnswerPart>* out);
  // Hermes kCall once the body has begun; false when the call was decided
  // (mode_ is kText again, or the parser stopped), true while it waits.
  bool run_hermes_body(std::vector<AnswerPart>* out);
  void run_llama_start(std::vector<AnswerPart>* out);
  void run_llama_calls(std::vector<AnswerPart>* out);
  // Llama 3: what is held is text after all (after a call: without the
  // separators that follow it), and so is the rest of the answer.
  void llama_give_up(std::vector<AnswerPart>* out);
  void emit_text(std::string_view text, std::vector<AnswerPart>* out);
  // Block syntaxes (api/tool_formats.h): kText looks for an opener, kBlock
  // waits for the block's end; finish_block() at the end of the output.
  void run_block_syntax(std::vector<AnswerPart>* out);
  void finish_block_syntax(std::vector<AnswerPart>* out);
  // The block in buf_[0, end) is complete: its calls, or its text.
  void decide_block(size_t end, std::vector<AnswerPart>* out);
  // One call object ({"name", "arguments"|"parameters"}); else why not.
  // arguments_json is the argument member's text as scan_ minified it (Boost's
  // serialization when scan_ cannot give it).
  std::optional<ToolFallback> parse_call(const boost::json::value& v, ToolCall* call) const;
  // The same for the text of one call object.
  std::optional<ToolFallback> parse_call_text(std::string_view text, ToolCall* call) const;
  void count_fallback(ToolFallback reason) { ++n_fallbacks_[static_cast<int>(reason)]; }
  // A new call object begins (scan_ follows it from its `{`).
  void begin_call();
  // stream_arguments: kToolCallStart once scan_ has a known name and the
  // arguments' `{`, then the arguments' new bytes as a kToolCallDelta. Also
  // after scan_ failed: whether a call opened depends on the bytes before the
  // failure only, not on how the output was chunked.
  void stream_call(std::vector<AnswerPart>* out);
  // The verdict on a complete call object (`body`, scan_ has read it): the
  // call is emitted (true), or counted as a fallback (false: the caller emits
  // its text, unless it had been streamed, which aborts).
  bool decide_call(std::string_view body, std::vector<AnswerPart>* out);
  // A streamed call failed: kToolCallAbort, and the parser stops.
  void abort_call(ToolFallback reason, std::vector<AnswerPart>* out);
  void emit_call(ToolCall call, std::vector<AnswerPart>* out);

  ToolSyntax syntax_;
  std::vector<std::string> names_;
  ToolParserOptions options_;
  bool done_ = false;
  bool aborted_ = false;
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
  // kCall: buf_[0, scan_pos_) has been scanned (Hermes: fed to scan_ from
  // the body's `{`); Llama 3: the object being read starts at obj_start_.
  size_t scan_pos_ = 0;
  size_t obj_start_ = 0;
  std::optional<CallObjectScanner> scan_;  // the call object being read
  bool call_open_ = false;      // stream_arguments: kToolCallStart went out for it
  size_t n_args_streamed_ = 0;  // bytes of scan_->streamed_args() sent as deltas
  int n_llama_calls_ = 0;       // Llama 3: calls in this answer so far
  bool after_call_ = false;  // drop whitespace that follows an accepted call
  size_t seed_left_ = 0;     // bytes of the seed not yet skipped in the text emitted
  int n_calls_ = 0;
  std::array<int, kNumToolFallbacks> n_fallbacks_{};
  // Block syntaxes: the opener of the block being read (kBlock), where its
  // end is, and whether the answer has begun (openers at the start only).
  std::string block_opener_;
  std::string block_space_;  // the whitespace before it (text again when the block is not calls)
  std::optional<tool_formats::BlockEnd> block_end_;
  bool answer_started_ = false;
};

}  // namespace zl::api
