// `zerolayer generate`, `logits` and `inspect`: debugging tools on the
// reference forward pass.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cinttypes>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/model_loading.h"
#include "core/thread_pool.h"
#include "model/forward.h"
#include "model/model.h"

namespace zl::cli {
namespace {

void append_float(std::string& out, float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
  out += buf;
}

void append_ids(std::string& out, const std::vector<int32_t>& ids) {
  out += '[';
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(ids[i]);
  }
  out += ']';
}

// Greedy: argmax, ties to the lowest id. Otherwise a softmax sample at `temperature`.
int32_t pick_token(const float* logits, int64_t n_vocab, double temperature, std::mt19937_64& rng) {
  int64_t best = 0;
  for (int64_t i = 1; i < n_vocab; ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  if (temperature <= 0) return static_cast<int32_t>(best);
  std::vector<double> p(n_vocab);
  double sum = 0;
  for (int64_t i = 0; i < n_vocab; ++i) sum += p[i] = std::exp((logits[i] - logits[best]) / temperature);
  double u = std::uniform_real_distribution<double>(0.0, sum)(rng);
  for (int64_t i = 0; i < n_vocab; ++i) {
    if ((u -= p[i]) <= 0) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(best);
}

std::string describe_value(const GgufValue& v, bool all) {
  if (const std::string* s = v.as_string()) {
    std::string out;
    append_json_string(out, all || s->size() <= 120 ? *s : s->substr(0, 117) + "...");
    return out;
  }
  if (const GgufArray* a = v.as_array()) {
    std::string out = "[" + std::string(gguf_value_type_name(a->elem_type)) + " x " + std::to_string(a->items.size()) + "]";
    const size_t shown = all ? a->items.size() : std::min<size_t>(a->items.size(), 8);
    if (shown) out += " ";
    for (size_t i = 0; i < shown; ++i) out += (i ? ", " : "") + describe_value(a->items[i], all);
    if (shown < a->items.size()) out += ", ...";
    return out;
  }
  if (auto b = v.as_bool()) return *b ? "true" : "false";
  if (v.is_integer()) {
    if (auto i = v.as_int()) return std::to_string(*i);
    return std::to_string(*v.as_uint());
  }
  if (auto f = v.as_float()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.9g", *f);
    return buf;
  }
  return "?";
}

std::optional<int64_t> eos_id(const GgufFile& f) {
  auto v = f.get_int("tokenizer.ggml.eos_token_id");
  if (!v.ok()) return std::nullopt;
  return *v;
}

}  // namespace

int cmd_logits(int argc, char** argv, int first) {
  int code = 0;
  auto args = parse_command(argc, argv, first, "logits", "--model PATH --ids 1,2,3",
                            {{"model", true, "GGUF model file"},
                             {"ids", true, "comma-separated token ids, fed in one batch"},
                             {"threads", true, "compute threads (default: all cores)"}},
                            &code);
  if (!args) return code;
  if (!args->has("model") || !args->has("ids")) return report_error("logits", invalid_argument("--model and --ids are required"));
  auto ids = parse_id_list(*args->get("ids"));
  if (!ids.ok()) return report_error("logits", ids.status());
  if (ids->empty()) return report_error("logits", invalid_argument("--ids is empty"));
  auto threads = args->get_int("threads", 0);
  if (!threads.ok()) return report_error("logits", threads.status());
  auto loaded = load_model_with_progress(*args->get("model"));
  if (!loaded.ok()) return report_error("logits", loaded.status());
  const Model& model = *loaded->model;
  ThreadPool pool(static_cast<int>(*threads));
  ReferenceForward fwd(model, static_cast<int64_t>(ids->size()), &pool);
  auto logits = fwd.forward(*ids, /*all_logits=*/true);
  if (!logits.ok()) return report_error("logits", logits.status());
  const int64_t n_vocab = model.config.n_vocab;
  std::string out = "{\"logits\": [";
  out.reserve(logits->size() * 14);
  for (size_t t = 0; t < ids->size(); ++t) {
    out += t ? ",\n[" : "\n[";
    for (int64_t i = 0; i < n_vocab; ++i) {
      if (i) out += ',';
      append_float(out, (*logits)[t * n_vocab + i]);
    }
    out += ']';
  }
  out += "]}\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return kExitOk;
}

int cmd_generate(int argc, char** argv, int first) {
  int code = 0;
  auto args = parse_command(
      argc, argv, first, "generate", "[--model PATH] (--prompt TEXT | --prompt-ids 1,2,3) [-n N] [flags]",
      {{"model", true, "GGUF model file"},
       {"prompt", true, "prompt text (tokenized with the model's tokenizer)"},
       {"prompt-ids", true, "prompt as comma-separated token ids (fed verbatim)"},
       {"n", true, "tokens to generate (default 32)"},
       {"temperature", true, "0 = greedy (default 0.8)"},
       {"seed", true, "sampling seed (default 42)"},
       {"threads", true, "compute threads (default: all cores)"},
       {"ctx", true, "context size in tokens (default: prompt + n)"},
       {"ignore-eos", false, "do not stop at the end-of-sequence token"},
       {"json", false, "print {prompt_ids, generated_ids, text} as one JSON object"}},
      &code);
  if (!args) return code;
  if (args->has("prompt") == args->has("prompt-ids")) {
    return report_error("generate", invalid_argument("give exactly one of --prompt and --prompt-ids"));
  }
  auto n_gen = args->get_int("n", 32);
  auto temperature = args->get_double("temperature", 0.8);
  auto seed = args->get_int("seed", 42);
  auto threads = args->get_int("threads", 0);
  auto n_ctx = args->get_int("ctx", 0);
  for (const Status* s : {&n_gen.status(), &temperature.status(), &seed.status(), &threads.status(), &n_ctx.status()}) {
    if (!s->ok()) return report_error("generate", *s);
  }
  if (*n_gen < 0 || *n_gen > (1 << 20)) return report_error("generate", invalid_argument("-n must be in [0, 1048576]"));
  if (!(*temperature >= 0)) return report_error("generate", invalid_argument("--temperature must be >= 0"));

  auto model_path = args->has("model") ? Result<std::string>(*args->get("model")) : default_model_path();
  if (!model_path.ok()) return report_error("generate", model_path.status());
  auto loaded = load_model_with_progress(*model_path);
  if (!loaded.ok()) return report_error("generate", loaded.status());
  const Model& model = *loaded->model;

  std::vector<int32_t> prompt;
  if (args->has("prompt-ids")) {
    auto ids = parse_id_list(*args->get("prompt-ids"));
    if (!ids.ok()) return report_error("generate", ids.status());
    prompt = *ids;
  } else {
    auto ids = tokenize_prompt(*model.file, *args->get("prompt"));
    if (!ids.ok()) return report_error("generate", ids.status());
    prompt = *ids;
  }
  if (prompt.empty()) return report_error("generate", invalid_argument("the prompt has no tokens"));

  const int64_t ctx = *n_ctx > 0 ? *n_ctx : static_cast<int64_t>(prompt.size()) + *n_gen;
  ThreadPool pool(static_cast<int>(*threads));
  ReferenceForward fwd(model, ctx, &pool);
  std::mt19937_64 rng(static_cast<uint64_t>(*seed));
  const auto eos = args->has("ignore-eos") ? std::nullopt : eos_id(*model.file);
  const int64_t n_vocab = model.config.n_vocab;

  const auto t0 = std::chrono::steady_clock::now();
  auto logits = fwd.forward(prompt, /*all_logits=*/false);
  if (!logits.ok()) return report_error("generate", logits.status());
  const auto t1 = std::chrono::steady_clock::now();
  std::vector<int32_t> generated;
  while (static_cast<int64_t>(generated.size()) < *n_gen) {
    const int32_t id = pick_token(logits->data(), n_vocab, *temperature, rng);
    generated.push_back(id);
    if (eos && id == *eos) break;
    if (static_cast<int64_t>(generated.size()) == *n_gen) break;
    const int32_t next[1] = {id};
    logits = fwd.forward(next, /*all_logits=*/false);
    if (!logits.ok()) return report_error("generate", logits.status());
  }
  const auto t2 = std::chrono::steady_clock::now();
  auto text = detokenize_ids(*model.file, generated);
  if (!text.ok()) return report_error("generate", text.status());

  if (args->has("json")) {
    std::string out = "{\"prompt_ids\": ";
    append_ids(out, prompt);
    out += ", \"generated_ids\": ";
    append_ids(out, generated);
    out += ", \"text\": ";
    append_json_string(out, *text);
    out += "}\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
  } else {
    std::fwrite(text->data(), 1, text->size(), stdout);
    std::fputc('\n', stdout);
  }
  const double pp_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  const double tg_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
  const size_t n_decoded = generated.empty() ? 0 : generated.size() - 1;
  std::fprintf(stderr, "load %.0f ms | prompt %zu tokens in %.1f ms (%.1f t/s) | generated %zu tokens, %.1f t/s\n",
               loaded->t_load_ms, prompt.size(), pp_ms, prompt.size() * 1000.0 / pp_ms, generated.size(),
               n_decoded ? n_decoded * 1000.0 / tg_ms : 0.0);
  return kExitOk;
}

int cmd_inspect(int argc, char** argv, int first) {
  int code = 0;
  auto args = parse_command(argc, argv, first, "inspect", "--model PATH [--json]",
                            {{"model", true, "GGUF model file"}, {"all", false, "print long arrays in full"}}, &code);
  if (!args) return code;
  if (!args->has("model")) return report_error("inspect", invalid_argument("--model is required"));
  auto file = GgufFile::open(*args->get("model"));
  if (!file.ok()) return report_error("inspect", file.status());
  const GgufFile& f = **file;
  std::printf("file: %s\nGGUF version %u, alignment %" PRIu64 ", %zu metadata keys, %zu tensors, %" PRIu64 " bytes\n",
              f.path().c_str(), f.version(), f.alignment(), f.metadata().size(), f.tensors().size(), f.file_size());
  if (auto desc = f.get_string("general.description"); desc.ok()) std::printf("description: %s\n", desc->c_str());
  std::printf("\nmetadata:\n");
  for (const auto& [key, value] : f.metadata()) {
    std::printf("  %-48s %s\n", key.c_str(), describe_value(value, args->has("all")).c_str());
  }
  std::printf("\ntensors:\n");
  int64_t n_params = 0;
  uint64_t n_bytes = 0;
  for (const auto& t : f.tensors()) {
    std::string shape;
    for (int d = 0; d < t.n_dims; ++d) shape += (d ? ", " : "") + std::to_string(t.ne[d]);
    std::printf("  %-40s %-6s [%s] %" PRIu64 " bytes\n", t.name.c_str(), ggml_type_name(t.type).c_str(), shape.c_str(),
                t.n_bytes);
    n_params += t.n_elements();
    n_bytes += t.n_bytes;
  }
  std::printf("\nparameters: %" PRId64 " (%.3f M), tensor data: %.2f MiB, %.3f bits/weight\n", n_params, n_params / 1e6,
              n_bytes / 1048576.0, n_params ? 8.0 * n_bytes / n_params : 0.0);
  auto model = load_model(std::move(file).value());
  if (!model.ok()) {
    std::printf("model: not loadable: %s\n", model.status().to_string().c_str());
    return kExitRuntime;
  }
  const ModelConfig& c = (*model)->config;
  std::printf("model: %s, %" PRId64 " layers, n_embd %" PRId64 ", %" PRId64 " heads (%" PRId64 " kv, head_dim %" PRId64
              "), n_ff %" PRId64 ", vocab %" PRId64 ", context %" PRId64 ", rope base %g%s%s\n",
              c.arch_name.c_str(), c.n_layer, c.n_embd, c.n_head, c.n_head_kv, c.head_dim, c.n_ff, c.n_vocab,
              c.n_ctx_train, c.rope_freq_base, c.tied_output ? ", tied output" : "",
              (*model)->rope_freqs ? ", rope_freqs" : "");
  return kExitOk;
}

}  // namespace zl::cli
