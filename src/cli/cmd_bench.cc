// `zerolayer bench`: llama-bench-style throughput of the forward pass, each
// figure next to the machine bound measured in the same run.
//
//   pp128/pp512  prompt processing: one forward of N tokens (last logits only)
//   tg128        generation: 128 forwards of one token each, from position 0
//                (pp and tg over an F16 KV cache, as the engine serves and
//                llama-bench measures)
//   batched[B]   aggregate decode: B independent sequences (a 32-token
//                prompt each, prefilled untimed) decoding together through the
//                engine's ModelRunner with an F16 paged KV cache: every step
//                is one forward of B tokens, one per sequence, each attending
//                its own context — the engine's decode step without the
//                scheduler and sampler.
//                The four run in rounds (B = 1, 4, 8, 16, then again), so
//                that b16_vs_b1_round_median, the median of each round's own
//                B=16 / B=1, compares the two in the same minutes.
// Each figure is the best of --reps runs (the machine is shared and noisy);
// cpu_share = process CPU time / (wall time x threads) over the timed runs
// says how much of the machine the bench actually got.
//
// decode_roofline pairs each measurement with its bound: 128 timed decode
// steps in windows of 8 tokens, each window right after one pass of the
// bandwidth test (and one untimed decode step that warms what the pass
// evicted), so that both see the same load on the machine; the figure is the
// median over windows of (weight bytes x window t/s) / window bandwidth, and
// bandwidth_gbs the median bandwidth sample.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "api/json_util.h"  // append_json_string
#include "cli/model_loading.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "kernels/peak.h"
#include "model/forward.h"
#include "model/runner.h"

namespace zl::cli {
namespace {

// Runs per figure at most: each is a full pass of the figure (seconds on a
// large model), and the count is narrowed to int.
constexpr int64_t kMaxReps = 1000;

struct BenchContext {
  const Model& model;
  ThreadPool* pool;
  std::shared_ptr<const PackedWeights> weights;
  int reps;
  std::vector<int32_t> ids;  // random token ids
};

double seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Tokens per second of `n_steps` forwards of `chunk` tokens each on a fresh
// context; best of ctx.reps.
Result<double> tokens_per_second(BenchContext& ctx, int64_t n_steps, int64_t chunk, bool all_logits) {
  double best = 0;
  for (int rep = 0; rep < ctx.reps; ++rep) {
    ReferenceForward fwd(ctx.model, n_steps * chunk, ctx.pool, ctx.weights, KvType::kF16);
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t s = 0; s < n_steps; ++s) {
      std::span<const int32_t> tokens(ctx.ids.data() + s * chunk, static_cast<size_t>(chunk));
      auto r = fwd.forward(tokens, all_logits);
      if (!r.ok()) return r.status();
    }
    best = std::max(best, static_cast<double>(n_steps * chunk) / seconds(t0));
  }
  return best;
}

// Aggregate tokens/s of B sequences decoding `n_steps` tokens each in one
// batch per step (see the file comment); best of `reps`.
Result<double> batched_decode_tps(BenchContext& ctx, int64_t b, int64_t n_steps, int reps) {
  constexpr int64_t kBlock = 16, kPrompt = 32;
  const int64_t blocks_per_seq = (kPrompt + n_steps + kBlock - 1) / kBlock;
  const int64_t n_ids = static_cast<int64_t>(ctx.ids.size());
  double best = 0;
  for (int rep = 0; rep < reps; ++rep) {
    ModelRunner runner(ctx.model, ctx.pool, ctx.weights);
    ASSIGN_OR_RETURN(KvStorage kv, KvStorage::create(ctx.model.config, b * blocks_per_seq, kBlock, KvType::kF16));
    std::vector<std::vector<int32_t>> tables(b);
    for (int64_t s = 0; s < b; ++s) {
      for (int64_t i = 0; i < blocks_per_seq; ++i) tables[s].push_back(static_cast<int32_t>(s * blocks_per_seq + i));
    }
    std::vector<BatchSequence> batch(b);
    std::vector<float> logits;
    for (int64_t s = 0; s < b; ++s) {
      batch[s] = {.tokens = std::span(ctx.ids).subspan((s * kPrompt) % (n_ids - kPrompt), kPrompt),
                  .n_past = 0, .block_table = tables[s], .want_logits = false};
    }
    RETURN_IF_ERROR(runner.forward(batch, kv, logits));
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t step = 0; step < n_steps; ++step) {
      for (int64_t s = 0; s < b; ++s) {
        batch[s] = {.tokens = std::span(ctx.ids).subspan((s * 7 + step) % n_ids, 1), .n_past = kPrompt + step,
                    .block_table = tables[s], .want_logits = true};
      }
      logits.clear();
      RETURN_IF_ERROR(runner.forward(batch, kv, logits));
    }
    best = std::max(best, static_cast<double>(b * n_steps) / seconds(t0));
  }
  return best;
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct RooflineWindows {
  double ratio = 0;          // median of per-window roofline fractions
  double bandwidth_gbs = 0;  // median bandwidth sample
};

// "a,b,c" -> {"a", "b", "c"} (empty items kept: they fail the caller's parse).
std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t comma; (comma = s.find(',', start)) != std::string::npos; start = comma + 1) {
    out.push_back(s.substr(start, comma - start));
  }
  out.push_back(s.substr(start));
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

