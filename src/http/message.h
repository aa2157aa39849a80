// HTTP requests and answers as the API layer sees them: plain values, no
// Beast types (only src/http/server.cc includes Beast, to keep builds fast).
//
// A handler receives an HttpRequest and a Responder. The Responder is the
// one way to answer: a complete answer (send), or a stream (begin_stream,
// write..., end_stream). Requests on one connection are answered in order
// (pipelining-safe): the next request is not parsed before the current
// answer is complete.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zl::http {

using Header = std::pair<std::string, std::string>;

struct HttpRequest {
  std::string method;       // "GET", "POST", "HEAD", ...
  std::string target;       // as sent: "/v1/messages?beta=true"
  std::string path;         // target without the query: "/v1/messages"
  std::string query;        // after '?', possibly empty
  std::vector<Header> headers;  // names lowercased, in arrival order
  std::string body;
  std::string request_id;   // the client's x-request-id when valid, else "req_…" (http/request_id.h)
  std::vector<std::string> path_params;  // router captures ({id})
  int version = 11;         // 10, 11 or 20 (HTTP/2)
  // When the server had read the whole request (steady clock): where the
  // API's request logs and time-to-first-token measurements start.
  std::chrono::steady_clock::time_point t_received{};
  // The connection's smoothed round-trip time (TCP_INFO tcpi_rtt) when the
  // request was read, µs; -1: unknown. For the efficiency ratio (api/metrics.h).
  int64_t tcp_rtt_us = -1;

  // Value of the first header named `name` (lowercase), or "" when absent.
  std::string_view header(std::string_view name) const;
  bool has_header(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<Header> headers;  // extra headers (request-id is added by the server)
  std::string body;
};

// Errors the HTTP layer itself detects. The API layer turns them into its
// error envelope (see Router::set_error_formatter); the mapping to a status
// code lives in api/errors.cc.
enum class HttpError {
  kBadRequest,        // malformed HTTP
  kNotFound,          // no route
  kMethodNotAllowed,  // route exists, not for this method
  kBodyTooLarge,      // past ServerConfig::max_body_bytes
  kHeadersTooLarge,   // past ServerConfig::max_header_bytes
  kInternal,          // a handler threw
};

// One request's answer. Every method except post()/post_after() must be
// called on the connection's I/O thread (the thread that called the
// handler). post() is thread-safe: it runs fn on that thread later, unless
// the exchange has finished or the client has gone.
class Responder {
 public:
  virtual ~Responder() = default;

  virtual const std::string& request_id() const = 0;

  // A complete answer. Content-Length, request-id and x-request-id are added.
  virtual void send(HttpResponse response) = 0;

  // A streamed answer: status and headers now (chunked transfer coding),
  // body bytes through write(), closed by end_stream(). `head.body` is
  // written as the first chunk when not empty.
  virtual void begin_stream(HttpResponse head) = 0;
  // Queues bytes; never blocks. Ignored after the client has gone.
  virtual void write(std::string_view bytes) = 0;
  virtual void end_stream() = 0;

  // Bytes queued but not yet accepted by the socket (backpressure signal).
  virtual size_t buffered_bytes() const = 0;
  // True once the client has gone (read EOF/error, write error, timeout).
  virtual bool client_gone() const = 0;
  // True once the answer is complete (sent or stream ended) or the client gone.
  virtual bool done() const = 0;

  // fn runs once if the client goes away before the answer is complete.
  virtual void on_client_gone(std::function<void()> fn) = 0;
  // fn runs each time the queued bytes have all been written.
  virtual void on_drained(std::function<void()> fn) = 0;
  // Keeps `state` alive until the exchange is over (answered or client gone).
  virtual void hold(std::shared_ptr<void> state) = 0;

  // Thread-safe. Runs fn on the connection's I/O thread.
  virtual void post(std::function<void()> fn) = 0;
  // Runs fn on the I/O thread after `delay` (not if the exchange is over).
  virtual void post_after(std::chrono::milliseconds delay, std::function<void()> fn) = 0;
};

using Handler = std::function<void(HttpRequest& request, std::shared_ptr<Responder> responder)>;

}  // namespace zl::http
