// Deterministic random-weight models in real shapes, for tests and benchmarks.
//
// Weights are N(0, 0.02) (norm weights 1 + N(0, 0.05)) from a counter-based
// generator keyed by (seed, tensor name, row), so every row is independent of
// the others and the output is byte-identical for the same arguments however
// many threads write it. Tokenizer metadata is copied from a vocabulary GGUF.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "format/ggml_type.h"
#include "model/quant_mix.h"

namespace zl {

struct ModelShape {
  std::string arch = "llama";  // llama, qwen2, qwen3, gemma3, phi3, qwen3moe, gpt-oss
  int64_t n_vocab = 0;         // 0: take the vocabulary's size
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;        // 0: n_embd / n_head
  int64_t n_ff = 0;
  int64_t n_ctx = 0;
  float rope_freq_base = 10000.0f;
  float rms_eps = 1e-5f;
  bool tied_output = false;
  bool llama3_rope = false;    // write rope_freqs.weight (Llama 3.1/3.2 scaling)
  // gemma3: sliding-window layers (sliding_window_pattern n: n - 1 local : 1
  // global) with their own rope base; phi3: a window on every layer.
  int64_t sliding_window = 0;
  int64_t sliding_window_pattern = 6;
  float rope_freq_base_swa = 10000.0f;
  // phi3: LongRoPE factor tensors for a context beyond rope_orig_ctx (0: none).
  int64_t rope_orig_ctx = 0;
  // gpt-oss: YaRN rope scaling by this factor over rope_orig_ctx (0: none).
  float yarn_factor = 0.0f;
  // qwen3moe, gpt-oss: n_expert experts of n_ff_exp, n_expert_used per token.
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t n_ff_exp = 0;
};

// Presets: "tiny", "llama3.2-1b", "tinyllama-1.1b", "stories260k",
// "gemma3-1b" (Gemma 3 1B), "phi3.5-mini" (Phi-3.5-mini), "qwen3-30b-a3b"
// (Qwen3-30B-A3B; --n-layer makes it smaller), "tiny-moe" (qwen3moe of the
// tiny shape, 8 experts of 64, 2 used), "gpt-oss-20b" (gpt-oss-20b; use
// --n-layer for fewer layers). Each sets its
// architecture. nullopt if unknown.
std::optional<ModelShape> model_shape_preset(const std::string& name);
std::vector<std::string> model_shape_preset_names();

struct MakeModelOptions {
  ModelShape shape;
  GgmlType type = GgmlType::kF32;  // type of the 2-D weight matrices
  // A llama-quantize mix ("Q4_K_M", model/quant_mix.h): per-matrix types
  // instead of `type` everywhere (which should then be the mix's base).
  std::optional<QuantMix> mix;
  std::string vocab_path;          // GGUF with tokenizer.* metadata
  std::string out_path;
  uint64_t seed = 1;
  std::string name;                // general.name (default: "zerolayer random <shape>")
  // Memory for the writer's buffers (one tensor, a row of floats per
  // thread); nullopt: available_memory_bytes() now.
  std::optional<uint64_t> memory_budget;
};

// Writes the model. `progress` (may be null) receives (bytes_done, bytes_total).
// InvalidArgument for an inconsistent shape; ResourceExhausted, naming the
// tensor and the bytes, when its largest tensor does not fit in the memory
// budget (or its size overflows), before anything is written.
Status make_model(const MakeModelOptions& opts, ThreadPool* pool,
                  const std::function<void(uint64_t, uint64_t)>& progress);

}  // namespace zl
