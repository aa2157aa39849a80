#include "model/model.h"

#include <cmath>

#include "kernels/quant.h"

namespace zl {
namespace {

constexpr int64_t kMaxDim = int64_t{1} << 24;  // bound for any model dimension

const float* f32_data(const GgufTensor* t) { return reinterpret_cast<const float*>(t->data); }

Result<int64_t> required_int(const GgufFile& f, const std::string& key) {
  ASSIGN_OR_RETURN(int64_t v, f.get_int(key));
  if (v <= 0 || v > kMaxDim) return corrupt_file(gguf_quoted(key) + " = " + std::to_string(v) + " is out of range");
  return v;
}

Result<int64_t> optional_int(const GgufFile& f, const std::string& key, int64_t def) {
  if (!f.find(key)) return def;
  return required_int(f, key);
}

// A window length: absent or 0 means none.
Result<int64_t> optional_window(const GgufFile& f, const std::string& key) {
  if (!f.find(key)) return int64_t{0};
  ASSIGN_OR_RETURN(int64_t v, f.get_int(key));
  if (v == 0) return v;
  return required_int(f, key);
}

Result<float> required_float(const GgufFile& f, const std::string& key) {
  ASSIGN_OR_RETURN(double v, f.get_float(key));
  if (!std::isfinite(v)) return corrupt_file(gguf_quoted(key) + " is not finite");
  return static_cast<float>(v);
}

Result<float> optional_float(const GgufFile& f, const std::string& key, float def) {
  if (!f.find(key)) return def;
  return required_float(f, key);
}

// Binds a tensor and checks its shape (ne[0], ne[1]; ne1 = 1 for vectors) and type.
Result<const GgufTensor*> bind_tensor(const GgufFile& f, const std::string& name, int64_t ne0, int64_t ne1,
                               bool required = true) {
  const GgufTensor* t = f.find_tensor(name);
  if (!t) {
    if (!required) return static_cast<const GgufTensor*>(nullptr);
    return corrupt_file("missing tensor " + gguf_quoted(name));
  }
  const bool is_vector = ne1 == 1;
  if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1) {
    return corrupt_file("tensor " + gguf_quoted(name) + " has shape [" + std::to_string(t->ne[0]) + ", " +
                        std::to_string(t->ne[1]) + ", " + std::to_string(t->ne[2]) + ", " +
                        std::to_string(t->ne[3]) + "], expected [" + std::to_string(ne0) + ", " +
                        std::to_string(ne1) + "]");
  }
  auto traits = ggml_type_traits(static_cast<uint32_t>(t->type));
  if (!traits || !traits->supported) {
    return unsupported("tensor " + gguf_quoted(name) + " has type " + ggml_type_name(t->type) +
                       ", which zerolayer does not support (supported: " + supported_ggml_type_names() + ")");
  }
  if (is_vector && t->type != GgmlType::kF32) {
    return unsupported("tensor " + gguf_quoted(name) + " is " + ggml_type_name(t->type) + "; 1-D tensors must be F32");
  }
  return t;
}

// Binds a stack of n_expert matrices [ne0, ne1, n_expert] (a 2-D type).
Result<const GgufTensor*> bind_experts(const GgufFile& f, const std::string& name, int64_t ne0, int64_t ne1,
                                       int64_t n_expert) {
  const GgufTensor* t = f.find_tensor(name);
  if (!t) return corrupt_file("missing tensor " + gguf_quoted(name));
  if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != n_expert || t->ne[3] != 1) {
    return corrupt_file("tensor " + gguf_quoted(name) + " has shape [" + std::to_string(t->ne[0]) + ", " +
                        std::to_string(t->ne[1]) + ", " + std::to_string(t->ne[2]) + ", " +
                        std::to_string(t->ne[3]) + "], expected [" + std::to_string(ne0) + ", " +
                        std::to_string(ne1) + ", " + std::to_string(n_expert) + "]");
  }
  auto traits = ggml_type_traits(static_cast<uint32_t>(t->type));
  if (!traits || !traits->supported) {
    return unsupported("tensor " + gguf_quoted(name) + " has type " + ggml_type_name(t->type) +
                       ", which zerolayer does not support (supported: " + supported_ggml_type_names() + ")");
  }
  return t;
}

