// HTTP/1.1 connections (internal to src/http; the design is in server.h).
#pragma once

#include "http/conn_shared.h"

namespace zl::http::internal {

// Registers and starts an HTTP/1.1 connection on `transport` (closed at
// once when the server is draining). Its first bytes are sniffed for the
// HTTP/2 preface, and `Upgrade: h2c` is honoured on plain TCP: both move the
// transport to an HTTP/2 session. `on_io_thread`: the caller runs on ioc's
// thread (the first read starts without a trip through the queue).
void serve_http1(Transport transport, asio::io_context& ioc, Shared& sh, bool on_io_thread);

}  // namespace zl::http::internal
