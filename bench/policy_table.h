// The --compare tables of engine_bench and serve_bench: per burst and prompt mix, one row per
// scheduling policy (medians over the rounds) and one of latency/throughput ratios (the median
// of the rounds' ratios: both halves of a round see the same machine load).
#pragma once

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace zl::bench {

struct BurstStats {
  double p50 = 0, p90 = 0, p99 = 0, tok_s = 0;  // TTFT percentiles in ms; aggregate tokens/s
};

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

inline void print_policy_header() {
  std::printf("| burst | prompts | policy | TTFT p50 ms | p90 ms | p99 ms | tokens/s |\n|---|---|---|---|---|---|---|\n");
}

// rounds[0]: the latency policy's rounds, rounds[1]: the throughput policy's, in the same order.
inline void print_policy_rows(int burst, const std::string& mix, const std::vector<BurstStats> (&rounds)[2]) {
  for (int k = 0; k < 2; ++k) {
    auto med = [&](double BurstStats::*f) {
      std::vector<double> v;
      for (const BurstStats& b : rounds[k]) v.push_back(b.*f);
      return median(v);
    };
    std::printf("| %d | %s | %s | %.1f | %.1f | %.1f | %.1f |\n", burst, mix.c_str(), k == 0 ? "latency" : "throughput",
                med(&BurstStats::p50), med(&BurstStats::p90), med(&BurstStats::p99), med(&BurstStats::tok_s));
  }
  std::vector<double> r50, r99, rtok;
  for (size_t i = 0; i < rounds[0].size() && i < rounds[1].size(); ++i) {
    r50.push_back(rounds[0][i].p50 / rounds[1][i].p50);
    r99.push_back(rounds[0][i].p99 / rounds[1][i].p99);
    rtok.push_back(rounds[0][i].tok_s / rounds[1][i].tok_s);
  }
  std::printf("| %d | %s | latency / throughput | %.2f | | %.2f | %.2f |\n", burst, mix.c_str(), median(r50), median(r99),
              median(rtok));
  std::fflush(stdout);
}

}  // namespace zl::bench
