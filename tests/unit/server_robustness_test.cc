// The HTTP server's exception boundary and its watch on clients that leave:
//   - handler code that throws after its handler returned (Responder::post,
//     post_after, a GenerationSession's pump and ping timer) becomes a 500
//     or an SSE error frame in the API's envelope, logged with the request
//     id, and the connection serves its next request;
//   - a client that pipelines and then closes (or resets) while its request
//     is busy is noticed: the engine request is cancelled at once, not run
//     to max_tokens for nobody;
//   - pipelined requests, a large one included, are still answered in order.
// In process: the real API routes and test-only routes on one router, the
// fake engine, a real HttpServer on a free port, a raw-socket client.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "api/anthropic/messages.h"
#include "api/generation.h"
#include "api/service.h"
#include "core/log.h"
#include "support/fake_engine.h"
#include "http/router.h"
#include "http/server.h"
#include "http/sse.h"
#include "support/http_client.h"  // RawClient, parse_sse
#include "support/json_object.h"  // parse_obj

namespace zl::api {
namespace {

using test::HttpReply;
using test::RawClient;
using namespace std::chrono_literals;

constexpr int kWaitMs = 20000;  // generous: a loaded 2-core machine

// Polls `pred` until it holds or kWaitMs pass.
template <typename Pred>
bool wait_for(Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kWaitMs);
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

// The log lines written while it lives (core/log.h redirected to a file, JSON).
class LogCapture {
 public:
  LogCapture() : file_(std::tmpfile()), format_(log::format()) {
    previous_ = log::set_fd(fileno(file_));
    log::set_format(log::Format::kJson);
  }
  ~LogCapture() {
    log::set_fd(previous_);
    log::set_format(format_);
    std::fclose(file_);
  }
  std::string text() const {
    std::string all;
    char buf[4096];
    off_t off = 0;
    ssize_t n;
    while ((n = pread(fileno(file_), buf, sizeof buf, off)) > 0) {
      all.append(buf, static_cast<size_t>(n));
      off += n;
    }
    return all;
  }
  // True once an error line naming `request_id` has been written.
  bool has_error_for(const std::string& request_id) const {
    const std::string all = text();
    size_t pos = 0;
    while (pos < all.size()) {
      size_t nl = all.find('\n', pos);
      if (nl == std::string::npos) nl = all.size();
      const std::string line = all.substr(pos, nl - pos);
      pos = nl + 1;
      if (line.find("\"request_id\":\"" + request_id + "\"") != std::string::npos &&
          line.find("\"level\":\"error\"") != std::string::npos) {
        return true;
      }
    }
    return false;
  }

 private:
  std::FILE* file_;
  log::Format format_;
  int previous_ = -1;
};

// Wraps a real formatter and throws from one of its calls.
class ThrowingFormatter final : public EventFormatter {
 public:
  enum class Where { kText, kComplete, kPing };
  ThrowingFormatter(std::unique_ptr<EventFormatter> inner, Where where) : inner_(std::move(inner)), where_(where) {}

  void stream_start(const Usage& u, std::string& out) override { inner_->stream_start(u, out); }
  void stream_text(std::string_view t, std::string& out) override {
    if (where_ == Where::kText) throw std::runtime_error("formatter broke on text");
    inner_->stream_text(t, out);
  }
  void stream_tool_call_start(std::string_view n, std::string& out) override { inner_->stream_tool_call_start(n, out); }
  void stream_tool_call_delta(std::string_view a, std::string& out) override { inner_->stream_tool_call_delta(a, out); }
  void stream_tool_call_end(std::string& out) override { inner_->stream_tool_call_end(out); }
  void stream_finish(const Completion& c, std::string& out) override { inner_->stream_finish(c, out); }
  void stream_error(const ApiError& e, std::string& out) override { inner_->stream_error(e, out); }
  void stream_ping(std::string& out) override {
    if (where_ == Where::kPing) throw std::runtime_error("formatter broke on a keep-alive");
    inner_->stream_ping(out);
  }
  http::HttpResponse complete(const std::vector<AnswerPart>& a, const Completion& c) override {
    if (where_ == Where::kComplete) throw std::runtime_error("formatter broke on the answer");
    return inner_->complete(a, c);
  }
  http::HttpResponse error(const ApiError& e) override { return inner_->error(e); }