Result<RooflineWindows> decode_roofline_windows(BenchContext& ctx, double bytes_per_token) {
  constexpr int kWindows = 16, kTokensPerWindow = 8, kWarmup = 1;
  constexpr int kStride = kTokensPerWindow + kWarmup;
  ReferenceForward fwd(ctx.model, kWindows * kStride, ctx.pool, ctx.weights, KvType::kF16);
  std::vector<double> ratios, bandwidths;
  for (int w = 0; w < kWindows; ++w) {
    ASSIGN_OR_RETURN(const double bw, measure_read_bandwidth_gbs(ctx.pool, size_t{1} << 30, /*n_passes=*/1));
    // One untimed token first: the 1 GiB read has just evicted every cache
    // and TLB entry a decode step keeps warm (code, activations, norms, KV),
    // which made the first token after it ~25% slower than steady decode.
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kStride; ++i) {
      if (i == kWarmup) t0 = std::chrono::steady_clock::now();
      auto r = fwd.forward(std::span<const int32_t>(ctx.ids.data() + w * kStride + i, 1), false);
      if (!r.ok()) return r.status();
    }
    const double tps = kTokensPerWindow / seconds(t0);
    bandwidths.push_back(bw);
    ratios.push_back(bytes_per_token * tps / (bw * 1e9));
  }
  return RooflineWindows{median(ratios), median(bandwidths)};
}

// Prints {"model": path<rest> on stdout (rest: the other members and the
// closing brace).
void print_json(const std::string& path, const char* rest) {
  std::string out = "{\"model\": ";
  api::append_json_string(out, path);
  out += rest;
  std::fwrite(out.data(), 1, out.size(), stdout);
}

// KV bytes one decode step reads with n_kv positions in the cache: per
// layer K and V rows of the positions it attends (a sliding-window layer at
// most its window).
double kv_bytes_per_step(const ModelConfig& c, KvType type, int64_t n_kv) {
  double bytes = 0;
  for (const LayerConfig& l : c.layers) {
    const int64_t seen = l.sliding_window > 0 ? std::min(n_kv, l.sliding_window) : n_kv;
    bytes += 2.0 * static_cast<double>(seen) * static_cast<double>(kv_row_bytes(type, c.kv_dim()));
  }
  return bytes;
}

// `bench --depth N`: long-context figures with a KV cache of `type`:
//   pp512        one forward of 512 tokens on a fresh context (the short-prompt rate)
//   prefill      N tokens in chunks of 512 (the engine's default step budget)
//   decode       tokens decoded after the N, in windows as decode_roofline_windows,
//                each window's roofline counting the weights plus the KV bytes
//                its steps read; decode at depth 0 (a fresh context) in the
//                same way, so that the step time splits into weights (the
//                depth-0 step) and attention over the context (the rest).
struct DepthFigures {
  double pp512 = 0, prefill_tps = 0, prefill_s = 0;
  double decode_tps = 0, decode_roofline = 0, bandwidth_gbs = 0, kv_bytes = 0;
  double decode0_tps = 0, decode0_roofline = 0;
  double attention_roofline = 0;  // attention alone at the depth (attention_roofline)
};

