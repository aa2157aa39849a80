#include "http/http2_session.h"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <array>
#include <boost/asio/post.hpp>
#include <cctype>
#include <cstring>
#include <unordered_map>
#include <vector>

#include "core/log.h"
#include "http/request_id.h"
#include "http/responder_base.h"

namespace zl::http::internal {
namespace {

// PING and SETTINGS frames (not ACKs) a client may send per second.
constexpr int kMaxControlFramesPerS = 100;
// HPACK dynamic tables, both directions (RFC 7541's default).
constexpr uint32_t kHpackTableBytes = 4096;
// Bytes taken from nghttp2 for one socket write.
constexpr size_t kMaxWriteBytes = 64 << 10;
constexpr size_t kReadBytes = 16 << 10;
// RFC 9113 §6.5.2: a field's size is its name, its value and 32.
constexpr size_t kFieldOverhead = 32;
// Request bodies a connection may hold at once (streams still arriving), in
// max_body_bytes: without it, SETTINGS_MAX_CONCURRENT_STREAMS multiplies the
// body limit. A stream that would pass it is refused (REFUSED_STREAM: not
// processed, safe to retry).
constexpr uint64_t kBodyBudgetFactor = 4;
constexpr uint64_t kMinBodyBudget = 1 << 20;  // whatever max_body_bytes: a read's worth of small requests always fits

class Session;

// One stream's answer (see Responder and the top of http2_session.h).
class H2Stream final : public ResponderBase {
 public:
  H2Stream(std::weak_ptr<Session> session, asio::io_context& ioc, const Router* router, const HttpRequest& req,
           int32_t id)
      : ResponderBase(ioc, router, req), session_(std::move(session)), id_(id) {}

  void send(HttpResponse response) override;
  void begin_stream(HttpResponse head) override;
  void write(std::string_view bytes) override;
  void end_stream() override;
  size_t buffered_bytes() const override { return out_.size() - off_; }

  // nghttp2's data source: up to `len` bytes of the body into `buf`.
  ssize_t read_data(uint8_t* buf, size_t len, uint32_t* flags);

 private:
  // HEADERS for `r` (with DATA to follow when `has_body`).
  void submit(const HttpResponse& r, int64_t content_length, bool has_body);
  // More body (or its end) is ready: resume a deferred data source.
  void kick();
  void abort_transport() override;

  std::weak_ptr<Session> session_;
  int32_t id_;
  std::string out_;  // body bytes nghttp2 has not taken yet, from off_
  size_t off_ = 0;
  bool eof_ = false;       // the body ends after out_
  bool deferred_ = false;  // the data source said NGHTTP2_ERR_DEFERRED
};

// A stream from its HEADERS until it closes.
struct StreamSlot {
  HttpRequest req;  // being received; moved out at dispatch
  size_t header_bytes = 0;
  bool headers_too_large = false;
  bool body_too_large = false;
  std::shared_ptr<H2Stream> responder;  // set at dispatch
};

class Session final : public ConnBase, public std::enable_shared_from_this<Session> {
 public:
  Session(Transport t, asio::io_context& ioc, Shared& sh) : sock_(std::move(t)), ioc_(ioc), sh_(sh), deadline_(ioc) {
    sh_.n_open.fetch_add(1);
    sh_.n_h2_sessions.fetch_add(1);
  }
  ~Session() override {
    if (ng_) nghttp2_session_del(ng_);
    sh_.n_in_progress.fetch_sub(static_cast<int64_t>(streams_.size()));
    sh_.n_open.fetch_sub(1);
    sh_.remove(this);
  }

  // Creates the nghttp2 session and sends the server's SETTINGS; false when
  // nghttp2 refuses (out of memory, a bad HTTP2-Settings).
  bool init(const std::optional<H2Upgrade>& upgrade);
  void start(std::string_view initial, std::optional<H2Upgrade> upgrade);
  void abort() override { close(); }
  void drain() override;

