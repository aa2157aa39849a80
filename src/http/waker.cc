#include "http/waker.h"

namespace zl::http {

void Waker::connect(Responder* responder, std::function<void()> job) {
  job_ = std::move(job);
  std::lock_guard<std::mutex> lock(mu_);
  responder_ = responder;
}

void Waker::notify() {
  if (pending_.exchange(true, std::memory_order_acq_rel)) return;  // one is posted already
  std::lock_guard<std::mutex> lock(mu_);
  if (responder_ == nullptr) return;
  responder_->post([self = shared_from_this()] {
    // Cleared before the job runs: an event pushed while it drains the
    // channel posts again, and the next run sees it.
    self->pending_.store(false, std::memory_order_release);
    // A copy: the job may end its owner, whose destructor disconnects (clears job_).
    if (auto job = self->job_) job();
  });
}

void Waker::disconnect() {
  job_ = nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  responder_ = nullptr;
}

}  // namespace zl::http
