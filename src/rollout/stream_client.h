// A streamed generation as a client sees it: POST a Messages (or OpenAI)
// body with `stream: true` to another server and time its SSE answer. Used
// by shadow traffic (rollout/shadow.h) and `zerolayer diff` (cli/cmd_diff.cc).
//
//   SseAnswerParser  bytes of an Anthropic or OpenAI event stream -> text,
//                    token times, output token count, stop reason, error.
//   stream_post()    one HTTP/1.1 exchange on a fresh connection (Beast,
//                    plain http://), bounded by a deadline; never throws:
//                    every failure is a value in StreamOutcome.
//
// Times are milliseconds from just before the connection is opened, as a
// client of that server would measure them.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace zl::rollout {

struct StreamOutcome {
  int status = 0;              // HTTP status; 0: no answer (refused, timed out before the head)
  std::string error;           // empty: a complete answer; else why not ("timed out", an SSE error's message…)
  std::string error_type;      // the error envelope's type ("rate_limit_error"…), or "timeout" / "connect"
  double first_token_ms = -1;  // the first content delta (text, thought or tool arguments); < 0: none
  double last_token_ms = -1;   // the last one
  double total_ms = -1;        // the end of the answer
  int64_t total_tokens = -1;   // output tokens the server reported (usage); -1: none reported
  std::string stop_reason;     // Anthropic stop_reason / OpenAI finish_reason, as sent
  std::string text;            // the answer's text deltas, concatenated (capped)
  bool ok() const { return error.empty() && status == 200; }
};

// Reads an event stream incrementally (lines may be split anywhere).
// Anthropic: content_block_delta (text_delta, thinking_delta,
// input_json_delta), message_start / message_delta (usage, stop_reason),
// error. OpenAI: `data:` chunks (choices[0].delta.content / text,
// finish_reason, usage.completion_tokens), an `error` object, [DONE].
class SseAnswerParser {
 public:
  explicit SseAnswerParser(size_t max_text_bytes = 1 << 20) : max_text_(max_text_bytes) {}
  // `now_ms`: the time to note for a content delta in these bytes.
  void feed(std::string_view bytes, double now_ms);
  // Fills the parsed fields of `out` (not status or total_ms).
  void finish(StreamOutcome& out) const;
  bool saw_end() const { return saw_end_; }  // message_stop / [DONE]

 private:
  void on_line(std::string_view line, double now_ms);
  void on_event(double now_ms);

  size_t max_text_;
  std::string line_;
  std::string event_;  // the pending `event:` name
  std::string data_;   // the pending `data:` lines
  StreamOutcome acc_;
  bool saw_end_ = false;
  size_t n_line_bytes_ = 0;
};

struct StreamCall {
  std::string host;
  std::string port = "80";
  std::string target;          // "/v1/messages"
  std::string body;            // sent as is (stream: true is the caller's business)
  std::string api_key;         // sent as x-api-key and Authorization: Bearer; empty: none
  std::vector<std::pair<std::string, std::string>> headers;  // more request headers
  std::chrono::steady_clock::time_point deadline;
  size_t max_text_bytes = 1 << 20;
  size_t max_stream_bytes = 64 << 20;  // a longer answer is cut (error "too long")
};

// Runs on the caller's executor; completes by call.deadline at the latest.
boost::asio::awaitable<StreamOutcome> stream_post(StreamCall call);

// The body with "stream": true (and for OpenAI chat/completions routes
// stream_options.include_usage, so the token count comes back). InvalidArgument
// when `body` is not a JSON object.
Result<std::string> with_stream_true(std::string_view body, bool openai);

}  // namespace zl::rollout
