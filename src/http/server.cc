#include "http/server.h"

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <netinet/in.h>
#include <netinet/tcp.h>  // TCP_INFO
#include <cctype>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "core/log.h"
#include "core/random_id.h"
#include "http/request_parser.h"  // feed_parser, to_request
#include "http/request_id.h"

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = boost::asio::ip::tcp;
using error_code = boost::system::error_code;

namespace zl::http {
namespace {

// The kernel's smoothed RTT of a connection in µs (one getsockopt), or -1.
int64_t tcp_rtt_us(tcp::socket& sock) {
  tcp_info info{};
  socklen_t len = sizeof info;
  if (getsockopt(sock.native_handle(), IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return -1;
  return static_cast<int64_t>(info.tcpi_rtt);
}

// After an error answer that closes the connection, unread request bytes are
// drained for this long so the client sees the answer, not a reset.
constexpr std::chrono::milliseconds kLingerTime{2000};

std::string_view reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    case 529: return "Site Overloaded";
    default: return "Status";
  }
}

using Clock = std::chrono::steady_clock;

std::string new_request_id() { return random_id("req_"); }

// Status line and headers. `content_length` < 0: chunked (HTTP/1.1) or
// close-delimited (HTTP/1.0).
std::string serialize_head(const HttpResponse& r, const std::string& request_id, int64_t content_length,
                           bool keep_alive, int version) {
  std::string h;
  h.reserve(256 + r.headers.size() * 48);
  h += version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ";
  h += std::to_string(r.status);
  h += ' ';
  h += reason_phrase(r.status);
  h += "\r\nServer: zerolayer\r\n";
  if (!r.content_type.empty()) h += "Content-Type: " + r.content_type + "\r\n";
  if (content_length >= 0) {
    h += "Content-Length: " + std::to_string(content_length) + "\r\n";
  } else if (version == 11) {
    h += "Transfer-Encoding: chunked\r\n";
  }
  h += "request-id: " + request_id + "\r\nx-request-id: " + request_id + "\r\n";
  for (const auto& [k, v] : r.headers) h += k + ": " + v + "\r\n";
  if (!keep_alive) {
    h += "Connection: close\r\n";
  } else if (version == 10) {
    h += "Connection: keep-alive\r\n";
  }
  h += "\r\n";
  return h;
}

class Connection;

struct Shared {
  ServerConfig cfg;
  const Router* router = nullptr;
  std::atomic<int64_t> n_open{0};
  std::atomic<int64_t> n_total{0};
  std::atomic<int64_t> n_requests{0};
  std::atomic<int64_t> n_in_progress{0};  // HttpServer::requests_in_progress
  // Every live connection and its I/O context, so that stop() can close the
  // busy ones (a busy connection keeps itself alive (busy_self_) and its
  // exchange holds the handler's state, a cycle that only an answer's end or
  // close() breaks) and begin_drain() can reach each one on its own thread.
  struct Entry {
    std::weak_ptr<Connection> conn;
    asio::io_context* ioc;
  };
  std::mutex conns_mu;
  std::unordered_map<const Connection*, Entry> conns;
  // Set once by begin_drain, under conns_mu: a connection is either
  // registered before the drain takes its list, or refused at accept.
  std::atomic<bool> draining{false};
};

// One request's answer (see Responder). Lives on its connection's thread.
//
// The exception boundary: every piece of handler code the server runs for
// this request -- the handler itself (dispatch), what it post()s or
// post_after()s, its on_drained and on_client_gone callbacks -- runs through
// guarded(). An exception there is logged with the request id and becomes
// the answer: a 500 in the API's envelope when nothing has been sent, or the
// API's SSE error frame and the stream's end after a 200. The connection
// (keep-alive) and every other request on the loop go on.
class Exchange final : public Responder, public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(std::weak_ptr<Connection> conn, asio::io_context& ioc, const Router* router, const HttpRequest& req,
           bool keep_alive)
      : conn_(std::move(conn)), ioc_(ioc), router_(router), id_(req.request_id), method_(req.method),
        path_(req.path), head_only_(req.method == "HEAD"), version_(req.version),
        keep_alive_(keep_alive) {}

