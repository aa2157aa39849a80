// Model configuration and weights of the decoder-only transformers zerolayer
// runs, read from GGUF.
//
// Supported architectures: `llama` (Llama 2/3.x with rope_freqs factors,
// TinyLlama, Mistral, SmolLM, stories), `qwen2` (q/k/v biases, NEOX rope),
// `qwen3` (per-head q/k RMS norm, NEOX rope), `gemma3` (embedding scale, q/k
// norms, post-attention and post-FFN norms, GELU FFN, interleaved
// sliding-window layers with their own rope base), `phi3` (fused QKV and
// gate/up matrices, partial rotary, LongRoPE factors) and `qwen3moe` (qwen3
// attention, mixture-of-experts FFN: router, top-k experts) and `gpt-oss`
// (attention biases and sinks, alternating sliding-window layers, experts
// with biases and a clamped SwiGLU). Output embeddings may
// be tied (no `output.weight`: token_embd is used). Weights stay in the
// mmap'ed file; Model only holds pointers to the tensors.
//
// What varies between layers (sliding window, rope settings) is data in
// ModelConfig::layers, filled from the metadata; the forward pass reads it
// and never the architecture name. Optional tensors (biases, q/k norms,
// post-norms) are used where LayerWeights has them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "format/gguf.h"

namespace zl {

enum class Arch { kLlama, kQwen2, kQwen3, kGemma3, kPhi3, kQwen3Moe, kGptOss };
// kNorm rotates adjacent pairs (x[2i], x[2i+1]); kNeox rotates halves (x[i], x[i+d/2]).
enum class RopeType { kNorm, kNeox };
// The FFN's gated activation: down(act(gate(x)) * up(x)).
enum class FfnActivation {
  kSilu,  // SwiGLU
  kGelu,  // GELU (tanh form) as llama.cpp evaluates it (kernels/fused.h geglu)
};

// One rope setting: theta_i = pos * scale * base^(-2i/rope_dim) / factor_i.
struct RopeParams {
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;  // 1/factor of linear rope scaling
  bool operator==(const RopeParams&) const = default;
};

// What one layer does differently from the others. read_model_config fills
// one per layer from the metadata (read_arch_traits in model.cc, one case per
// architecture); the runner reads only this, so a new per-layer trait (say an
// alternating window without a pattern key, or a per-layer rope scaling) is
// a field here, a line there, and its use in ModelRunner.
struct LayerConfig {
  int64_t sliding_window = 0;  // > 0: queries see only the last sliding_window positions (their own included)
  int32_t rope = 0;            // index into ModelConfig::ropes
};

// How a mixture-of-experts layer turns router logits into expert weights
// (model/moe.h route_tokens).
enum class MoeGating {
  kSoftmaxTopkNorm,  // qwen3moe: p = softmax(r); the k largest p; weights p_e / sum of the k
  kTopkSoftmax,      // gpt-oss: the k largest r; weights softmax over those k
};

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
  // Architecture traits, data for the forward pass.
  float embd_scale = 1.0f;       // token embeddings are multiplied by this (gemma3: sqrt(n_embd))
  float attn_scale = 0.0f;       // attention score scale (set by read_model_config)
  FfnActivation ffn_act = FfnActivation::kSilu;
  float final_logit_softcap = 0.0f;  // > 0: logits = cap * tanh(logits / cap)
  // LongRoPE (phi3): per-dimension factors rope_factors_long / _short, the
  // long ones when the context exceeds rope_orig_ctx; cos/sin times
  // rope_attn_factor.
  int64_t rope_orig_ctx = 0;
  float rope_attn_factor = 1.0f;
  // Mixture of experts (n_expert > 0): every layer's FFN is n_expert expert
  // FFNs of n_ff_exp, n_expert_used of them per token chosen by the router.
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t n_ff_exp = 0;
  MoeGating moe_gating = MoeGating::kSoftmaxTopkNorm;
  // > 0: the experts' activation is gpt-oss's clamped SwiGLU,
  // g = min(g, limit), u = clamp(u, -limit, limit), g * sigmoid(alpha g) * (u + 1).
  float expert_swiglu_limit = 0.0f;
  float expert_swiglu_alpha = 1.0f;
  // YaRN (rope.scaling.type "yarn"): per rotated dimension i, theta mixes
  // the interpolated (freq_scale) and the original angle by a ramp between
  // the correction dimensions of yarn_beta_fast and yarn_beta_slow over
  // rope_orig_ctx; cos/sin × (1 + 0.1 ln(1 / freq_scale)), as llama.cpp.
  bool yarn = false;
  float yarn_beta_fast = 32.0f;
  float yarn_beta_slow = 1.0f;
  std::vector<RopeParams> ropes;    // distinct rope settings; ropes[0] is the file's main one
  std::vector<LayerConfig> layers;  // n_layer entries

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
  const GgufTensor* bo = nullptr;         // gpt-oss: [n_embd], after wo
  const GgufTensor* attn_sinks = nullptr; // gpt-oss: [n_head], a logit per head that joins the softmax denominator
  const GgufTensor* q_norm = nullptr;     // qwen3: [head_dim]
  const GgufTensor* k_norm = nullptr;     // qwen3: [head_dim]
  const GgufTensor* wqkv = nullptr;       // phi3: [n_embd, q_dim + 2 kv_dim], replaces wq, wk, wv
  const GgufTensor* post_attn_norm = nullptr;  // gemma3: [n_embd], on the attention output
  const GgufTensor* ffn_norm = nullptr;   // [n_embd]
  const GgufTensor* ffn_gate = nullptr;   // [n_embd, n_ff]; null when ffn_up holds gate and up
  const GgufTensor* ffn_up = nullptr;     // [n_embd, n_ff], or phi3 [n_embd, 2 n_ff]: gate rows then up rows
  const GgufTensor* ffn_down = nullptr;   // [n_ff, n_embd]
  const GgufTensor* post_ffn_norm = nullptr;  // gemma3: [n_embd], on the FFN output
  // Mixture of experts (replace ffn_gate, ffn_up, ffn_down).
  const GgufTensor* ffn_gate_inp = nullptr;   // router [n_embd, n_expert]
  const GgufTensor* ffn_gate_exps = nullptr;  // [n_embd, n_ff_exp, n_expert]
  const GgufTensor* ffn_up_exps = nullptr;    // [n_embd, n_ff_exp, n_expert]
  const GgufTensor* ffn_down_exps = nullptr;  // [n_ff_exp, n_embd, n_expert]
  const GgufTensor* ffn_gate_inp_b = nullptr;  // gpt-oss: router bias [n_expert]
  const GgufTensor* ffn_gate_exps_b = nullptr; // gpt-oss: [n_ff_exp, n_expert]
  const GgufTensor* ffn_up_exps_b = nullptr;   // gpt-oss: [n_ff_exp, n_expert]
  const GgufTensor* ffn_down_exps_b = nullptr; // gpt-oss: [n_embd, n_expert]
};

