#include "http/server.h"

#include <netinet/in.h>
#include <netinet/tcp.h>  // TCP_INFO

#include <boost/asio/post.hpp>
#include <thread>
#include <vector>

#include "core/log.h"
#include "http/conn_shared.h"
#include "http/http1_connection.h"
#include "http/tls.h"

namespace zl::http {

namespace internal {

int64_t tcp_rtt_us(tcp::socket& sock) {
  tcp_info info{};
  socklen_t len = sizeof info;
  if (getsockopt(sock.native_handle(), IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return -1;
  return static_cast<int64_t>(info.tcpi_rtt);
}

}  // namespace internal

using namespace internal;  // NOLINT: this file is the server's assembly of its internal parts

// ---- HttpServer ----

namespace {

// An I/O thread's loop. Handler code runs behind Exchange::guarded(); an
// exception that still escapes a completion handler (the server's own code,
// e.g. std::bad_alloc) is logged and the loop runs on: Asio lets run() be
// called again after a handler threw, with the other handlers still queued.
void run_loop(asio::io_context& ctx) {
  for (;;) {
    try {
      ctx.run();
      return;  // stopped
    } catch (const std::exception& e) {
      log::error("exception escaped an I/O handler, the loop goes on", {{"what", e.what()}});
    } catch (...) {
      log::error("exception of unknown type escaped an I/O handler, the loop goes on");
    }
  }
}

}  // namespace

struct HttpServer::Impl {
  Shared shared;
  std::vector<std::unique_ptr<asio::io_context>> contexts;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards;
  std::unique_ptr<tcp::acceptor> acceptor;
  std::vector<std::thread> threads;
  size_t next_context = 0;
  uint16_t port = 0;
  bool started = false;
  bool stopped = false;

  asio::io_context& next() {
    asio::io_context& ctx = *contexts[next_context];
    next_context = (next_context + 1) % contexts.size();
    return ctx;
  }

  // Runs on the listener's thread (context 0). Each completion also takes
  // every connection already waiting in the backlog (non-blocking accepts
  // until none is left), so a burst of connections is admitted in one go,
  // and a connection of context 0 starts reading at once instead of after
  // a trip through the event loop's queue.
  void accept() {
    asio::io_context& ctx = next();
    acceptor->async_accept(ctx, [this, &ctx](error_code ec, tcp::socket sock) {
      if (ec == asio::error::operation_aborted || !acceptor->is_open()) return;
      if (!ec) admit(std::move(sock), ctx);
      for (int i = 0; i < kMaxAcceptBurst && !ec && acceptor->is_open(); ++i) {
        asio::io_context& c = *contexts[next_context];
        tcp::socket s(c);
        acceptor->accept(s, ec);  // non-blocking: would_block once the backlog is empty
        if (ec) break;
        next();
        admit(std::move(s), c);
      }
      accept();
    });
  }

  // Connections taken per accept completion before the loop goes back to
  // the event queue (other connections' work waits meanwhile).
  static constexpr int kMaxAcceptBurst = 64;

  // Serves `sock` (TLS first when configured): closed at once past
  // max_connections or once draining. A connection of context 0 (the
  // listener's) starts reading at once instead of after a trip through the
  // event loop's queue.
  void admit(tcp::socket sock, asio::io_context& ctx) {
    error_code ignored;
    if (shared.n_open.load() >= shared.cfg.max_connections || shared.draining.load()) {
      sock.close(ignored);
      return;
    }
    shared.n_total.fetch_add(1);
    sock.set_option(tcp::no_delay(true), ignored);
    if (shared.cfg.socket_send_buffer > 0) {
      sock.set_option(asio::socket_base::send_buffer_size(shared.cfg.socket_send_buffer), ignored);
    }
    if (auto tls = shared.tls_context()) {
      serve_tls(std::move(sock), ctx, shared, std::move(tls));
      return;
    }
    serve_http1(Transport(std::move(sock)), ctx, shared, /*on_io_thread=*/&ctx == contexts[0].get());
  }
};

HttpServer::HttpServer(ServerConfig config, const Router* router) : impl_(std::make_unique<Impl>()) {
  impl_->shared.cfg = std::move(config);
  impl_->shared.router = router;
  const int n = std::max(1, impl_->shared.cfg.n_io_threads);
  for (int i = 0; i < n; ++i) {
    impl_->contexts.push_back(std::make_unique<asio::io_context>(1));
    impl_->guards.push_back(asio::make_work_guard(*impl_->contexts.back()));
  }
}

HttpServer::~HttpServer() {
  stop();
  // Destroying the contexts destroys pending handlers and so the connections.
  impl_->acceptor.reset();
  impl_->contexts.clear();
}

Status HttpServer::listen() {
  const ServerConfig& cfg = impl_->shared.cfg;
  if (!cfg.tls_cert_file.empty() || !cfg.tls_key_file.empty()) RETURN_IF_ERROR(reload_tls());
  error_code ec;
  auto addr = asio::ip::make_address(cfg.host, ec);
  if (ec) return invalid_argument("bad listen address '" + cfg.host + "': " + ec.message());
  tcp::endpoint ep(addr, cfg.port);
  auto acc = std::make_unique<tcp::acceptor>(*impl_->contexts[0]);
  const std::string where = cfg.host + ":" + std::to_string(cfg.port);
  acc->open(ep.protocol(), ec);
  if (!ec) acc->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acc->bind(ep, ec);
  if (!ec) acc->listen(asio::socket_base::max_listen_connections, ec);
  if (!ec) acc->non_blocking(true, ec);
  if (ec) return io_error("cannot listen on " + where + ": " + ec.message());
  impl_->port = acc->local_endpoint().port();
  impl_->acceptor = std::move(acc);
  return {};
}

uint16_t HttpServer::port() const { return impl_->port; }

bool HttpServer::tls() const { return !impl_->shared.cfg.tls_cert_file.empty(); }

Status HttpServer::reload_tls() {
  const ServerConfig& cfg = impl_->shared.cfg;
  if (cfg.tls_cert_file.empty() || cfg.tls_key_file.empty()) {
    return invalid_argument("TLS needs both a certificate (--tls-cert) and its private key (--tls-key)");
  }
  auto ctx = make_tls_context(cfg.tls_cert_file, cfg.tls_key_file);
  if (!ctx.ok()) return ctx.status();
  std::lock_guard<std::mutex> lock(impl_->shared.tls_mu);
  impl_->shared.tls = std::move(*ctx);
  return {};
}

void HttpServer::start() {
  CHECK(impl_->acceptor) << "listen() first";
  if (impl_->started) return;
  impl_->started = true;
  impl_->accept();
  for (auto& ctx : impl_->contexts) {
    impl_->threads.emplace_back([c = ctx.get()] { run_loop(*c); });
  }
}

void HttpServer::stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  if (impl_->acceptor) {
    asio::post(*impl_->contexts[0], [a = impl_->acceptor.get()] {
      error_code ignored;
      a->close(ignored);
    });
  }
  for (auto& g : impl_->guards) g.reset();
  for (auto& ctx : impl_->contexts) ctx->stop();
  for (auto& t : impl_->threads) t.join();
  impl_->threads.clear();
  // The I/O threads are gone: close what is still open from here, which
  // cancels answers in progress and frees each connection.
  std::vector<std::weak_ptr<ConnBase>> open;
  {
    std::lock_guard<std::mutex> lock(impl_->shared.conns_mu);
    for (auto& [ptr, entry] : impl_->shared.conns) open.push_back(entry.conn);
  }
  for (auto& weak : open) {
    if (auto conn = weak.lock()) conn->abort();
  }
}

void HttpServer::begin_drain() {
  Shared& sh = impl_->shared;
  std::unordered_map<asio::io_context*, std::vector<std::weak_ptr<ConnBase>>> by_context;
  {
    std::lock_guard<std::mutex> lock(sh.conns_mu);
    if (sh.draining.exchange(true)) return;
    for (auto& [ptr, entry] : sh.conns) by_context[entry.ioc].push_back(entry.conn);
  }
  // The listener lives on context 0 (an accept in flight ends with
  // operation_aborted; one already accepted is refused by admit()).
  if (impl_->acceptor) {
    asio::post(*impl_->contexts[0], [a = impl_->acceptor.get()] {
      error_code ignored;
      a->close(ignored);
    });
  }
  for (auto& [ioc, conns] : by_context) {
    asio::post(*ioc, [conns = std::move(conns)] {
      for (const auto& weak : conns) {
        if (auto conn = weak.lock()) conn->drain();
      }
    });
  }
}

int64_t HttpServer::requests_in_progress() const { return impl_->shared.n_in_progress.load(); }

ServerCounters HttpServer::counters() const {
  return ServerCounters{.n_connections_open = impl_->shared.n_open.load(),
                        .n_connections_total = impl_->shared.n_total.load(),
                        .n_requests_total = impl_->shared.n_requests.load(),
                        .n_h2_sessions_total = impl_->shared.n_h2_sessions.load(),
                        .n_h2_abuse_closed_total = impl_->shared.n_h2_goaway_abuse.load()};
}

}  // namespace zl::http