  const std::string& request_id() const override { return id_; }
  void send(HttpResponse response) override;
  void begin_stream(HttpResponse head) override;
  void write(std::string_view bytes) override;
  void end_stream() override;
  size_t buffered_bytes() const override;
  bool client_gone() const override { return gone_; }
  bool done() const override { return ended_ || gone_; }
  void on_client_gone(std::function<void()> fn) override { on_gone_ = std::move(fn); }
  void on_drained(std::function<void()> fn) override { on_drained_ = std::move(fn); }
  void hold(std::shared_ptr<void> state) override {
    if (!done()) held_.push_back(std::move(state));
  }
  void post(std::function<void()> fn) override;
  void post_after(std::chrono::milliseconds delay, std::function<void()> fn) override;

  // Runs `fn` (handler code, named `where` in the log) behind the boundary above.
  template <typename Fn>
  void guarded(std::string_view where, Fn&& fn) {
    try {
      fn();
    } catch (const std::exception& e) {
      fail_internal(where, e.what());
    } catch (...) {
      fail_internal(where, "an exception of unknown type");
    }
  }

  // Connection side.
  void mark_gone() {
    if (gone_ || ended_) return;
    gone_ = true;
    if (auto fn = std::move(on_gone_)) guarded("on_client_gone", fn);
    release();
  }
  void drained() {
    if (!on_drained_ || done()) return;
    // A copy: the callback may end the answer, which clears on_drained_.
    auto fn = on_drained_;
    guarded("on_drained", fn);
  }
  // Drain: an answer not begun yet carries Connection: close.
  void end_keep_alive() { keep_alive_ = false; }

 private:
  // `bytes` as the body's next part: a chunk (HTTP/1.1) or as is (HTTP/1.0).
  void append_body(std::string& out, std::string_view bytes) const;
  void release() {
    on_gone_ = nullptr;
    on_drained_ = nullptr;
    held_.clear();  // may destroy the handler's state (which may hold us: we are kept by the caller)
  }
  void finish();
  // The boundary's answer for an exception `what` thrown in `where`.
  void fail_internal(std::string_view where, std::string_view what);

  std::weak_ptr<Connection> conn_;
  asio::io_context& ioc_;
  const Router* router_;
  std::string id_;
  // The request line, for the error answer's envelope (the API is chosen by path).
  std::string method_;
  std::string path_;
  bool head_only_;
  int version_;
  bool keep_alive_;
  bool started_ = false;
  bool ended_ = false;
  bool gone_ = false;
  std::function<void()> on_gone_;
  std::function<void()> on_drained_;
  std::vector<std::shared_ptr<void>> held_;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket sock, asio::io_context& ioc, Shared& shared)
      : sock_(std::move(sock)), ioc_(ioc), timer_(ioc), sh_(shared) {
    sh_.n_open.fetch_add(1);
    sh_.n_total.fetch_add(1);
  }
  ~Connection() {
    end_request();
    sh_.n_open.fetch_sub(1);
    std::lock_guard<std::mutex> lock(sh_.conns_mu);
    sh_.conns.erase(this);
  }

  // Thread-safe: the connection's life runs on its own I/O thread from here.
  void start() {
    asio::post(ioc_, [self = shared_from_this()] { self->read_next(); });
  }
  // start() when already on the connection's I/O thread: no trip through
  // the event loop's queue.
  void start_here() { read_next(); }
  // Closes at once (client_gone for a pending answer). Only on the
  // connection's I/O thread, or once that thread has stopped (HttpServer::stop).
  void abort() { close(); }
  // HttpServer::begin_drain, on the connection's I/O thread: idle (no request
  // in progress) closes now; otherwise the connection closes once the answer
  // in progress is written, and an answer not begun says Connection: close.
  void drain();

  // Exchange side.
  void queue(std::string_view bytes) {
    if (closed_) return;
    out_.append(bytes);
    flush();
  }
  size_t buffered() const { return out_.size() + writing_buf_.size(); }
  void exchange_ended(bool keep_alive) {
    answer_queued_ = true;
    if (!keep_alive) keep_alive_ = false;
    if (!writing_ && out_.empty()) finish_exchange();
  }
  bool closed() const { return closed_; }

