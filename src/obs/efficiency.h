// engine_efficiency_ratio: how much of what the client waits for its first
// token is the engine's doing.
//
//   ratio = p95(engine TTFT) / p95(client TTFB estimate)
//   engine TTFT          = engine's first token − request received (whole request read)
//   client TTFB estimate = server's first token byte written − request received
//                          + the connection's smoothed RTT (TCP_INFO tcpi_rtt)
//
// over the last kWindow requests that produced a first token. The RTT stands
// for the network time the server cannot see (the request's way in and the
// first byte's way out). Thread-safe and lock-free: add() is two relaxed
// stores and one fetch_add; ratio() (at scrape) copies the window and sorts.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

namespace zl::obs {

class EfficiencyWindow {
 public:
  static constexpr size_t kWindow = 1024;

  // One request's sample, seconds. Ignored when client_ttfb_s <= 0.
  void add(double engine_ttft_s, double client_ttfb_s);
  // p95 ratio over the window; NaN before the first sample.
  double ratio() const;
  // The p-quantile (0..1, nearest rank) of the first n values (n >= 1); sorts them.
  static double quantile(double* values, size_t n, double p);

 private:
  std::atomic<uint64_t> n_{0};  // samples ever added; slot = n % kWindow
  std::array<std::atomic<double>, kWindow> engine_{};
  std::array<std::atomic<double>, kWindow> client_{};
};

}  // namespace zl::obs
