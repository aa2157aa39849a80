// `zerolayer make-model`: deterministic random-weight models for tests and benchmarks.
#include <chrono>
#include <cstdio>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/log.h"
#include "core/progress.h"
#include "core/thread_pool.h"
#include "model/make_model.h"

namespace zl::cli {

int cmd_make_model(int argc, char** argv, int first) {
  std::string presets;
  for (const auto& n : model_shape_preset_names()) presets += (presets.empty() ? "" : ", ") + n;
  int code = 0;
  auto args = parse_command(argc, argv, first, "make-model", "--shape NAME --type TYPE --vocab VOCAB.gguf --out FILE [flags]",
                            {{"shape", true, "shape preset: " + presets},
                             {"type", true, "2-D tensor type (" + supported_ggml_type_names() + ") or a llama-quantize mix (" + quant_mix_names() + ")"},
                             {"vocab", true, "GGUF whose tokenizer.* metadata is copied"},
                             {"out", true, "output GGUF path"},
                             {"arch", true, "llama, qwen2, qwen3, gemma3, phi3, qwen3moe or gpt-oss (default: the shape's)"},
                             {"seed", true, "weight seed (default 1)"},
                             {"name", true, "general.name"},
                             {"threads", true, "threads (default: all cores)"},
                             {"n-embd", true, "override embedding length"},
                             {"n-layer", true, "override layer count"},
                             {"n-head", true, "override attention heads"},
                             {"n-head-kv", true, "override KV heads"},
                             {"head-dim", true, "override head dimension"},
                             {"n-ff", true, "override feed-forward length"},
                             {"n-ctx", true, "override context length"},
                             {"n-vocab", true, "pad the vocabulary to this size"},
                             {"n-expert", true, "override expert count (MoE shapes)"},
                             {"n-expert-used", true, "override experts used per token"},
                             {"n-ff-exp", true, "override expert feed-forward length"}},
                            &code);
  if (!args) return code;
  for (const char* req : {"shape", "type", "vocab", "out"}) {
    if (!args->has(req)) return report_error("make-model", invalid_argument(std::string("--") + req + " is required"));
  }
  auto shape = model_shape_preset(*args->get("shape"));
  if (!shape) return report_error("make-model", invalid_argument("unknown --shape '" + *args->get("shape") + "' (" + presets + ")"));
  const std::optional<QuantMix> mix = parse_quant_mix(*args->get("type"));
  auto type = mix ? std::optional<GgmlType>(mix->base) : parse_ggml_type(*args->get("type"));
  if (!type) {
    return report_error("make-model", invalid_argument("unknown --type '" + *args->get("type") + "' (types: " +
                                                       supported_ggml_type_names() + "; mixes: " + quant_mix_names() + ")"));
  }
  MakeModelOptions opts{.shape = *shape, .type = *type, .mix = mix, .vocab_path = *args->get("vocab"), .out_path = *args->get("out"), .seed = 1, .name = ""};
  opts.shape.arch = args->get_or("arch", opts.shape.arch);
  opts.name = args->get_or("name", "");
  // Each dimension up to 2^22 (make_model checks that the tensors they make
  // fit in memory); layers up to 4096: the writer keeps ~12 tensors a layer
  // and checks each new name against all before it.
  constexpr int64_t kMaxDim = int64_t{1} << 22, kMaxLayers = 4096;
  struct Override {
    const char* flag;
    int64_t* field;
    int64_t max = kMaxDim;
  } overrides[] = {{"n-embd", &opts.shape.n_embd}, {"n-layer", &opts.shape.n_layer, kMaxLayers},
                   {"n-head", &opts.shape.n_head}, {"n-head-kv", &opts.shape.n_head_kv},
                   {"head-dim", &opts.shape.head_dim}, {"n-ff", &opts.shape.n_ff},
                   {"n-ctx", &opts.shape.n_ctx}, {"n-vocab", &opts.shape.n_vocab},
                   {"n-expert", &opts.shape.n_expert, 4096}, {"n-expert-used", &opts.shape.n_expert_used, 4096},
                   {"n-ff-exp", &opts.shape.n_ff_exp}};
  for (auto& o : overrides) {
    auto v = args->get_int_in(o.flag, *o.field, 0, o.max);
    if (!v.ok()) return report_error("make-model", v.status());
    *o.field = *v;
  }
  if (args->has("n-embd") || args->has("n-head")) {
    if (!args->has("head-dim")) opts.shape.head_dim = 0;  // re-derive from the new shape
  }
  auto seed = args->get_int("seed", 1);
  auto threads = args->get_int_in("threads", 0, 0, kMaxThreads);
  if (!seed.ok()) return report_error("make-model", seed.status());
  if (!threads.ok()) return report_error("make-model", threads.status());
  opts.seed = static_cast<uint64_t>(*seed);

  ThreadPool pool(static_cast<int>(*threads));
  Progress progress("writing " + opts.out_path, 1000);
  const auto t0 = std::chrono::steady_clock::now();
  Status st = make_model(opts, &pool, [&](uint64_t done, uint64_t total) {
    progress.update(total ? done * 1000 / total : 0);
  });
  progress.finish();
  if (!st.ok()) return report_error("make-model", st);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  log::info("model written", {{"path", opts.out_path}, {"t_write_s", s}});
  return kExitOk;
}

}  // namespace zl::cli