 private:
  void read_next();
  void start_read_some();
  void on_read_some(error_code ec, size_t n);
  // Feeds the buffered bytes to the parser: dispatches a complete request,
  // answers a malformed one, or reads on (the phase deadlines: headers from
  // the first byte, the body from the end of the headers).
  void parse();
  void dispatch();
  void flush();
  void on_written(error_code ec);
  void finish_exchange();
  // A request is in progress from its first byte read (parse) until
  // its answer is written (finish_exchange) or the connection closes.
  void begin_request() {
    if (in_request_) return;
    in_request_ = true;
    sh_.n_in_progress.fetch_add(1);
  }
  void end_request() {
    if (!in_request_) return;
    in_request_ = false;
    sh_.n_in_progress.fetch_sub(1);
  }
  void answer_and_close(HttpError error);
  void close();
  void linger_close();
  // The current phase's deadline (idle, headers, body, a write, the
  // linger), checked lazily: at most one timer wait is pending, and it is
  // only replaced when a new deadline comes before it. A wait that fires
  // before the deadline (which moved later) waits again; one that finds no
  // deadline (disarmed) ends. A request thus re-arms the kernel timer about
  // once instead of once per phase, and a stream's writes (arm at each
  // flush, disarm when written) touch no timer at all.
  void arm(std::chrono::milliseconds d);
  void disarm() { deadline_ = Clock::time_point::max(); }
  void wait_until(Clock::time_point t);

  // A connection's reads start small (a request is usually a few hundred
  // bytes: the buffer of a burst of new connections stays small) and double
  // while they fill up.
  static constexpr size_t kMinReadSize = 4 << 10;
  static constexpr size_t kMaxReadSize = 64 << 10;
  // Unparsed bytes kept while a request is busy: a few pipelined requests,
  // or the start of a large one. Reading pauses past this (plus one read).
  static constexpr size_t kMaxPipelinedBytes = 256 << 10;

  tcp::socket sock_;
  asio::io_context& ioc_;
  asio::steady_timer timer_;
  Shared& sh_;
  beast::flat_buffer buf_;
  // A read while busy lands here and is appended to buf_ when it completes:
  // buf_ may be parsed (and consumed, which moves its storage) before the
  // read completes, once the answer ends.
  std::string side_buf_;
  bool side_read_ = false;  // the read in flight is into side_buf_
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::shared_ptr<Exchange> ex_;
  // Keeps the connection alive while an answer is pending even when no
  // socket operation is (pipelined bytes buffered: no read outstanding).
  std::shared_ptr<Connection> busy_self_;
  std::string out_;
  std::string writing_buf_;
  uint64_t timer_gen_ = 0;       // the pending wait's; bumped to orphan it
  Clock::time_point deadline_ = Clock::time_point::max();
  Clock::time_point wait_expiry_{};  // when the pending wait fires
  bool waiting_ = false;             // a timer wait is pending
  bool writing_ = false;
  size_t read_size_ = kMinReadSize;
  bool reading_ = false;        // an async_read_some is in flight (idle, a request's bytes, or background)
  bool header_seen_ = false;    // the current request's headers are complete (body deadline armed)
  bool busy_ = false;           // a request is being answered
  bool in_request_ = false;     // counted in Shared::n_in_progress
  bool answer_queued_ = false;  // the answer is complete in out_/writing_buf_
  bool keep_alive_ = true;
  bool lingering_ = false;
  bool closed_ = false;
};

// ---- Exchange ----

void Exchange::send(HttpResponse r) {
  if (started_ || done()) return;
  auto conn = conn_.lock();
  if (!conn) return;
  started_ = true;
  std::string bytes = serialize_head(r, id_, static_cast<int64_t>(r.body.size()), keep_alive_, version_);
  if (!head_only_) bytes += r.body;
  conn->queue(bytes);
  finish();
}

void Exchange::begin_stream(HttpResponse head) {
  if (started_ || done()) return;
  auto conn = conn_.lock();
  if (!conn) return;
  started_ = true;
  // HTTP/1.0 has no chunked coding: the body ends when the connection closes.
  if (version_ == 10) keep_alive_ = false;
  // The head and the first body bytes go out in one socket write.
  std::string bytes = serialize_head(head, id_, head_only_ ? 0 : -1, keep_alive_, version_);
  if (!head_only_) append_body(bytes, head.body);
  conn->queue(bytes);
  if (head_only_) finish();
}