  // Stream side.
  nghttp2_session* ng() { return ng_; }
  // A flush on the next loop turn (many writes of one handler turn go out together).
  void schedule_flush();
  void stream_abort() { close(); }

 private:
  static nghttp2_session_callbacks* callbacks();
  static int on_begin_headers(nghttp2_session*, const nghttp2_frame* f, void* user);
  static int on_header(nghttp2_session*, const nghttp2_frame* f, const uint8_t* name, size_t namelen,
                       const uint8_t* value, size_t valuelen, uint8_t flags, void* user);
  static int on_data_chunk(nghttp2_session*, uint8_t flags, int32_t id, const uint8_t* data, size_t len, void* user);
  static int on_frame_recv(nghttp2_session*, const nghttp2_frame* f, void* user);
  static int on_stream_close(nghttp2_session*, int32_t id, uint32_t error_code, void* user);

  void read();
  void on_read(error_code ec, size_t n);
  // Gives `n` bytes to nghttp2, dispatches the requests they completed, flushes.
  void feed(const uint8_t* data, size_t n);
  void dispatch_ready();
  void dispatch(int32_t id, StreamSlot& slot);
  void flush();
  void on_written(error_code ec);
  void notify_drained();
  void update_deadline();
  void expired();
  // Rate bounds: more than `max` events within one second is abuse.
  void count(Clock::time_point* window, int* n, int max, const char* what);
  // GOAWAY(`error`), every stream cancelled now, the connection closed once written.
  void terminate(uint32_t error, const char* why);
  void close();

