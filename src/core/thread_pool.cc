#include "core/thread_pool.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define ZL_CPU_RELAX() _mm_pause()
#else
#define ZL_CPU_RELAX() ((void)0)
#endif

namespace zl {
namespace {

// Spins until pred() or until kSpinUs have passed; true if pred() held.
// After a short pure spin it yields between checks, so that on an
// oversubscribed machine a waiting thread hands its CPU to the thread it is
// waiting for instead of burning the time slice.
template <typename Pred>
bool spin_until(Pred pred) {
  for (int i = 0; i < 256; ++i) {
    if (pred()) return true;
    ZL_CPU_RELAX();
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(ThreadPool::kSpinUs);
  for (int i = 0;; ++i) {
    if (pred()) return true;
    std::this_thread::yield();
    if ((i & 15) == 15 && std::chrono::steady_clock::now() > deadline) return pred();
  }
}

}  // namespace

int ThreadPool::default_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads <= 0 ? default_threads() : n_threads) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_work_.notify_all();
  for (auto& t : workers_) t.join();
}

// Returns false when the pool is stopping. A worker that goes to sleep counts
// itself in n_sleeping_ first (under mu_), so parallel_for, which bumps the
// generation before reading n_sleeping_, either sees it or is seen by it.
bool ThreadPool::wait_for_generation(uint64_t seen) {
  auto ready = [&] { return stop_.load() || generation_.load() != seen; };
  if (!spin_until(ready)) {
    std::unique_lock<std::mutex> lock(mu_);
    n_sleeping_.fetch_add(1);
    cv_work_.wait(lock, ready);
    n_sleeping_.fetch_sub(1);
  }
  return !stop_.load();
}

void ThreadPool::run_parts() {
  for (;;) {
    const int64_t i = next_part_.fetch_add(1, std::memory_order_relaxed);
    if (i >= n_parts_) return;
    (*fn_)(i * part_size_, std::min(n_, (i + 1) * part_size_));
  }
}

void ThreadPool::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    if (!wait_for_generation(seen)) return;
    seen = generation_.load(std::memory_order_acquire);
    run_parts();
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);  // pairs with the caller's sleep
      cv_done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t n_grains = (n + grain - 1) / grain;
  if (n_threads_ == 1 || n_grains == 1) {
    fn(0, n);
    return;
  }
  const int64_t max_parts = std::min<int64_t>(n_grains, int64_t{n_threads_} * kPartsPerThread);
  const int64_t grains_per_part = (n_grains + max_parts - 1) / max_parts;
  n_ = n;
  part_size_ = grains_per_part * grain;
  n_parts_ = (n_grains + grains_per_part - 1) / grains_per_part;
  next_part_.store(0, std::memory_order_relaxed);
  fn_ = &fn;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1);  // seq_cst: publishes the job, orders before n_sleeping_
  if (n_sleeping_.load() > 0) {
    { std::lock_guard<std::mutex> lock(mu_); }
    cv_work_.notify_all();
  }
  run_parts();
  auto done = [&] { return pending_.load(std::memory_order_acquire) == 0; };
  if (!spin_until(done)) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_done_.wait(lock, done);
  }
  fn_ = nullptr;
}

}  // namespace zl
