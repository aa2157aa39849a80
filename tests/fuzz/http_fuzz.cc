// libFuzzer target fuzz_http: bytes as a connection receives them -> the
// server's request parser (http/request_parser.h, as server.cc drives it:
// arbitrary read boundaries, pipelined requests) -> the router with the real
// API service's routes (api/service.h) on a canned engine, answered through
// an in-memory Responder; no sockets, no threads.
// Input: byte 0 picks the read size (bits 1-6; 0: all at once) and the
// service (bit 0: with API keys and the demo model's template, else open
// and chatml, so tool calls are parsed); the rest is the byte stream.
// Invariants: the parser's request is consistent (path + query = target,
// header names lowercase); every request dispatched gets exactly one answer
// (or still has a timer pending: a paced stream), never a 5xx and never an
// exception; every JSON body and every SSE `data:` line is JSON; an HTTP
// error (400, 413, 431) ends the connection.
#include <boost/beast/core/buffers_to_string.hpp>
#include <cctype>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/service.h"
#include "fuzz/fuzz_support.h"
#include "http/request_parser.h"
#include "http/router.h"

namespace {

using namespace zl;

// Answers every request with text (a Hermes tool call in it) and a finish.
class CannedEngine final : public EngineApi {
 public:
  std::shared_ptr<RequestChannel> submit(Request request) override {
    auto ch = std::make_shared<RequestChannel>(request.id);
    Usage u{.n_prompt_tokens = static_cast<int64_t>(request.prompt_ids.size())};
    for (const char* text : {"Hello, ", "w\xc3\xb6rld <tool_call>\n{\"name\": \"get_weather\", ",
                             "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call> bye"}) {
      ++u.n_generated_tokens;
      ch->push(Event{.kind = EventKind::kText, .text = text, .usage = u});
    }
    ch->push(Event{.kind = EventKind::kFinish, .finish = FinishReason::kEndOfSequence, .usage = u});
    return ch;
  }
  EngineStats stats() const override { return EngineStats{.n_ctx = 512}; }
};

// One exchange's answer, in memory (the contract of http::Responder; what
// Exchange in server.cc does with a socket).
class MemoryResponder final : public http::Responder, public std::enable_shared_from_this<MemoryResponder> {
 public:
  explicit MemoryResponder(std::string id) : id_(std::move(id)) {}
  const std::string& request_id() const override { return id_; }
  void send(http::HttpResponse r) override {
    if (started_ || done()) return;
    started_ = true;
    response_ = std::move(r);
    finish();
  }
  void begin_stream(http::HttpResponse head) override {
    if (started_ || done()) return;
    started_ = streamed_ = true;
    response_ = std::move(head);
  }
  void write(std::string_view bytes) override {
    if (started_ && !done()) response_.body.append(bytes);
  }
  void end_stream() override {
    if (started_ && !done()) finish();
  }
  size_t buffered_bytes() const override { return 0; }
  bool client_gone() const override { return gone_; }
  bool done() const override { return ended_ || gone_; }
  void on_client_gone(std::function<void()> fn) override { on_gone_ = std::move(fn); }
  void on_drained(std::function<void()> fn) override {}
  void hold(std::shared_ptr<void> state) override {
    if (!done()) held_.push_back(std::move(state));
  }
  void post(std::function<void()> fn) override { posted_.push_back(std::move(fn)); }
  void post_after(std::chrono::milliseconds, std::function<void()> fn) override { timers_.push_back(std::move(fn)); }

  // Runs what was posted, then the timers, until the answer is complete or
  // nothing is left; false when it is still waiting on a timer after
  // kMaxRounds (a paced stream: the clock does not move here).
  bool run() {
    constexpr int kMaxRounds = 64;
    for (int round = 0; round < kMaxRounds && !done(); ++round) {
      auto work = std::move(posted_.empty() ? timers_ : posted_);
      if (work.empty()) break;
      for (auto& fn : work) {
        if (!done()) fn();
      }
    }
    return done() || !timers_.empty();
  }
  void mark_gone() {
    if (done()) return;
    gone_ = true;
    if (auto fn = std::move(on_gone_)) fn();
    release();
  }
  bool answered() const { return ended_; }
  bool streamed() const { return streamed_; }
  const http::HttpResponse& response() const { return response_; }

