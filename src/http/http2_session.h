// HTTP/2 sessions (nghttp2) on the server's event loops (internal to src/http).
//
// One session per connection, on the connection's I/O thread, like an
// HTTP/1.1 connection; one request per stream, many streams at once. Each
// stream is a Responder to the same router and handlers as HTTP/1.1: a
// complete answer is HEADERS (+ DATA), a streamed answer is HEADERS and
// DATA frames as write() queues bytes (no chunked coding; END_STREAM ends
// it). Backpressure: a stream's bytes wait in its own buffer until nghttp2
// takes them, which it does only within the stream's and the connection's
// flow-control windows and while the socket keeps up; buffered_bytes() is
// that buffer, so a client that does not open its window is a slow reader
// and the handler pauses the sequence as over HTTP/1.1; on_drained fires
// once the buffer has gone to the socket. RST_STREAM from the client (or
// the session's end) is Responder::on_client_gone: the API cancels the
// engine request, dropped at the engine's next step.
//
// Defences (the session answers with GOAWAY and closes):
//   - SETTINGS_MAX_CONCURRENT_STREAMS (ServerConfig::h2_max_concurrent_streams);
//     streams past it are refused by nghttp2 (REFUSED_STREAM).
//   - A request's header list past ServerConfig::max_header_bytes (HPACK
//     decoded size, RFC 9113's 32 bytes per field included; advertised as
//     SETTINGS_MAX_HEADER_LIST_SIZE) is answered as HttpError::kHeadersTooLarge
//     without the rest being kept; a body past max_body_bytes is
//     kBodyTooLarge and is not kept either.
//   - Request bodies held at once per connection: 4 x max_body_bytes (at
//     least 1 MiB); a
//     stream past it is refused (RST_STREAM REFUSED_STREAM, safe to retry).
//   - HPACK: the decoder's table stays at 4096 bytes (SETTINGS_HEADER_TABLE_SIZE),
//     the encoder's is bounded at 4096 whatever the client allows.
//   - Rapid reset (CVE-2023-44487): more than h2_max_resets_per_s RST_STREAM
//     frames from the client in one second is GOAWAY(ENHANCE_YOUR_CALM).
//     Streams reset before their request was dispatched (in the same read)
//     never reach the engine; those dispatched are cancelled.
//   - PING/SETTINGS floods: more than kMaxControlFramesPerS of them in one
//     second is GOAWAY(ENHANCE_YOUR_CALM); nghttp2 also bounds the ACKs queued.
//   - Timeouts: header_timeout for the preface and first frames, idle_timeout
//     with no stream open (GOAWAY(NO_ERROR)), write_timeout for a socket write.
//   - Drain (HttpServer::begin_drain): GOAWAY(NO_ERROR) naming the last stream
//     taken; streams in progress finish, then the connection closes.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "http/conn_shared.h"
#include "http/message.h"

namespace zl::http::internal {

// A request read over HTTP/1.1 with `Upgrade: h2c`: answered on stream 1.
struct H2Upgrade {
  HttpRequest request;
  std::string settings;  // the HTTP2-Settings header, base64url-decoded
};

// The decoded HTTP2-Settings payload when `req` asks for `Upgrade: h2c`
// (RFC 7540 §3.2) and may have it: nullopt otherwise (answered over HTTP/1.1).
std::optional<std::string> h2c_upgrade_settings(const HttpRequest& req);

// Registers and starts an HTTP/2 session on `transport`, on ioc's thread.
// `initial`: bytes already read (the client's preface and what followed);
// `upgrade`: the request that asked for h2c (101 is written first).
void serve_http2(Transport transport, asio::io_context& ioc, Shared& sh, std::string_view initial,
                 std::optional<H2Upgrade> upgrade = std::nullopt);

}  // namespace zl::http::internal