// One decode window: kTokens steps on `fwd` from where it stands, after a
// bandwidth pass and an untimed step (which warms what the pass evicted).
struct DecodeWindow {
  double tps = 0, roofline = 0, bandwidth_gbs = 0;
};

Result<DecodeWindow> decode_window(BenchContext& ctx, ReferenceForward& fwd, KvType type, double weight_bytes) {
  constexpr int kTokens = 8, kWarmup = 1;
  ASSIGN_OR_RETURN(const double bw, measure_read_bandwidth_gbs(ctx.pool, size_t{1} << 30, /*n_passes=*/1));
  auto t0 = std::chrono::steady_clock::now();
  double bytes = 0;
  for (int i = 0; i < kTokens + kWarmup; ++i) {
    if (i == kWarmup) t0 = std::chrono::steady_clock::now();
    if (i >= kWarmup) bytes += weight_bytes + kv_bytes_per_step(ctx.model.config, type, fwd.n_past() + 1);
    const int32_t id = ctx.ids[(fwd.n_past() * 7 + i) % ctx.ids.size()];
    auto r = fwd.forward(std::span<const int32_t>(&id, 1), false);
    if (!r.ok()) return r.status();
  }
  const double dt = seconds(t0);
  return DecodeWindow{kTokens / dt, bytes / dt / (bw * 1e9), bw};
}

// Steps a decode window takes (with its untimed one).
constexpr int64_t kWindowSteps = 9;

// Decode attention alone at depth n_kv: one query token over a KV cache of
// n_kv random positions in every layer (blocks of 16 in shuffled order, as
// the engine's pool hands them out), split by position range across the
// pool and merged, as the runner does; each of n_windows steps right after
// a bandwidth pass. Returns the median of (KV bytes / step time) / bandwidth:
// how close the kernels read K and V to the memory bound.
Result<double> attention_roofline(BenchContext& ctx, KvType type, int64_t n_kv, int n_windows) {
  const ModelConfig& c = ctx.model.config;
  constexpr int64_t kBlock = 16;
  const int64_t n_blocks = (n_kv + kBlock - 1) / kBlock;
  ASSIGN_OR_RETURN(KvStorage kv, KvStorage::create(c, n_blocks, kBlock, type));
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> row(c.kv_dim());
  for (int64_t il = 0; il < c.n_layer; ++il) {
    for (int64_t b = 0; b < n_blocks; ++b) {
      for (int64_t slot = 0; slot < kBlock; ++slot) {
        for (float& x : row) x = dist(rng);
        store_kv_row(type, row.data(), kv.k_row(il, b, slot), c.kv_dim());
        store_kv_row(type, row.data(), kv.v_row(il, b, slot), c.kv_dim());
      }
    }
  }
  std::vector<int32_t> table(n_blocks);
  for (int64_t i = 0; i < n_blocks; ++i) table[i] = static_cast<int32_t>(i);
  std::shuffle(table.begin(), table.end(), rng);
  std::vector<float> q(c.q_dim()), out(c.q_dim());
  for (float& x : q) x = dist(rng);
  const int64_t n_ranges = (n_kv + kAttentionRange - 1) / kAttentionRange;
  std::vector<double> ratios;
  for (int w = 0; w < n_windows; ++w) {
    ASSIGN_OR_RETURN(const double bw, measure_read_bandwidth_gbs(ctx.pool, size_t{1} << 30, /*n_passes=*/1));
    const auto t0 = std::chrono::steady_clock::now();
    double bytes = 0;
    for (int64_t il = 0; il < c.n_layer; ++il) {
      const AttentionShape shape{.n_head = c.n_head, .n_head_kv = c.n_head_kv, .head_dim = c.head_dim,
                                 .block_size = kBlock, .scale = c.attn_scale, .window = c.layers[il].sliding_window};
      if (!attention_range_supported(shape)) return unsupported("no SIMD attention for this model's head_dim");
      const int64_t first = attention_first_position(shape, n_kv) / kAttentionRange;
      const int64_t pf = attention_partial_floats(shape);
      std::vector<float> partials((n_ranges - first) * pf);
      ctx.pool->parallel_for(n_ranges - first, [&](int64_t j0, int64_t j1) {
        for (int64_t j = j0; j < j1; ++j) {
          attention_range(shape, q.data(), kv.k_layer(il), kv.v_layer(il), type, table.data(), n_kv, first + j,
                          &partials[j * pf]);
        }
      });
      attention_merge(shape, partials.data(), n_ranges - first, out.data());
      const int64_t seen = n_kv - attention_first_position(shape, n_kv);
      bytes += 2.0 * static_cast<double>(seen) * static_cast<double>(kv_row_bytes(type, c.kv_dim()));
    }
    ratios.push_back(bytes / seconds(t0) / (bw * 1e9));
  }
  return median(ratios);
}