  Transport sock_;
  asio::io_context& ioc_;
  Shared& sh_;
  Deadline deadline_;
  nghttp2_session* ng_ = nullptr;
  std::unordered_map<int32_t, StreamSlot> streams_;
  std::vector<int32_t> ready_;  // streams whose request is complete, dispatched after the read
  uint64_t n_body_bytes_ = 0;   // request bodies held (streams not dispatched yet)
  std::array<uint8_t, kReadBytes> in_{};
  WriteBuffers out_;  // the 101 of an upgrade first
  const Clock::time_point t_start_ = Clock::now();
  Clock::time_point reset_window_{};
  int n_resets_ = 0;
  Clock::time_point control_window_{};
  int n_control_ = 0;
  bool got_frame_ = false;  // past the preface and the first frame
  bool flush_posted_ = false;
  bool closing_ = false;  // close once what is queued is written
  bool draining_ = false;
  bool closed_ = false;
};

// ---- H2Stream ----

// Header names in HTTP/2 are lowercase; hop-by-hop fields are not allowed.
bool connection_specific(std::string_view name) {
  return name == "connection" || name == "keep-alive" || name == "proxy-connection" || name == "transfer-encoding" ||
         name == "upgrade";
}

void H2Stream::submit(const HttpResponse& r, int64_t content_length, bool has_body) {
  auto session = session_.lock();
  if (!session) return;
  std::vector<std::pair<std::string, std::string>> fields;
  fields.reserve(r.headers.size() + 6);
  fields.emplace_back(":status", std::to_string(r.status));
  fields.emplace_back("server", "zerolayer");
  if (!r.content_type.empty()) fields.emplace_back("content-type", r.content_type);
  if (content_length >= 0) fields.emplace_back("content-length", std::to_string(content_length));
  fields.emplace_back("request-id", request_id());
  fields.emplace_back("x-request-id", request_id());
  for (const auto& [k, v] : r.headers) {
    std::string name = k;
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (!connection_specific(name)) fields.emplace_back(std::move(name), v);
  }
  std::vector<nghttp2_nv> nva;
  nva.reserve(fields.size());
  for (auto& [k, v] : fields) {
    nva.push_back(nghttp2_nv{reinterpret_cast<uint8_t*>(k.data()), reinterpret_cast<uint8_t*>(v.data()), k.size(),
                             v.size(), NGHTTP2_NV_FLAG_NONE});
  }
  nghttp2_data_provider provider{};
  provider.read_callback = [](nghttp2_session*, int32_t, uint8_t* buf, size_t len, uint32_t* flags,
                              nghttp2_data_source* source, void*) -> ssize_t {
    return static_cast<H2Stream*>(source->ptr)->read_data(buf, len, flags);
  };
  // The stream outlives its data source: the session keeps it until the stream closes.
  provider.source.ptr = this;
  const int rv = nghttp2_submit_response(session->ng(), id_, nva.data(), nva.size(), has_body ? &provider : nullptr);
  if (rv != 0) {
    log::warn("HTTP/2 response not submitted", {{"request_id", request_id()}, {"error", nghttp2_strerror(rv)}});
    nghttp2_submit_rst_stream(session->ng(), NGHTTP2_FLAG_NONE, id_, NGHTTP2_INTERNAL_ERROR);
  }
  session->schedule_flush();
}

void H2Stream::send(HttpResponse r) {
  if (started_ || done()) return;
  started_ = true;
  const int64_t length = static_cast<int64_t>(r.body.size());
  if (!head_only_) out_ = std::move(r.body);
  eof_ = true;
  submit(r, length, !head_only_ && !out_.empty());
  set_ended();
}

void H2Stream::begin_stream(HttpResponse head) {
  if (started_ || done()) return;
  started_ = true;
  if (head_only_) {
    submit(head, -1, false);
    set_ended();
    return;
  }
  out_ = std::move(head.body);
  submit(head, -1, true);
}

void H2Stream::write(std::string_view bytes) {
  if (!started_ || done() || bytes.empty()) return;
  if (off_ > 0 && off_ >= out_.size() / 2) {  // compact: what nghttp2 took is gone
    out_.erase(0, off_);
    off_ = 0;
  }
  out_.append(bytes);
  kick();
}

void H2Stream::end_stream() {
  if (!started_ || done()) return;
  eof_ = true;
  kick();
  set_ended();
}

void H2Stream::kick() {
  auto session = session_.lock();
  if (!session) return;
  if (deferred_) {
    deferred_ = false;
    nghttp2_session_resume_data(session->ng(), id_);
  }
  session->schedule_flush();
}

ssize_t H2Stream::read_data(uint8_t* buf, size_t len, uint32_t* flags) {
  const size_t n = std::min(len, out_.size() - off_);
  if (n > 0) std::memcpy(buf, out_.data() + off_, n);
  off_ += n;
  if (off_ == out_.size()) {
    out_.clear();
    off_ = 0;
    if (eof_) {
      *flags |= NGHTTP2_DATA_FLAG_EOF;
      return static_cast<ssize_t>(n);
    }
  }
  if (n == 0) {
    deferred_ = true;
    return NGHTTP2_ERR_DEFERRED;
  }
  return static_cast<ssize_t>(n);
}

void H2Stream::abort_transport() {
  if (auto session = session_.lock()) session->stream_abort();
}

// ---- Session: nghttp2 callbacks ----

nghttp2_session_callbacks* Session::callbacks() {
  static nghttp2_session_callbacks* cbs = [] {
    nghttp2_session_callbacks* c = nullptr;
    CHECK(nghttp2_session_callbacks_new(&c) == 0);
    nghttp2_session_callbacks_set_on_begin_headers_callback(c, &Session::on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(c, &Session::on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(c, &Session::on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(c, &Session::on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(c, &Session::on_stream_close);
    return c;
  }();
  return cbs;
}

int Session::on_begin_headers(nghttp2_session*, const nghttp2_frame* f, void* user) {
  auto* self = static_cast<Session*>(user);
  if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST || self->closing_) return 0;
  self->streams_.try_emplace(f->hd.stream_id);
  self->sh_.n_in_progress.fetch_add(1);
  return 0;
}

int Session::on_header(nghttp2_session*, const nghttp2_frame* f, const uint8_t* name, size_t namelen,
                       const uint8_t* value, size_t valuelen, uint8_t, void* user) {
  auto* self = static_cast<Session*>(user);
  auto it = self->streams_.find(f->hd.stream_id);
  if (it == self->streams_.end() || f->hd.type != NGHTTP2_HEADERS) return 0;
  StreamSlot& slot = it->second;
  slot.header_bytes += namelen + valuelen + kFieldOverhead;
  if (slot.header_bytes > self->sh_.cfg.max_header_bytes) slot.headers_too_large = true;
  if (slot.headers_too_large || f->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;  // trailers are not kept
  std::string_view n(reinterpret_cast<const char*>(name), namelen);
  std::string v(reinterpret_cast<const char*>(value), valuelen);
  HttpRequest& req = slot.req;
  if (n == ":method") {
    req.method = std::move(v);
  } else if (n == ":path") {
    req.target = std::move(v);
  } else if (n == ":authority") {
    req.headers.emplace_back("host", std::move(v));
  } else if (!n.empty() && n[0] != ':') {
    req.headers.emplace_back(std::string(n), std::move(v));  // nghttp2 checked: lowercase, no hop-by-hop
  }
  return 0;
}

int Session::on_data_chunk(nghttp2_session*, uint8_t, int32_t id, const uint8_t* data, size_t len, void* user) {
  auto* self = static_cast<Session*>(user);
  auto it = self->streams_.find(id);
  if (it == self->streams_.end()) return 0;
  StreamSlot& slot = it->second;
  if (slot.body_too_large) return 0;
  if (slot.req.body.size() + len > self->sh_.cfg.max_body_bytes) {
    slot.body_too_large = true;  // answered 413 at the end of the stream; nothing more is kept
    self->n_body_bytes_ -= slot.req.body.size();
    std::string().swap(slot.req.body);
    return 0;
  }
  if (self->n_body_bytes_ + len > std::max(kMinBodyBudget, kBodyBudgetFactor * self->sh_.cfg.max_body_bytes)) {
    nghttp2_submit_rst_stream(self->ng_, NGHTTP2_FLAG_NONE, id, NGHTTP2_REFUSED_STREAM);
    return 0;
  }
  slot.req.body.append(reinterpret_cast<const char*>(data), len);
  self->n_body_bytes_ += len;
  return 0;
}

int Session::on_frame_recv(nghttp2_session*, const nghttp2_frame* f, void* user) {
  auto* self = static_cast<Session*>(user);
  self->got_frame_ = true;
  switch (f->hd.type) {
    case NGHTTP2_HEADERS:
    case NGHTTP2_DATA:
      if ((f->hd.flags & NGHTTP2_FLAG_END_STREAM) && self->streams_.count(f->hd.stream_id)) {
        self->ready_.push_back(f->hd.stream_id);
      }
      break;
    case NGHTTP2_RST_STREAM:
      self->count(&self->reset_window_, &self->n_resets_, static_cast<int>(self->sh_.cfg.h2_max_resets_per_s),
                  "RST_STREAM flood (rapid reset)");
      break;
    case NGHTTP2_PING:
    case NGHTTP2_SETTINGS:
      if (!(f->hd.flags & NGHTTP2_FLAG_ACK)) {
        self->count(&self->control_window_, &self->n_control_, kMaxControlFramesPerS, "PING/SETTINGS flood");
      }
      break;
    default:
      break;
  }
  return 0;
}

int Session::on_stream_close(nghttp2_session*, int32_t id, uint32_t, void* user) {
  auto* self = static_cast<Session*>(user);
  auto it = self->streams_.find(id);
  if (it == self->streams_.end()) return 0;
  std::shared_ptr<H2Stream> responder = std::move(it->second.responder);
  self->n_body_bytes_ -= it->second.req.body.size();  // 0 once dispatched
  self->streams_.erase(it);
  self->sh_.n_in_progress.fetch_sub(1);
  // Reset by the client (or the session ended) before the answer was
  // complete: the handler cancels its engine request.
  if (responder) responder->mark_gone();
  return 0;
}

// ---- Session ----

bool Session::init(const std::optional<H2Upgrade>& upgrade) {
  nghttp2_option* opt = nullptr;
  if (nghttp2_option_new(&opt) != 0) return false;
  nghttp2_option_set_max_deflate_dynamic_table_size(opt, kHpackTableBytes);
  nghttp2_option_set_max_settings(opt, 32);
  const int rv = nghttp2_session_server_new2(&ng_, callbacks(), this, opt);
  nghttp2_option_del(opt);
  if (rv != 0) return false;
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, sh_.cfg.h2_max_concurrent_streams},
      {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, kHpackTableBytes},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, sh_.cfg.max_header_bytes},
  };
  if (nghttp2_submit_settings(ng_, NGHTTP2_FLAG_NONE, settings, std::size(settings)) != 0) return false;
  if (!upgrade) return true;
  const auto& s = upgrade->settings;
  if (nghttp2_session_upgrade2(ng_, reinterpret_cast<const uint8_t*>(s.data()), s.size(),
                               upgrade->request.method == "HEAD", nullptr) != 0) {
    return false;
  }
  StreamSlot& slot = streams_[1];
  slot.req = upgrade->request;
  sh_.n_in_progress.fetch_add(1);
  ready_.push_back(1);
  out_.pending = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n";
  return true;
}

void Session::start(std::string_view initial, std::optional<H2Upgrade> upgrade) {
  deadline_.init(weak_from_this(), [this] { expired(); });
  if (!init(upgrade)) {
    log::warn("HTTP/2 session not started (a bad HTTP2-Settings header, or out of memory)");
    close();
    return;
  }
  if (sh_.draining.load()) drain();
  update_deadline();
  if (!initial.empty()) {
    feed(reinterpret_cast<const uint8_t*>(initial.data()), initial.size());
  } else {
    dispatch_ready();  // the upgrade's request
    flush();
  }
  if (!closed_) read();
}

void Session::read() {
  sock_.async_read_some(asio::buffer(in_), [self = shared_from_this()](error_code ec, size_t n) {
    self->on_read(ec, n);
  });
}

void Session::on_read(error_code ec, size_t n) {
  if (closed_) return;
  if (ec) {
    close();  // EOF or reset: every open stream's client has gone
    return;
  }
  feed(in_.data(), n);
  if (!closed_) read();
}

void Session::feed(const uint8_t* data, size_t n) {
  if (closing_) return;  // GOAWAY sent: what follows is not read
  const ssize_t rv = nghttp2_session_mem_recv(ng_, data, n);
  if (rv < 0) {
    // Not HTTP/2 (a bad preface), a flood nghttp2 caught, or a callback
    // failure: the session ends (GOAWAY when the preface was seen).
    log::debug("HTTP/2 session error", {{"error", nghttp2_strerror(static_cast<int>(rv))}});
    if (rv == NGHTTP2_ERR_FLOODED) sh_.n_h2_goaway_abuse.fetch_add(1);
    if (!got_frame_) {
      close();
      return;
    }
    terminate(rv == NGHTTP2_ERR_FLOODED ? NGHTTP2_ENHANCE_YOUR_CALM : NGHTTP2_PROTOCOL_ERROR,
              nghttp2_strerror(static_cast<int>(rv)));
    return;
  }
  dispatch_ready();
  flush();
}

void Session::dispatch_ready() {
  std::vector<int32_t> ready;
  ready.swap(ready_);
  for (int32_t id : ready) {
    if (closing_ || closed_) return;
    auto it = streams_.find(id);
    // Reset in the same read as its request: it never reaches the handler.
    if (it == streams_.end() || it->second.responder) continue;
    dispatch(id, it->second);
  }
}

void Session::dispatch(int32_t id, StreamSlot& slot) {
  n_body_bytes_ -= slot.req.body.size();
  HttpRequest req = std::move(slot.req);
  slot.req = HttpRequest{};
  req.version = 20;
  req.t_received = Clock::now();
  req.tcp_rtt_us = tcp_rtt_us(sock_.socket());
  const size_t q = req.target.find('?');
  req.path = req.target.substr(0, q);
  if (q != std::string::npos) req.query = req.target.substr(q + 1);
  req.request_id = request_id_for(req.headers);
  auto stream = std::make_shared<H2Stream>(weak_from_this(), ioc_, sh_.router, req, id);
  slot.responder = stream;
  sh_.n_requests.fetch_add(1);
  if (slot.headers_too_large || slot.body_too_large) {
    const HttpError e = slot.headers_too_large ? HttpError::kHeadersTooLarge : HttpError::kBodyTooLarge;
    stream->guarded("error answer", [&] { stream->send(sh_.router->error_response(e, req)); });
    return;
  }
  stream->guarded("handler", [&] { sh_.router->dispatch(req, stream); });
}

void Session::schedule_flush() {
  if (flush_posted_ || closed_) return;
  flush_posted_ = true;
  asio::post(ioc_, [self = shared_from_this()] {
    self->flush_posted_ = false;
    self->flush();
  });
}

void Session::flush() {
  if (out_.busy || closed_) return;
  while (out_.pending.size() < kMaxWriteBytes) {
    const uint8_t* data = nullptr;
    const ssize_t n = nghttp2_session_mem_send(ng_, &data);
    if (n < 0) {
      log::debug("HTTP/2 send error", {{"error", nghttp2_strerror(static_cast<int>(n))}});
      close();
      return;
    }
    if (n == 0) break;
    out_.pending.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
  }
  if (out_.pending.empty()) {
    // Nothing left to say: a session that is over (GOAWAY sent, or the
    // drain's last stream done) closes.
    if (closing_ || (nghttp2_session_want_read(ng_) == 0 && nghttp2_session_want_write(ng_) == 0) ||
        (draining_ && streams_.empty())) {
      close();
      return;
    }
    update_deadline();
    return;
  }
  out_.start(sock_, [self = shared_from_this()](error_code ec) { self->on_written(ec); });
  update_deadline();
}

void Session::on_written(error_code ec) {
  if (closed_) return;
  if (ec) {
    close();
    return;
  }
  notify_drained();
  flush();
}

void Session::notify_drained() {
  std::vector<std::shared_ptr<H2Stream>> drained;
  for (auto& [id, slot] : streams_) {
    if (slot.responder && slot.responder->buffered_bytes() == 0) drained.push_back(slot.responder);
  }
  for (auto& s : drained) s->drained();
}

void Session::update_deadline() {
  if (closed_) return;
  if (!got_frame_) {
    // The preface and the first frame within header_timeout of the start.
    const auto left = sh_.cfg.header_timeout - std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t_start_);
    deadline_.arm(std::max(left, std::chrono::milliseconds(0)));
  } else if (out_.busy) {
    deadline_.arm(sh_.cfg.write_timeout);
  } else if (streams_.empty()) {
    deadline_.arm(sh_.cfg.idle_timeout);
  } else if (std::none_of(streams_.begin(), streams_.end(), [](const auto& s) { return s.second.responder; })) {
    deadline_.arm(sh_.cfg.body_timeout);  // only requests still arriving
  } else {
    deadline_.disarm();  // answers in progress: they have their own pace
  }
}

void Session::expired() {
  if (closed_) return;
  if (out_.busy || closing_ || !got_frame_) {
    close();  // a stuck write, a GOAWAY not taken, or no preface in time
    return;
  }
  terminate(NGHTTP2_NO_ERROR, "idle");
}

void Session::count(Clock::time_point* window, int* n, int max, const char* what) {
  const Clock::time_point now = Clock::now();
  if (now - *window >= std::chrono::seconds(1)) {
    *window = now;
    *n = 0;
  }
  if (++*n <= max || closing_) return;
  sh_.n_h2_goaway_abuse.fetch_add(1);
  log::warn("HTTP/2 connection closed", {{"reason", what}, {"limit_per_s", static_cast<int64_t>(max)}});
  terminate(NGHTTP2_ENHANCE_YOUR_CALM, what);
}

void Session::terminate(uint32_t error, const char* why) {
  if (closing_ || closed_) return;
  closing_ = true;
  log::debug("HTTP/2 GOAWAY", {{"reason", why}});
  nghttp2_session_terminate_session(ng_, error);
  ready_.clear();
  // No engine work outlives the session: every answer in progress is cancelled now.
  std::vector<std::shared_ptr<H2Stream>> open;
  for (auto& [id, slot] : streams_) {
    if (slot.responder) open.push_back(slot.responder);
  }
  for (auto& s : open) s->mark_gone();
  deadline_.arm(sh_.cfg.write_timeout);
  if (!out_.busy) schedule_flush();
}

void Session::drain() {
  if (closed_ || draining_) return;
  draining_ = true;
  // GOAWAY(NO_ERROR) naming the last stream taken: streams in progress run
  // to their end, the client opens new ones elsewhere.
  nghttp2_submit_goaway(ng_, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(ng_), NGHTTP2_NO_ERROR,
                        nullptr, 0);
  schedule_flush();
}

void Session::close() {
  if (closed_) return;
  closed_ = true;
  deadline_.cancel();
  auto self = shared_from_this();
  std::vector<std::shared_ptr<H2Stream>> open;
  for (auto& [id, slot] : streams_) {
    if (slot.responder) open.push_back(slot.responder);
    sh_.n_in_progress.fetch_sub(1);
  }
  streams_.clear();
  ready_.clear();
  n_body_bytes_ = 0;
  for (auto& s : open) s->mark_gone();
  sock_.close();
}

// base64url (RFC 4648 §5), padding optional; nullopt on a bad character.
std::optional<std::string> base64url_decode(std::string_view in) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int v;
    if (c >= 'A' && c <= 'Z') v = c - 'A';
    else if (c >= 'a' && c <= 'z') v = c - 'a' + 26;
    else if (c >= '0' && c <= '9') v = c - '0' + 52;
    else if (c == '-') v = 62;
    else if (c == '_') v = 63;
    else if (c == '=') break;
    else return std::nullopt;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return out;
}

bool has_token(std::string_view list, std::string_view token) {
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t end = list.find(',', pos);
    if (end == std::string_view::npos) end = list.size();
    std::string_view item = list.substr(pos, end - pos);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t')) item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t')) item.remove_suffix(1);
    if (item.size() == token.size() &&
        std::equal(item.begin(), item.end(), token.begin(),
                   [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; })) {
      return true;
    }
    pos = end + 1;
  }
  return false;
}

}  // namespace

std::optional<std::string> h2c_upgrade_settings(const HttpRequest& req) {
  if (req.version != 11 || !has_token(req.header("upgrade"), "h2c") || !req.has_header("http2-settings")) {
    return std::nullopt;
  }
  return base64url_decode(req.header("http2-settings"));
}

void serve_http2(Transport transport, asio::io_context& ioc, Shared& sh, std::string_view initial,
                 std::optional<H2Upgrade> upgrade) {
  auto session = std::make_shared<Session>(std::move(transport), ioc, sh);
  sh.add(session, ioc, /*even_draining=*/true);  // start() applies a drain in progress
  session->start(initial, std::move(upgrade));
}

}  // namespace zl::http::internal
