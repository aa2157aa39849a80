// Engine benchmark: drives zl::Engine directly (no HTTP) with N concurrent
// requests and reports aggregate decode throughput, time to first token and
// inter-token latency percentiles, and what the prefix cache saves.
//
//   engine_bench --model PATH [--concurrency 1,4,16,64] [--prompt 64] [--gen 64]
//                [--threads N] [--prefix 256] [--logprobs N] [--json]
//   engine_bench --model PATH --compare [--bursts 1,16,64] [--mix short,mixed]
//                [--reps 3] [--gen 64] [--threads N]
//
// --compare: the scheduling policies (engine/scheduler.h) side by side in the
// same run: per burst size and prompt mix (short: 20-40 tokens; mixed:
// 50-2000), `reps` rounds, each running the same burst (all requests
// submitted at once) on a latency-policy engine and a throughput-policy engine
// (in alternating order; one set of prepared weights), and reporting TTFT
// p50/p90/p99 and aggregate tokens/s (generated tokens over submit -> last
// token) as medians over the rounds, and the latency/throughput ratios (the
// median of the rounds' ratios).
//
// Each request has its own random prompt (so no accidental prefix sharing)
// and decodes greedily with ignore_eos, so every request generates exactly
// --gen tokens. The prefix run sends the same concurrency with a shared
// --prefix-token preamble, once with the prefix cache off and once warm.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cli/args.h"
#include "model/packed_weights.h"
#include "policy_table.h"
#include "engine/engine.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace zl {
namespace {

using Clock = std::chrono::steady_clock;

struct RunResult {
  int concurrency = 0;
  double wall_s = 0;
  int64_t n_generated = 0;
  int64_t n_prompt = 0;
  int64_t n_cached = 0;
  std::vector<double> ttft_ms;  // submit -> first token event
  std::vector<double> itl_ms;   // gaps between token events (per token)
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p / 100.0 * (v.size() - 1) + 0.5));
  return v[i];
}

// logprobs: Request::logprobs (-1: none).
RunResult run(Engine& engine, const std::vector<std::vector<int32_t>>& prompts, int n_gen, const std::string& tenant,
              int32_t logprobs = -1) {
  RunResult r;
  r.concurrency = static_cast<int>(prompts.size());
  std::vector<std::shared_ptr<RequestChannel>> channels;
  std::vector<Clock::time_point> t_submit(prompts.size());
  const auto t0 = Clock::now();
  for (size_t i = 0; i < prompts.size(); ++i) {
    Request req{.id = "bench-" + std::to_string(i), .tenant = tenant, .prompt_ids = prompts[i]};
    req.sampling.temperature = 0;
    req.stop.max_tokens = n_gen;
    req.stop.ignore_eos = true;
    req.return_token_ids = true;
    req.logprobs = logprobs;
    t_submit[i] = Clock::now();
    channels.push_back(engine.submit(std::move(req)));
  }
  std::vector<std::thread> readers;
  std::vector<RunResult> parts(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    readers.emplace_back([&, i] {
      RunResult& p = parts[i];
      Clock::time_point last{};
      for (bool done = false; !done;) {
        for (const Event& e : channels[i]->wait_and_drain(std::chrono::milliseconds(200))) {
          const auto now = Clock::now();
          const size_t n = e.token_ids.size();
          if (n > 0) {
            if (last == Clock::time_point{}) {
              p.ttft_ms.push_back(std::chrono::duration<double, std::milli>(now - t_submit[i]).count());
            } else {
              const double gap = std::chrono::duration<double, std::milli>(now - last).count();
              for (size_t k = 0; k < n; ++k) p.itl_ms.push_back(gap / n);
            }
            last = now;
          }
          if (e.kind != EventKind::kText) {
            p.n_generated = e.usage.n_generated_tokens;
            p.n_prompt = e.usage.n_prompt_tokens;
            p.n_cached = e.usage.n_cached_tokens;
            if (e.kind == EventKind::kError) std::fprintf(stderr, "request %zu: %s\n", i, e.error.to_string().c_str());
            done = true;
          }
        }
      }
    });
  }
  for (auto& t : readers) t.join();
  r.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  for (auto& p : parts) {
    r.n_generated += p.n_generated;
    r.n_prompt += p.n_prompt;
    r.n_cached += p.n_cached;
    r.ttft_ms.insert(r.ttft_ms.end(), p.ttft_ms.begin(), p.ttft_ms.end());
    r.itl_ms.insert(r.itl_ms.end(), p.itl_ms.begin(), p.itl_ms.end());
  }
  return r;
}