// The figures of `bench --depth` for each KV type in `types`: per type in
// turn pp512, decode at depth 0 and the prefill of `depth` tokens; then the
// decode windows at depth of all types interleaved (window w of every type,
// then window w + 1, the order reversed every other round), so that the types share the machine's load window by
// window and pair_ratios[i] (type i's window rate over the first type's, per
// window) compares them in the same minutes.
struct DepthRun {
  KvType type;
  DepthFigures f;
  std::vector<double> pair_ratios;  // against types[0], one a window
};

Result<std::vector<DepthRun>> depth_figures(BenchContext& ctx, int64_t depth, const std::vector<KvType>& types) {
  constexpr int kWindows = 8;
  constexpr int64_t kChunk = 512;
  const double weight_bytes = static_cast<double>(ctx.weights->n_bytes_per_token());
  const int64_t n_decode = kWindows * kWindowSteps;
  std::vector<DepthRun> runs;
  std::vector<std::unique_ptr<ReferenceForward>> at_depth;
  for (KvType type : types) {
    DepthFigures& f = runs.emplace_back(DepthRun{type, {}, {}}).f;
    ASSIGN_OR_RETURN(f.attention_roofline, attention_roofline(ctx, type, depth, 16));
    for (int rep = 0; rep < ctx.reps; ++rep) {
      ReferenceForward fwd(ctx.model, kChunk, ctx.pool, ctx.weights, type);
      const auto t0 = std::chrono::steady_clock::now();
      auto r = fwd.forward(std::span<const int32_t>(ctx.ids.data(), kChunk), false);
      if (!r.ok()) return r.status();
      f.pp512 = std::max(f.pp512, kChunk / seconds(t0));
    }
    {
      ReferenceForward fwd(ctx.model, n_decode + 1, ctx.pool, ctx.weights, type);
      std::vector<double> tps, ratios;
      for (int w = 0; w < kWindows; ++w) {
        ASSIGN_OR_RETURN(const DecodeWindow d, decode_window(ctx, fwd, type, weight_bytes));
        tps.push_back(d.tps), ratios.push_back(d.roofline);
      }
      f.decode0_tps = median(tps), f.decode0_roofline = median(ratios);
    }
    auto& fwd = at_depth.emplace_back(
        std::make_unique<ReferenceForward>(ctx.model, depth + n_decode + 1, ctx.pool, ctx.weights, type));
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t p = 0; p < depth; p += kChunk) {
      const int64_t n = std::min(kChunk, depth - p);
      auto r = fwd->forward(std::span<const int32_t>(ctx.ids.data() + p, static_cast<size_t>(n)), false);
      if (!r.ok()) return r.status();
    }
    f.prefill_s = seconds(t0);
    f.prefill_tps = static_cast<double>(depth) / f.prefill_s;
    f.kv_bytes = kv_bytes_per_step(ctx.model.config, type, depth + 1);
  }
  // Window w of every type, the order reversed every other round (A B, B A,
  // ...) so that no type always follows another.
  std::vector<std::vector<DecodeWindow>> windows(runs.size());
  for (int w = 0; w < kWindows; ++w) {
    for (size_t k = 0; k < runs.size(); ++k) {
      const size_t i = w % 2 ? runs.size() - 1 - k : k;
      ASSIGN_OR_RETURN(const DecodeWindow d, decode_window(ctx, *at_depth[i], runs[i].type, weight_bytes));
      windows[i].push_back(d);
    }
    for (size_t i = 0; i < runs.size(); ++i) runs[i].pair_ratios.push_back(windows[i][w].tps / windows[0][w].tps);
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    std::vector<double> tps, ratios, bws;
    for (const DecodeWindow& d : windows[i]) tps.push_back(d.tps), ratios.push_back(d.roofline), bws.push_back(d.bandwidth_gbs);
    DepthFigures& f = runs[i].f;
    f.decode_tps = median(tps), f.decode_roofline = median(ratios), f.bandwidth_gbs = median(bws);
  }
  return runs;
}

