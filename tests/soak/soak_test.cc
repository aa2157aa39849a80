// The soak test: the real `zerolayer serve` on the built-in demo model
// (models/zerolayer-demo.gguf), many concurrent clients on loopback for
// ZL_SOAK_SECONDS (default 100): good requests of both APIs, streamed and
// not (with random stream_options), next to streams cut at random bytes,
// clients that leave a busy or pipelined generation, slow and stalled readers
// (backpressure), slow-loris heads, connection floods, oversized bodies,
// malformed JSON and HTTP, prompts over the context (soak_clients.h). Then:
//   - no 5xx but the typed overload, every good request answered well;
//   - the engine idle (/metrics engine_requests_running and _waiting 0), its
//     KV blocks in use back to the warm-up baseline, no connection left open;
//   - RSS growth since the warm-up under kMaxRssGrowthKb;
//   - the next requests served, /ready never stalled, SIGTERM exits 0.
// Prints requests by kind and outcome with p50/p99 latencies. Randomness is
// seeded (ZL_SOAK_SEED, else from the clock; printed) so a failure repeats
// (up to thread timing). ZL_SOAK_CLIENTS sets the number of client threads.
// CTest label `soak` (scripts/test.sh runs it as its own step; scripts/soak.sh
// runs it for longer).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "soak/soak_clients.h"
#include "support/http_client.h"
#include "support/process.h"  // file_exists

namespace zl::soak {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kMaxRssGrowthKb = 64 * 1024;
constexpr int kMaxFailuresShown = 30;
constexpr size_t kSlowestShown = 8;
constexpr int kServerCtx = 256;
constexpr int kServerMaxBody = 256 << 10;

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoll(v) : fallback;
}

// Requests by kind and outcome, latencies by kind, the first failures.
// Thread-safe.
class Tally {
 public:
  void add(Kind kind, const Result& r, double ms, const std::string& where) {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t k = static_cast<size_t>(kind);
    ++counts_[k][static_cast<size_t>(r.outcome)];
    latencies_ms_[k].push_back(ms);
    slowest_.push_back({ms, std::string(kKindNames[k]) + " " + where});
    std::sort(slowest_.begin(), slowest_.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    if (slowest_.size() > kSlowestShown) slowest_.pop_back();
    if (r.outcome == Outcome::kFail) {
      ++n_failures_;
      if (failures_.size() < kMaxFailuresShown) failures_.push_back(std::string(kKindNames[k]) + " " + where + ": " + r.detail);
    }
  }
  int64_t n_failures() const {
    std::lock_guard<std::mutex> lock(mu_);
    return n_failures_;
  }
  int64_t count(Kind kind, Outcome o) const {
    std::lock_guard<std::mutex> lock(mu_);
    return counts_[static_cast<size_t>(kind)][static_cast<size_t>(o)];
  }
  std::string failures() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string out;
    for (const auto& f : failures_) out += "  " + f + "\n";
    return out;
  }
  void print() const;

 private:
  mutable std::mutex mu_;
  std::array<std::array<int64_t, static_cast<size_t>(Outcome::kCount)>, static_cast<size_t>(Kind::kCount)> counts_{};
  std::array<std::vector<double>, static_cast<size_t>(Kind::kCount)> latencies_ms_;
  std::vector<std::string> failures_;
  std::vector<std::pair<double, std::string>> slowest_;  // (ms, kind and client), slowest first
  int64_t n_failures_ = 0;
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

void Tally::print() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::printf("%-20s %7s", "kind", "n");
  for (const char* o : kOutcomeNames) std::printf(" %10s", o);
  std::printf(" %9s %9s\n", "p50 ms", "p99 ms");
  std::vector<double> all;
  int64_t total = 0;
  for (size_t k = 0; k < counts_.size(); ++k) {
    int64_t n = 0;
    for (int64_t c : counts_[k]) n += c;
    total += n;
    std::printf("%-20s %7lld", kKindNames[k], static_cast<long long>(n));
    for (int64_t c : counts_[k]) std::printf(" %10lld", static_cast<long long>(c));
    std::printf(" %9.1f %9.1f\n", percentile(latencies_ms_[k], 0.5), percentile(latencies_ms_[k], 0.99));
    all.insert(all.end(), latencies_ms_[k].begin(), latencies_ms_[k].end());
  }
  std::printf("%-20s %7lld %*s %9.1f %9.1f\n", "all", static_cast<long long>(total),
              static_cast<int>(11 * kOutcomeNames.size() - 1), "", percentile(all, 0.5), percentile(all, 0.99));
  std::printf("slowest:");
  for (const auto& [ms, what] : slowest_) std::printf(" %.0f ms %s;", ms, what.c_str());
  std::printf("\n");
}

