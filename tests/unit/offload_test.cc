// http/offload.h: a handler's Responder calls recorded off the I/O thread and
// replayed on it, in order; dropped with what they hold when the exchange
// ends first; small bodies handled inline.
#include "http/offload.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/service.h"
#include "limits/response_cache.h"
#include "support/fake_api_server.h"
#include "support/http_client.h"
#include "support/json_object.h"
#include "support/null_responder.h"

namespace zl::http {
namespace {

// The I/O side, by hand: what reached it, in order, and its posted jobs,
// run by run_posted() (only while the exchange is open, as the server's
// responders run them).
class RecordingResponder final : public test::NullResponder {
 public:
  void send(HttpResponse r) override { log("send " + r.body), ended_ = true; }
  void begin_stream(HttpResponse head) override { log("begin " + head.body); }
  void write(std::string_view b) override { log("write " + std::string(b)); }
  void end_stream() override { log("end"), ended_ = true; }
  bool done() const override { return ended_ || gone_; }
  void hold(std::shared_ptr<void> state) override {
    log("hold");
    if (!done()) held_.push_back(std::move(state));
  }
  void on_client_gone(std::function<void()> fn) override {
    log("on_gone"), on_gone_ = std::move(fn);
  }
  void post(std::function<void()> fn) override {
    std::lock_guard<std::mutex> lock(mu_);
    posted_.push_back(std::move(fn));
    cv_.notify_all();
  }

  // Runs the jobs posted so far (and those they post); returns how many.
  int run_posted() {
    int n = 0;
    for (;;) {
      std::vector<std::function<void()>> jobs;
      {
        std::lock_guard<std::mutex> lock(mu_);
        jobs.swap(posted_);
      }
      if (jobs.empty()) return n;
      for (auto& j : jobs) {
        if (!done()) j(), ++n;
      }
    }
  }
  bool wait_posted(int timeout_ms) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                        [&] { return !posted_.empty(); });
  }
  void client_leaves() {
    gone_ = true;
    if (auto fn = std::move(on_gone_)) fn();
    held_.clear();
  }
  std::vector<std::string> calls;

 private:
  void log(std::string s) { calls.push_back(std::move(s)); }
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::function<void()>> posted_;
  std::vector<std::shared_ptr<void>> held_;
  std::function<void()> on_gone_;
  bool ended_ = false, gone_ = false;
};

TEST(DeferredResponder, RecordsThenReplaysInOrderThenPassesThrough) {
  auto real = std::make_shared<RecordingResponder>();
  auto d = std::make_shared<DeferredResponder>(real);
  d->hold(std::make_shared<int>(1));
  d->begin_stream(HttpResponse{.body = "head"});
  d->write("a");
  int ran = 0;
  d->post(
      [&] { ++ran, d->write("from a job"); });  // a job posted while recording runs in the replay
  d->write("b");
  EXPECT_FALSE(d->done());
  EXPECT_FALSE(d->client_gone());
  EXPECT_EQ(d->buffered_bytes(), 0u);
  EXPECT_TRUE(real->calls.empty());  // nothing reaches the I/O side before the replay
  d->release();
  EXPECT_TRUE(real->calls.empty());
  EXPECT_EQ(real->run_posted(), 1);  // the replay itself
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(real->calls, (std::vector<std::string>{"hold", "begin head", "write a",
                                                   "write from a job", "write b"}));
  d->write("c");  // after the replay: straight through
  d->end_stream();
  EXPECT_TRUE(d->done());
  EXPECT_EQ(real->calls.back(), "end");
  EXPECT_EQ(real->calls.size(), 7u);
}

TEST(DeferredResponder, AnAnswerSentWhileRecordingMakesItDone) {
  auto real = std::make_shared<RecordingResponder>();
  auto d = std::make_shared<DeferredResponder>(real);
  d->send(HttpResponse{.body = "{}"});
  EXPECT_TRUE(d->done());
  EXPECT_FALSE(real->done());
  d->release();
  real->run_posted();
  EXPECT_EQ(real->calls, (std::vector<std::string>{"send {}"}));
  EXPECT_TRUE(d->done());
}

TEST(DeferredResponder, AClientGoneBeforeTheReplayDropsWhatTheHandlerHeld) {
  auto real = std::make_shared<RecordingResponder>();
  auto d = std::make_shared<DeferredResponder>(real);
  auto state = std::make_shared<int>(7);
  std::weak_ptr<int> weak = state;
  // A session as GenerationSession makes one: held by the exchange, holding the responder.
  struct Session {
    std::shared_ptr<int> state;
    std::shared_ptr<Responder> responder;
  };
  d->hold(std::make_shared<Session>(Session{std::move(state), d}));
  d->on_client_gone([] {});
  d->write("x");
  d->release();
  real->client_leaves();
  EXPECT_EQ(real->run_posted(), 0);  // the replay does not run on a finished exchange
  EXPECT_TRUE(real->calls.empty());
  d.reset();
  // ... and its job, dropped, let go of everything recorded (no cycle through the session).
  real.reset();
  EXPECT_TRUE(weak.expired());
}

