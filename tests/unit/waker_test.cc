// http::Waker: the engine thread's wake-up line into an I/O thread. Its job
// runs only where the Responder runs posted work (never on the notifying
// thread), notifications fold while one is pending, and after disconnect()
// nothing more is posted or run. And the GenerationSession that uses it:
// the engine thread, in the middle of a notification, holds no reference
// to the session, so the session's destructor runs on the I/O side.
#include <gtest/gtest.h>

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "api/generation.h"
#include "http/waker.h"
#include "support/null_responder.h"

namespace zl::http {
namespace {

// A Responder whose post() queues work for the test's own thread to run.
class QueueResponder final : public test::NullResponder {
 public:
  void post(std::function<void()> fn) override {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(fn));
    ++n_posted_;
  }
  void post_after(std::chrono::milliseconds, std::function<void()> fn) override { post(std::move(fn)); }

  // Runs what is queued, on the calling thread; how many ran.
  int run_queued() {
    std::deque<std::function<void()>> q;
    {
      std::lock_guard<std::mutex> lock(mu_);
      q.swap(queue_);
    }
    for (auto& fn : q) fn();
    return static_cast<int>(q.size());
  }
  int n_posted() {
    std::lock_guard<std::mutex> lock(mu_);
    return n_posted_;
  }

 private:
  std::mutex mu_;
  std::deque<std::function<void()>> queue_;
  int n_posted_ = 0;
};

TEST(Waker, NotificationsFoldAndTheJobRunsOnThePostingThread) {
  QueueResponder responder;
  auto waker = std::make_shared<Waker>();
  std::atomic<int> n_runs{0};
  std::thread::id ran_on;
  waker->connect(&responder, [&] {
    ++n_runs;
    ran_on = std::this_thread::get_id();
  });
  // Four "engine" threads notify many times before the I/O side runs anything.
  std::vector<std::thread> engines;
  for (int t = 0; t < 4; ++t) {
    engines.emplace_back([w = waker] {
      for (int i = 0; i < 1000; ++i) w->notify();
    });
  }
  for (auto& t : engines) t.join();
  EXPECT_EQ(responder.n_posted(), 1);  // folded into one pending wake-up
  EXPECT_EQ(n_runs.load(), 0);         // nothing ran on a notifying thread
  EXPECT_EQ(responder.run_queued(), 1);
  EXPECT_EQ(n_runs.load(), 1);
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  // Once it has run, the next notification posts again.
  waker->notify();
  EXPECT_EQ(responder.n_posted(), 2);
  responder.run_queued();
  EXPECT_EQ(n_runs.load(), 2);
}

TEST(Waker, AfterDisconnectNothingIsPostedOrRun) {
  QueueResponder responder;
  auto waker = std::make_shared<Waker>();
  int n_runs = 0;
  waker->connect(&responder, [&] { ++n_runs; });
  waker->notify();           // posted, not run yet
  waker->disconnect();       // the owner goes
  responder.run_queued();    // the stale wake-up runs nothing
  EXPECT_EQ(n_runs, 0);
  std::thread engine([w = waker] { w->notify(); });
  engine.join();
  EXPECT_EQ(responder.n_posted(), 1);
}

TEST(Waker, TheNotifierOwnsOnlyTheWaker) {
  // What the engine thread holds (a notifier closure with the waker) keeps
  // neither the job's captures nor the owner alive once it has disconnected.
  QueueResponder responder;
  auto owner = std::make_shared<int>(42);
  std::weak_ptr<int> weak_owner = owner;
  auto waker = std::make_shared<Waker>();
  waker->connect(&responder, [weak = weak_owner] { (void)weak.lock(); });
  std::function<void()> notifier = [w = waker] { w->notify(); };
  waker->disconnect();
  waker.reset();
  owner.reset();
  EXPECT_TRUE(weak_owner.expired());
  std::thread engine([&] {
    notifier();
    notifier = nullptr;  // the engine thread drops the last reference: destroys only the waker
  });
  engine.join();
  EXPECT_EQ(responder.n_posted(), 0);
}

// An engine that only hands out channels; the test pushes from its own thread.
class ChannelEngine final : public EngineApi {
 public:
  std::shared_ptr<RequestChannel> submit(Request request) override {
    channel = std::make_shared<RequestChannel>(request.id);
    return channel;
  }
  EngineStats stats() const override { return {}; }
  std::shared_ptr<RequestChannel> channel;
};

// A formatter that records the thread it is destroyed on (with its session).
class RecordingFormatter final : public api::EventFormatter {
 public:
  explicit RecordingFormatter(std::thread::id* destroyed_on) : destroyed_on_(destroyed_on) {}
  ~RecordingFormatter() override { *destroyed_on_ = std::this_thread::get_id(); }
  void stream_start(const Usage&, std::string&) override {}
  void stream_text(std::string_view, std::string&) override {}
  void stream_tool_call_start(std::string_view, std::string&) override {}
  void stream_tool_call_delta(std::string_view, std::string&) override {}
  void stream_tool_call_end(std::string&) override {}
  void stream_finish(const api::Completion&, std::string&) override {}
  void stream_error(const api::ApiError&, std::string&) override {}
  void stream_ping(std::string&) override {}
  HttpResponse complete(const std::vector<api::AnswerPart>&, const api::Completion&) override { return {}; }
  HttpResponse error(const api::ApiError&) override { return {}; }