 private:
  std::unique_ptr<EventFormatter> inner_;
  Where where_;
};

// The API routes plus test-only routes whose posted work throws.
class RobustnessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    engine_ = std::make_unique<fake::FakeEngine>(fake::FakeEngineConfig{.n_ctx = 1 << 20, .step_time = 2000us});
    service_ = std::make_unique<ApiService>(ApiConfig{}, engine_.get(), &codec_);
    service_->register_routes(router_);
    add_test_routes();
    server_ = std::make_unique<http::HttpServer>(http::ServerConfig{.port = 0}, &router_);
    ASSERT_TRUE(server_->listen().ok());
    server_->start();
  }
  void TearDown() override {  // like serve: no more I/O, then the engine, then the server
    server_->stop();
    engine_.reset();
    server_.reset();
  }

  void add_test_routes() {
    using R = std::shared_ptr<http::Responder>;
    router_.add("GET", "/test/post-throws", [](http::HttpRequest&, R res) {
      res->post([] { throw std::runtime_error("boom in a posted handler"); });
    });
    router_.add("GET", "/test/timer-throws", [](http::HttpRequest&, R res) {
      res->post_after(1ms, [] { throw std::logic_error("boom in a timer"); });
    });
    auto stream_then_throw = [](http::HttpRequest&, R res) {
      http::HttpResponse head = http::sse_head();
      http::append_sse_comment(head.body, "started");
      res->begin_stream(std::move(head));
      res->post_after(1ms, [] { throw std::runtime_error("boom after the 200"); });
    };
    router_.add("GET", "/test/stream-throws", stream_then_throw);
    router_.add("GET", "/v1/chat/test-stream-throws", stream_then_throw);  // an OpenAI path
    // A generation whose formatter throws (query: where, and "stream").
    router_.add("POST", "/test/session", [this](http::HttpRequest& q, R res) {
      using W = ThrowingFormatter::Where;
      const W where = q.query.find("ping") != std::string::npos       ? W::kPing
                      : q.query.find("complete") != std::string::npos ? W::kComplete
                                                                      : W::kText;
      SessionOptions opts;
      opts.stream = q.query.find("stream") != std::string::npos;
      if (opts.stream) opts.ping_interval = 5ms;  // commits the stream before the first token
      opts.on_done = [this](const SessionResult& r) {
        std::lock_guard<std::mutex> lock(mu_);
        results_.push_back(r);
      };
      Request request{.id = q.request_id, .prompt_ids = *codec_.encode_text(q.body)};
      request.stop.max_tokens = where == W::kComplete ? 3 : 100000;
      auto fmt = std::make_unique<ThrowingFormatter>(anthropic::make_formatter("m", q.request_id), where);
      GenerationSession::start(*engine_, std::move(request), std::move(opts), std::move(fmt), std::move(res));
    });
  }

  int port() const { return server_->port(); }
  std::vector<SessionResult> results() {
    std::lock_guard<std::mutex> lock(mu_);
    return results_;
  }
  // The engine went idle and every request's answer is over.
  bool wait_quiet() {
    return wait_for([&] { return engine_->stats().n_running == 0 && server_->requests_in_progress() == 0; });
  }

  fake::FakeCodec codec_;
  http::Router router_;
  std::unique_ptr<fake::FakeEngine> engine_;
  std::unique_ptr<ApiService> service_;
  std::unique_ptr<http::HttpServer> server_;
  std::mutex mu_;
  std::vector<SessionResult> results_;
};

// Checks an Anthropic error envelope for an internal error of request `id`.
void expect_internal_error(const std::string& json, const std::string& id) {
  boost::json::object o = test::parse_obj(json);
  ASSERT_TRUE(o.contains("error")) << json;
  EXPECT_EQ(o["type"].as_string(), "error");
  EXPECT_EQ(o["error"].at("type").as_string(), "api_error");
  EXPECT_EQ(o["error"].at("detail").at("reason").as_string(), "internal_server_error");
  EXPECT_EQ(o["request_id"].as_string(), id);
}

// The next request on the same connection is served.
void expect_next_request_served(RawClient& c) {
  ASSERT_TRUE(c.send_raw(test::http_request("GET", "/health", "")));
  HttpReply r = c.read_response(kWaitMs);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, R"({"status":"ok"})");
}

