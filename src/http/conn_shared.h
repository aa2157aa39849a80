// What the server's connection types share (internal to src/http): the
// transport a connection reads and writes (plain TCP or TLS over TCP), the
// server-wide state every connection reaches (configuration, counters, the
// registry that stop() and begin_drain() walk), and the base of every
// registered connection. Asio stays inside src/http's .cc files and this
// header; the API layer sees only message.h and router.h.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "http/router.h"
#include "http/server.h"

namespace zl::http::internal {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;
using Clock = std::chrono::steady_clock;
using TlsStream = asio::ssl::stream<tcp::socket>;

// A connection's byte stream: plain TCP, or TLS over TCP (after the
// handshake). Movable, so that an HTTP/1.1 connection can hand its stream to
// an HTTP/2 session (prior knowledge, Upgrade: h2c). Not thread-safe: one
// connection's I/O thread.
class Transport {
 public:
  explicit Transport(tcp::socket sock) : plain_(std::move(sock)) {}
  // TLS over `sock`; `ctx` is kept alive by the transport (a SIGHUP reload
  // swaps the server's context while older connections still use theirs).
  Transport(tcp::socket sock, std::shared_ptr<asio::ssl::context> ctx)
      : plain_(sock.get_executor()), ctx_(std::move(ctx)), tls_(std::make_unique<TlsStream>(std::move(sock), *ctx_)) {}
  Transport(Transport&&) = default;
  Transport& operator=(Transport&&) = default;

  bool is_tls() const { return tls_ != nullptr; }
  TlsStream* tls() { return tls_.get(); }
  tcp::socket& socket() { return tls_ ? tls_->next_layer() : plain_; }

  template <typename Buffers, typename Handler>
  void async_read_some(const Buffers& b, Handler&& h) {
    if (tls_) {
      tls_->async_read_some(b, std::forward<Handler>(h));
    } else {
      plain_.async_read_some(b, std::forward<Handler>(h));
    }
  }
  template <typename Buffers, typename Handler>
  void async_write(const Buffers& b, Handler&& h) {
    if (tls_) {
      asio::async_write(*tls_, b, std::forward<Handler>(h));
    } else {
      asio::async_write(plain_, b, std::forward<Handler>(h));
    }
  }
  // Half-close (the linger after an error answer). TCP only: a TLS stream's
  // writes would need a close_notify, which is skipped (the peer has its answer).
  void shutdown_send() {
    error_code ignored;
    if (!tls_) plain_.shutdown(tcp::socket::shutdown_send, ignored);
  }
  void close() {
    error_code ignored;
    socket().shutdown(tcp::socket::shutdown_both, ignored);
    socket().close(ignored);
  }

 private:
  tcp::socket plain_;
  std::shared_ptr<asio::ssl::context> ctx_;
  std::unique_ptr<TlsStream> tls_;
};

// A connection's outgoing bytes: queued in `pending` at any time, written
// one socket write at a time (what was queued meanwhile goes out in the
// next). One connection's I/O thread.
struct WriteBuffers {
  std::string pending;  // queued, not yet written
  std::string writing;  // the socket write in flight
  bool busy = false;    // a write is in flight

  size_t size() const { return pending.size() + writing.size(); }
  // Starts writing `pending` on `t` unless a write is in flight or nothing
  // is queued (false). `done(ec)` runs when the write ends, `writing`
  // cleared; it holds the owner (which owns *this) alive.
  template <typename Done>
  bool start(Transport& t, Done done) {
    if (busy || pending.empty()) return false;
    writing.swap(pending);
    pending.clear();
    busy = true;
    t.async_write(asio::buffer(writing), [this, done = std::move(done)](error_code ec, size_t) mutable {
      busy = false;
      writing.clear();
      done(ec);
    });
    return true;
  }
};

// A registered connection (HTTP/1.1 or HTTP/2). abort() and drain() run on
// the connection's own I/O thread (or after that thread stopped: abort in
// HttpServer::stop).
class ConnBase {
 public:
  virtual ~ConnBase() = default;
  virtual void abort() = 0;
  virtual void drain() = 0;
};

struct Shared {
  ServerConfig cfg;
  const Router* router = nullptr;
  std::atomic<int64_t> n_open{0};
  std::atomic<int64_t> n_total{0};
  std::atomic<int64_t> n_requests{0};
  std::atomic<int64_t> n_in_progress{0};  // HttpServer::requests_in_progress
  std::atomic<int64_t> n_h2_sessions{0};
  std::atomic<int64_t> n_h2_goaway_abuse{0};  // sessions closed for rapid resets or floods
  // Every live connection and its I/O context, so that stop() can close the
  // busy ones (a busy connection keeps itself alive and its answer holds the
  // handler's state, a cycle that only an answer's end or close() breaks)
  // and begin_drain() can reach each one on its own thread.
  struct Entry {
    std::weak_ptr<ConnBase> conn;
    asio::io_context* ioc;
  };
  std::mutex conns_mu;
  std::unordered_map<const ConnBase*, Entry> conns;
  // Set once by begin_drain, under conns_mu: a connection is either
  // registered before the drain takes its list, or refused at accept.
  std::atomic<bool> draining{false};
  // The TLS context new handshakes use (null: plain TCP); swapped by
  // HttpServer::reload_tls under tls_mu.
  std::mutex tls_mu;
  std::shared_ptr<asio::ssl::context> tls;