 private:
  void finish() {
    ended_ = true;
    release();
  }
  void release() {
    auto self = shared_from_this();  // the held state may hold the last reference
    on_gone_ = nullptr;
    auto held = std::move(held_);
    held.clear();
    posted_.clear();
    timers_.clear();
  }

  std::string id_;
  bool started_ = false, streamed_ = false, ended_ = false, gone_ = false;
  http::HttpResponse response_;
  std::function<void()> on_gone_;
  std::vector<std::shared_ptr<void>> held_;
  std::vector<std::function<void()>> posted_, timers_;
};

struct Service {
  CannedEngine engine;
  api::ApiService api;
  http::Router router;
  Service(api::ApiConfig config, const api::PromptCodec* codec) : api(std::move(config), &engine, codec) {
    api.register_routes(router);
  }
};

Service& service(bool with_keys) {
  // (offload_threads 0: every handler answers before dispatch returns, which check_answer reads)
  static Service open({.sse_ping_interval = std::chrono::milliseconds(0), .offload_threads = 0}, &fuzz::fuzz_codec(1));
  static Service keyed({.api_keys = {"sk-fuzz"}, .offload_threads = 0}, &fuzz::fuzz_codec(0));
  return with_keys ? keyed : open;
}

void check_answer(const MemoryResponder& res) {
  const http::HttpResponse& r = res.response();
  FUZZ_CHECK(r.status >= 200 && r.status < 500);
  if (res.streamed()) {
    FUZZ_CHECK(fuzz::sse_data_is_json(r.body));
  } else if (r.content_type == "application/json") {
    FUZZ_CHECK(fuzz::is_json(r.body));
  }
}

void dispatch(const http::Router& router, http::HttpRequest req) {
  const size_t q = req.target.find('?');
  FUZZ_CHECK(req.path == req.target.substr(0, q));
  FUZZ_CHECK(req.query == (q == std::string::npos ? "" : req.target.substr(q + 1)));
  for (const auto& [name, value] : req.headers) {
    for (char c : name) FUZZ_CHECK(!std::isupper(static_cast<unsigned char>(c)));
  }
  req.request_id = "req_fuzz";
  auto res = std::make_shared<MemoryResponder>(req.request_id);
  try {
    router.dispatch(req, res);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_http: a handler threw: %s\n", e.what());
    std::abort();
  }
  FUZZ_CHECK(res->run());  // answered, or a timer is pending
  if (res->answered()) check_answer(*res);
  res->mark_gone();  // a stream still paced: the client leaves
}

}  // namespace

ZL_FUZZ_TARGET(fuzz_http) {
  if (size < 1) return 0;
  const size_t read_size = (data[0] >> 1) & 63;
  const http::Router& router = service(data[0] & 1).router;
  boost::beast::flat_buffer buf;
  std::optional<http::BeastRequestParser> parser;
  auto new_parser = [&] {
    parser.emplace();
    parser->header_limit(4096);
    parser->body_limit(8192);
  };
  new_parser();
  for (size_t i = 1; i < size;) {
    const size_t n = read_size == 0 ? size - i : std::min(read_size, size - i);
    auto space = buf.prepare(n);
    std::memcpy(space.data(), data + i, n);
    buf.commit(n);
    i += n;
    // As Connection::parse: every complete request is dispatched, then the
    // next one is parsed from what is left (pipelining).
    while (true) {
      if (const auto error = http::feed_parser(*parser, buf)) {
        http::HttpRequest req;
        req.request_id = "req_fuzz";
        const http::HttpResponse r = router.error_response(*error, req);
        FUZZ_CHECK(r.status >= 400 && r.status < 500 && fuzz::is_json(r.body));
        return 0;  // the connection closes
      }
      if (!parser->is_done()) break;
      dispatch(router, http::to_request(parser->release()));
      new_parser();
      if (buf.size() == 0) break;
    }
  }
  return 0;
}
