#include "http/offload.h"

#include <algorithm>
#include <exception>
#include <utility>

namespace zl::http {

DeferredResponder::DeferredResponder(std::shared_ptr<Responder> real) : real_(std::move(real)) {}

DeferredResponder::~DeferredResponder() = default;

void DeferredResponder::release() {
  // The replay holds us (and so what the recorded calls hold) until it runs;
  // when the exchange is over first, Responder::post drops it unrun, and
  // the guard below drops the recorded calls: a held generation session then
  // goes (its destructor cancels the engine's work), and with it the cycle
  // it made through us.
  struct Replay {
    std::shared_ptr<DeferredResponder> self;
    bool ran = false;
    explicit Replay(std::shared_ptr<DeferredResponder> s) : self(std::move(s)) {}
    Replay(const Replay&) = delete;
    ~Replay() {
      if (!ran && self) self->drop_recorded();
    }
  };
  auto job = std::make_shared<Replay>(shared_from_this());
  real_->post([job] {
    job->ran = true;
    job->self->replay();
  });
}

void DeferredResponder::drop_recorded() {
  std::vector<std::function<void()>> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    recording_ = false;
    dropped.swap(recorded_);
  }
  // (destroyed here, outside the lock: a destructor may call post())
}

void DeferredResponder::replay() {
  std::vector<std::function<void()>> calls;
  {
    std::lock_guard<std::mutex> lock(mu_);
    recording_ = false;  // from here on every call goes straight through
    calls.swap(recorded_);
  }
  // Posted jobs among them run inline (we are on the I/O thread, as they
  // would have been), each only while the exchange is open, as post() runs
  // them; what they post goes after this replay.
  for (std::function<void()>& call : calls) call();
}

void DeferredResponder::send(HttpResponse response) {
  if (record(
          [&] {
            return [r = real_, response = std::move(response)]() mutable {
              r->send(std::move(response));
            };
          },
          /*answers=*/true))
    return;
  real_->send(std::move(response));
}

void DeferredResponder::begin_stream(HttpResponse head) {
  if (record([&] {
        return [r = real_, head = std::move(head)]() mutable { r->begin_stream(std::move(head)); };
      }))
    return;
  real_->begin_stream(std::move(head));
}

void DeferredResponder::write(std::string_view bytes) {
  if (record([&] { return [r = real_, b = std::string(bytes)] { r->write(b); }; })) return;
  real_->write(bytes);
}

void DeferredResponder::end_stream() {
  if (record([&] { return [r = real_] { r->end_stream(); }; }, /*answers=*/true)) return;
  real_->end_stream();
}

size_t DeferredResponder::buffered_bytes() const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (recording_) return 0;
  }
  return real_->buffered_bytes();
}

bool DeferredResponder::client_gone() const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (recording_) return false;
  }
  return real_->client_gone();
}

bool DeferredResponder::done() const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (recording_) return answered_;
  }
  return real_->done();
}

void DeferredResponder::on_client_gone(std::function<void()> fn) {
  if (record([&] {
        return [r = real_, fn = std::move(fn)]() mutable { r->on_client_gone(std::move(fn)); };
      }))
    return;
  real_->on_client_gone(std::move(fn));
}

void DeferredResponder::on_drained(std::function<void()> fn) {
  if (record([&] {
        return [r = real_, fn = std::move(fn)]() mutable { r->on_drained(std::move(fn)); };
      }))
    return;
  real_->on_drained(std::move(fn));
}

void DeferredResponder::hold(std::shared_ptr<void> state) {
  if (record([&] {
        return [r = real_, state = std::move(state)]() mutable { r->hold(std::move(state)); };
      }))
    return;
  real_->hold(std::move(state));
}

void DeferredResponder::post(std::function<void()> fn) {
  if (record([&] {
        return [r = real_, fn = std::move(fn)] {
          if (!r->done()) fn();
        };
      })) {
    return;
  }
  real_->post(std::move(fn));
}

void DeferredResponder::post_after(std::chrono::milliseconds delay, std::function<void()> fn) {
  if (record([&] {
        return [r = real_, delay, fn = std::move(fn)]() mutable {
          r->post_after(delay, std::move(fn));
        };
      }))
    return;
  real_->post_after(delay, std::move(fn));
}

HandlerOffload::HandlerOffload(int n_threads, size_t min_body_bytes)
    : n_threads_(std::max(0, n_threads)), min_body_bytes_(min_body_bytes) {
  for (int i = 0; i < n_threads_; ++i) threads_.emplace_back([this] { run(); });
}

HandlerOffload::~HandlerOffload() {
  stop();
}

void HandlerOffload::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  std::deque<std::function<void()>> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    dropped.swap(jobs_);  // the server has stopped: these are not answered
  }
}

void HandlerOffload::run() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      if (stop_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

Handler HandlerOffload::wrap(Handler h) {
  return [this, h = std::move(h)](HttpRequest& request, std::shared_ptr<Responder> responder) {
    if (n_threads_ == 0 || request.body.size() < min_body_bytes_)
      return h(request, std::move(responder));
    // The request is the server's local (http1_connection.cc, http2_session.cc): ours from here.
    auto req = std::make_shared<HttpRequest>(std::move(request));
    auto deferred = std::make_shared<DeferredResponder>(responder);
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back([h, req, deferred] {
        try {
          h(*req, deferred);
        } catch (...) {
          // Thrown on the I/O thread instead, where the server's boundary
          // turns it into the answer (a 500 in the API's envelope).
          deferred->post([e = std::current_exception()] { std::rethrow_exception(e); });
        }
        deferred->release();
      });
    }
    cv_.notify_one();
  };
}

}  // namespace zl::http