Kind pick_kind(Rng& rng) {
  static const std::discrete_distribution<int> kDist(kKindWeights.begin(), kKindWeights.end());
  std::discrete_distribution<int> d = kDist;
  return static_cast<Kind>(d(rng));
}

// VmRSS of `pid` in kB, -1 when unreadable.
int64_t rss_kb(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6);
  }
  return -1;
}

// The value of an unlabelled series in /metrics text, -1 when absent.
int64_t metric_in(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n" + name + " ");
  return at == std::string::npos ? -1 : std::atoll(text.c_str() + at + name.size() + 2);
}

struct EngineIdle {
  int64_t running = -1, waiting = -1, kv_used = -1, connections = -1;
};

EngineIdle read_idle(int port) {
  const test::HttpReply r = test::fetch(port, "GET", "/metrics");
  return EngineIdle{.running = metric_in(r.body, "engine_requests_running"),
                    .waiting = metric_in(r.body, "engine_requests_waiting"),
                    .kv_used = metric_in(r.body, "engine_kv_blocks_used"),
                    .connections = metric_in(r.body, "zerolayer_http_connections_open")};
}

// Polls /metrics until nothing runs or waits, the KV blocks in use are back
// to `kv_baseline` and only the /metrics connection itself is open; false at
// the deadline (`last` then says what was left).
bool wait_idle(int port, int64_t kv_baseline, std::chrono::seconds timeout, EngineIdle* last) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    *last = read_idle(port);
    if (last->running == 0 && last->waiting == 0 && last->kv_used == kv_baseline && last->connections == 1) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // polling interval of a deadline wait
  }
}

std::string model_path() {
  const std::string demo = std::string(ZL_SOURCE_DIR) + "/models/zerolayer-demo.gguf";
  if (test::file_exists(demo)) return demo;
  const std::string shared = std::string(ZL_SHARED_DIR) + "/models/stories260K.gguf";
  return test::file_exists(shared) ? shared : "";
}

// One good request of each kind; every one must be answered well.
void expect_served(const Target& t, Rng& rng, const char* when) {
  for (Kind k : {Kind::kAnthropic, Kind::kAnthropicStream, Kind::kOpenAIChat, Kind::kOpenAIChatStream, Kind::kCompletion}) {
    const Result r = run_client(k, t, rng);
    EXPECT_EQ(r.outcome, Outcome::kOk) << when << ", " << kKindNames[static_cast<size_t>(k)] << ": " << r.detail;
  }
}

// The clients: n_clients threads, each picking kinds at random until the
// deadline. /ready is polled meanwhile; returns the number of its 503s.
int run_clients(const Target& t, uint64_t seed, int n_clients, Clock::time_point deadline, Tally& tally) {
  std::vector<std::thread> threads;
  const auto start = Clock::now();
  for (int i = 0; i < n_clients; ++i) {
    threads.emplace_back([&, i] {
      Rng rng(seed * 1000003u + static_cast<uint64_t>(i));
      for (int64_t n = 0; Clock::now() < deadline; ++n) {
        const Kind kind = pick_kind(rng);
        const auto t0 = Clock::now();
        const Result r = run_client(kind, t, rng);
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        const double at_s = std::chrono::duration<double>(t0 - start).count();
        char where[96];
        std::snprintf(where, sizeof where, "(client %d, request %lld, at %.1f s)", i, static_cast<long long>(n), at_s);
        tally.add(kind, r, ms, where);
      }
    });
  }
  int n_stalled = 0;
  while (Clock::now() < deadline) {
    const test::HttpReply r = test::fetch(t.port, "GET", "/ready");
    if (r.status != 200) ++n_stalled;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // polling interval
  }
  for (auto& th : threads) th.join();
  return n_stalled;
}