TEST_F(RobustnessTest, PostedHandlerAndTimerThatThrowAnswer500) {
  LogCapture logs;
  for (const char* path : {"/test/post-throws", "/test/timer-throws"}) {
    SCOPED_TRACE(path);
    RawClient c(port());
    ASSERT_TRUE(c.send_raw(test::http_request("GET", path, "")));
    HttpReply r = c.read_response(kWaitMs);
    ASSERT_TRUE(r.complete);
    EXPECT_EQ(r.status, 500);
    const std::string id = r.header("request-id");
    expect_internal_error(r.body, id);
    EXPECT_TRUE(logs.has_error_for(id)) << logs.text();
    expect_next_request_served(c);  // keep-alive: the connection survived
  }
  EXPECT_EQ(test::fetch(port(), "GET", "/health").status, 200);  // and the loop
}

TEST_F(RobustnessTest, ThrowAfterTheHeadIsAnSseErrorFrameInTheApisEnvelope) {
  LogCapture logs;
  RawClient c(port());
  ASSERT_TRUE(c.send_raw(test::http_request("GET", "/test/stream-throws", "")));
  HttpReply r = c.read_response(kWaitMs);
  ASSERT_TRUE(r.complete);  // the stream ended (chunked terminator)
  EXPECT_EQ(r.status, 200);
  std::vector<test::SseEvent> ev = test::parse_sse(r.body);
  ASSERT_FALSE(ev.empty()) << r.body;
  EXPECT_EQ(ev.back().event, "error");
  expect_internal_error(ev.back().data, r.header("request-id"));
  EXPECT_TRUE(logs.has_error_for(r.header("request-id")));
  expect_next_request_served(c);

  // An OpenAI route: a data-only frame with the OpenAI envelope.
  RawClient o(port());
  ASSERT_TRUE(o.send_raw(test::http_request("GET", "/v1/chat/test-stream-throws", "")));
  HttpReply ro = o.read_response(kWaitMs);
  ASSERT_TRUE(ro.complete);
  EXPECT_EQ(ro.status, 200);
  ev = test::parse_sse(ro.body);
  ASSERT_FALSE(ev.empty()) << ro.body;
  EXPECT_EQ(ev.back().event, "");
  boost::json::object e = test::parse_obj(ev.back().data);
  EXPECT_EQ(e["error"].at("code").as_string(), "internal_server_error");
  expect_next_request_served(o);
}

TEST_F(RobustnessTest, SessionPumpThatThrowsEndsTheAnswerAndCancelsTheGeneration) {
  LogCapture logs;
  // Non-streaming: the formatter throws on the whole answer -> a 500.
  RawClient c(port());
  ASSERT_TRUE(c.send_raw(test::http_request("POST", "/test/session?complete", "hello")));
  HttpReply r = c.read_response(kWaitMs);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 500);
  expect_internal_error(r.body, r.header("request-id"));
  EXPECT_TRUE(logs.has_error_for(r.header("request-id")));
  expect_next_request_served(c);

  // Streaming, committed early by the keep-alive: the first text throws ->
  // an SSE error event after the 200, and the generation is cancelled.
  const int64_t n_cancelled = engine_->n_cancelled();
  ASSERT_TRUE(c.send_raw(test::http_request("POST", "/test/session?stream", "[[fake:prefill=50]][[fake:long]]")));
  r = c.read_response(kWaitMs);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200);
  std::vector<test::SseEvent> ev = test::parse_sse(r.body);
  ASSERT_GE(ev.size(), 2u) << r.body;
  EXPECT_EQ(ev.front().event, "message_start");
  EXPECT_EQ(ev.back().event, "error");
  expect_internal_error(ev.back().data, r.header("request-id"));
  EXPECT_TRUE(wait_for([&] { return engine_->n_cancelled() == n_cancelled + 1; }));
  expect_next_request_served(c);
  EXPECT_TRUE(wait_quiet());

  std::vector<SessionResult> done = results();
  ASSERT_EQ(done.size(), 2u);
  EXPECT_EQ(done[0].status, 500);
  EXPECT_EQ(done[0].error_reason, ErrorReason::kInternalServerError);
  EXPECT_EQ(done[1].status, 200);
  EXPECT_EQ(done[1].error_reason, ErrorReason::kInternalServerError);
}