void Exchange::append_body(std::string& out, std::string_view bytes) const {
  if (bytes.empty()) return;
  if (version_ == 10) {
    out.append(bytes);
    return;
  }
  char size_line[24];
  int n = std::snprintf(size_line, sizeof size_line, "%zx\r\n", bytes.size());
  out.reserve(out.size() + bytes.size() + n + 2);
  out.append(size_line, n);
  out.append(bytes);
  out += "\r\n";
}

void Exchange::write(std::string_view bytes) {
  if (!started_ || done() || bytes.empty()) return;
  auto conn = conn_.lock();
  if (!conn) return;
  if (version_ == 10) {
    conn->queue(bytes);
    return;
  }
  std::string chunk;
  append_body(chunk, bytes);
  conn->queue(chunk);
}

void Exchange::end_stream() {
  if (!started_ || done()) return;
  auto conn = conn_.lock();
  if (!conn) return;
  if (version_ == 11) conn->queue("0\r\n\r\n");
  finish();
}

void Exchange::finish() {
  ended_ = true;
  auto self = shared_from_this();  // release() may drop the last outside reference
  release();
  if (auto conn = conn_.lock()) conn->exchange_ended(keep_alive_);
}

size_t Exchange::buffered_bytes() const {
  auto conn = conn_.lock();
  return conn ? conn->buffered() : 0;
}

void Exchange::post(std::function<void()> fn) {
  asio::post(ioc_, [w = weak_from_this(), fn = std::move(fn)] {
    auto self = w.lock();
    if (self && !self->done()) self->guarded("post", fn);
  });
}

void Exchange::post_after(std::chrono::milliseconds delay, std::function<void()> fn) {
  auto timer = std::make_shared<asio::steady_timer>(ioc_, delay);
  timer->async_wait([timer, w = weak_from_this(), fn = std::move(fn)](error_code ec) {
    auto self = w.lock();
    if (!ec && self && !self->done()) self->guarded("post_after", fn);
  });
}

void Exchange::fail_internal(std::string_view where, std::string_view what) {
  const bool answered = done();
  log::error("request handler threw", {{"request_id", id_}, {"where", where}, {"what", what}, {"path", path_},
                                       {"answer", answered ? "none (already complete)" : started_ ? "sse error" : "500"}});
  if (answered) return;
  auto self = shared_from_this();  // the answer's end may drop every other reference
  HttpRequest req;
  req.method = method_;
  req.target = path_;
  req.path = path_;
  req.request_id = id_;
  req.version = version_;
  try {
    if (started_) {
      write(router_->stream_error_event(HttpError::kInternal, req));
      end_stream();
    } else {
      send(router_->error_response(HttpError::kInternal, req));
    }
  } catch (const std::exception& e) {
    // Even the error answer failed: cut the connection (the client sees an
    // incomplete answer, never a hang).
    log::error("error answer failed, closing the connection", {{"request_id", id_}, {"what", e.what()}});
    if (auto conn = conn_.lock()) conn->abort();
  }
}

// ---- Connection ----

void Connection::arm(std::chrono::milliseconds d) {
  deadline_ = Clock::now() + d;
  if (waiting_ && wait_expiry_ <= deadline_) return;  // it wakes up in time and waits on
  wait_until(deadline_);
}

void Connection::wait_until(Clock::time_point t) {
  const uint64_t gen = ++timer_gen_;  // a wait still pending is orphaned (and cancelled below)
  waiting_ = true;
  wait_expiry_ = t;
  timer_.expires_at(t);
  timer_.async_wait([self = shared_from_this(), gen](error_code ec) {
    if (gen != self->timer_gen_) return;  // replaced by a newer wait
    self->waiting_ = false;
    if (ec || self->closed_ || self->deadline_ == Clock::time_point::max()) return;
    if (Clock::now() < self->deadline_) {
      self->wait_until(self->deadline_);
      return;
    }
    // A deadline passed: slow client, idle keep-alive, stuck write or the end of a linger.
    self->close();
  });
}