struct Model {
  std::unique_ptr<GgufFile> file;
  ModelConfig config;
  const GgufTensor* token_embd = nullptr;   // [n_embd, n_vocab]
  const GgufTensor* output_norm = nullptr;  // [n_embd]
  const GgufTensor* output = nullptr;       // [n_embd, n_vocab] (token_embd when tied)
  const GgufTensor* rope_freqs = nullptr;   // optional [rope_dim/2]: theta divisors (Llama 3.1+)
  const GgufTensor* rope_factors_long = nullptr;   // optional [rope_dim/2] (phi3 LongRoPE)
  const GgufTensor* rope_factors_short = nullptr;  // optional [rope_dim/2]
  std::vector<LayerWeights> layers;

  // Total parameters and bytes of all tensors in the file.
  int64_t n_params() const;
  uint64_t n_weight_bytes() const;
  // The rope theta divisors for a context of n_ctx tokens (rope_dim/2
  // floats), or null: rope_freqs, else LongRoPE's long factors when n_ctx
  // exceeds rope_orig_ctx and its short ones otherwise.
  const float* rope_factors(int64_t n_ctx) const;
};

// Reads the configuration of a supported architecture from GGUF metadata.
Result<ModelConfig> read_model_config(const GgufFile& file);

// Opens `path`, reads the config and binds every tensor, checking that each
// required tensor exists with the expected shape and a supported type.
Result<std::unique_ptr<Model>> load_model(const std::string& path);
// Same, on an already opened file.
Result<std::unique_ptr<Model>> load_model(std::unique_ptr<GgufFile> file);

std::string arch_name(Arch arch);
// "llama, qwen2, qwen3, gemma3, phi3, qwen3moe, gpt-oss": what the error for an unsupported one lists.
std::string supported_arch_names();

}  // namespace zl
