// One generation from parsed request to answer, shared by both APIs and by
// streaming and non-streaming (non-streaming collects the events).
//
//   prepare_request(): prompt -> token ids (PromptCodec), the exact context
//     check (400 context_length_exceeded with the counts), max_tokens
//     clamped to what remains of the window, sampling and stop settings.
//   GenerationSession: submits to the engine, then on the connection's I/O
//     thread drains the RequestChannel whenever the engine notifies, passes
//     text through the tool-call parser (when the request offers tools in
//     the model's native syntax, api/tool_calls.h), the stream shaper and an
//     EventFormatter (the API's wire format) into the Responder. A stream
//     gets a tool call as it is written (ToolParserOptions::stream_arguments:
//     its block opens once the name is known and the arguments begin, the
//     arguments follow in pieces, paced and split by the shaper like text);
//     the text the shaper holds before a call goes out first, at once,
//     whatever the pacing, and so do its last pieces before the block ends.
//     A streamed call that then fails (invalid JSON, over the size cap, cut
//     short) ends the stream with an error event (abort_call() says why);
//     a non-streaming answer takes calls whole and a failed one is text.
//     With ToolPlan::single_call
//     (parallel tool use disabled) the first complete call ends the answer:
//     the engine request is cancelled and the answer finishes with that call
//     (tool_use / tool_calls). A client that goes away cancels the engine
//     request; so does the session's destruction before the end.
//     Backpressure: a stream drains its channel only while the connection
//     holds less than kMaxBufferedBytes not yet taken by the socket; events
//     then stay in the channel and the engine pauses the sequence, so memory
//     per stream is bounded (that buffer + EngineConfig::max_pending_events
//     events) whatever the client's reading speed.
//     Server-Timing (SessionOptions::timing) on every answer's head.
//     Keep-alive (SessionOptions::ping_interval): a stream that has written
//     nothing for the interval (a long prefill, a wait in the engine's
//     queue) is committed early (200, headers, the formatter's stream start,
//     whose message_start then reports the prompt's token count) and then
//     gets a keep-alive frame (stream_ping) each silent interval, so proxies
//     and clients do not cut a connection that is only waiting. Real writes
//     reset the silence clock; nothing is pinged while the socket is backed
//     up. One pending timer per streaming session, none otherwise.
//     Threads: the engine thread only notifies, through an http::Waker that
//     owns nothing of the session (so it never runs the session's or the
//     responder's destructor); everything else runs on the I/O thread.
//     Exceptions: a pump, timer or drain callback that throws ends the
//     answer with api_error / internal_server_error (a 500, or an SSE error
//     event after the 200), logged with the request id, and cancels the
//     engine request; the connection lives on.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "api/chat.h"
#include "api/context_policy.h"
#include "api/errors.h"
#include "api/prompt_codec.h"
#include "api/server_timing.h"
#include "api/thinking.h"
#include "api/tool_calls.h"
#include "api/tool_prompt.h"
#include "engine/request.h"
#include "http/message.h"
#include "http/stream_shaper.h"
#include "http/waker.h"

