#include "obs/efficiency.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "obs/metrics.h"  // kEnabled

namespace zl::obs {

void EfficiencyWindow::add(double engine_ttft_s, double client_ttfb_s) {
  if constexpr (!kEnabled) return;
  if (!(client_ttfb_s > 0) || !(engine_ttft_s >= 0)) return;
  const uint64_t slot = n_.fetch_add(1, std::memory_order_relaxed) % kWindow;
  engine_[slot].store(engine_ttft_s, std::memory_order_relaxed);
  client_[slot].store(client_ttfb_s, std::memory_order_relaxed);
}

double EfficiencyWindow::quantile(double* values, size_t n, double p) {
  // Nearest rank: the ceil(p·n)-th smallest value.
  size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(n)));
  rank = std::clamp<size_t>(rank, 1, n);
  std::nth_element(values, values + rank - 1, values + n);
  return values[rank - 1];
}

double EfficiencyWindow::ratio() const {
  // A slot whose add() is under way may hold the previous sample's pair or
  // half of each: harmless for a p95 over 1024 samples.
  const size_t n = static_cast<size_t>(std::min<uint64_t>(n_.load(std::memory_order_relaxed), kWindow));
  if (n == 0) return NAN;
  std::vector<double> e(n), c(n);
  for (size_t i = 0; i < n; ++i) {
    e[i] = engine_[i].load(std::memory_order_relaxed);
    c[i] = client_[i].load(std::memory_order_relaxed);
  }
  const double den = quantile(c.data(), n, 0.95);
  return den > 0 ? quantile(e.data(), n, 0.95) / den : NAN;
}

}  // namespace zl::obs