// The members of one KV type's figures, without braces.
std::string depth_json_members(const DepthRun& run, double weight_bytes) {
  const DepthFigures& f = run.f;
  const double attention_share = f.decode_tps > 0 ? std::max(0.0, 1.0 - f.decode_tps / f.decode0_tps) : 0;
  char buf[768];
  std::snprintf(buf, sizeof buf,
                "\"kv_type\": \"%s\", \"pp512\": %.2f, \"prefill_tokens_per_s\": %.2f, \"prefill_vs_pp512\": %.4f, "
                "\"decode_tokens_per_s\": %.2f, \"decode_roofline\": %.4f, \"decode0_tokens_per_s\": %.2f, "
                "\"decode0_roofline\": %.4f, \"attention_share\": %.4f, \"weight_bytes_per_token\": %.0f, "
                "\"kv_bytes_per_step\": %.0f, \"attention_roofline\": %.4f, \"bandwidth_gbs\": %.2f",
                kv_type_name(run.type), f.pp512, f.prefill_tps, f.pp512 > 0 ? f.prefill_tps / f.pp512 : 0.0,
                f.decode_tps, f.decode_roofline, f.decode0_tps, f.decode0_roofline, attention_share, weight_bytes,
                f.kv_bytes, f.attention_roofline, f.bandwidth_gbs);
  return buf;
}