TEST_F(RobustnessTest, PingTimerThatThrowsEndsTheStream) {
  const int64_t n_cancelled = engine_->n_cancelled();
  RawClient c(port());
  // A prefill long enough for the keep-alive timer to fire twice (the second
  // writes a ping frame, which throws).
  ASSERT_TRUE(c.send_raw(test::http_request("POST", "/test/session?stream&ping", "[[fake:prefill=600000]]")));
  HttpReply r = c.read_response(kWaitMs);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200);
  std::vector<test::SseEvent> ev = test::parse_sse(r.body);
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(ev.back().event, "error");
  expect_internal_error(ev.back().data, r.header("request-id"));
  EXPECT_TRUE(wait_for([&] { return engine_->n_cancelled() == n_cancelled + 1; }));
  expect_next_request_served(c);
  EXPECT_TRUE(wait_quiet());
}

// A non-streamed generation that would run for minutes (100000 tokens at
// 2 ms), and the client's next request pipelined behind it.
std::string long_request() {
  return test::http_request("POST", "/v1/messages",
                            R"({"model":"m","max_tokens":100000,"messages":[{"role":"user","content":"[[fake:long]]"}]})");
}

TEST_F(RobustnessTest, ClientThatPipelinesAndClosesIsNoticed) {
  for (bool reset : {false, true}) {
    SCOPED_TRACE(reset ? "reset" : "close");
    const int64_t n_cancelled = engine_->n_cancelled();
    RawClient c(port());
    // Both requests in one write: the pipelined bytes are buffered as the
    // first request is dispatched.
    ASSERT_TRUE(c.send_raw(long_request() + test::http_request("GET", "/health", "")));
    ASSERT_TRUE(wait_for([&] { return engine_->stats().n_running == 1; }));
    if (reset) {
      c.abort_now();
    } else {
      c.close_now();
    }
    EXPECT_TRUE(wait_for([&] { return engine_->n_cancelled() == n_cancelled + 1; }));
    EXPECT_TRUE(wait_quiet());
  }
}

TEST_F(RobustnessTest, ClientThatPipelinesWhileBusyAndLeavesIsNoticed) {
  const int64_t n_cancelled = engine_->n_cancelled();
  RawClient c(port());
  ASSERT_TRUE(c.send_raw(long_request()));
  ASSERT_TRUE(wait_for([&] { return engine_->stats().n_running == 1; }));
  // The next request arrives while the first is busy; then the client leaves.
  ASSERT_TRUE(c.send_raw(test::http_request("GET", "/health", "")));
  ASSERT_TRUE(c.send_raw(test::http_request("GET", "/v1/models", "")));
  c.close_now();
  EXPECT_TRUE(wait_for([&] { return engine_->n_cancelled() == n_cancelled + 1; }));
  EXPECT_TRUE(wait_quiet());
  EXPECT_EQ(test::fetch(port(), "GET", "/health").status, 200);
}

TEST_F(RobustnessTest, PipelinedRequestsStillAnsweredInOrderLargeOnesIncluded) {
  RawClient c(port());
  ASSERT_TRUE(c.send_raw(test::http_request(
      "POST", "/v1/messages",
      R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"[[fake:prefill=200]]"}]})")));
  ASSERT_TRUE(wait_for([&] { return server_->requests_in_progress() == 1; }));
  // While it is busy: a small request and one past the pipelining bound
  // (reading pauses, then resumes once the first answer is out).
  const std::string big_text(600 << 10, 'a');
  ASSERT_TRUE(c.send_raw(test::http_request("GET", "/health", "") +
                         test::http_request("POST", "/v1/messages/count_tokens",
                                            R"({"model":"m","messages":[{"role":"user","content":")" + big_text +
                                                R"("}]})")));
  HttpReply r1 = c.read_response(kWaitMs);
  ASSERT_TRUE(r1.complete);
  EXPECT_EQ(r1.status, 200);
  EXPECT_EQ(test::parse_obj(r1.body)["stop_reason"].as_string(), "max_tokens");
  HttpReply r2 = c.read_response(kWaitMs);
  ASSERT_TRUE(r2.complete);
  EXPECT_EQ(r2.status, 200);
  EXPECT_EQ(r2.body, R"({"status":"ok"})");
  HttpReply r3 = c.read_response(kWaitMs);
  ASSERT_TRUE(r3.complete);
  EXPECT_EQ(r3.status, 200) << r3.body;
  EXPECT_GT(test::parse_obj(r3.body)["input_tokens"].as_int64(), static_cast<int64_t>(big_text.size()));
}

}  // namespace
}  // namespace zl::api
