// A fixed pool of persistent worker threads for data-parallel kernels.
//
// parallel_for(n, fn) gives each thread one contiguous range of [0, n),
// which it works through in chunks; a thread that runs out steals the back
// half of another's remainder (so a thread that the OS preempts — the
// machine is shared with HTTP threads and other processes — does not hold
// everyone up at the barrier, and a matmul's threads each read one sequential
// stream of weights instead of hopping between parts). The calling
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
#include <memory>
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

  // The range [begin, end) of [0, n) that thread `thread` (0 = the caller of
  // parallel_for, 1.. the workers) starts from in a parallel_for of `n`
  // elements split by `grain` (empty when it gets none).
  void own_range(int64_t n, int64_t grain, int thread, int64_t* begin, int64_t* end) const;

  // Warm-up for the next parallel_for: until it starts, an idle worker
  // `thread` prefetches [p, p + bytes) into its cache — the head of its
  // own range of the next matrix while the caller does serial work (norms,
  // activation quantization), so that the memory bus does not sit idle. A
  // hint is dropped when the next parallel_for starts. Only advice.
  void prefetch_hint(int thread, const void* p, size_t bytes);

  // How long an idle worker (or the waiting caller) spins before sleeping.
  static constexpr int kSpinUs = 200;
  // An owner claims 1 / kChunkDivisor of what is left of its range at a time
  // (at least one unit): few claims, and small chunks at the end.
  static constexpr int kChunkDivisor = 8;

 private:
  void worker_loop(int thread);
  bool wait_for_generation(uint64_t seen, int thread);
  void run_ranges(int thread);
  // Claims the next chunk of the thread's own range; false when it is empty.
  bool claim(int thread, int64_t* u0, int64_t* u1);
  // Moves the back half of the fullest other range into the thread's own;
  // false when every range is empty.
  bool steal(int thread);
  // Prefetches the next slice of `thread`'s hint; false when there is none.
  bool prefetch_step(int thread, uint64_t seen, size_t* done);

  int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_work_;
  std::condition_variable cv_done_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<int> n_sleeping_{0};
  std::atomic<bool> stop_{false};
  // The current job: [0, n_) in units of unit_ elements (n_units of them),
  // thread t owning units [t * n_units / n_threads_, (t + 1) * n_units /
  // n_threads_) at the start. Each range is packed as (begin, end) in one
  // word: the owner claims chunks from the front, a thread that ran out
  // steals the back half of another's remainder. Contiguous ranges keep each
  // thread's weight stream sequential (no prefetcher restarts), stealing
  // keeps the end balanced to a chunk.
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0, unit_ = 1;
  struct alignas(64) Range {
    std::atomic<uint64_t> packed{0};
  };
  std::unique_ptr<Range[]> ranges_;
  struct Hint {
    std::atomic<uint64_t> generation{~uint64_t{0}};  // valid while generation_ == this
    std::atomic<uint64_t> seq{0};                    // bumped by every hint
    std::atomic<const char*> p{nullptr};
    std::atomic<size_t> bytes{0};
  };
  std::unique_ptr<Hint[]> hints_;
};

}  // namespace zl
