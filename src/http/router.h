// Method + path routing. Patterns are exact paths whose segments may be
// "{name}" captures ("/v1/models/{id}"); captures go to
// HttpRequest::path_params in order. The query string is never matched.
// Unknown paths are 404, known paths with another method 405; both answers
// come from the error formatter that the API layer installs, so that every
// error body is the API's envelope (and a handler that throws after its
// stream began gets the API's SSE error frame, from the stream error formatter). HEAD falls back to the GET route.
//
// Built once before the server starts; then read-only (thread-safe).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "http/message.h"

namespace zl::http {

// Makes the answer for an error the HTTP layer detected.
using ErrorFormatter = std::function<HttpResponse(HttpError error, const HttpRequest& request)>;
// Makes the bytes that report an error inside a streamed (SSE) answer whose
// 200 and head have gone out: whole SSE frames, blank line included.
using StreamErrorFormatter = std::function<std::string(HttpError error, const HttpRequest& request)>;

class Router {
 public:
  void add(std::string method, std::string pattern, Handler handler);
  void set_error_formatter(ErrorFormatter f) { error_formatter_ = std::move(f); }
  void set_stream_error_formatter(StreamErrorFormatter f) { stream_error_formatter_ = std::move(f); }
  // Headers every answer carries, whatever route or error made it
  // (x-engine-host): added to each response and stream head that passes
  // through dispatch() and to error_response(). Call before serving.
  void set_common_headers(std::vector<Header> headers) { common_headers_ = std::move(headers); }

  // Runs the handler for `request`, or answers 404/405.
  void dispatch(HttpRequest& request, const std::shared_ptr<Responder>& responder) const;

  // The answer for an HTTP-level error (a plain JSON body without a formatter).
  HttpResponse error_response(HttpError error, const HttpRequest& request) const;
  // The SSE error frame for an error after a stream's head (an `error` event
  // with a plain JSON body without a formatter).
  std::string stream_error_event(HttpError error, const HttpRequest& request) const;

 private:
  struct Route {
    std::string method;
    std::vector<std::string> segments;
    Handler handler;
  };
  static bool match(const Route& r, std::string_view path, std::vector<std::string>* params);

  std::vector<Route> routes_;
  ErrorFormatter error_formatter_;
  StreamErrorFormatter stream_error_formatter_;
  std::vector<Header> common_headers_;
};

}  // namespace zl::http
