// Cost of one token's logprobs (sampling::logprobs: log-sum-exp over the vocabulary and the top
// alternatives) at vocabulary sizes, on random normal logits; the best of 5 rounds of 100 calls.
// Each prompt token of an echo request pays it once, each generated token with logprobs once.
//
//   logprobs_bench [--vocab 32000,151936] [--top 5]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/sampler.h"

int main(int argc, char** argv) {
  std::string vocabs = "32000,128256,151936";
  int top = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--vocab") {
      vocabs = argv[i + 1];
    } else if (k == "--top") {
      top = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "usage: logprobs_bench [--vocab 32000,151936] [--top 5]\n");
      return 2;
    }
  }
  std::printf("| vocabulary | top | ms a token |\n|---|---|---|\n");
  std::stringstream list(vocabs);
  for (std::string item; std::getline(list, item, ',');) {
    const int n = std::atoi(item.c_str());
    if (n <= 0) continue;
    std::mt19937 rng(1);
    std::normal_distribution<float> dist(0.0f, 3.0f);
    std::vector<float> logits(static_cast<size_t>(n));
    for (float& v : logits) v = dist(rng);
    zl::TokenLogprobs out;
    double best = 1e30;
    for (int round = 0; round < 5; ++round) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < 100; ++i) zl::sampling::logprobs(logits, i % n, top, &out);
      best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 100);
    }
    std::printf("| %d | %d | %.3f |\n", n, top, best);
  }
  return 0;
}
