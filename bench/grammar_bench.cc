// Constrained decoding cost (bench/README.md): the per-token cost of the
// grammar mask on a 151k-token vocabulary (qwen2) and the 512-token one
// (stories260K), against the decode step of a 1B-shape model measured in the
// same run.
//
//   grammar_bench [--model 1B.gguf] [--outputs N] [--threads N] [--regex P | --gbnf G | --schema S]
//
// --regex / --gbnf / --schema: that grammar (a guided_regex pattern, a GBNF
// text, a JSON Schema's text) instead of the built-in schemas — to see what
// a client's grammar costs the engine thread, which computes every
// sequence's mask in turn.
//
// For each vocabulary and schema, N outputs are decoded by a stand-in for
// the model: at each step the engine's ConstrainedOutput computes the mask
// (timed: the grammar mask, its TokenMask and the sampler's apply_mask over
// a logits row, everything constrained decoding adds to a step), then a
// random allowed token is kept (not timed; biased toward tokens that close
// strings and containers, so outputs end). Reported: mean, median and p99
// per token, and the share of steps that walked the trie (a state not seen
// before in that output). With --model, the decode step is the engine's own
// (greedy, 32 tokens, median of 3), and each figure is also a percentage of it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/constraint.h"
#include "engine/engine.h"
#include "format/gguf.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

const char* kSchemas[][2] = {
    {"person", R"({"type":"object","properties":{"name":{"type":"string","maxLength":40},
      "age":{"type":"integer","minimum":0,"maximum":150},"email":{"type":"string","pattern":"^[a-z0-9.]+@[a-z]+\\.[a-z]{2,3}$"},
      "tags":{"type":"array","items":{"type":"string","maxLength":12},"maxItems":4},
      "address":{"type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}},"required":["city"]}},
      "required":["name","age","tags","address"],"additionalProperties":false})"},
    {"json_object", ""},
};

struct Stats {
  std::vector<double> us;
  int64_t n_walks = 0;
  uint64_t max_work = 0;  // the largest mask walk's matcher work
  int64_t n_truncated = 0;  // masks cut at TokenMasker::kMaxMaskWork
};