TEST(HandlerOffload, SmallBodiesInlineLargeOnesOnItsThreadAnsweredOnTheIoSide) {
  HandlerOffload offload(1, 16);
  std::thread::id handler_thread;
  Handler h = offload.wrap([&](HttpRequest& req, std::shared_ptr<Responder> res) {
    handler_thread = std::this_thread::get_id();
    res->send(HttpResponse{.body = req.body});
  });
  {
    auto real = std::make_shared<RecordingResponder>();
    HttpRequest small{.body = "short"};
    h(small, real);
    EXPECT_EQ(handler_thread, std::this_thread::get_id());
    EXPECT_EQ(real->calls, (std::vector<std::string>{"send short"}));
  }
  {
    auto real = std::make_shared<RecordingResponder>();
    HttpRequest large{.body = std::string(64, 'x')};
    h(large, real);
    ASSERT_TRUE(real->wait_posted(10000));
    EXPECT_NE(handler_thread, std::this_thread::get_id());
    real->run_posted();
    EXPECT_EQ(real->calls, (std::vector<std::string>{"send " + std::string(64, 'x')}));
  }
}

TEST(HandlerOffload, AThrowingHandlerThrowsOnTheIoSide) {
  HandlerOffload offload(1, 0);
  Handler h = offload.wrap(
      [](HttpRequest&, std::shared_ptr<Responder>) { throw std::runtime_error("boom"); });
  auto real = std::make_shared<RecordingResponder>();
  HttpRequest req{.body = "x"};
  h(req, real);
  ASSERT_TRUE(real->wait_posted(10000));
  // The server runs posted jobs behind its exception boundary, which answers 500.
  EXPECT_THROW(real->run_posted(), std::runtime_error);
}

// Every POST handled off the I/O thread (offload_min_body_bytes 0), over
// the fake engine: the paths a generation's answer can take arrive whole.
class OffloadedRoutes : public ::testing::Test {
 protected:
  void SetUp() override {
    api::ApiConfig api;
    api.offload_min_body_bytes = 0;
    api.sse_ping_interval = std::chrono::milliseconds(20);
    api.response_cache = std::make_shared<limits::ResponseCache>(1 << 20);
    server_ = std::make_unique<test::FakeApiServer>(
        fake::FakeEngineConfig{.n_ctx = 4096, .step_time = std::chrono::microseconds(2000)},
        std::move(api), ServerConfig{});
    ASSERT_TRUE(server_->listening());
  }
  void TearDown() override { server_.reset(); }
  test::HttpReply post(const std::string& path, const std::string& body,
                       std::vector<std::string> headers = {}) {
    return test::fetch(server_->port(), "POST", path, body, headers, 20000);
  }
  std::unique_ptr<test::FakeApiServer> server_;
};

std::string messages(const std::string& content, int max_tokens = 12,
                     const std::string& extra = "") {
  return R"({"model":"m","max_tokens":)" + std::to_string(max_tokens) +
         R"(,"temperature":0,"messages":[{"role":"user","content":")" + content + "\"}]" + extra +
         "}";
}

TEST_F(OffloadedRoutes, AnswersStreamsCacheHitsAndValidation) {
  test::HttpReply first = post("/v1/messages", messages("hello"));
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.header("x-engine-cache"), "miss");
  test::HttpReply again =
      post("/v1/messages", messages("hello"));  // replayed from the response cache
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.header("x-engine-cache"), "hit");
  EXPECT_EQ(test::parse_obj(again.body)["content"], test::parse_obj(first.body)["content"]);
  // A slow stream: keep-alive pings (armed while the handler ran) before its tokens.
  test::HttpReply stream =
      post("/v1/messages", messages("[[fake:slow]] story", 3, R"(,"stream":true)"));
  ASSERT_EQ(stream.status, 200);
  EXPECT_NE(stream.body.find("event: ping"), std::string::npos) << stream.body;
  EXPECT_NE(stream.body.find("event: message_stop"), std::string::npos) << stream.body;
  test::HttpReply validated = post("/v1/messages", messages("hello"), {"X-Engine-Mode: validate"});
  EXPECT_EQ(validated.status, 200) << validated.body;
  test::HttpReply counted = post("/v1/messages/count_tokens",
                                 R"({"model":"m","messages":[{"role":"user","content":"hello"}]})");
  EXPECT_EQ(counted.status, 200) << counted.body;
  test::HttpReply bad = post("/v1/chat/completions", "{not json");
  EXPECT_EQ(bad.status, 400) << bad.body;
}

TEST_F(OffloadedRoutes, AClientLeavingCancelsItsSequence) {
  const int64_t before = server_->engine().n_cancelled();
  {
    test::RawClient c(server_->port());
    ASSERT_TRUE(c.send_raw(test::http_request(
        "POST", "/v1/messages", messages("[[fake:long]] go", 100000, R"(,"stream":true)"))));
    ASSERT_TRUE(c.read_until(
        [](const std::string& b) { return b.find("content_block_delta") != std::string::npos; }));
    c.abort_now();
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (server_->engine().n_cancelled() == before && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(server_->engine().n_cancelled(), before + 1);
}

}  // namespace
}  // namespace zl::http
