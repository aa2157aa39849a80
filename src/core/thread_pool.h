// A fixed pool of persistent worker threads for data-parallel kernels.
//
// parallel_for(n, fn) splits [0, n) into one contiguous range per thread and
// runs fn(begin, end) on each; the calling thread takes the first range, so a
// pool of N threads starts N-1 workers. Idle workers sleep on a condition
// variable (no busy spinning). Not reentrant: call parallel_for from one
// thread at a time (the engine thread owns the pool).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace zl {

class ThreadPool {
 public:
  // n_threads <= 0 picks the number of hardware threads.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int n_threads() const { return n_threads_; }

  // Runs fn(begin, end) over [0, n) split into at most n_threads() ranges whose
  // sizes are multiples of `grain` (except the last). Blocks until all finish.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 1);

  static int default_threads();

 private:
  void worker_loop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_work_;
  std::condition_variable cv_done_;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  std::vector<std::pair<int64_t, int64_t>> ranges_;
};

}  // namespace zl