namespace zl::api {

struct Prepared {
  Request request;
  int64_t n_prompt_tokens = 0;
  int64_t n_ctx = 0;             // 0: unknown (no check)
  bool max_tokens_clamped = false;  // the window, not the client's max_tokens, bounds the answer
  ToolPlan tools;                   // how tools were rendered, and how to parse the output
  ThinkingPlan thinking;            // whether the output holds a thought (api/thinking.h)
  ContextTruncation truncation;     // what a truncation policy dropped (api/context_policy.h)
};

// Builds the engine request for `chat`. `n_ctx` <= 0 disables the window check.
// `key_id`: the identity of the authenticated API key ("" on a server
// without keys); with chat.user it makes Request::tenant (tenant_of).
// `context`: the truncation policy for a prompt that does not fit
// (api/context_policy.h; the default: the 400, as without one).
ApiResult<Prepared> prepare_request(const ChatRequest& chat, const PromptCodec& codec, int64_t n_ctx,
                                    std::string request_id, std::string_view key_id = {},
                                    const ContextOptions& context = {});

// The prefix-cache tenant of a request: the API key first, then the client's
// user id (metadata.user_id / user) within the key. Two keys never share a
// tenant whatever user ids their clients send (key ids contain no '/').
std::string tenant_of(std::string_view key_id, std::string_view user);

// The error for a prompt of n_prompt tokens that does not fit n_ctx, naming the field that holds
// the prompt (prompt_param: "prompt" for a raw prompt, /v1/completions; else "messages").
ApiError context_length_error(int64_t n_prompt, int64_t n_ctx);
std::string prompt_param(const ChatRequest& chat);

// How a generation ended, as both APIs need it.
struct Completion {
  FinishReason finish = FinishReason::kNone;
  std::string stop_sequence;
  Usage usage;
  bool max_tokens_clamped = false;  // kMaxTokens then means the window filled
  // Tool calls in the answer. With kEndOfSequence (the model ended its turn)
  // and at least one call the stop reason is tool_use / tool_calls.
  int n_tool_calls = 0;
  Timings timings;  // the engine's (validate mode reports them)
};

// An API's wire format for one generation. Called on the I/O thread, in
// order: stream_start once, stream_text and tool calls (stream_tool_call_start,
// stream_tool_call_delta 1..n times, stream_tool_call_end) 0..n times in the
// answer's order, then stream_finish or stream_error (streaming); or
// complete / error (non-streaming). stream_error may also come inside a
// call, after its start: the call is then not complete.
// stream_ping may come any number of times after stream_start, between the
// others, while the stream has nothing else to say.
class EventFormatter {
 public:
  virtual ~EventFormatter() = default;
  virtual void stream_start(const Usage& usage, std::string& out) = 0;
  virtual void stream_text(std::string_view text, std::string& out) = 0;
  // A tool call opens: its name (the formatter gives it an id).
  virtual void stream_tool_call_start(std::string_view name, std::string& out) = 0;
  // The next piece of its arguments; the pieces concatenate to its arguments JSON.
  virtual void stream_tool_call_delta(std::string_view arguments, std::string& out) = 0;
  virtual void stream_tool_call_end(std::string& out) = 0;
  virtual void stream_finish(const Completion& c, std::string& out) = 0;
  virtual void stream_error(const ApiError& e, std::string& out) = 0;
  // A keep-alive frame that the API's clients skip.
  virtual void stream_ping(std::string& out) = 0;
  // The model's thought (api/thinking.h), before any text or call: pieces,
  // then its end once (also when the output ends inside it). A non-streamed
  // answer has it as kThinking parts. Formats without thoughts ignore them.
  virtual void stream_thinking(std::string_view text, std::string& out) {}
  virtual void stream_thinking_end(std::string& out) {}
  // Log-probabilities of tokens (Event::logprobs), each time before the text
  // they came with: the next stream chunk carries them (whatever it says, as
  // the text may wait in a parser or the shaper), a whole answer has them all.
  // Formats without logprobs ignore them.
  virtual void take_logprobs(std::span<const TokenLogprobs> logprobs) {}
  // The whole answer: text pieces and tool calls in order (empty: no text).
  virtual http::HttpResponse complete(const std::vector<AnswerPart>& answer, const Completion& c) = 0;
  virtual http::HttpResponse error(const ApiError& e) = 0;
};

// How a session ended, for metrics and request logs.
struct SessionResult {
  int status = 0;                // 499: the client went away
  Usage usage;
  double t_first_ms = -1;        // session start -> first token on the I/O thread
  double t_total_ms = 0;
  Timings timings;               // the engine's, from its last event
  std::chrono::steady_clock::time_point t_submit{};  // engine.submit() was called
  FinishReason finish = FinishReason::kNone;
  // The reason of an error answer (also after a 200: an SSE error event),
  // kClientGone for 499; none for a complete answer.
  std::optional<ErrorReason> error_reason;
  int n_tool_calls = 0;          // tool calls that reached the client
  std::array<int, kNumToolFallbacks> n_tool_fallbacks{};  // ToolCallParser::n_fallbacks
};

struct SessionOptions {
  // Where t_first_ms / t_total_ms start (the request's arrival); unset: the
  // session's creation.
  std::chrono::steady_clock::time_point t_start{};
  bool stream = false;
  std::optional<http::StreamShape> shape;
  bool max_tokens_clamped = false;
  // The prompt's token count (Prepared::n_prompt_tokens): the usage a stream
  // committed before the engine's first event reports (cached count unknown: 0).
  int64_t n_prompt_tokens = 0;
  // Streams: a keep-alive frame after this long without a write; 0: none
  // (the stream then starts with the engine's first token).
  std::chrono::milliseconds ping_interval{0};
  // Prepared::tools: when active, the output is parsed for tool calls.
  ToolPlan tools;
  // Prepared::thinking: when active, the output is parsed for a thought first.
  ThinkingPlan thinking;
  // The API layer's phases (parse, tokenize): the Server-Timing header
  // (api/server_timing.h) of a non-streamed answer adds the engine's phases
  // from its last event; a stream's head, those known when it goes out.
  ServerTiming timing;
  // Called once when the answer is complete or the client has gone (metrics, logs).
  std::function<void(const SessionResult&)> on_done;
  // Adds headers to the answer's head, whatever it is (a stream's 200, a
  // whole answer, an error): called once, on the I/O thread, as the head is
  // built, with the usage known then (rate-limit headers, x-engine-*), in
  // order. Each admission duty pushes its own. Empty: no extra headers.
  using HeadHeaders = std::function<void(const Usage& usage, std::vector<http::Header>& headers)>;
  std::vector<HeadHeaders> head_headers;
  // A tap on the engine's events (the response cache records a miss with
  // it, limits/response_cache.h): called on the I/O thread with each kText
  // event the session takes from the channel, in order, then with the event
  // that finish() completes the answer with (the engine's kFinish, or the
  // one the session makes when a single tool call ends the answer; also a
  // kCancelled one). An answer that ends in an error never passes a
  // kFinish. Empty: no tap.
  std::function<void(const Event&)> on_event;
};

class GenerationSession : public std::enable_shared_from_this<GenerationSession> {
 public:
  // A stream stops draining its channel while this many bytes wait for the socket.
  static constexpr size_t kMaxBufferedBytes = 16 << 10;

