// A fixed pool of persistent worker threads for data-parallel kernels.
//
// parallel_for(n, fn) splits [0, n) into up to kPartsPerThread contiguous
// ranges per thread, which the threads claim from an atomic counter (so a
// thread that the OS preempts — the machine is shared with HTTP threads and
// other processes — does not hold everyone up at the barrier). The calling
// thread works too, so a pool of N threads starts N-1 workers. Not
// reentrant: call parallel_for from one thread at a time (the engine thread
// owns the pool).
//
// Cost: a dispatch is an atomic store plus, at the end, a spin on an atomic
// counter — about a microsecond when the workers are awake. After a job a
// worker spins for up to kSpinUs (the next matmul of a forward pass usually
// follows within microseconds), then sleeps on a condition variable, so an
// idle pool burns no CPU.
#pragma once

#include <atomic>
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

  // Runs fn(begin, end) over [0, n) split into ranges whose sizes are
  // multiples of `grain` (except the last), each exactly once, on any of the
  // threads. Blocks until all finish.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 1);

  static int default_threads();

  // How long an idle worker (or the waiting caller) spins before sleeping.
  static constexpr int kSpinUs = 200;
  static constexpr int kPartsPerThread = 4;

 private:
  void worker_loop();
  bool wait_for_generation(uint64_t seen);
  void run_parts();

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_work_;
  std::condition_variable cv_done_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<int> n_sleeping_{0};
  std::atomic<bool> stop_{false};
  // The current job: parts [0, n_parts_) of part_size_ elements of [0, n_).
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0, part_size_ = 0, n_parts_ = 0;
  std::atomic<int64_t> next_part_{0};
};

}  // namespace zl
