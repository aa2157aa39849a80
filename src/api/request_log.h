// Request logs (DESIGN.md §5): one record per answered request, written by
// the serve command as one JSON object per line on stderr, or as a short
// human-readable line when stderr is a terminal. The record is also what
// in-process users (bench/serve_bench.cc) read the engine's timings from.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "engine/request.h"

namespace zl::api {

struct RequestLog {
  using Clock = std::chrono::steady_clock;
  std::string request_id;
  std::string method;
  std::string route;             // the route pattern ("/v1/models/{id}"), or "other"
  int status = 0;                // 499: the client went away before the answer
  bool generation = false;       // the fields below are set
  bool stream = false;
  Usage usage;
  FinishReason finish = FinishReason::kNone;
  std::string error_reason;      // error.detail.reason of an error answer
  // Generation: the request body was parsed (before the chat template and
  // the tokenizer); other routes: the answer was sent.
  Clock::time_point t_start{};
  double t_first_token_ms = -1;  // t_start -> the first token reached the I/O thread
  double t_total_ms = 0;         // t_start -> the answer was complete (generation only)
  Clock::time_point t_submit{};  // the request was handed to the engine (EngineApi::submit)
  Timings engine;                // the engine's own (zero when it never ran)
  std::string tenant;            // the keys-file name of the request's key ("" otherwise)
};

// {"ts":"…","level":"info","request_id":…,"route":…,"status":…,…} (no newline).
std::string format_request_log_json(const RequestLog& r);
// "200 POST /v1/messages req_… 12+34 tok first 5.1 ms total 40.2 ms end_turn".
std::string format_request_log_human(const RequestLog& r);

using RequestLogSink = std::function<void(const RequestLog&)>;

// A sink that writes one line per record through the log writer (JSON, or
// human-readable in the text log format: log::format()). Thread-safe: one
// write(2) per line.
RequestLogSink stderr_request_log();

}  // namespace zl::api
