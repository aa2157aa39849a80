// Matrix-vector kernel benchmark: the decode matmul alone, per weight format,
// as a fraction of the machine's read bandwidth measured in the same run.
//
//   kernel_bench [--types Q4_0,Q8_0,Q4_K,Q6_K,F16,BF16,F32] [--threads N]
//   (--types takes any supported type: Q4_1,Q5_0,IQ4_NL,MXFP4,Q5_K,Q3_K,Q2_K,IQ4_XS too)
//                [--mib 1024] [--n-in 2048] [--n-out 8192] [--tokens 1] [--rounds 8]
//                [--cpu 0]
//
// Per type: random weights filling about --mib MiB (much more than the
// last-level cache) in matrices of n_out x n_in, prepared as the model loader
// prepares them (PackedMatrix, active ISA). Each round reads the bandwidth
// bound once (the same streaming read as `zerolayer bench`) and then runs
// every matrix once by a --tokens activation; the figure is the median over
// rounds of (weight bytes / matmul time) / bandwidth, and with --tokens > 1
// also GFLOP/s (2 x n_in x n_out x tokens per matrix). Not a test.
//
// --cpu 1 (with --threads 1): the kernels' arithmetic alone on a busy machine.
// No bandwidth probe; each round is timed by the calling thread's CPU time
// (CLOCK_THREAD_CPUTIME_ID: time other processes take from the core is not
// counted), and the table gives weight GB and GFLOP per CPU second (the
// best round: switches to other processes still cost cache refills; at one token the GB/s is the GEMV's compute ceiling, to set
// against the memory bandwidth per thread).
// Use a small --mib (the matrices in cache) and --tokens > 1 to compare the
// prefill kernels of several types in one run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "format/ggml_type.h"
#include "kernels/matmul.h"
#include "kernels/peak.h"
#include "kernels/quant.h"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t p = 0;
  while (p <= s.size()) {
    const size_t q = s.find(',', p);
    out.push_back(s.substr(p, q == std::string::npos ? std::string::npos : q - p));
    if (q == std::string::npos) break;
    p = q + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> a = {{"types", "Q4_0,Q8_0,Q4_K,Q6_K,F16,BF16,F32"},
                                          {"threads", "0"}, {"mib", "1024"}, {"n-in", "2048"},
                                          {"n-out", "8192"}, {"tokens", "1"}, {"rounds", "8"}, {"cpu", "0"}};
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k.rfind("--", 0) != 0 || !a.count(k.substr(2))) {
      std::fprintf(stderr, "kernel_bench: unknown flag %s\n", argv[i]);
      return 2;
    }
    a[k.substr(2)] = argv[i + 1];
  }
  zl::ThreadPool pool(std::atoi(a["threads"].c_str()));
  const int64_t n_in = std::atoll(a["n-in"].c_str()), n_out = std::atoll(a["n-out"].c_str());
  const int64_t n_tokens = std::atoll(a["tokens"].c_str());
  const int rounds = std::atoi(a["rounds"].c_str());
  const size_t budget = static_cast<size_t>(std::atoll(a["mib"].c_str())) << 20;
  const bool cpu = a["cpu"] == "1";
  if (cpu && pool.n_threads() != 1) {
    std::fprintf(stderr, "kernel_bench: --cpu 1 needs --threads 1 (it times the calling thread)\n");
    return 2;
  }
  std::printf("isa %s, threads %d, %lld x %lld matrices, %lld token(s)\n", zl::isa_name(zl::active_isa()),
              pool.n_threads(), static_cast<long long>(n_out), static_cast<long long>(n_in),
              static_cast<long long>(n_tokens));
  // Prefill/batches are compute bound: GFLOP/s (2 per multiply-add) says more there.
  const bool gemm = n_tokens > 1;
  if (cpu) std::printf("| type | matrices | GB per CPU second | GFLOP per CPU second | CPU ms per round |\n|---|---|---|---|---|\n");
  else
  std::printf("| type | matrices | GB/s | bandwidth GB/s | fraction |%s\n|---|---|---|---|---|%s\n",
              gemm ? " GFLOP/s |" : "", gemm ? "---|" : "");
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n_in * n_tokens)), y(static_cast<size_t>(n_out * n_tokens));
  for (float& v : x) v = dist(rng);
  for (const std::string& name : split(a["types"])) {
    // Any type the kernels support (format/ggml_type.h).
    const std::optional<zl::GgmlType> parsed = zl::parse_ggml_type(name);
    const auto traits = parsed ? zl::ggml_type_traits(static_cast<uint32_t>(*parsed)) : std::nullopt;
    if (!traits || !traits->supported) {
      std::fprintf(stderr, "kernel_bench: unknown type %s (supported: %s)\n", name.c_str(),
                   zl::supported_ggml_type_names().c_str());
      return 2;
    }
    const zl::GgmlType type = *parsed;
    const size_t row = zl::row_size(type, n_in), bytes = row * static_cast<size_t>(n_out);
    const int64_t n_mats = std::max<int64_t>(1, static_cast<int64_t>(budget / bytes));
    // One random matrix quantized, copied (with a changed byte per row so
    // that no two are identical in cache) into the others.
    std::vector<float> wf(static_cast<size_t>(n_in));
    std::vector<uint8_t> proto(bytes);
    for (int64_t r = 0; r < n_out; ++r) {
      for (float& v : wf) v = dist(rng) * 0.02f;
      zl::quantize_row(type, wf.data(), proto.data() + r * row, n_in);
    }
    std::vector<std::unique_ptr<uint8_t[]>> raw;
    std::vector<zl::PackedMatrix> mats;
    for (int64_t m = 0; m < n_mats; ++m) {
      raw.emplace_back(new uint8_t[bytes]);
      std::copy(proto.begin(), proto.end(), raw.back().get());
      mats.emplace_back(type, raw.back().get(), n_in, n_out);
    }
    // Repacking made a copy: the originals are not read again.
    if (mats[0].repacked()) raw.clear();
    std::vector<double> fracs, gbs, bws, gflops;
    if (cpu) {
      auto thread_seconds = [] {
        timespec ts{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
      };
      std::vector<double> ms;
      for (int r = 0; r < rounds + 1; ++r) {
        const double c0 = thread_seconds();
        for (const auto& m : mats) zl::matmul(m, x.data(), n_tokens, y.data(), &pool);
        const double s = thread_seconds() - c0;
        if (r == 0) continue;  // warm-up
        ms.push_back(1e3 * s);
        gbs.push_back(static_cast<double>(bytes) * static_cast<double>(n_mats) / s / 1e9);
        gflops.push_back(2.0 * static_cast<double>(n_in * n_out * n_tokens * n_mats) / s / 1e9);
      }
      std::printf("| %s | %lld | %.1f | %.1f | %.3f |\n", name.c_str(), static_cast<long long>(n_mats),
                  *std::max_element(gbs.begin(), gbs.end()), *std::max_element(gflops.begin(), gflops.end()),
                  *std::min_element(ms.begin(), ms.end()));
      std::fflush(stdout);
      continue;
    }
    for (int r = 0; r < rounds + 1; ++r) {
      const auto bw_or = zl::measure_read_bandwidth_gbs(&pool, size_t{1} << 30, 1);
      if (!bw_or.ok()) {
        std::fprintf(stderr, "kernel_bench: %s\n", bw_or.status().to_string().c_str());
        return 1;
      }
      const double bw = *bw_or;
      const auto t0 = std::chrono::steady_clock::now();
      for (const auto& m : mats) zl::matmul(m, x.data(), n_tokens, y.data(), &pool);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (r == 0) continue;  // warm-up
      const double g = static_cast<double>(bytes) * static_cast<double>(n_mats) / s / 1e9;
      gbs.push_back(g);
      bws.push_back(bw);
      fracs.push_back(g / bw);
      gflops.push_back(2.0 * static_cast<double>(n_in * n_out * n_tokens * n_mats) / s / 1e9);
    }
    std::printf("| %s | %lld | %.1f | %.1f | %.1f%% |", name.c_str(), static_cast<long long>(n_mats), median(gbs),
                median(bws), 100 * median(fracs));
    if (gemm) std::printf(" %.0f |", median(gflops));
    std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}