void Connection::read_next() {
  if (closed_) return;
  busy_ = false;
  parser_.emplace();
  parser_->header_limit(sh_.cfg.max_header_bytes);
  parser_->body_limit(sh_.cfg.max_body_bytes);
  header_seen_ = false;
  if (buf_.size() > 0) {
    parse();
    return;
  }
  if (sh_.draining.load()) {
    close();  // no idle keep-alive while draining
    return;
  }
  arm(sh_.cfg.idle_timeout);
  if (!reading_) start_read_some();
}

void Connection::start_read_some() {
  reading_ = true;
  side_read_ = busy_;
  auto on_read = [self = shared_from_this()](error_code ec, size_t n) { self->on_read_some(ec, n); };
  if (side_read_) {
    side_buf_.resize(read_size_);
    sock_.async_read_some(asio::buffer(side_buf_), std::move(on_read));
  } else {
    sock_.async_read_some(buf_.prepare(read_size_), std::move(on_read));
  }
}

void Connection::on_read_some(error_code ec, size_t n) {
  reading_ = false;
  if (closed_) return;
  if (ec) {
    // EOF or reset: idle keep-alive ends, or the client left mid-answer.
    close();
    return;
  }
  // A read that filled its space: the client has more to say (a large body),
  // read in bigger pieces.
  if (n == read_size_) read_size_ = std::min(read_size_ * 2, kMaxReadSize);
  if (lingering_) {
    buf_.consume(buf_.size());
    start_read_some();
    return;
  }
  if (side_read_) {
    auto room = buf_.prepare(n);
    std::memcpy(room.data(), side_buf_.data(), n);
  }
  buf_.commit(n);
  side_read_ = false;
  if (busy_) {
    // Pipelined bytes: kept, unparsed, for after this answer. Reading goes
    // on (EOF or a reset while busy is the client leaving) up to the bound.
    if (buf_.size() < kMaxPipelinedBytes) start_read_some();
    return;
  }
  parse();
}

void Connection::parse() {
  if (!in_request_) {
    begin_request();
    arm(sh_.cfg.header_timeout);  // from the request's first byte
  }
  if (const auto error = feed_parser(*parser_, buf_)) return answer_and_close(*error);
  if (parser_->is_done()) {
    dispatch();
    return;
  }
  if (parser_->is_header_done() && !header_seen_) {
    header_seen_ = true;
    const auto& h = parser_->get();
    if (h.version() == 11 && beast::iequals(h[bhttp::field::expect], "100-continue")) {
      queue("HTTP/1.1 100 Continue\r\n\r\n");
    }
    arm(sh_.cfg.body_timeout);
  }
  if (!reading_) start_read_some();
}

void Connection::dispatch() {
  disarm();
  busy_ = true;
  busy_self_ = shared_from_this();
  answer_queued_ = false;
  keep_alive_ = parser_->keep_alive() && !sh_.draining.load();
  const auto t_received = std::chrono::steady_clock::now();
  HttpRequest req = to_request(parser_->release());
  parser_.reset();
  req.request_id = request_id_for(req.headers);  // the client's when valid
  req.t_received = t_received;
  req.tcp_rtt_us = tcp_rtt_us(sock_);
  sh_.n_requests.fetch_add(1);
  ex_ = std::make_shared<Exchange>(weak_from_this(), ioc_, sh_.router, req, keep_alive_);
  // Watch the socket while answering: EOF means the client has gone.
  if (!reading_ && buf_.size() < kMaxPipelinedBytes) start_read_some();
  auto ex = ex_;
  ex->guarded("handler", [&] { sh_.router->dispatch(req, ex); });
}

void Connection::flush() {
  if (writing_ || out_.empty() || closed_) return;
  writing_buf_.swap(out_);
  out_.clear();
  writing_ = true;
  if (busy_) arm(sh_.cfg.write_timeout);
  asio::async_write(sock_, asio::buffer(writing_buf_), [self = shared_from_this()](error_code ec, size_t) {
    self->on_written(ec);
  });
}

