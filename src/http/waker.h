// A wake-up line from another thread (the engine's) to one answer's I/O
// thread, that owns nothing of the I/O side.
//
// The engine thread calls notify() after each event it pushes into a
// RequestChannel (RequestChannel::set_notifier). Were the notifier to hold
// or lock the consumer (a GenerationSession, its Responder), the engine
// thread could end up its last owner and run I/O-side destructors. A Waker
// holds only a raw Responder pointer, valid between connect() and
// disconnect() (both on the I/O thread, the owner disconnecting before the
// Responder can go), and the job to post; destroying it on any thread
// destroys only those.
//
//   notify()      any thread: posts the job to the I/O thread
//                 (Responder::post); notifications that arrive while one is
//                 posted and has not run yet are folded into it.
//   disconnect()  I/O thread: later notify() calls post nothing; returns
//                 after a notify() in progress on another thread has posted.
//
// Thread-safe. Costs per notify(): an atomic exchange, and when a post is
// due a mutex and Responder::post (an allocation and a queue push).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>

#include "http/message.h"

namespace zl::http {

class Waker : public std::enable_shared_from_this<Waker> {
 public:
  // Make with std::make_shared (the posted job holds the Waker).
  Waker() = default;
  Waker(const Waker&) = delete;
  Waker& operator=(const Waker&) = delete;

  // `responder` must stay alive until disconnect(); `job` runs on its I/O
  // thread once per (folded) notification. On the I/O thread.
  void connect(Responder* responder, std::function<void()> job);
  void notify();
  void disconnect();

 private:
  std::mutex mu_;
  Responder* responder_ = nullptr;  // guarded by mu_
  std::function<void()> job_;       // I/O thread only
  std::atomic<bool> pending_{false};
};

}  // namespace zl::http