double pct(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

// end_early: stop an output at random where its end is allowed (the
// schemas); else the end is never picked: the output runs until nothing else
// is allowed, or 400 steps.
Stats run(const zl::grammar::TokenTrie& trie, const std::vector<std::string>& pieces, int32_t eos,
          const std::shared_ptr<const zl::grammar::Grammar>& g, int n_outputs, bool end_early) {
  Stats s;
  std::mt19937 rng(1);
  zl::TokenMask mask(static_cast<int32_t>(pieces.size()));
  std::vector<float> logits(pieces.size(), 0.0f);
  for (int out = 0; out < n_outputs; ++out) {
    zl::ConstrainedOutput c(zl::GrammarConstraint{.start = g, .end_when_complete = true}, trie, {eos});
    for (int step = 0; step < 400; ++step) {
      const auto t0 = Clock::now();
      const zl::TokenMask* m = c.mask(mask);
      zl::sampling::apply_mask(logits, *m);
      s.us.push_back(ms_since(t0) * 1000);
      s.n_truncated += c.mask_truncated();
      std::vector<int32_t> allowed, closing;
      for (int32_t id = 0; id < static_cast<int32_t>(pieces.size()); ++id) {
        if (m->forbidden(id) || (id == eos && !end_early)) continue;
        allowed.push_back(id);
        if (id != eos && std::strchr("\"]}", pieces[id][0])) closing.push_back(id);
      }
      std::fill(logits.begin(), logits.end(), 0.0f);
      if (allowed.empty()) break;
      if (std::find(allowed.begin(), allowed.end(), eos) != allowed.end() && rng() % 2 == 0) break;
      const auto& pick = !closing.empty() && rng() % 3 != 0 ? closing : allowed;
      const int32_t id = pick[rng() % pick.size()];
      if (id == eos) break;
      c.accept(id, pieces[id]);
      if (c.phase() == zl::ConstrainedOutput::Phase::kEnded) break;
    }
    s.max_work = std::max(s.max_work, c.max_mask_work());
  }
  return s;
}

// The 1B-shape model's decode step (ms): a greedy request of 32 tokens, median of 3.
double decode_step_ms(const std::string& path, int threads) {
  auto model = zl::load_model(path);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().to_string().c_str());
    return 0;
  }
  auto tok = zl::Tokenizer::from_gguf(*(*model)->file);
  if (!tok.ok()) return 0;
  auto engine = zl::Engine::create(**model, **tok, zl::EngineConfig{.n_ctx = 256, .max_seqs = 1, .n_threads = threads});
  if (!engine.ok()) {
    std::fprintf(stderr, "%s\n", engine.status().to_string().c_str());
    return 0;
  }
  std::vector<double> steps;
  for (int rep = 0; rep < 3; ++rep) {
    zl::Request r{.id = "b", .tenant = "t", .prompt_ids = (*tok)->encode("Once upon a time")};
    r.sampling.temperature = 0;
    r.stop.max_tokens = 32;
    r.stop.ignore_eos = true;
    auto ch = (*engine)->submit(std::move(r));
    for (;;) {
      bool done = false;
      for (zl::Event& e : ch->wait_and_drain(std::chrono::milliseconds(1000))) {
        if (e.kind == zl::EventKind::kText) continue;
        done = true;
        if (e.usage.n_generated_tokens > 1) {
          steps.push_back(e.timings.t_decode_ms() / static_cast<double>(e.usage.n_generated_tokens - 1));
        }
      }
      if (done) break;
    }
  }
  return pct(steps, 0.5);
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path, regex, gbnf, schema_arg;
  int n_outputs = 40, threads = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--model")) model_path = argv[i + 1];
    if (!std::strcmp(argv[i], "--regex")) regex = argv[i + 1];
    if (!std::strcmp(argv[i], "--gbnf")) gbnf = argv[i + 1];
    if (!std::strcmp(argv[i], "--schema")) schema_arg = argv[i + 1];
    if (!std::strcmp(argv[i], "--outputs")) n_outputs = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[i + 1]);
  }
  double step_ms = 0;
  if (!model_path.empty()) {
    step_ms = decode_step_ms(model_path, threads);
    std::printf("decode step of %s (%d threads, median of 3 x 32 tokens): %.2f ms\n", model_path.c_str(), threads,
                step_ms);
  }
  const std::string shared = ZL_SHARED_DIR;
  for (const std::string& vocab_path : {shared + "/vocab/ggml-vocab-qwen2.gguf", shared + "/models/stories260K.gguf"}) {
    auto file = zl::GgufFile::open(vocab_path);
    if (!file.ok()) {
      std::printf("SKIPPED %s: %s\n", vocab_path.c_str(), file.status().to_string().c_str());
      continue;
    }
    auto tok = zl::Tokenizer::from_gguf(**file);
    if (!tok.ok()) continue;
    const int32_t n_vocab = (*tok)->vocab().n_tokens();
    std::vector<std::string> pieces(static_cast<size_t>(n_vocab));
    int32_t eos = -1;
    for (int32_t id = 0; id < n_vocab; ++id) {
      pieces[id] = (*tok)->token_to_piece(id);
      if (eos < 0 && (*tok)->vocab().is_eog(id)) eos = id;
    }
    const auto t0 = Clock::now();
    zl::grammar::TokenTrie trie(pieces);
    std::printf("\n%s: %d tokens, trie of %zu nodes built in %.1f ms\n", vocab_path.c_str(), n_vocab, trie.n_nodes(),
                ms_since(t0));
    std::vector<std::pair<const char*, const char*>> grammars;
    for (const auto& sc : kSchemas) grammars.emplace_back(sc[0], sc[1]);
    if (!regex.empty() || !gbnf.empty()) grammars = {{!regex.empty() ? "regex" : "gbnf", nullptr}};
    if (!schema_arg.empty()) grammars = {{"schema", schema_arg.c_str()}};
    for (const auto& [name, schema] : grammars) {
      auto g = !regex.empty()  ? zl::grammar::compile_text_regex(regex)
               : !gbnf.empty() ? zl::grammar::compile_gbnf(gbnf)
               : *schema       ? zl::grammar::compile_json_schema(schema)
                               : zl::Result<std::shared_ptr<const zl::grammar::Grammar>>(zl::grammar::json_object_grammar());
      if (!g.ok()) {
        std::fprintf(stderr, "%s: %s\n", name, g.status().to_string().c_str());
        return 1;
      }
      // Cold walks are counted by timing: a step over 4x the median is taken as one.
      const Stats s = run(trie, pieces, eos, *g, n_outputs, schema != nullptr);
      const double mean = [&] {
        double sum = 0;
        for (double x : s.us) sum += x;
        return s.us.empty() ? 0 : sum / static_cast<double>(s.us.size());
      }();
      const double med = pct(s.us, 0.5), p99 = pct(s.us, 0.99);
      std::printf("  %-12s %6zu steps  per token: mean %8.1f us  median %7.1f us  p99 %8.1f us", name, s.us.size(),
                  mean, med, p99);
      std::printf("  largest walk %.2g units (bound %.2g), %lld cut", static_cast<double>(s.max_work),
                  static_cast<double>(zl::grammar::TokenMasker::kMaxMaskWork), static_cast<long long>(s.n_truncated));
      if (step_ms > 0) std::printf("  = %.2f%% (mean) of a decode step", 100 * mean / 1000 / step_ms);
      std::printf("\n");
    }
  }
  return 0;
}