int report_depth(BenchContext& ctx, const std::string& path, int n_threads, int64_t depth,
                 const std::vector<KvType>& types, bool json) {
  auto runs = depth_figures(ctx, depth, types);
  if (!runs.ok()) return report_error("bench", runs.status());
  const double weight_bytes = static_cast<double>(ctx.weights->n_bytes_per_token());
  const std::string first = kv_type_name(types[0]);
  if (json) {
    char head[256];
    std::snprintf(head, sizeof head, ", \"threads\": %d, \"kernels\": \"%s\", \"depth\": %lld, ", n_threads,
                  isa_name(active_isa()), static_cast<long long>(depth));
    std::string rest = head;
    if (runs->size() == 1) {
      rest += depth_json_members(runs->front(), weight_bytes);
    } else {
      // Several types: one object each, and each type's decode rate at the
      // depth over the first type's, window by window (median, min, max).
      rest += "\"kv_types\": [";
      for (size_t i = 0; i < runs->size(); ++i) {
        if (i > 0) rest += ", ";
        rest += "{";
        rest += depth_json_members((*runs)[i], weight_bytes);
        const auto& pr = (*runs)[i].pair_ratios;
        char ratio[192];
        std::snprintf(ratio, sizeof ratio,
                      ", \"decode_vs_first\": %.4f, \"decode_vs_first_min\": %.4f, \"decode_vs_first_max\": %.4f}",
                      median(pr), *std::min_element(pr.begin(), pr.end()), *std::max_element(pr.begin(), pr.end()));
        rest += ratio;
      }
      rest += "]";
    }
    rest += "}\n";
    print_json(path, rest.c_str());
    return kExitOk;
  }
  for (const DepthRun& run : *runs) {
    const DepthFigures& f = run.f;
    const double attention_share = f.decode_tps > 0 ? std::max(0.0, 1.0 - f.decode_tps / f.decode0_tps) : 0;
    if (&run != &runs->front()) std::printf("\n");
    std::printf("model %s, %d threads, %s kernels, KV cache %s, depth %lld\n", path.c_str(), n_threads,
                isa_name(active_isa()), kv_type_name(run.type), static_cast<long long>(depth));
    std::printf("bytes / decode step    %8.1f MB weights + %.1f MB KV; bandwidth %.2f GB/s (median)\n\n",
                weight_bytes / 1e6, f.kv_bytes / 1e6, f.bandwidth_gbs);
    std::printf("%-22s %10s\n", "test", "t/s");
    std::printf("%-22s %10.2f\n", "pp512", f.pp512);
    std::printf("%-22s %10.2f   (%.1f%% of pp512, %.1f s)\n", ("prefill " + std::to_string(depth)).c_str(),
                f.prefill_tps, f.pp512 > 0 ? 100 * f.prefill_tps / f.pp512 : 0.0, f.prefill_s);
    std::printf("%-22s %10.2f   (%.1f%% of the weights roofline)\n", "decode at depth 0", f.decode0_tps,
                100 * f.decode0_roofline);
    std::printf("%-22s %10.2f   (%.1f%% of the weights + KV roofline)\n",
                ("decode at " + std::to_string(depth)).c_str(), f.decode_tps, 100 * f.decode_roofline);
    std::printf("%-22s %10s   (%.1f%% of the KV roofline: split attention alone, K and V read once)\n",
                "attention alone", "", 100 * f.attention_roofline);
    std::printf("\nattention over the context: %.0f%% of a decode step at depth %lld (1 - depth rate / depth-0 rate)\n",
                100 * attention_share, static_cast<long long>(depth));
  }
  if (runs->size() > 1) {
    std::printf("\ndecode at depth %lld against %s, window by window (each pair measured in the same minute):\n",
                static_cast<long long>(depth), first.c_str());
    for (size_t i = 1; i < runs->size(); ++i) {
      const auto& pr = (*runs)[i].pair_ratios;
      std::printf("  %-6s %.3fx (median of %zu windows; %.3f to %.3f)\n", kv_type_name((*runs)[i].type), median(pr),
                  pr.size(), *std::min_element(pr.begin(), pr.end()), *std::max_element(pr.begin(), pr.end()));
    }
  }
  return kExitOk;
}

// Multiply-adds per token of the layer matrices (prompt tokens skip the output).
double layer_macs_per_token(const Model& model) {
  double macs = 0;
  for (const LayerWeights& l : model.layers) {
    for (const GgufTensor* t : {l.wq, l.wk, l.wv, l.wqkv, l.wo, l.ffn_gate, l.ffn_up, l.ffn_down, l.ffn_gate_inp}) {
      if (t) macs += static_cast<double>(t->ne[0]) * static_cast<double>(t->ne[1]);
    }
    // Mixture of experts: the experts a token uses (expert_used_count of them).
    for (const GgufTensor* t : {l.ffn_gate_exps, l.ffn_up_exps, l.ffn_down_exps}) {
      if (t) macs += static_cast<double>(t->ne[0]) * static_cast<double>(t->ne[1]) * static_cast<double>(model.config.n_expert_used);
    }
  }
  return macs;
}

}  // namespace

