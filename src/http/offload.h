// Handlers run off the I/O thread: for requests whose handling is CPU work
// in proportion to their body (parsing a large JSON body, rendering a chat
// template, tokenizing, the guard's scan), so that one 30 MB request does
// not stall every other answer on its I/O thread for the seconds that takes.
//
//   HandlerOffload offload(2, 64 << 10);
//   router.add("POST", "/v1/messages", offload.wrap(handler));
//
// A wrapped handler with a body of at least min_body_bytes runs on one of
// the offload's threads (started in arrival order) with a
// DeferredResponder: every call it makes on its Responder while it runs
// (send, begin_stream, write, hold, on_client_gone, post, ...) is recorded,
// and replayed in order on the connection's I/O thread once the handler has
// returned; later calls go straight through (they come from jobs posted to
// the I/O thread, as always). So handler code written for the I/O thread
// runs unchanged: what it touches besides its Responder must be
// thread-safe, as handlers on several I/O threads already require. Smaller
// requests run inline.
//
// Not answered: the I/O thread's connection is gone before the replay (the
// replay does not run; what the handler held, e.g. a generation session, is
// dropped then, which cancels its work), or the offload is destroyed with
// the request still queued (the server is stopping).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "http/message.h"

namespace zl::http {

class DeferredResponder final : public Responder,
                                public std::enable_shared_from_this<DeferredResponder> {
 public:
  explicit DeferredResponder(std::shared_ptr<Responder> real);
  ~DeferredResponder() override;

  // The handler has returned (its thread): replays the recorded calls on the
  // real Responder's I/O thread, then passes every call through.
  void release();

  const std::string& request_id() const override { return real_->request_id(); }
  void send(HttpResponse response) override;
  void begin_stream(HttpResponse head) override;
  void write(std::string_view bytes) override;
  void end_stream() override;
  // While recording: 0 bytes buffered, the client not gone, done once the
  // handler has sent its answer or ended its stream.
  size_t buffered_bytes() const override;
  bool client_gone() const override;
  bool done() const override;
  void on_client_gone(std::function<void()> fn) override;
  void on_drained(std::function<void()> fn) override;
  void hold(std::shared_ptr<void> state) override;
  void post(std::function<void()> fn) override;
  void post_after(std::chrono::milliseconds delay, std::function<void()> fn) override;

 private:
  // While recording: records the call make() returns (made only then: no
  // copy of the bytes once calls go straight through) and returns true
  // (`answers`: the call completes the answer, done() is true from now);
  // else false: make the call now.
  template <typename Make>
  bool record(Make&& make, bool answers = false) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!recording_) return false;
    answered_ = answered_ || answers;
    recorded_.emplace_back(make());
    return true;
  }
  // On the I/O thread: the recorded calls, in order.
  void replay();
  void drop_recorded();

  std::shared_ptr<Responder> real_;
  mutable std::mutex mu_;  // recording_ and recorded_ (post() comes from any thread)
  bool recording_ = true;
  bool answered_ = false;  // while recording: send or end_stream seen
  std::vector<std::function<void()>> recorded_;
};

class HandlerOffload {
 public:
  HandlerOffload(int n_threads, size_t min_body_bytes);
  ~HandlerOffload();
  HandlerOffload(const HandlerOffload&) = delete;
  HandlerOffload& operator=(const HandlerOffload&) = delete;

  // `h` behind the offload (the returned handler refers to this object,
  // which must outlive the routes).
  Handler wrap(Handler h);
  // Lets the handlers running finish and drops the queued ones (not
  // answered). Once the server has stopped taking requests, before what
  // the handlers use (the engine) goes; the destructor calls it too.
  void stop();

 private:
  void run();

  const int n_threads_;
  const size_t min_body_bytes_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace zl::http
