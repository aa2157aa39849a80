// Server-sent events framing (text/event-stream). `data` must be one line
// (our JSON never contains a raw newline); frames end with a blank line.
#pragma once

#include <string>
#include <string_view>

#include "http/message.h"

namespace zl::http {

// "event: <event>\ndata: <data>\n\n"
inline void append_sse_event(std::string& out, std::string_view event, std::string_view data) {
  out.append("event: ").append(event).append("\ndata: ").append(data).append("\n\n");
}

// "data: <data>\n\n" (OpenAI streams have no event: lines)
inline void append_sse_data(std::string& out, std::string_view data) {
  out.append("data: ").append(data).append("\n\n");
}

// ": <comment>\n\n" (a comment line: clients skip it; a keep-alive)
inline void append_sse_comment(std::string& out, std::string_view comment) {
  out.append(": ").append(comment).append("\n\n");
}

// The head of an SSE answer: 200, text/event-stream, no caching, no proxy buffering.
inline HttpResponse sse_head() {
  HttpResponse r;
  r.status = 200;
  r.content_type = "text/event-stream";
  r.headers = {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}};
  return r;
}

}  // namespace zl::http
