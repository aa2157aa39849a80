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
// `idle()` is called between checks and returns whether it did work (then
// no pause).
template <typename Pred, typename Idle>
bool spin_until(Pred pred, Idle idle) {
  for (int i = 0; i < 256; ++i) {
    if (pred()) return true;
    if (!idle()) ZL_CPU_RELAX();
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(ThreadPool::kSpinUs);
  for (int i = 0;; ++i) {
    if (pred()) return true;
    if (!idle()) std::this_thread::yield();
    if ((i & 15) == 15 && std::chrono::steady_clock::now() > deadline) return pred();
  }
}

}  // namespace

int ThreadPool::default_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

ThreadPool::ThreadPool(int n_threads)
    : n_threads_(n_threads <= 0 ? default_threads() : n_threads),
      ranges_(new Range[n_threads_]),
      hints_(new Hint[n_threads_]) {
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

namespace {

// The split of parallel_for: units of `unit` elements, `n_units` of them.
struct Split {
  int64_t unit, n_units;
};

Split split_of(int64_t n, int64_t grain) {
  grain = std::max<int64_t>(grain, 1);
  int64_t unit = grain, n_units = (n + grain - 1) / grain;
  // Ranges are packed as two 32-bit unit indices.
  while (n_units > int64_t{INT32_MAX}) unit *= 2, n_units = (n + unit - 1) / unit;
  return {unit, n_units};
}

constexpr uint64_t pack(int64_t begin, int64_t end) {
  return static_cast<uint64_t>(begin) << 32 | static_cast<uint64_t>(end);
}
constexpr int64_t range_begin(uint64_t r) { return static_cast<int64_t>(r >> 32); }
constexpr int64_t range_end(uint64_t r) { return static_cast<int64_t>(r & 0xFFFFFFFFu); }

// The first unit of thread t's starting range (thread n_threads: the end).
int64_t first_unit(int64_t t, const Split& sp, int n_threads) { return t * sp.n_units / n_threads; }

}  // namespace

void ThreadPool::own_range(int64_t n, int64_t grain, int thread, int64_t* begin, int64_t* end) const {
  *begin = *end = 0;
  if (n <= 0 || thread < 0 || thread >= n_threads_) return;
  const Split sp = split_of(n, grain);
  if (n_threads_ == 1 || sp.n_units == 1) {
    if (thread == 0) *end = n;
    return;
  }
  *begin = std::min(n, first_unit(thread, sp, n_threads_) * sp.unit);
  *end = std::min(n, first_unit(thread + 1, sp, n_threads_) * sp.unit);
}

void ThreadPool::prefetch_hint(int thread, const void* p, size_t bytes) {
  if (thread <= 0 || thread >= n_threads_) return;
  Hint& h = hints_[thread];
  h.generation.store(~uint64_t{0}, std::memory_order_relaxed);
  h.p.store(static_cast<const char*>(p), std::memory_order_relaxed);
  h.bytes.store(bytes, std::memory_order_relaxed);
  h.seq.fetch_add(1, std::memory_order_relaxed);
  h.generation.store(generation_.load(std::memory_order_relaxed), std::memory_order_release);
}

bool ThreadPool::prefetch_step(int thread, uint64_t seen, size_t* done) {
  Hint& h = hints_[thread];
  if (h.generation.load(std::memory_order_acquire) != seen) return false;
  const char* p = h.p.load(std::memory_order_relaxed);
  const size_t bytes = h.bytes.load(std::memory_order_relaxed);
  if (*done >= bytes) return false;
  constexpr size_t kStep = 1024;  // 16 lines between checks of the generation
  const size_t end = std::min(bytes, *done + kStep);
  for (size_t i = *done; i < end; i += 64) __builtin_prefetch(p + i, 0, 2);
  *done = end;
  return true;
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
bool ThreadPool::wait_for_generation(uint64_t seen, int thread) {
  auto ready = [&] { return stop_.load() || generation_.load() != seen; };
  size_t done = 0;
  uint64_t hint_seq = ~uint64_t{0};
  auto idle = [&] {
    const uint64_t q = hints_[thread].seq.load(std::memory_order_relaxed);
    if (q != hint_seq) hint_seq = q, done = 0;  // a new hint
    return prefetch_step(thread, seen, &done);
  };
  if (!spin_until(ready, idle)) {
    std::unique_lock<std::mutex> lock(mu_);
    n_sleeping_.fetch_add(1);
    cv_work_.wait(lock, ready);
    n_sleeping_.fetch_sub(1);
  }
  return !stop_.load();
}

bool ThreadPool::claim(int thread, int64_t* u0, int64_t* u1) {
  std::atomic<uint64_t>& r = ranges_[thread].packed;
  uint64_t cur = r.load(std::memory_order_relaxed);
  for (;;) {
    const int64_t b = range_begin(cur), e = range_end(cur);
    if (b >= e) return false;
    const int64_t take = std::max<int64_t>(1, (e - b) / kChunkDivisor);
    if (r.compare_exchange_weak(cur, pack(b + take, e), std::memory_order_relaxed)) {
      *u0 = b;
      *u1 = b + take;
      return true;
    }
  }
}

bool ThreadPool::steal(int thread) {
  for (;;) {
    int victim = -1;
    int64_t most = 0;
    uint64_t seen = 0;
    for (int t = 0; t < n_threads_; ++t) {
      if (t == thread) continue;
      const uint64_t v = ranges_[t].packed.load(std::memory_order_relaxed);
      if (range_end(v) - range_begin(v) > most) victim = t, most = range_end(v) - range_begin(v), seen = v;
    }
    if (victim < 0) return false;
    const int64_t b = range_begin(seen), e = range_end(seen), take = std::max<int64_t>(1, (e - b) / 2);
    if (ranges_[victim].packed.compare_exchange_strong(seen, pack(b, e - take), std::memory_order_relaxed)) {
      // Our own range is empty: only thieves read it, and they skip it.
      ranges_[thread].packed.store(pack(e - take, e), std::memory_order_relaxed);
      return true;
    }
  }
}

void ThreadPool::run_ranges(int thread) {
  do {
    int64_t u0 = 0, u1 = 0;
    while (claim(thread, &u0, &u1)) (*fn_)(u0 * unit_, std::min(n_, u1 * unit_));
  } while (steal(thread));
}

void ThreadPool::worker_loop(int thread) {
  uint64_t seen = 0;
  for (;;) {
    if (!wait_for_generation(seen, thread)) return;
    seen = generation_.load(std::memory_order_acquire);
    run_ranges(thread);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mu_);  // pairs with the caller's sleep
      cv_done_.notify_one();
    }
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain) {
  if (n <= 0) return;
  const Split sp = split_of(n, grain);
  if (n_threads_ == 1 || sp.n_units == 1) {
    fn(0, n);
    return;
  }
  n_ = n;
  unit_ = sp.unit;
  for (int t = 0; t < n_threads_; ++t) {
    ranges_[t].packed.store(pack(first_unit(t, sp, n_threads_), first_unit(t + 1, sp, n_threads_)),
                            std::memory_order_relaxed);
  }
  fn_ = &fn;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1);  // seq_cst: publishes the job, orders before n_sleeping_
  if (n_sleeping_.load() > 0) {
    { std::lock_guard<std::mutex> lock(mu_); }
    cv_work_.notify_all();
  }
  run_ranges(0);
  auto done = [&] { return pending_.load(std::memory_order_acquire) == 0; };
  if (!spin_until(done, [] { return false; })) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_done_.wait(lock, done);
  }
  fn_ = nullptr;
}

}  // namespace zl