std::vector<int32_t> random_prompt(std::mt19937& rng, int n, int64_t n_vocab, int32_t bos) {
  std::vector<int32_t> p;
  if (bos >= 0) p.push_back(bos);
  while (static_cast<int>(p.size()) < n) p.push_back(static_cast<int32_t>(rng() % n_vocab));
  return p;
}

// ---- --compare: the two scheduling policies on the same bursts ----

zl::bench::BurstStats burst_stats(const RunResult& r) {
  return {.p50 = percentile(r.ttft_ms, 50), .p90 = percentile(r.ttft_ms, 90), .p99 = percentile(r.ttft_ms, 99),
          .tok_s = r.wall_s > 0 ? static_cast<double>(r.n_generated) / r.wall_s : 0};
}

std::vector<int32_t> burst_lengths(std::mt19937& rng, const std::string& mix, int n) {
  const bool mixed = mix == "mixed";
  std::uniform_int_distribution<int32_t> len(mixed ? 50 : 20, mixed ? 2000 : 40);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(len(rng));
  return out;
}

int compare_policies(const Model& model, const Tokenizer& tok, const cli::Args& args, int n_gen, int threads) {
  auto bursts = cli::parse_id_list(args.get_or("bursts", "1,16,64"));
  auto reps = args.get_int_in("reps", 3, 1, 1000);
  if (!bursts.ok() || !reps.ok() || bursts->empty() ||
      std::any_of(bursts->begin(), bursts->end(), [](int32_t b) { return b < 1 || b > 4096; })) {
    return cli::report_error("engine_bench", invalid_argument("--bursts must list sizes in [1, 4096], --reps >= 1"));
  }
  std::vector<std::string> mixes;
  for (const std::string& m : {std::string("short"), std::string("mixed")}) {
    if (args.get_or("mix", "short,mixed").find(m) != std::string::npos) mixes.push_back(m);
  }
  if (mixes.empty()) return cli::report_error("engine_bench", invalid_argument("--mix: short and/or mixed"));
  const int max_burst = *std::max_element(bursts->begin(), bursts->end());
  const bool any_mixed = std::find(mixes.begin(), mixes.end(), "mixed") != mixes.end();
  const int64_t n_ctx = (any_mixed ? 2000 : 40) + n_gen + 16;
  // The KV cache holds the largest burst whole (no preemption): the policies
  // differ in how they order and split the prefill, not in what fits.
  const int64_t n_kv = static_cast<int64_t>(max_burst) * ((any_mixed ? 1100 : 40) + n_gen + 32);
  auto weights = PackedWeights::create(model, {.name = "the model"});
  if (!weights.ok()) return cli::report_error("engine_bench", weights.status());
  std::vector<std::unique_ptr<Engine>> engines;
  for (SchedulePolicy policy : {SchedulePolicy::kLatency, SchedulePolicy::kThroughput}) {
    EngineConfig ec{.n_ctx = n_ctx, .max_seqs = max_burst, .n_kv_tokens = std::max(n_kv, n_ctx),
                    .schedule = policy, .n_threads = threads};
    auto e = Engine::create(model, tok, ec, *weights);
    if (!e.ok()) return cli::report_error("engine_bench", e.status());
    engines.push_back(std::move(e).value());
  }
  const int64_t n_vocab = model.config.n_vocab;
  const int32_t bos = tok.vocab().bos();
  std::mt19937 rng(7);
  for (auto& e : engines) run(*e, {random_prompt(rng, 8, n_vocab, bos)}, 4, "warmup");
  std::printf("policies, same run: %s, gen %d, %lld rounds each (medians; ratios: median of the rounds' ratios)\n",
              args.get("model")->c_str(), n_gen, static_cast<long long>(*reps));
  zl::bench::print_policy_header();
  for (int32_t burst : *bursts) {
    for (const std::string& mix : mixes) {
      std::vector<zl::bench::BurstStats> per[2];
      for (int rep = 0; rep < *reps; ++rep) {
        std::vector<std::vector<int32_t>> prompts;
        for (int32_t n : burst_lengths(rng, mix, burst)) prompts.push_back(random_prompt(rng, n, n_vocab, bos));
        zl::bench::BurstStats got[2];
        for (int k = 0; k < 2; ++k) {
          const int which = (rep + k) % 2;  // alternate which policy runs first
          // A fresh tenant: no prefix hits from the other engine's or an earlier round.
          got[which] = burst_stats(run(*engines[which], prompts, n_gen, "r" + std::to_string(rep) + mix));
        }
        per[0].push_back(got[0]);
        per[1].push_back(got[1]);
      }
      zl::bench::print_policy_rows(burst, mix, per);
    }
  }
  return 0;
}