 private:
  std::thread::id* destroyed_on_;
};

// Holds the session (hold()) like an exchange; a post() from another thread
// can be made to wait until the session is unreferenced (with a deadline).
class HoldingResponder final : public test::NullResponder {
 public:
  void hold(std::shared_ptr<void> state) override {
    held = state;
    watched = state;
  }
  void post(std::function<void()> fn) override {
    if (std::this_thread::get_id() != io_thread) {
      entered_post.store(true);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (!watched.expired() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
      saw_expired.store(watched.expired());
    }
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(fn));
  }
  void post_after(std::chrono::milliseconds, std::function<void()> fn) override { post(std::move(fn)); }
  void run_queued() {
    std::deque<std::function<void()>> q;
    {
      std::lock_guard<std::mutex> lock(mu_);
      q.swap(queue_);
    }
    for (auto& fn : q) fn();
  }

  std::thread::id io_thread = std::this_thread::get_id();
  std::shared_ptr<void> held;
  std::weak_ptr<void> watched;
  std::atomic<bool> entered_post{false};
  std::atomic<bool> saw_expired{false};

 private:
  std::mutex mu_;
  std::deque<std::function<void()>> queue_;
};

TEST(Waker, TheEngineThreadNeverOwnsTheSession) {
  ChannelEngine engine;
  auto responder = std::make_shared<HoldingResponder>();
  std::thread::id destroyed_on;
  api::GenerationSession::start(engine, Request{.id = "r", .prompt_ids = {1, 2}}, api::SessionOptions{},
                                std::make_unique<RecordingFormatter>(&destroyed_on), responder);
  ASSERT_TRUE(engine.channel);
  responder->run_queued();  // start()'s own wake-up
  // The engine thread pushes an event; its notification is held inside
  // post() until the session has no owner left.
  std::thread engine_thread([&] { engine.channel->push(Event{.kind = EventKind::kText, .text = "x"}); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!responder->entered_post.load() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  ASSERT_TRUE(responder->entered_post.load());
  // The I/O side lets go of the session (an answer's end): it is destroyed
  // here and now, though the engine thread is inside its notification.
  responder->held.reset();
  engine_thread.join();
  EXPECT_TRUE(responder->saw_expired.load());
  EXPECT_EQ(destroyed_on, std::this_thread::get_id());
  responder->run_queued();  // the stale wake-up runs nothing
  engine.channel->push(Event{.kind = EventKind::kFinish});  // nor does a later notification
}

}  // namespace
}  // namespace zl::http
