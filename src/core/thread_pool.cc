#include "core/thread_pool.h"

#include <algorithm>

namespace zl {

int ThreadPool::default_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads <= 0 ? default_threads() : n_threads) {
  ranges_.resize(n_threads_);
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_work_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    std::pair<int64_t, int64_t> range;
    const std::function<void(int64_t, int64_t)>* fn;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_work_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      range = ranges_[index];
      fn = fn_;
    }
    if (range.first < range.second) (*fn)(range.first, range.second);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) cv_done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int64_t n_chunks = (n + grain - 1) / grain;
  if (n_threads_ == 1 || n_chunks == 1) {
    fn(0, n);
    return;
  }
  int64_t per = (n_chunks + n_threads_ - 1) / n_threads_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int i = 0; i < n_threads_; ++i) {
      int64_t b = std::min(n, i * per * grain);
      int64_t e = std::min(n, (i + 1) * per * grain);
      ranges_[i] = {b, e};
    }
    fn_ = &fn;
    pending_ = n_threads_ - 1;
    ++generation_;
  }
  cv_work_.notify_all();
  if (ranges_[0].first < ranges_[0].second) fn(ranges_[0].first, ranges_[0].second);
  std::unique_lock<std::mutex> lock(mu_);
  cv_done_.wait(lock, [&] { return pending_ == 0; });
  fn_ = nullptr;
}

}  // namespace zl