int main_impl(int argc, char** argv) {
  int code = 0;
  auto args = cli::parse_command(argc, argv, 1, "engine_bench", "--model PATH [flags]",
                                 {{"model", true, "GGUF model"},
                                  {"concurrency", true, "comma-separated concurrency levels (default 1,4,16,64)"},
                                  {"prompt", true, "prompt tokens per request (default 64)"},
                                  {"gen", true, "generated tokens per request (default 64)"},
                                  {"prefix", true, "shared prefix tokens for the prefix-cache run (default 256)"},
                                  {"threads", true, "compute threads (default: all cores)"},
                                  {"logprobs", true, "each token's logprob and this many alternatives (default: none)"},
                                  {"compare", false, "the scheduling policies side by side on bursts (see the top comment)"},
                                  {"bursts", true, "--compare: burst sizes (default 1,16,64)"},
                                  {"mix", true, "--compare: prompt mixes, short and/or mixed (default short,mixed)"},
                                  {"reps", true, "--compare: rounds per burst and mix (default 3)"},
                                  {"json", false, "one JSON object"}},
                                 &code);
  if (!args) return code;
  if (!args->has("model")) return cli::report_error("engine_bench", invalid_argument("--model is required"));
  // Token counts size every prompt (and, with the levels, the KV cache:
  // Engine::create checks that against memory); levels as serve's --parallel.
  constexpr int64_t kMaxTokens = int64_t{1} << 20, kMaxConcurrency = 4096;
  auto levels = cli::parse_id_list(args->get_or("concurrency", "1,4,16,64"));
  auto n_prompt = args->get_int_in("prompt", 64, 1, kMaxTokens);
  auto n_gen = args->get_int_in("gen", 64, 1, kMaxTokens);
  auto n_prefix = args->get_int_in("prefix", 256, 0, kMaxTokens);
  auto threads = args->get_int_in("threads", 0, 0, cli::kMaxThreads);
  auto logprobs = args->get_int_in("logprobs", -1, -1, 20);
  for (const Status* s : {&levels.status(), &n_prompt.status(), &n_gen.status(), &n_prefix.status(), &threads.status(),
                          &logprobs.status()}) {
    if (!s->ok()) return cli::report_error("engine_bench", *s);
  }
  if (levels->empty() || std::any_of(levels->begin(), levels->end(), [](int32_t c) { return c < 1 || c > kMaxConcurrency; })) {
    return cli::report_error("engine_bench", invalid_argument("--concurrency must list levels in [1, 4096]"));
  }
  auto model = load_model(*args->get("model"));
  if (!model.ok()) return cli::report_error("engine_bench", model.status());
  auto tok = Tokenizer::from_gguf(*(*model)->file);
  if (!tok.ok()) return cli::report_error("engine_bench", tok.status());
  if (args->has("compare")) return compare_policies(**model, **tok, *args, static_cast<int>(*n_gen), static_cast<int>(*threads));
  const int64_t n_vocab = (*model)->config.n_vocab;
  const int32_t bos = (*tok)->vocab().bos();
  const int max_c = *std::max_element(levels->begin(), levels->end());
  const int64_t per_seq = std::max<int64_t>(*n_prompt, *n_prefix + 16) + *n_gen + 16;

  auto make_engine = [&](bool prefix_caching) {
    EngineConfig ec{.n_ctx = per_seq, .max_seqs = std::max(1, max_c), .n_kv_tokens = per_seq * std::max(1, max_c),
                    .n_threads = static_cast<int>(*threads), .prefix_caching = prefix_caching};
    return Engine::create(**model, **tok, ec);
  };
  auto engine = make_engine(true);
  if (!engine.ok()) return cli::report_error("engine_bench", engine.status());
  std::mt19937 rng(42);
  // Warm-up: page the weights in.
  run(**engine, {random_prompt(rng, 8, n_vocab, bos)}, 4, "warmup");

  const bool json = args->has("json");
  std::string out = "{\"model\": \"" + *args->get("model") + "\", \"threads\": " + std::to_string((*engine)->config().n_threads) +
                    ", \"prompt\": " + std::to_string(*n_prompt) + ", \"gen\": " + std::to_string(*n_gen) + ", \"runs\": [";
  if (!json) {
    std::printf("model %s, prompt %lld, gen %lld\n", args->get("model")->c_str(), static_cast<long long>(*n_prompt),
                static_cast<long long>(*n_gen));
    std::printf("%6s %10s %12s %10s %10s %10s %10s\n", "conc", "wall s", "gen t/s", "ttft p50", "ttft p99", "itl p50",
                "itl p99");
  }
  int idx = 0;
  for (int32_t c : *levels) {
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < c; ++i) prompts.push_back(random_prompt(rng, static_cast<int>(*n_prompt), n_vocab, bos));
    RunResult r = run(**engine, prompts, static_cast<int>(*n_gen), "t" + std::to_string(c), static_cast<int32_t>(*logprobs));
    const double tps = r.n_generated / r.wall_s;
    char buf[512];
    if (json) {
      std::snprintf(buf, sizeof buf,
                    "%s{\"concurrency\": %d, \"wall_s\": %.3f, \"gen_tokens_per_s\": %.1f, \"ttft_ms_p50\": %.2f, "
                    "\"ttft_ms_p99\": %.2f, \"itl_ms_p50\": %.2f, \"itl_ms_p99\": %.2f}",
                    idx++ ? ", " : "", c, r.wall_s, tps, percentile(r.ttft_ms, 50), percentile(r.ttft_ms, 99),
                    percentile(r.itl_ms, 50), percentile(r.itl_ms, 99));
      out += buf;
    } else {
      std::printf("%6d %10.2f %12.1f %10.1f %10.1f %10.2f %10.2f\n", c, r.wall_s, tps, percentile(r.ttft_ms, 50),
                  percentile(r.ttft_ms, 99), percentile(r.itl_ms, 50), percentile(r.itl_ms, 99));
    }
  }
  // Prefix cache: the same shared preamble, cold (cache off) and warm.
  const int c = std::min(max_c, 16);
  std::vector<int32_t> preamble = random_prompt(rng, static_cast<int>(*n_prefix), n_vocab, bos);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < c; ++i) {
    auto p = preamble;
    auto suffix = random_prompt(rng, 16, n_vocab, -1);
    p.insert(p.end(), suffix.begin(), suffix.end());
    prompts.push_back(p);
  }
  auto cold_engine = make_engine(false);
  RunResult cold = run(**cold_engine, prompts, 8, "p");
  run(**engine, {prompts[0]}, 1, "p");  // warm the cache with the preamble
  RunResult warm = run(**engine, prompts, 8, "p");
  const double saved = cold.wall_s > 0 ? 1.0 - warm.wall_s / cold.wall_s : 0;
  if (json) {
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "], \"prefix\": {\"concurrency\": %d, \"prefix_tokens\": %lld, \"cold_wall_s\": %.3f, "
                  "\"warm_wall_s\": %.3f, \"cold_ttft_ms_p50\": %.2f, \"warm_ttft_ms_p50\": %.2f, "
                  "\"cached_prompt_tokens\": %lld, \"prompt_tokens\": %lld, \"time_saved\": %.3f}}\n",
                  c, static_cast<long long>(*n_prefix), cold.wall_s, warm.wall_s, percentile(cold.ttft_ms, 50),
                  percentile(warm.ttft_ms, 50), static_cast<long long>(warm.n_cached),
                  static_cast<long long>(warm.n_prompt), saved);
    out += buf;
    std::fputs(out.c_str(), stdout);
  } else {
    std::printf("prefix cache (%d requests sharing %lld tokens): cold %.2f s (ttft p50 %.1f ms), warm %.2f s (ttft p50 %.1f "
                "ms), %lld of %lld prompt tokens cached, %.0f%% time saved\n",
                c, static_cast<long long>(*n_prefix), cold.wall_s, percentile(cold.ttft_ms, 50), warm.wall_s,
                percentile(warm.ttft_ms, 50), static_cast<long long>(warm.n_cached), static_cast<long long>(warm.n_prompt),
                100 * saved);
  }
  return 0;
}

}  // namespace
}  // namespace zl

int main(int argc, char** argv) { return zl::main_impl(argc, argv); }
