// HTTP/1.1 connections (see server.h for the design): Beast's parser fed
// from the connection's buffer, one exchange at a time. The first bytes of a
// connection are sniffed for the HTTP/2 preface (h2c with prior knowledge)
// and a request with `Upgrade: h2c` is answered with 101 and over HTTP/2:
// either way the transport moves to an HTTP/2 session (http2_session.h).
#include "http/http1_connection.h"

#include <boost/asio/post.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstring>
#include <optional>

#include "core/random_id.h"
#include "http/http2_session.h"
#include "http/request_id.h"
#include "http/request_parser.h"  // feed_parser, to_request
#include "http/responder_base.h"

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

namespace zl::http::internal {
namespace {

// drained for this long so the client sees the answer, not a reset.
constexpr std::chrono::milliseconds kLingerTime{2000};

std::string_view reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 101: return "Switching Protocols";
    case 204: return "No Content";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 409: return "Conflict";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 499: return "Client Closed Request";
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 504: return "Gateway Timeout";
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

// One request's answer on an HTTP/1.1 connection (see Responder). Lives on
// its connection's thread.
class Exchange final : public ResponderBase {
 public:
  Exchange(std::weak_ptr<Connection> conn, asio::io_context& ioc, const Router* router, const HttpRequest& req,
           bool keep_alive)
      : ResponderBase(ioc, router, req), conn_(std::move(conn)), version_(req.version), keep_alive_(keep_alive) {}

  void send(HttpResponse response) override;
  void begin_stream(HttpResponse head) override;
  void write(std::string_view bytes) override;
  void end_stream() override;
  size_t buffered_bytes() const override;
  // Drain: an answer not begun yet carries Connection: close.
  void end_keep_alive() { keep_alive_ = false; }

 private:
  // `bytes` as the body's next part: a chunk (HTTP/1.1) or as is (HTTP/1.0).
  void append_body(std::string& out, std::string_view bytes) const;
  void finish();
  void abort_transport() override;

  std::weak_ptr<Connection> conn_;
  int version_;
  bool keep_alive_;
};

class Connection final : public ConnBase, public std::enable_shared_from_this<Connection> {
 public:
  Connection(Transport sock, asio::io_context& ioc, Shared& shared)
      : sock_(std::move(sock)), ioc_(ioc), deadline_(ioc), sh_(shared) {
    sh_.n_open.fetch_add(1);
  }
  ~Connection() override {
    end_request();
    sh_.n_open.fetch_sub(1);
    sh_.remove(this);
  }

  // Thread-safe: the connection's life runs on its own I/O thread from here.
  void start() {
    init_deadline();
    asio::post(ioc_, [self = shared_from_this()] { self->read_next(); });
  }
  // start() when already on the connection's I/O thread: no trip through
  // the event loop's queue.
  void start_here() {
    init_deadline();
    read_next();
  }
  // Closes at once (client_gone for a pending answer). Only on the
  // connection's I/O thread, or once that thread has stopped (HttpServer::stop).
  void abort() override { close(); }
  // HttpServer::begin_drain, on the connection's I/O thread: idle (no request
  // in progress) closes now; otherwise the connection closes once the answer
  // in progress is written, and an answer not begun says Connection: close.
  void drain() override;