void Connection::on_written(error_code ec) {
  writing_ = false;
  writing_buf_.clear();
  if (closed_) return;
  if (ec) {
    close();
    return;
  }
  if (!out_.empty()) {
    flush();
    return;
  }
  if (busy_) disarm();
  if (answer_queued_) {
    finish_exchange();
  } else if (ex_) {
    ex_->drained();
  }
}

void Connection::finish_exchange() {
  end_request();
  auto self = std::move(busy_self_);
  ex_.reset();
  answer_queued_ = false;
  busy_ = false;
  if (!keep_alive_) {
    linger_close();
    return;
  }
  read_next();
}

void Connection::answer_and_close(HttpError error) {
  HttpRequest req;
  req.request_id = new_request_id();
  req.t_received = std::chrono::steady_clock::now();
  req.method = "POST";
  if (parser_ && parser_->is_header_done()) {
    req.method = std::string(parser_->get().method_string());
    req.target = std::string(parser_->get().target());
    req.path = req.target.substr(0, req.target.find('?'));
  }
  HttpResponse r = sh_.router->error_response(error, req);
  std::string bytes = serialize_head(r, req.request_id, static_cast<int64_t>(r.body.size()), false, 11) + r.body;
  parser_.reset();
  busy_ = true;
  keep_alive_ = false;
  answer_queued_ = true;
  queue(bytes);
}

void Connection::linger_close() {
  if (closed_) return;
  lingering_ = true;
  error_code ignored;
  sock_.shutdown(tcp::socket::shutdown_send, ignored);
  arm(kLingerTime);
  buf_.consume(buf_.size());
  if (!reading_) start_read_some();
}

void Connection::drain() {
  if (closed_ || lingering_) return;
  if (!in_request_) {
    close();
    return;
  }
  keep_alive_ = false;
  if (ex_) ex_->end_keep_alive();
}

void Connection::close() {
  if (closed_) return;
  closed_ = true;
  end_request();
  ++timer_gen_;
  timer_.cancel();
  if (ex_) {
    auto ex = std::move(ex_);
    ex->mark_gone();
  }
  error_code ignored;
  sock_.shutdown(tcp::socket::shutdown_both, ignored);
  sock_.close(ignored);
  busy_self_.reset();  // last: may destroy *this
}

}  // namespace

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
      if (!ec) start(admit(std::move(sock), ctx), ctx);
      for (int i = 0; i < kMaxAcceptBurst && !ec && acceptor->is_open(); ++i) {
        asio::io_context& c = *contexts[next_context];
        tcp::socket s(c);
        acceptor->accept(s, ec);  // non-blocking: would_block once the backlog is empty
        if (ec) break;
        next();
        start(admit(std::move(s), c), c);
      }
      accept();
    });
  }

  void start(const std::shared_ptr<Connection>& conn, asio::io_context& ctx) {
    if (!conn) return;
    if (&ctx == contexts[0].get()) {
      conn->start_here();
    } else {
      conn->start();
    }
  }
  // Connections taken per accept completion before the loop goes back to
  // the event queue (other connections' work waits meanwhile).
  static constexpr int kMaxAcceptBurst = 64;

  // A registered connection for `sock`; null (the socket closed) past
  // max_connections or once draining.
  std::shared_ptr<Connection> admit(tcp::socket sock, asio::io_context& ctx) {
    error_code ignored;
    if (shared.n_open.load() < shared.cfg.max_connections) {
      sock.set_option(tcp::no_delay(true), ignored);
      if (shared.cfg.socket_send_buffer > 0) {
        sock.set_option(asio::socket_base::send_buffer_size(shared.cfg.socket_send_buffer), ignored);
      }
      std::lock_guard<std::mutex> lock(shared.conns_mu);
      if (!shared.draining.load()) {
        auto conn = std::make_shared<Connection>(std::move(sock), ctx, shared);
        shared.conns.emplace(conn.get(), Shared::Entry{conn, &ctx});
        return conn;
      }
    }
    sock.close(ignored);
    return nullptr;
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
  std::vector<std::weak_ptr<Connection>> open;
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
  std::unordered_map<asio::io_context*, std::vector<std::weak_ptr<Connection>>> by_context;
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
                        .n_requests_total = impl_->shared.n_requests.load()};
}

}  // namespace zl::http
