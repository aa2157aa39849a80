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
  void on_client_gone(std::function<void()> fn) override { log("on_gone"), on_gone_ = std::move(fn); }
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
    return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return !posted_.empty(); });
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
  d->post([&] { ++ran, d->write("from a job"); });  // a job posted while recording runs in the replay
  d->write("b");
  EXPECT_FALSE(d->done());
  EXPECT_FALSE(d->client_gone());
  EXPECT_EQ(d->buffered_bytes(), 0u);
  EXPECT_TRUE(real->calls.empty());  // nothing reaches the I/O side before the replay
  d->release();
  EXPECT_TRUE(real->calls.empty());
  EXPECT_EQ(real->run_posted(), 1);  // the replay itself
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(real->calls, (std::vector<std::string>{"hold", "begin head", "write a", "write from a job", "write b"}));
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
  Handler h = offload.wrap([](HttpRequest&, std::shared_ptr<Responder>) { throw std::runtime_error("boom"); });
  auto real = std::make_shared<RecordingResponder>();
  HttpRequest req{.body = "x"};
  h(req, real);
  ASSERT_TRUE(real->wait_posted(10000));
  // The server runs posted jobs behind its exception boundary, which answers 500.
  EXPECT_THROW(real->run_posted(), std::runtime_error);
}

}  // namespace
}  // namespace zl::http