  // Exchange side.
  void queue(std::string_view bytes) {
    if (closed_) return;
    out_.pending.append(bytes);
    flush();
  }
  size_t buffered() const { return out_.size(); }
  void exchange_ended(bool keep_alive) {
    answer_queued_ = true;
    if (!keep_alive) keep_alive_ = false;
    if (!out_.busy && out_.pending.empty()) finish_exchange();
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
  // The transport moves to an HTTP/2 session: after the preface (no
  // request), or after `Upgrade: h2c` (`upgrade`, answered on stream 1).
  // Only with no socket operation pending. *this closes (without the socket).
  void hand_over_to_h2(std::optional<H2Upgrade> upgrade);
  void close();
  void linger_close();
  // The current phase's deadline (idle, headers, body, a write, the
  // linger): past it, the connection closes (a slow client, an idle
  // keep-alive, a stuck write, the end of a linger).
  void init_deadline() {
    deadline_.init(weak_from_this(), [this] { close(); });
  }
  void arm(std::chrono::milliseconds d) { deadline_.arm(d); }
  void disarm() { deadline_.disarm(); }

  // A connection's reads start small (a request is usually a few hundred
  // bytes: the buffer of a burst of new connections stays small) and double
  // while they fill up.
  static constexpr size_t kMinReadSize = 4 << 10;
  static constexpr size_t kMaxReadSize = 64 << 10;
  // Unparsed bytes kept while a request is busy: a few pipelined requests,
  // or the start of a large one. Reading pauses past this (plus one read).
  static constexpr size_t kMaxPipelinedBytes = 256 << 10;

  Transport sock_;
  asio::io_context& ioc_;
  Deadline deadline_;
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
  WriteBuffers out_;
  size_t read_size_ = kMinReadSize;
  bool reading_ = false;        // an async_read_some is in flight (idle, a request's bytes, or background)
  bool header_seen_ = false;    // the current request's headers are complete (body deadline armed)
  bool busy_ = false;           // a request is being answered
  bool in_request_ = false;     // counted in Shared::n_in_progress
  bool answer_queued_ = false;  // the answer is complete in out_
  bool keep_alive_ = true;
  bool lingering_ = false;
  bool closed_ = false;
  bool sniffed_ = false;  // the first bytes are known not to be the HTTP/2 preface
};

// ---- Exchange ----

void Exchange::send(HttpResponse r) {
  if (started_ || done()) return;
  auto conn = conn_.lock();
  if (!conn) return;
  started_ = true;
  std::string bytes = serialize_head(r, request_id(), static_cast<int64_t>(r.body.size()), keep_alive_, version_);
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
  std::string bytes = serialize_head(head, request_id(), head_only_ ? 0 : -1, keep_alive_, version_);
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
  auto self = shared_from_this();  // set_ended() may drop the last outside reference
  set_ended();
  if (auto conn = conn_.lock()) conn->exchange_ended(keep_alive_);
}

size_t Exchange::buffered_bytes() const {
  auto conn = conn_.lock();
  return conn ? conn->buffered() : 0;
}

void Exchange::abort_transport() {
  if (auto conn = conn_.lock()) conn->abort();
}

// ---- Connection ----

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
  if (!sniffed_) {
    // Prior knowledge: the connection's first bytes are HTTP/2's preface.
    const std::string_view got(static_cast<const char*>(buf_.data().data()), std::min(buf_.size(), kH2Preface.size()));
    if (got != kH2Preface.substr(0, got.size())) {
      sniffed_ = true;
    } else if (got.size() == kH2Preface.size() && !reading_ && !out_.busy) {
      return hand_over_to_h2(std::nullopt);
    } else {
      if (!reading_) start_read_some();
      return;
    }
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
  req.tcp_rtt_us = tcp_rtt_us(sock_.socket());
  if (!sock_.is_tls() && !out_.busy && out_.pending.empty() && !reading_ && !sh_.draining.load()) {
    if (auto settings = h2c_upgrade_settings(req)) {
      hand_over_to_h2(H2Upgrade{.request = std::move(req), .settings = std::move(*settings)});
      return;
    }
  }
  sh_.n_requests.fetch_add(1);
  ex_ = std::make_shared<Exchange>(weak_from_this(), ioc_, sh_.router, req, keep_alive_);
  // Watch the socket while answering: EOF means the client has gone.
  if (!reading_ && buf_.size() < kMaxPipelinedBytes) start_read_some();
  auto ex = ex_;
  ex->guarded("handler", [&] { sh_.router->dispatch(req, ex); });
}

void Connection::flush() {
  if (closed_) return;
  if (!out_.start(sock_, [self = shared_from_this()](error_code ec) { self->on_written(ec); })) return;
  if (busy_) arm(sh_.cfg.write_timeout);
}

void Connection::on_written(error_code ec) {
  if (closed_) return;
  if (ec) {
    close();
    return;
  }
  if (!out_.pending.empty()) {
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
  sock_.shutdown_send();
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

void Connection::hand_over_to_h2(std::optional<H2Upgrade> upgrade) {
  closed_ = true;
  end_request();  // the session counts its streams
  deadline_.cancel();
  std::string rest(static_cast<const char*>(buf_.data().data()), buf_.size());
  buf_.consume(buf_.size());
  auto self = shared_from_this();
  busy_self_.reset();
  ex_.reset();
  serve_http2(std::move(sock_), ioc_, sh_, rest, std::move(upgrade));
}

void Connection::close() {
  if (closed_) return;
  closed_ = true;
  end_request();
  deadline_.cancel();
  if (ex_) {
    auto ex = std::move(ex_);
    ex->mark_gone();
  }
  sock_.close();
  busy_self_.reset();  // last: may destroy *this
}

}  // namespace

void serve_http1(Transport transport, asio::io_context& ioc, Shared& sh, bool on_io_thread) {
  auto conn = std::make_shared<Connection>(std::move(transport), ioc, sh);
  if (!sh.add(conn, ioc)) {
    conn->abort();
    return;
  }
  if (on_io_thread) {
    conn->start_here();
  } else {
    conn->start();
  }
}

}  // namespace zl::http::internal