// Every supported architecture: its GGUF name and rope pairing.
struct ArchInfo {
  Arch arch;
  const char* name;
  RopeType rope_type;
};
constexpr ArchInfo kArchs[] = {{Arch::kLlama, "llama", RopeType::kNorm},
                               {Arch::kQwen2, "qwen2", RopeType::kNeox},
                               {Arch::kQwen3, "qwen3", RopeType::kNeox},
                               {Arch::kGemma3, "gemma3", RopeType::kNeox},
                               {Arch::kPhi3, "phi3", RopeType::kNeox},
                               {Arch::kQwen3Moe, "qwen3moe", RopeType::kNeox},
                               {Arch::kGptOss, "gpt-oss", RopeType::kNeox}};

// Gemma 3's layer kinds: `sliding_window_pattern` n (an integer) makes layer
// il local when il % n < n - 1 (n local : 1 global); an array gives each
// layer's flag. Absent: Gemma 3's 6 (5 local : 1 global).
Result<std::vector<bool>> sliding_layers(const GgufFile& f, const std::string& key, int64_t n_layer,
                                         int64_t default_pattern = 6) {
  std::vector<bool> local(n_layer);
  if (const GgufArray* arr = f.get_array(key)) {
    if (static_cast<int64_t>(arr->items.size()) != n_layer) {
      return corrupt_file(gguf_quoted(key) + " has " + std::to_string(arr->items.size()) + " entries for " +
                          std::to_string(n_layer) + " layers");
    }
    for (int64_t i = 0; i < n_layer; ++i) {
      auto v = arr->items[i].as_int();
      if (!v) return corrupt_file(gguf_quoted(key) + " must hold booleans or integers");
      local[i] = *v != 0;
    }
    return local;
  }
  ASSIGN_OR_RETURN(int64_t n, optional_int(f, key, default_pattern));
  for (int64_t i = 0; i < n_layer; ++i) local[i] = i % n < n - 1;
  return local;
}

// The index of `r` in c.ropes, appended if new.
int32_t rope_index(ModelConfig& c, const RopeParams& r) {
  for (size_t i = 0; i < c.ropes.size(); ++i) {
    if (c.ropes[i] == r) return static_cast<int32_t>(i);
  }
  c.ropes.push_back(r);
  return static_cast<int32_t>(c.ropes.size() - 1);
}

// The per-layer data and the traits of c.arch (c's common fields read).
Status read_arch_traits(const GgufFile& f, ModelConfig& c) {
  const std::string a = c.arch_name + ".";
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  c.ropes = {RopeParams{c.rope_freq_base, c.rope_freq_scale}};
  c.layers.assign(c.n_layer, LayerConfig{});
  ASSIGN_OR_RETURN(c.final_logit_softcap, optional_float(f, a + "final_logit_softcapping", 0.0f));
  if (c.final_logit_softcap < 0) return corrupt_file("final_logit_softcapping must not be negative");
  switch (c.arch) {
    case Arch::kGemma3: {
      c.embd_scale = std::sqrt(static_cast<float>(c.n_embd));
      c.ffn_act = FfnActivation::kGelu;
      // Gemma 3 27B scales queries by 1/sqrt(n_embd / n_head) (query_pre_attn_scalar), the others by 1/sqrt(head_dim).
      if (c.n_layer == 62) c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.n_embd / c.n_head));
      ASSIGN_OR_RETURN(int64_t window, optional_window(f, a + "attention.sliding_window"));
      if (window == 0) break;
      ASSIGN_OR_RETURN(float base_swa, optional_float(f, a + "rope.freq_base_swa", 10000.0f));
      if (!(base_swa > 0)) return corrupt_file("rope.freq_base_swa must be positive");
      // Local layers use their own base and no rope scaling.
      const int32_t local_rope = rope_index(c, RopeParams{base_swa, 1.0f});
      ASSIGN_OR_RETURN(auto local, sliding_layers(f, a + "attention.sliding_window_pattern", c.n_layer));
      for (int64_t i = 0; i < c.n_layer; ++i) {
        if (local[i]) c.layers[i] = {.sliding_window = window, .rope = local_rope};
      }
      break;
    }
    case Arch::kPhi3: {
      ASSIGN_OR_RETURN(int64_t window, optional_window(f, a + "attention.sliding_window"));
      for (auto& l : c.layers) l.sliding_window = window;
      ASSIGN_OR_RETURN(c.rope_orig_ctx, optional_int(f, a + "rope.scaling.original_context_length", c.n_ctx_train));
      ASSIGN_OR_RETURN(c.rope_attn_factor, optional_float(f, a + "rope.scaling.attn_factor", 1.0f));
      if (!(c.rope_attn_factor > 0)) return corrupt_file("rope.scaling.attn_factor must be positive");
      break;
    }
    case Arch::kQwen3Moe:
    case Arch::kGptOss: {
      ASSIGN_OR_RETURN(c.n_expert, required_int(f, a + "expert_count"));
      ASSIGN_OR_RETURN(c.n_expert_used, required_int(f, a + "expert_used_count"));
      ASSIGN_OR_RETURN(c.n_ff_exp, optional_int(f, a + "expert_feed_forward_length", c.n_ff));
      if (c.arch == Arch::kQwen3Moe) {
        c.moe_gating = MoeGating::kSoftmaxTopkNorm;
        break;
      }
      // gpt-oss: selection on the biased router logits, softmax over the
      // chosen; the clamped SwiGLU (no GGUF key holds its constants: those
      // of the reference implementation and llama.cpp); alternating
      // sliding-window layers (layer il local when il % 2 == 0, unless a
      // sliding_window_pattern key says otherwise).
      c.moe_gating = MoeGating::kTopkSoftmax;
      c.expert_swiglu_limit = 7.0f;
      c.expert_swiglu_alpha = 1.702f;
      ASSIGN_OR_RETURN(int64_t window, optional_window(f, a + "attention.sliding_window"));
      if (window == 0) break;
      ASSIGN_OR_RETURN(auto local, sliding_layers(f, a + "attention.sliding_window_pattern", c.n_layer, 2));
      for (int64_t i = 0; i < c.n_layer; ++i) {
        if (local[i]) c.layers[i].sliding_window = window;
      }
      break;
    }
    default: break;
  }
  if (c.n_expert > 0 && (c.n_expert_used > c.n_expert || c.n_expert > 4096)) {
    return corrupt_file("expert_used_count " + std::to_string(c.n_expert_used) + " of expert_count " +
                        std::to_string(c.n_expert) + " is out of range");
  }
  return {};
}

}  // namespace