  std::shared_ptr<asio::ssl::context> tls_context() {
    std::lock_guard<std::mutex> lock(tls_mu);
    return tls;
  }
  // Registers `conn` (stop/drain reach it). False when draining (then the
  // caller closes it), unless `even_draining` (a connection handed from one
  // protocol to another: the drain is applied by the caller).
  bool add(const std::shared_ptr<ConnBase>& conn, asio::io_context& ioc, bool even_draining = false) {
    std::lock_guard<std::mutex> lock(conns_mu);
    if (draining.load() && !even_draining) return false;
    conns.emplace(conn.get(), Entry{conn, &ioc});
    return true;
  }
  void remove(const ConnBase* conn) {
    std::lock_guard<std::mutex> lock(conns_mu);
    conns.erase(conn);
  }
};

// A connection's current deadline (a phase's timeout), checked lazily: at
// most one timer wait is pending, and it is only replaced when a new
// deadline comes before it. A wait that fires before the deadline (which
// moved later) waits again; one that finds no deadline (disarmed) ends. A
// connection thus re-arms the kernel timer about once per request instead
// of once per phase, and arming at each write touches no timer at all.
// One connection's I/O thread.
class Deadline {
 public:
  explicit Deadline(asio::io_context& ioc) : timer_(ioc) {}
  // `owner` owns *this (a pending wait holds it weakly and does nothing once
  // it is gone); `expired` runs on the I/O thread when an armed deadline passes.
  void init(std::weak_ptr<void> owner, std::function<void()> expired) {
    owner_ = std::move(owner);
    expired_ = std::move(expired);
  }
  void arm(std::chrono::milliseconds d) {
    deadline_ = Clock::now() + d;
    if (waiting_ && expiry_ <= deadline_) return;  // it wakes up in time and waits on
    wait_until(deadline_);
  }
  void disarm() { deadline_ = Clock::time_point::max(); }
  // No more expiry (the connection closes).
  void cancel() {
    ++gen_;
    disarm();
    timer_.cancel();
  }

 private:
  void wait_until(Clock::time_point t) {
    const uint64_t gen = ++gen_;  // a wait still pending is orphaned
    waiting_ = true;
    expiry_ = t;
    timer_.expires_at(t);
    timer_.async_wait([this, owner = owner_, gen](error_code ec) {
      const auto keep = owner.lock();
      if (!keep || gen != gen_) return;  // owner gone, or replaced by a newer wait
      waiting_ = false;
      if (ec || deadline_ == Clock::time_point::max()) return;
      if (Clock::now() < deadline_) {
        wait_until(deadline_);
        return;
      }
      disarm();
      expired_();
    });
  }

  asio::steady_timer timer_;
  std::weak_ptr<void> owner_;
  std::function<void()> expired_;
  uint64_t gen_ = 0;  // the pending wait's; bumped to orphan it
  Clock::time_point deadline_ = Clock::time_point::max();
  Clock::time_point expiry_{};  // when the pending wait fires
  bool waiting_ = false;
};

// The kernel's smoothed RTT of a connection in µs (one getsockopt), or -1.
int64_t tcp_rtt_us(tcp::socket& sock);

// The HTTP/2 connection preface a client sends first (RFC 9113 §3.4).
inline constexpr std::string_view kH2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

}  // namespace zl::http::internal
