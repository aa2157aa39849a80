// Batched decode steps alone: the step `zerolayer bench` times as
// "batched B=", repeated for several batch sizes in alternation, with the
// process CPU time of each step next to its wall time (on a machine shared
// with other builds the CPU time, which the time other processes take does
// not inflate, is the steadier figure). For profiling (perf record) and for
// before/after comparisons of the decode path (bench/README.md).
//
//   batch_decode_bench --model PATH [--batch 1,16] [--steps 32] [--rounds 3] [--threads 2]
//                      [--dump PREFIX]
//
// Per round and batch size B: a fresh ModelRunner and F16 paged KV cache, B
// sequences of a 32-token prompt (prefilled untimed, random ids), then
// --steps forwards of B tokens (one per sequence, logits for every one).
// Prints per round and B: ms per step (wall, CPU of all threads) and
// tokens/s; then the medians over rounds and, per round, the ratio of each
// B's tokens/s to the first B's (the batched scaling, same round). --dump
// writes the logits of every step of round 0 to PREFIX.B<b>.f32 (raw
// floats), to compare two builds byte for byte (cmp). Not a test.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "cli/model_loading.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "model/runner.h"

namespace {

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

std::vector<int64_t> split_ints(const std::string& s) {
  std::vector<int64_t> out;
  size_t p = 0;
  while (p < s.size()) {
    const size_t q = s.find(',', p);
    out.push_back(std::atoll(s.substr(p, q == std::string::npos ? std::string::npos : q - p).c_str()));
    if (q == std::string::npos) break;
    p = q + 1;
  }
  return out;
}

struct StepTimes {
  double wall_ms = 0, cpu_ms = 0, tps = 0;
};

// B sequences decoding `n_steps` tokens together, as cmd_bench's batched_decode_tps.
zl::Result<StepTimes> run_batch(const zl::cli::LoadedModel& m, zl::ThreadPool* pool, const std::vector<int32_t>& ids,
                                int64_t b, int64_t n_steps, std::FILE* dump) {
  constexpr int64_t kBlock = 16, kPrompt = 32;
  const int64_t blocks_per_seq = (kPrompt + n_steps + kBlock - 1) / kBlock;
  const int64_t n_ids = static_cast<int64_t>(ids.size());
  zl::ModelRunner runner(*m.model, pool, m.weights);
  ASSIGN_OR_RETURN(zl::KvStorage kv,
                   zl::KvStorage::create(m.model->config, b * blocks_per_seq, kBlock, zl::KvType::kF16));
  std::vector<std::vector<int32_t>> tables(b);
  for (int64_t s = 0; s < b; ++s) {
    for (int64_t i = 0; i < blocks_per_seq; ++i) tables[s].push_back(static_cast<int32_t>(s * blocks_per_seq + i));
  }
  std::vector<zl::BatchSequence> batch(b);
  std::vector<float> logits;
  for (int64_t s = 0; s < b; ++s) {
    batch[s] = {.tokens = std::span(ids).subspan((s * kPrompt) % (n_ids - kPrompt), kPrompt),
                .n_past = 0, .block_table = tables[s], .want_logits = false};
  }
  RETURN_IF_ERROR(runner.forward(batch, kv, logits));
  const double c0 = process_cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t step = 0; step < n_steps; ++step) {
    for (int64_t s = 0; s < b; ++s) {
      batch[s] = {.tokens = std::span(ids).subspan((s * 7 + step) % n_ids, 1), .n_past = kPrompt + step,
                  .block_table = tables[s], .want_logits = true};
    }
    logits.clear();
    RETURN_IF_ERROR(runner.forward(batch, kv, logits));
    if (dump && std::fwrite(logits.data(), sizeof(float), logits.size(), dump) != logits.size()) {
      return zl::internal_error("short write of the logits dump");
    }
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = process_cpu_seconds() - c0;
  return StepTimes{.wall_ms = 1e3 * wall / static_cast<double>(n_steps),
                   .cpu_ms = 1e3 * cpu / static_cast<double>(n_steps),
                   .tps = static_cast<double>(b * n_steps) / wall};
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> a = {
      {"model", ""}, {"batch", "1,16"}, {"steps", "32"}, {"rounds", "3"}, {"threads", "2"}, {"dump", ""}};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k.rfind("--", 0) != 0 || !a.count(k.substr(2))) {
      std::fprintf(stderr, "batch_decode_bench: unknown flag %s\n", argv[i]);
      return 2;
    }
    a[k.substr(2)] = argv[i + 1];
  }
  const std::vector<int64_t> sizes = split_ints(a["batch"]);
  const int64_t n_steps = std::atoll(a["steps"].c_str());
  const int rounds = std::atoi(a["rounds"].c_str());
  if (a["model"].empty() || sizes.empty() || n_steps <= 0 || rounds <= 0 ||
      std::any_of(sizes.begin(), sizes.end(), [](int64_t b) { return b <= 0 || b > 1024; })) {
    std::fprintf(stderr,
                 "usage: batch_decode_bench --model PATH [--batch 1,16] [--steps 32] [--rounds 3] [--threads 2]\n");
    return 2;
  }
  auto loaded = zl::cli::load_model_with_progress(a["model"]);
  if (!loaded.ok()) {
    std::fprintf(stderr, "batch_decode_bench: %s\n", loaded.status().to_string().c_str());
    return 1;
  }
  zl::ThreadPool pool(std::atoi(a["threads"].c_str()));
  std::mt19937 rng(42);
  std::uniform_int_distribution<int32_t> id_dist(0, static_cast<int32_t>(loaded->model->config.n_vocab - 1));
  std::vector<int32_t> ids(1024);
  for (int32_t& id : ids) id = id_dist(rng);
  std::printf("%s, %d threads, %s kernels, %lld steps per figure\n", a["model"].c_str(), pool.n_threads(),
              zl::isa_name(zl::active_isa()), static_cast<long long>(n_steps));
  std::printf("| round | B | wall ms / step | CPU ms / step | tokens/s | vs B=%lld |\n|---|---|---|---|---|---|\n",
              static_cast<long long>(sizes[0]));
  std::vector<std::vector<StepTimes>> all(sizes.size());
  std::vector<std::vector<double>> ratios(sizes.size());
  for (int r = 0; r < rounds; ++r) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      std::FILE* dump = nullptr;
      if (r == 0 && !a["dump"].empty()) {
        const std::string path = a["dump"] + ".B" + std::to_string(sizes[i]) + ".f32";
        dump = std::fopen(path.c_str(), "wb");
        if (!dump) {
          std::fprintf(stderr, "batch_decode_bench: cannot write %s\n", path.c_str());
          return 1;
        }
      }
      auto t = run_batch(*loaded, &pool, ids, sizes[i], n_steps, dump);
      if (dump) std::fclose(dump);
      if (!t.ok()) {
        std::fprintf(stderr, "batch_decode_bench: %s\n", t.status().to_string().c_str());
        return 1;
      }
      all[i].push_back(*t);
      ratios[i].push_back(t->tps / all[0].back().tps);
      std::printf("| %d | %lld | %.2f | %.2f | %.1f | %.2f |\n", r, static_cast<long long>(sizes[i]), t->wall_ms,
                  t->cpu_ms, t->tps, ratios[i].back());
      std::fflush(stdout);
    }
  }
  std::printf("\nmedians over %d rounds:\n| B | wall ms / step | CPU ms / step | tokens/s | vs B=%lld |\n"
              "|---|---|---|---|---|\n",
              rounds, static_cast<long long>(sizes[0]));
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::vector<double> w, c, t;
    for (const StepTimes& s : all[i]) w.push_back(s.wall_ms), c.push_back(s.cpu_ms), t.push_back(s.tps);
    std::printf("| %lld | %.2f | %.2f | %.1f | %.2f |\n", static_cast<long long>(sizes[i]), median(w), median(c),
                median(t), median(ratios[i]));
  }
  return 0;
}