int cmd_bench(int argc, char** argv, int first) {
  int code = 0;
  auto args = parse_command(argc, argv, first, "bench",
                            "--model PATH [--threads N] [--reps N] [--depth N [--kv-type T[,T2...]]] [--json]",
                            {{"model", true, "GGUF model file"},
                             {"threads", true, "compute threads (default: all cores)"},
                             {"reps", true, "runs per figure, the best is reported (default 2)"},
                             {"depth", true, "long context: prefill N tokens, then decode after them"},
                             {"kv-type", true, "KV cache type of --depth: f16 (default), q8_0 or f32; a comma list (f16,q8_0) interleaves their decode windows and compares each with the first"},
                             {"json", false, "print one JSON object"}},
                            &code);
  if (!args) return code;
  if (!args->has("model")) return report_error("bench", invalid_argument("--model is required"));
  auto threads = args->get_int_in("threads", 0, 0, kMaxThreads);
  auto reps = args->get_int_in("reps", 2, 1, kMaxReps);
  if (!threads.ok()) return report_error("bench", threads.status());
  if (!reps.ok()) return report_error("bench", reps.status());
  // From 1: --depth 0 would measure nothing --depth N does not (decode at depth 0 is in every
  // --depth run) and divide its prefill of no tokens by no time. -1: not given.
  auto depth = args->get_int_in("depth", -1, 1, 1 << 20);
  if (!depth.ok()) return report_error("bench", depth.status());
  // --kv-type T or a comma list (T1,T2,...): the types' decode windows at the
  // depth interleaved, and each compared with the first.
  std::vector<KvType> kv_types;
  for (const std::string& name : split_list(args->get_or("kv-type", "f16"))) {
    KvType t;
    if (!parse_kv_type(name.c_str(), &t)) {
      return report_error("bench", invalid_argument("--kv-type must be f16, q8_0 or f32, or a comma list of them"));
    }
    if (std::find(kv_types.begin(), kv_types.end(), t) != kv_types.end()) {
      return report_error("bench", invalid_argument("--kv-type names " + name + " twice"));
    }
    kv_types.push_back(t);
  }
  if (kv_types.empty()) return report_error("bench", invalid_argument("--kv-type must name a type"));
  if (args->has("kv-type") && !args->has("depth")) {
    return report_error("bench", invalid_argument("--kv-type applies to --depth runs"));
  }
  auto loaded = load_model_with_progress(*args->get("model"));
  if (!loaded.ok()) return report_error("bench", loaded.status());
  const Model& model = *loaded->model;
  ThreadPool pool(static_cast<int>(*threads));
  BenchContext ctx{model, &pool, loaded->weights, static_cast<int>(*reps), {}};
  std::mt19937 rng(42);
  std::uniform_int_distribution<int32_t> id_dist(0, static_cast<int32_t>(model.config.n_vocab - 1));
  for (int64_t i = 0; i < std::max<int64_t>(1024, *depth + 512); ++i) ctx.ids.push_back(id_dist(rng));
  if (*depth >= 0) {
    for (KvType t : kv_types) {
      if (!kv_type_fits(t, model.config.kv_dim())) {
        return report_error("bench", invalid_argument(std::string("--kv-type ") + kv_type_name(t) +
                                                      " needs K/V rows of a multiple of 32 values"));
      }
    }
    if (model.config.n_ctx_train > 0 && *depth > model.config.n_ctx_train) {
      log::warn("--depth is larger than the context the model was trained on: past the training length the "
                "model's output may degrade (the speed figures stand)",
                {{"depth", *depth}, {"n_ctx_train", model.config.n_ctx_train}});
    }
    return report_depth(ctx, *args->get("model"), pool.n_threads(), *depth, kv_types, args->has("json"));
  }

  const double int8_peak_start = measure_int8_peak_gops(&pool);
  if (auto warm = tokens_per_second(ctx, 2, 8, false); !warm.ok()) return report_error("bench", warm.status());

  struct Figure {
    std::string name;
    int64_t n_steps, chunk;
    bool all_logits;
    double tps = 0;
  };
  std::vector<Figure> figs = {{"pp128", 1, 128, false}, {"pp512", 1, 512, false}, {"tg128", 128, 1, false}};
  for (int64_t b : {1, 4, 8, 16}) figs.push_back({std::to_string(b), 32, b, true});
  const double cpu0 = process_cpu_seconds();
  const auto wall0 = std::chrono::steady_clock::now();
  double int8_peak_gops = int8_peak_start;
  for (Figure& f : figs) {
    if (f.all_logits) continue;  // the batched figures: below
    // The int8 bound is re-measured around pp512 and the highest figure
    // kept (the conservative choice while the machine's load changes).
    if (f.name == "pp512") int8_peak_gops = std::max(int8_peak_gops, measure_int8_peak_gops(&pool));
    auto tps = tokens_per_second(ctx, f.n_steps, f.chunk, f.all_logits);
    if (!tps.ok()) return report_error("bench", tps.status());
    f.tps = *tps;
    if (f.name == "pp512") int8_peak_gops = std::max(int8_peak_gops, measure_int8_peak_gops(&pool));
  }
  // The batched figures in rounds (B = 1, 4, 8, 16 in turn, then again), each
  // figure the best of its rounds; and each round's own B=16 / B=1, whose
  // median compares the two in the same minutes.
  std::vector<double> b16_vs_b1;
  for (int rep = 0; rep < ctx.reps; ++rep) {
    double b1 = 0;
    for (Figure& f : figs) {
      if (!f.all_logits) continue;
      auto tps = batched_decode_tps(ctx, f.chunk, f.n_steps, 1);
      if (!tps.ok()) return report_error("bench", tps.status());
      f.tps = std::max(f.tps, *tps);
      if (f.chunk == 1) b1 = *tps;
      if (f.chunk == 16) b16_vs_b1.push_back(*tps / b1);
    }
  }
  const double b16_round_median = median(b16_vs_b1);
  const double cpu_share = (process_cpu_seconds() - cpu0) / (seconds(wall0) * pool.n_threads());
  const double weight_bytes = static_cast<double>(ctx.weights->n_bytes_per_token());
  auto windows = decode_roofline_windows(ctx, weight_bytes);
  if (!windows.ok()) return report_error("bench", windows.status());
  const double bandwidth_gbs = windows->bandwidth_gbs;
  const double tg = figs[2].tps;
  const double roofline = windows->ratio;
  const double pp_fraction = figs[1].tps * 2 * layer_macs_per_token(model) / (int8_peak_gops * 1e9);

  const std::string path = *args->get("model");
  if (args->has("json")) {
    char buf[1024];
    std::snprintf(buf, sizeof buf,
                  ", \"threads\": %d, \"kernels\": \"%s\", \"pp128\": %.2f, \"pp512\": %.2f, \"tg128\": %.2f, "
                  "\"batched\": {\"1\": %.2f, \"4\": %.2f, \"8\": %.2f, \"16\": %.2f}, \"bandwidth_gbs\": %.2f, "
                  "\"weight_bytes_per_token\": %.0f, \"decode_roofline\": %.4f, \"int8_peak_gops\": %.1f, "
                  "\"pp512_int8_fraction\": %.4f, \"b16_vs_b1_round_median\": %.4f, \"cpu_share\": %.3f}\n",
                  pool.n_threads(), isa_name(active_isa()), figs[0].tps, figs[1].tps, tg, figs[3].tps, figs[4].tps,
                  figs[5].tps, figs[6].tps, bandwidth_gbs, weight_bytes, roofline, int8_peak_gops, pp_fraction, b16_round_median, cpu_share);
    print_json(path, buf);
    return kExitOk;
  }
  std::printf("model %s, %d threads, %s kernels, best of %d\n", path.c_str(), pool.n_threads(),
              isa_name(active_isa()), ctx.reps);
  std::printf("memory read bandwidth  %8.2f GB/s\nint8 peak              %8.1f GOPS\n", bandwidth_gbs,
              int8_peak_gops);
  std::printf("weight bytes / token   %8.1f MB\n\n%-14s %10s\n", weight_bytes / 1e6, "test", "t/s");
  for (size_t i = 0; i < figs.size(); ++i) {
    const std::string name = i < 3 ? figs[i].name : "batched B=" + figs[i].name;
    std::printf("%-14s %10.2f\n", name.c_str(), figs[i].tps);
  }
  std::printf("\ndecode at %.1f%% of the memory roofline (median of 16 windows, each against the bandwidth\n"
              "measured just before it; %.1f t/s bound at the median bandwidth)\n",
              100 * roofline, bandwidth_gbs * 1e9 / weight_bytes);
  std::printf("pp512 at %.1f%% of the int8 peak; B=16 aggregate = %.2fx B=1 (best of each; the median of the %d\n"
              "rounds' own ratios, B=1 and B=16 measured in the same round: %.2fx)\n",
              100 * pp_fraction, figs[6].tps / figs[3].tps, ctx.reps, b16_round_median);
  std::printf("cpu share %.0f%% (below 100%%: other processes took the rest; figures are wall-clock)\n",
              100 * cpu_share);
  return kExitOk;
}

}  // namespace zl::cli