std::string arch_name(Arch arch) {
  for (const auto& info : kArchs) {
    if (info.arch == arch) return info.name;
  }
  return "?";
}

std::string supported_arch_names() {
  std::string s;
  for (const auto& info : kArchs) s += (s.empty() ? "" : ", ") + std::string(info.name);
  return s;
}

Result<ModelConfig> read_model_config(const GgufFile& f) {
  ModelConfig c;
  ASSIGN_OR_RETURN(c.arch_name, f.get_string("general.architecture"));
  const ArchInfo* info = nullptr;
  for (const auto& i : kArchs) {
    if (c.arch_name == i.name) info = &i;
  }
  if (!info) {
    return unsupported("architecture " + gguf_quoted(c.arch_name) + " is not supported (supported: " +
                       supported_arch_names() + ")");
  }
  c.arch = info->arch;
  c.rope_type = info->rope_type;
  if (auto name = f.get_string("general.name"); name.ok()) c.name = *name;
  const std::string a = c.arch_name + ".";
  ASSIGN_OR_RETURN(c.n_embd, required_int(f, a + "embedding_length"));
  ASSIGN_OR_RETURN(c.n_layer, required_int(f, a + "block_count"));
  ASSIGN_OR_RETURN(c.n_ff, required_int(f, a + "feed_forward_length"));
  ASSIGN_OR_RETURN(c.n_head, required_int(f, a + "attention.head_count"));
  ASSIGN_OR_RETURN(c.n_head_kv, optional_int(f, a + "attention.head_count_kv", c.n_head));
  // Required, as llama.cpp requires them: a guessed training context or
  // norm epsilon would run the model wrong without a word.
  ASSIGN_OR_RETURN(c.n_ctx_train, required_int(f, a + "context_length"));
  if (c.n_embd % c.n_head != 0 && !f.find(a + "attention.key_length")) {
    return corrupt_file("embedding_length " + std::to_string(c.n_embd) + " is not a multiple of head_count " +
                        std::to_string(c.n_head));
  }
  ASSIGN_OR_RETURN(c.head_dim, optional_int(f, a + "attention.key_length", c.n_embd / c.n_head));
  ASSIGN_OR_RETURN(int64_t v_len, optional_int(f, a + "attention.value_length", c.head_dim));
  if (v_len != c.head_dim) return unsupported("value_length != key_length is not supported");
  if (c.n_head % c.n_head_kv != 0) {
    return corrupt_file("head_count " + std::to_string(c.n_head) + " is not a multiple of head_count_kv " +
                        std::to_string(c.n_head_kv));
  }
  ASSIGN_OR_RETURN(c.rope_dim, optional_int(f, a + "rope.dimension_count", c.head_dim));
  if (c.rope_dim > c.head_dim || c.rope_dim % 2 != 0) {
    return corrupt_file("rope.dimension_count " + std::to_string(c.rope_dim) + " does not fit head_dim " +
                        std::to_string(c.head_dim));
  }
  if (c.head_dim % 2 != 0) return corrupt_file("head_dim must be even");
  // Every supported architecture normalizes with RMSNorm (none reads
  // attention.layer_norm_epsilon).
  ASSIGN_OR_RETURN(c.rms_eps, required_float(f, a + "attention.layer_norm_rms_epsilon"));
  ASSIGN_OR_RETURN(c.rope_freq_base, optional_float(f, a + "rope.freq_base", 10000.0f));
  if (!(c.rms_eps > 0) || !(c.rope_freq_base > 0)) return corrupt_file("rms epsilon and rope.freq_base must be positive");
  if (auto type = f.get_string(a + "rope.scaling.type"); type.ok() && *type == "linear") {
    ASSIGN_OR_RETURN(float factor, optional_float(f, a + "rope.scaling.factor", 1.0f));
    if (!(factor > 0)) return corrupt_file("rope.scaling.factor must be positive");
    c.rope_freq_scale = 1.0f / factor;
  } else if (type.ok() && *type == "yarn") {
    ASSIGN_OR_RETURN(float factor, optional_float(f, a + "rope.scaling.factor", 1.0f));
    if (!(factor >= 1)) return corrupt_file("rope.scaling.factor must be at least 1 for yarn");
    c.rope_freq_scale = 1.0f / factor;
    c.yarn = factor > 1;
    ASSIGN_OR_RETURN(c.rope_orig_ctx, optional_int(f, a + "rope.scaling.original_context_length", c.n_ctx_train));
    ASSIGN_OR_RETURN(c.rope_attn_factor, optional_float(f, a + "rope.scaling.attn_factor", 1.0f));
    ASSIGN_OR_RETURN(c.yarn_beta_fast, optional_float(f, a + "rope.scaling.yarn_beta_fast", 32.0f));
    ASSIGN_OR_RETURN(c.yarn_beta_slow, optional_float(f, a + "rope.scaling.yarn_beta_slow", 1.0f));
    if (!(c.rope_attn_factor > 0) || !(c.yarn_beta_fast > 0) || !(c.yarn_beta_slow > 0)) {
      return corrupt_file("yarn attn_factor and beta values must be positive");
    }
  } else if (type.ok() && *type != "none" && *type != "llama3" &&
             !(c.arch == Arch::kPhi3 && (*type == "longrope" || *type == "su"))) {
    return unsupported("rope scaling type " + gguf_quoted(*type) + " is not supported");
  }
  // Vocabulary size: the token embedding is the source of truth.
  const GgufTensor* emb = f.find_tensor("token_embd.weight");
  if (!emb) return corrupt_file("missing tensor 'token_embd.weight'");
  c.n_vocab = emb->ne[1];
  if (c.n_vocab <= 0 || c.n_vocab > kMaxDim) return corrupt_file("bad vocabulary size");
  // One embedding row per token, as llama.cpp requires: fewer rows leave
  // tokens without an embedding, more let the model sample ids with no text.
  // (output.weight is bound to the same row count below.)
  if (const GgufArray* tokens = f.get_array("tokenizer.ggml.tokens");
      tokens && static_cast<int64_t>(tokens->items.size()) != c.n_vocab) {
    return corrupt_file("token_embd.weight has " + std::to_string(c.n_vocab) + " rows but the tokenizer has " +
                        std::to_string(tokens->items.size()) +
                        " tokens (tokenizer.ggml.tokens); the vocabulary and the embedding must match");
  }
  c.tied_output = f.find_tensor("output.weight") == nullptr;
  RETURN_IF_ERROR(read_arch_traits(f, c));
  return c;
}