  // Submits `request` and answers through `responder`. The session keeps
  // itself alive through the responder until the answer is complete.
  static void start(EngineApi& engine, Request request, SessionOptions options,
                    std::unique_ptr<EventFormatter> formatter, std::shared_ptr<http::Responder> responder);

  GenerationSession(SessionOptions options, std::unique_ptr<EventFormatter> formatter,
                    std::shared_ptr<http::Responder> responder);
  ~GenerationSession();  // cancels the engine request if it has not finished

 private:
  using Clock = std::chrono::steady_clock;
  void pump();              // I/O thread
  // Runs a posted pump or timer callback behind the session's exception
  // boundary (fail_internal).
  template <typename Fn>
  void guarded(Fn&& fn);
  void fail_internal(std::string_view what);
  // True (and a wake-up on drain armed) while the socket is not keeping up.
  bool socket_backed_up();
  // The formatter's stream start, into start_bytes_, once (streams only):
  // the stream is to begin, and its text is formatted after it.
  void prepare_start();
  // Commits the stream (200, headers, the formatter's stream start, then
  // `more`) unless done already; true when it did and the stream start had a body.
  bool begin_stream_once(std::string_view more = {});
  // Writes `out` and clears it; a stream prepared (prepare_start) but not
  // committed yet is committed with `out` after its start: one socket write.
  void send_out(std::string& out);
  // Text from the engine: the thought apart (thinking parser), the answer on.
  void take_output(std::string_view text, std::string& out);
  void take_thoughts(std::vector<ThoughtPiece>& pieces, std::string& out);
  void deliver_thought(std::string_view text, std::string& out);
  void end_thought(std::string& out);  // the thought is over: its last pieces, then its end
  // Answer text, through the tool-call parser when there is one.
  void take_text(std::string_view text, std::string& out);
  void deliver(AnswerPart part, std::string& out);
  void deliver_text(std::string_view text, std::string& out);
  // What the shaper holds, now, as text or argument pieces (in_call_).
  void flush_shaper(std::string& out);
  void stream_piece(std::string_view piece, std::string& out);
  // A streamed call failed (call_abort_): the stream ends with an error.
  void abort_call(std::string& out);
  void finish(const Event& e);
  void fail(const ApiError& e);
  // Server-Timing: options_.timing and the engine's phases known in timings_.
  // And SessionOptions::head_headers.
  void add_timing_header(http::HttpResponse& response, bool with_decode) const;
  void schedule_shaper();
  void done(int status);
  // Queues stream bytes and restarts the silence clock.
  void write(std::string_view bytes);
  void arm_ping(Clock::duration delay);
  void on_ping_timer();

  SessionOptions options_;
  std::unique_ptr<EventFormatter> formatter_;
  std::shared_ptr<http::Responder> responder_;
  std::shared_ptr<RequestChannel> channel_;
  std::shared_ptr<http::Waker> waker_;  // the channel's notifier posts pumps through it
  std::optional<http::StreamShaper> shaper_;
  std::optional<Event> final_event_;  // kFinish held back while the shaper drains
  std::optional<ToolCallParser> tool_parser_;
  std::optional<ThinkingParser> thinking_parser_;
  bool in_thought_ = false;    // a streamed thought is open: shaper pieces are thought
  std::vector<AnswerPart> answer_;    // non-streaming: the whole answer
  int n_tool_calls_ = 0;
  bool in_call_ = false;       // a streamed call is open: shaper pieces are its arguments
  std::string call_name_;      // its name
  std::optional<ToolFallback> call_abort_;  // it failed after its start (kToolCallAbort)
  Usage usage_;
  Timings timings_;
  FinishReason finish_reason_ = FinishReason::kNone;
  std::optional<ErrorReason> error_reason_;
  Clock::time_point t_start_ = Clock::now();
  Clock::time_point t_submit_{};
  Clock::time_point t_last_write_ = t_start_;  // keep-alive: the silence clock
  double t_first_ms_ = -1;
  bool stream_started_ = false;
  bool start_prepared_ = false;  // start_bytes_ holds the formatter's stream start
  std::string start_bytes_;
  bool engine_usage_ = false;  // usage_ holds the engine's figures (an event arrived)
  bool timer_pending_ = false;
  bool ping_pending_ = false;
  bool drain_hook_set_ = false;
  bool finished_ = false;
};

}  // namespace zl::api
