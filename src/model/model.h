// Model configuration and weights of the Llama family, read from GGUF.
//
// Supported architectures: `llama` (Llama 2/3.x with rope_freqs factors,
// TinyLlama, Mistral, SmolLM, stories), `qwen2` (q/k/v biases, NEOX rope) and
// `qwen3` (per-head q/k RMS norm, NEOX rope). Output embeddings may be tied
// (no `output.weight`: token_embd is used). Weights stay in the mmap'ed file;
// Model only holds pointers to the tensors.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "format/gguf.h"

namespace zl {

enum class Arch { kLlama, kQwen2, kQwen3 };
// kNorm rotates adjacent pairs (x[2i], x[2i+1]); kNeox rotates halves (x[i], x[i+d/2]).
enum class RopeType { kNorm, kNeox };

struct ModelConfig {
  Arch arch = Arch::kLlama;
  std::string arch_name;      // "llama"
  std::string name;           // general.name, if any
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;       // key/value length per head
  int64_t n_ff = 0;
  int64_t n_ctx_train = 0;
  float rms_eps = 1e-5f;
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // 1/factor of linear rope scaling
  int64_t rope_dim = 0;          // rotated dims per head (<= head_dim)
  RopeType rope_type = RopeType::kNorm;
  bool tied_output = false;      // output projection is token_embd

  int64_t q_dim() const { return n_head * head_dim; }
  int64_t kv_dim() const { return n_head_kv * head_dim; }
};

// Pointers into the GgufFile; null for tensors the architecture does not have.
struct LayerWeights {
  const GgufTensor* attn_norm = nullptr;  // [n_embd]
  const GgufTensor* wq = nullptr;         // [n_embd, q_dim]
  const GgufTensor* wk = nullptr;         // [n_embd, kv_dim]
  const GgufTensor* wv = nullptr;         // [n_embd, kv_dim]
  const GgufTensor* wo = nullptr;         // [q_dim, n_embd]
  const GgufTensor* bq = nullptr;         // qwen2: [q_dim]
  const GgufTensor* bk = nullptr;         // qwen2: [kv_dim]
  const GgufTensor* bv = nullptr;         // qwen2: [kv_dim]
  const GgufTensor* q_norm = nullptr;     // qwen3: [head_dim]
  const GgufTensor* k_norm = nullptr;     // qwen3: [head_dim]
  const GgufTensor* ffn_norm = nullptr;   // [n_embd]
  const GgufTensor* ffn_gate = nullptr;   // [n_embd, n_ff]
  const GgufTensor* ffn_up = nullptr;     // [n_embd, n_ff]
  const GgufTensor* ffn_down = nullptr;   // [n_ff, n_embd]
};

struct Model {
  std::unique_ptr<GgufFile> file;
  ModelConfig config;
  const GgufTensor* token_embd = nullptr;   // [n_embd, n_vocab]
  const GgufTensor* output_norm = nullptr;  // [n_embd]
  const GgufTensor* output = nullptr;       // [n_embd, n_vocab] (token_embd when tied)
  const GgufTensor* rope_freqs = nullptr;   // optional [rope_dim/2]: theta divisors (Llama 3.1+)
  std::vector<LayerWeights> layers;

  // Total parameters and bytes of all tensors in the file.
  int64_t n_params() const;
  uint64_t n_weight_bytes() const;
};

// Reads the configuration of a supported architecture from GGUF metadata.
Result<ModelConfig> read_model_config(const GgufFile& file);

// Opens `path`, reads the config and binds every tensor, checking that each
// required tensor exists with the expected shape and a supported type.
Result<std::unique_ptr<Model>> load_model(const std::string& path);
// Same, on an already opened file.
Result<std::unique_ptr<Model>> load_model(std::unique_ptr<GgufFile> file);

std::string arch_name(Arch arch);

}  // namespace zl