Result<std::unique_ptr<Model>> load_model(const std::string& path) {
  ASSIGN_OR_RETURN(auto file, GgufFile::open(path));
  return load_model(std::move(file));
}

Result<std::unique_ptr<Model>> load_model(std::unique_ptr<GgufFile> file) {
  auto m = std::make_unique<Model>();
  const GgufFile& f = *file;
  ASSIGN_OR_RETURN(m->config, read_model_config(f));
  const ModelConfig& c = m->config;
  ASSIGN_OR_RETURN(m->token_embd, bind_tensor(f, "token_embd.weight", c.n_embd, c.n_vocab));
  ASSIGN_OR_RETURN(m->output_norm, bind_tensor(f, "output_norm.weight", c.n_embd, 1));
  if (c.tied_output) {
    m->output = m->token_embd;
  } else {
    ASSIGN_OR_RETURN(m->output, bind_tensor(f, "output.weight", c.n_embd, c.n_vocab));
  }
  ASSIGN_OR_RETURN(m->rope_freqs, bind_tensor(f, "rope_freqs.weight", c.rope_dim / 2, 1, /*required=*/false));
  ASSIGN_OR_RETURN(m->rope_factors_long, bind_tensor(f, "rope_factors_long.weight", c.rope_dim / 2, 1, false));
  ASSIGN_OR_RETURN(m->rope_factors_short, bind_tensor(f, "rope_factors_short.weight", c.rope_dim / 2, 1, false));
  if ((m->rope_factors_long == nullptr) != (m->rope_factors_short == nullptr)) {
    return corrupt_file("rope_factors_long and rope_factors_short must come together");
  }
  const bool qwen2 = c.arch == Arch::kQwen2;
  const bool qk_norm = c.arch == Arch::kQwen3 || c.arch == Arch::kGemma3 || c.arch == Arch::kQwen3Moe;
  const bool gemma3 = c.arch == Arch::kGemma3;
  const bool phi3 = c.arch == Arch::kPhi3;
  const bool gpt_oss = c.arch == Arch::kGptOss;
  // block_count comes from the header: a layer has at least 9 tensors, so a
  // count the file cannot hold is refused before it sizes anything.
  if (c.n_layer > static_cast<int64_t>(f.tensors().size())) {
    return corrupt_file("block_count " + std::to_string(c.n_layer) + " exceeds the file's " +
                        std::to_string(f.tensors().size()) + " tensors");
  }
  m->layers.resize(c.n_layer);
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LayerWeights& l = m->layers[i];
    ASSIGN_OR_RETURN(l.attn_norm, bind_tensor(f, p + "attn_norm.weight", c.n_embd, 1));
    // phi3 fuses q, k and v into attn_qkv (some conversions keep them apart).
    if (phi3) {
      ASSIGN_OR_RETURN(l.wqkv, bind_tensor(f, p + "attn_qkv.weight", c.n_embd, c.q_dim() + 2 * c.kv_dim(), false));
    }
    if (!l.wqkv) {
      ASSIGN_OR_RETURN(l.wq, bind_tensor(f, p + "attn_q.weight", c.n_embd, c.q_dim()));
      ASSIGN_OR_RETURN(l.wk, bind_tensor(f, p + "attn_k.weight", c.n_embd, c.kv_dim()));
      ASSIGN_OR_RETURN(l.wv, bind_tensor(f, p + "attn_v.weight", c.n_embd, c.kv_dim()));
    }
    ASSIGN_OR_RETURN(l.wo, bind_tensor(f, p + "attn_output.weight", c.q_dim(), c.n_embd));
    // Biases are required by qwen2 and accepted (if present) on llama.
    ASSIGN_OR_RETURN(l.bq, bind_tensor(f, p + "attn_q.bias", c.q_dim(), 1, qwen2));
    ASSIGN_OR_RETURN(l.bk, bind_tensor(f, p + "attn_k.bias", c.kv_dim(), 1, qwen2));
    ASSIGN_OR_RETURN(l.bv, bind_tensor(f, p + "attn_v.bias", c.kv_dim(), 1, qwen2));
    ASSIGN_OR_RETURN(l.bo, bind_tensor(f, p + "attn_output.bias", c.n_embd, 1, false));
    ASSIGN_OR_RETURN(l.attn_sinks, bind_tensor(f, p + "attn_sinks.weight", c.n_head, 1, gpt_oss));
    if ((l.bq == nullptr) != (l.bk == nullptr) || (l.bq == nullptr) != (l.bv == nullptr)) {
      return corrupt_file("layer " + std::to_string(i) + " has some but not all of the q/k/v biases");
    }
    if (qk_norm) {
      ASSIGN_OR_RETURN(l.q_norm, bind_tensor(f, p + "attn_q_norm.weight", c.head_dim, 1));
      ASSIGN_OR_RETURN(l.k_norm, bind_tensor(f, p + "attn_k_norm.weight", c.head_dim, 1));
    }
    if (gemma3) {
      // Norm weights are multipliers as stored (converters write Gemma's 1 + w).
      ASSIGN_OR_RETURN(l.post_attn_norm, bind_tensor(f, p + "post_attention_norm.weight", c.n_embd, 1));
      ASSIGN_OR_RETURN(l.post_ffn_norm, bind_tensor(f, p + "post_ffw_norm.weight", c.n_embd, 1));
    }
    // gpt-oss's post_attention_norm is the norm in front of the MoE.
    ASSIGN_OR_RETURN(l.ffn_norm, bind_tensor(f, p + (gpt_oss ? "post_attention_norm.weight" : "ffn_norm.weight"), c.n_embd, 1));
    if (c.n_expert > 0) {
      ASSIGN_OR_RETURN(l.ffn_gate_inp, bind_tensor(f, p + "ffn_gate_inp.weight", c.n_embd, c.n_expert));
      ASSIGN_OR_RETURN(l.ffn_gate_exps, bind_experts(f, p + "ffn_gate_exps.weight", c.n_embd, c.n_ff_exp, c.n_expert));
      ASSIGN_OR_RETURN(l.ffn_up_exps, bind_experts(f, p + "ffn_up_exps.weight", c.n_embd, c.n_ff_exp, c.n_expert));
      ASSIGN_OR_RETURN(l.ffn_down_exps, bind_experts(f, p + "ffn_down_exps.weight", c.n_ff_exp, c.n_embd, c.n_expert));
      if (gpt_oss) {
        ASSIGN_OR_RETURN(l.ffn_gate_inp_b, bind_tensor(f, p + "ffn_gate_inp.bias", c.n_expert, 1));
        ASSIGN_OR_RETURN(l.ffn_gate_exps_b, bind_tensor(f, p + "ffn_gate_exps.bias", c.n_ff_exp, c.n_expert));
        ASSIGN_OR_RETURN(l.ffn_up_exps_b, bind_tensor(f, p + "ffn_up_exps.bias", c.n_ff_exp, c.n_expert));
        ASSIGN_OR_RETURN(l.ffn_down_exps_b, bind_tensor(f, p + "ffn_down_exps.bias", c.n_embd, c.n_expert));
        for (const GgufTensor* b : {l.ffn_gate_exps_b, l.ffn_up_exps_b, l.ffn_down_exps_b}) {
          if (b->type != GgmlType::kF32) return unsupported("tensor " + gguf_quoted(b->name) + " must be F32");
        }
      }
      continue;
    }
    if (phi3) {  // ffn_up holds the gate rows, then the up rows
      ASSIGN_OR_RETURN(l.ffn_up, bind_tensor(f, p + "ffn_up.weight", c.n_embd, 2 * c.n_ff));
    } else {
      ASSIGN_OR_RETURN(l.ffn_gate, bind_tensor(f, p + "ffn_gate.weight", c.n_embd, c.n_ff));
      ASSIGN_OR_RETURN(l.ffn_up, bind_tensor(f, p + "ffn_up.weight", c.n_embd, c.n_ff));
    }
    ASSIGN_OR_RETURN(l.ffn_down, bind_tensor(f, p + "ffn_down.weight", c.n_ff, c.n_embd));
  }
  m->file = std::move(file);
  return m;
}

int64_t Model::n_params() const {
  int64_t n = 0;
  for (const auto& t : file->tensors()) n += t.n_elements();
  return n;
}

const float* Model::rope_factors(int64_t n_ctx) const {
  if (rope_freqs) return f32_data(rope_freqs);
  if (!rope_factors_long) return nullptr;
  return f32_data(n_ctx > config.rope_orig_ctx ? rope_factors_long : rope_factors_short);
}

uint64_t Model::n_weight_bytes() const {
  uint64_t n = 0;
  for (const auto& t : file->tensors()) n += t.n_bytes;
  return n;
}

}  // namespace zl
