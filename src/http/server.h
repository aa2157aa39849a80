// HTTP/1.1 and HTTP/2 server, plain or TLS, on Boost.Asio (Beast parses
// HTTP/1.1 in http1_connection.cc, nghttp2 runs HTTP/2 in http2_session.cc,
// OpenSSL TLS in tls.cc; none of them leaks into this header).
//
// Protocols on one port: without TLS, a connection whose first bytes are
// the HTTP/2 preface is HTTP/2 (prior knowledge), an HTTP/1.1 request with
// `Upgrade: h2c` is answered 101 and then over HTTP/2, anything else is
// HTTP/1.1. With TLS (ServerConfig::tls_cert_file) the port speaks only TLS
// and ALPN picks h2 or http/1.1. HTTP/2's design and limits are in
// http2_session.h; what follows is HTTP/1.1's.
//
// Design: n_io_threads event loops (one io_context each, one thread each);
// each accepted connection lives on one loop for its whole life, so a
// connection's state needs no locks. The listener (on loop 0) takes every
// connection waiting in the backlog per wake-up; a request is parsed as its
// bytes arrive (Beast's parser fed from the connection's buffer, no
// composed read operations) and dispatched in the same handler, so a burst
// of new connections is served one request after another rather than each
// phase of every request in turn. Per connection:
//   idle --first byte--> headers (deadline header_timeout from the first
//   byte: a slow-loris that trickles bytes is cut at the deadline, not reset
//   by each byte) --> body (deadline body_timeout) --> busy (the handler
//   answers through a Responder) --> idle again (keep-alive) or close.
// While busy the server keeps one read pending: EOF/reset means the client
// has gone, which fires Responder::on_client_gone (the API layer cancels the
// engine request there, and the engine drops the sequence at its next
// step). Bytes of pipelined requests that arrive meanwhile are buffered,
// unparsed, until the current answer is complete, and reading goes on so a
// client that pipelines and then leaves is still noticed; past 256 KiB
// buffered, reading pauses (TCP backpressure) until the answer is complete.
// Writes are queued and never block the loop; each socket write must finish
// within write_timeout.
// Handler code (the handler, what it posts, its timers and callbacks) runs
// behind an exception boundary: what it throws is logged with the request id
// and answered as a 500, or as an SSE error frame after a stream's 200, in
// the envelope of the router's error formatters; the connection goes on.
// Bodies past max_body_bytes are refused from the Content-Length alone (413)
// and the connection closes after a short lingering drain, so the client
// reads the answer instead of a reset.
//
// Graceful shutdown (begin_drain, then stop): the listener closes (new
// connections are refused), idle keep-alive connections close, and every
// request in progress -- from its first byte read until its answer is fully
// written -- runs to its end; answers not yet begun carry Connection: close,
// and each connection closes after its answer. The caller polls
// requests_in_progress() and calls stop() when it reaches 0 or its patience
// ends (stop() cuts whatever is left, as without a drain).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "http/router.h"

namespace zl::http {

struct ServerConfig {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;                 // 0: any free port (see HttpServer::port())
  int n_io_threads = 1;
  uint64_t max_body_bytes = 32ull << 20;   // 413 past this
  uint32_t max_header_bytes = 64u << 10;   // 431 past this
  std::chrono::milliseconds idle_timeout{60000};    // keep-alive: waiting for a request's first byte
  std::chrono::milliseconds header_timeout{10000};  // first byte -> end of headers
  std::chrono::milliseconds body_timeout{60000};    // end of headers -> end of body
  std::chrono::milliseconds write_timeout{60000};   // one socket write
  int max_connections = 10000;          // accepted and closed at once past this
  // SO_SNDBUF of accepted sockets; 0: the kernel's autotuning (up to
  // net.ipv4.tcp_wmem's max, megabytes). A fixed size bounds the kernel's
  // share of a stalled stream and makes backpressure engage sooner.
  int socket_send_buffer = 0;
  // TLS: PEM certificate (the chain may follow) and private key; both empty:
  // plain TCP. With TLS the port speaks only TLS (ALPN h2 or http/1.1); the
  // handshake must end within header_timeout. HttpServer::reload_tls reads
  // them again.
  std::string tls_cert_file;
  std::string tls_key_file;
  // HTTP/2 (http2_session.h): streams open at once per connection
  // (SETTINGS_MAX_CONCURRENT_STREAMS), and RST_STREAM frames a client may
  // send per second before the connection is closed (GOAWAY ENHANCE_YOUR_CALM).
  uint32_t h2_max_concurrent_streams = 128;
  uint32_t h2_max_resets_per_s = 100;
};

struct ServerCounters {
  int64_t n_connections_open = 0;
  int64_t n_connections_total = 0;
  int64_t n_requests_total = 0;
  int64_t n_h2_sessions_total = 0;      // HTTP/2 connections (prior knowledge, Upgrade: h2c, ALPN h2)
  int64_t n_h2_abuse_closed_total = 0;  // HTTP/2 connections closed for rapid resets or floods
};

class HttpServer {
 public:
  // The router must outlive the server.
  HttpServer(ServerConfig config, const Router* router);
  ~HttpServer();  // stops
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens (loading the TLS certificate and key first when
  // configured); kIo naming the address or the file when that fails.
  Status listen();
  // Reads the TLS certificate and key again (SIGHUP): new handshakes use
  // them, connections already open keep theirs. A bad file keeps the
  // previous ones and is an error naming it. Thread-safe.
  Status reload_tls();
  // Whether the port speaks TLS.
  bool tls() const;
  // The bound port (after listen()).
  uint16_t port() const;
  // Starts the I/O threads; returns at once.
  void start();
  // Closes the listener and every connection, joins the threads. Idempotent;
  // also after begin_drain().
  void stop();

  // Starts a graceful drain (see the top of this file). Thread-safe and
  // idempotent; returns at once: the work is posted to each I/O thread (the
  // listener's and every connection's own).
  void begin_drain();
  // Requests in progress: from a request's first byte read until its answer
  // is fully written or its connection closes. Each request counts once,
  // error answers of the HTTP layer (400, 413, 431) and HEAD included.
  // Thread-safe (an atomic load).
  int64_t requests_in_progress() const;

  ServerCounters counters() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zl::http