TEST(Soak, ManyHostileAndGoodClients) {
  const std::string model = model_path();
  if (model.empty()) GTEST_SKIP() << "SKIPPED: neither models/zerolayer-demo.gguf nor ../shared/models/stories260K.gguf";
  const int64_t seconds = env_int("ZL_SOAK_SECONDS", 100);
  const int n_clients = static_cast<int>(env_int("ZL_SOAK_CLIENTS", 16));
  const uint64_t seed = static_cast<uint64_t>(
      env_int("ZL_SOAK_SEED", std::chrono::system_clock::now().time_since_epoch().count() % 1000000007));
  std::printf("soak: %lld s, %d clients, seed %llu (repeat with ZL_SOAK_SEED=%llu), model %s\n",
              static_cast<long long>(seconds), n_clients, static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(seed), model.c_str());
  // A small window and KV cache (preemption happens), small socket buffers
  // and event queues (backpressure engages at once), a short ping interval.
  test::ServerProcess server({"--model", model, "--ctx", std::to_string(kServerCtx), "--parallel", "4", "--kv-size",
                              "640", "--max-body-bytes", std::to_string(kServerMaxBody), "--max-pending-events", "8",
                              "--socket-send-buffer", "4096", "--sse-ping-interval", "0.2", "--header-timeout-ms",
                              "3000", "--request-log", "false",
                              // Every client may wait at once (clients that left are cancelled a
                              // step later): the soak tests robustness, not load shedding.
                              "--max-queue", std::to_string(4 * n_clients)});
  ASSERT_TRUE(server.ok()) << "server did not start: " << server.startup_line();
  const Target target{.port = server.port(), .max_body_bytes = kServerMaxBody, .n_ctx = kServerCtx};
  Rng rng(seed);

  // Warm-up: every kind once, then the baselines.
  Tally warm;
  for (size_t k = 0; k < static_cast<size_t>(Kind::kCount); ++k) {
    warm.add(static_cast<Kind>(k), run_client(static_cast<Kind>(k), target, rng), 0, "(warm-up)");
  }
  ASSERT_EQ(warm.n_failures(), 0) << "warm-up failures:\n" << warm.failures();
  EngineIdle idle;
  ASSERT_TRUE(wait_idle(target.port, 0, std::chrono::seconds(30), &idle))
      << "not idle after the warm-up: running " << idle.running << ", waiting " << idle.waiting << ", kv blocks "
      << idle.kv_used << ", connections " << idle.connections;
  const int64_t kv_baseline = idle.kv_used;
  const int64_t rss0 = rss_kb(server.pid());

  Tally tally;
  const int n_stalled = run_clients(target, seed, n_clients, Clock::now() + std::chrono::seconds(seconds), tally);
  tally.print();
  ASSERT_EQ(server.wait_exit(0), -1) << "the server died during the soak";
  EXPECT_EQ(n_stalled, 0) << "/ready answered other than 200 during the soak";
  EXPECT_EQ(tally.n_failures(), 0) << "failures (first " << kMaxFailuresShown << "):\n" << tally.failures();
  EXPECT_GT(tally.count(Kind::kAnthropic, Outcome::kOk) + tally.count(Kind::kOpenAIChat, Outcome::kOk), 0);

  const bool became_idle = wait_idle(target.port, kv_baseline, std::chrono::seconds(30), &idle);
  EXPECT_TRUE(became_idle) << "not idle 30 s after the soak: running " << idle.running << ", waiting " << idle.waiting
                           << ", kv blocks " << idle.kv_used << " (baseline " << kv_baseline << "), connections "
                           << idle.connections;
  const int64_t rss1 = rss_kb(server.pid());
  std::printf("soak: RSS %lld kB after the warm-up, %lld kB after the soak (%+lld kB)\n", static_cast<long long>(rss0),
              static_cast<long long>(rss1), static_cast<long long>(rss1 - rss0));
  EXPECT_LT(rss1 - rss0, kMaxRssGrowthKb) << "RSS grew too much";
  expect_served(target, rng, "after the soak");

  server.signal(SIGTERM);
  EXPECT_EQ(server.wait_exit(30000), 0) << "SIGTERM did not stop the server cleanly";
}

}  // namespace
}  // namespace zl::soak
