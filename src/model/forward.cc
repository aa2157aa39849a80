#include "model/forward.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "kernels/attention.h"
#include "kernels/quant.h"

namespace zl {
namespace {

const float* f32_data(const GgufTensor* t) { return reinterpret_cast<const float*>(t->data); }

float silu(float x) { return x / (1.0f + std::exp(-x)); }

}  // namespace

void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float mean = static_cast<float>(sum / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale * w[i];
}

PackedWeights::PackedWeights(const Model& model, KernelIsa isa) {
  auto add = [&](const GgufTensor* t) {
    if (t == nullptr || by_tensor_.count(t)) return;
    by_tensor_.try_emplace(t, t->type, t->data, t->ne[0], t->ne[1], isa);
    n_bytes_per_token_ += by_tensor_.at(t).n_bytes();
  };
  for (const LayerWeights& l : model.layers) {
    for (const GgufTensor* t : {l.wq, l.wk, l.wv, l.wo, l.ffn_gate, l.ffn_up, l.ffn_down}) add(t);
  }
  add(model.output);
}

const PackedMatrix& PackedWeights::get(const GgufTensor& t) const {
  auto it = by_tensor_.find(&t);
  CHECK(it != by_tensor_.end()) << "PackedWeights: tensor " << t.name << " was not prepared";
  return it->second;
}

ReferenceForward::ReferenceForward(const Model& model, int64_t n_ctx, ThreadPool* pool,
                                   std::shared_ptr<const PackedWeights> weights)
    : model_(model),
      c_(model.config),
      weights_(weights ? std::move(weights) : std::make_shared<const PackedWeights>(model)),
      pool_(pool),
      n_ctx_(n_ctx > 0 ? n_ctx : model.config.n_ctx_train) {
  k_cache_.resize(c_.n_layer);
  v_cache_.resize(c_.n_layer);
}

// The kernels of kernels/matmul.h (ZL_KERNELS=scalar gives quant.h's
// reference vec_dot per row and token).
void ReferenceForward::matmul(const GgufTensor& w, const float* x, int64_t n_tokens, float* y) {
  zl::matmul(weights_->get(w), x, n_tokens, y, pool_);
}

// RoPE as ggml computes it: theta advances by repeated float multiplication,
// divided by the optional per-dimension frequency factors.
void ReferenceForward::rope(float* x, int64_t n_heads, int64_t pos) const {
  const int64_t n_dims = c_.rope_dim;
  const float theta_scale = std::pow(c_.rope_freq_base, -2.0f / static_cast<float>(n_dims));
  const float* factors = model_.rope_freqs ? f32_data(model_.rope_freqs) : nullptr;
  std::vector<float> cos_t(n_dims / 2), sin_t(n_dims / 2);
  float theta = static_cast<float>(pos);
  for (int64_t i = 0; i < n_dims / 2; ++i) {
    const float ff = factors ? factors[i] : 1.0f;
    const float angle = c_.rope_freq_scale * (theta / ff);
    cos_t[i] = std::cos(angle);
    sin_t[i] = std::sin(angle);
    theta *= theta_scale;
  }
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * c_.head_dim;
    for (int64_t i = 0; i < n_dims / 2; ++i) {
      // kNorm pairs adjacent values, kNeox pairs the two halves of the rotated dims.
      const int64_t a = c_.rope_type == RopeType::kNorm ? 2 * i : i;
      const int64_t b = c_.rope_type == RopeType::kNorm ? 2 * i + 1 : i + n_dims / 2;
      const float x0 = v[a], x1 = v[b];
      v[a] = x0 * cos_t[i] - x1 * sin_t[i];
      v[b] = x0 * sin_t[i] + x1 * cos_t[i];
    }
  }
}

void ReferenceForward::attention_block(const LayerWeights& l, int64_t il, int64_t n_tokens) {
  const int64_t n_embd = c_.n_embd, q_dim = c_.q_dim(), kv_dim = c_.kv_dim(), hd = c_.head_dim;
  for (int64_t t = 0; t < n_tokens; ++t) {
    rms_norm(&x_[t * n_embd], f32_data(l.attn_norm), &xn_[t * n_embd], n_embd, c_.rms_eps);
  }
  matmul(*l.wq, xn_.data(), n_tokens, q_.data());
  matmul(*l.wk, xn_.data(), n_tokens, k_.data());
  matmul(*l.wv, xn_.data(), n_tokens, v_.data());
  auto& kc = k_cache_[il];
  auto& vc = v_cache_[il];
  for (int64_t t = 0; t < n_tokens; ++t) {
    float* q = &q_[t * q_dim];
    float* k = &k_[t * kv_dim];
    float* v = &v_[t * kv_dim];
    if (l.bq) {
      for (int64_t i = 0; i < q_dim; ++i) q[i] += f32_data(l.bq)[i];
      for (int64_t i = 0; i < kv_dim; ++i) k[i] += f32_data(l.bk)[i];
      for (int64_t i = 0; i < kv_dim; ++i) v[i] += f32_data(l.bv)[i];
    }
    if (l.q_norm) {
      for (int64_t h = 0; h < c_.n_head; ++h) rms_norm(q + h * hd, f32_data(l.q_norm), q + h * hd, hd, c_.rms_eps);
      for (int64_t h = 0; h < c_.n_head_kv; ++h) rms_norm(k + h * hd, f32_data(l.k_norm), k + h * hd, hd, c_.rms_eps);
    }
    const int64_t pos = n_past_ + t;
    rope(q, c_.n_head, pos);
    rope(k, c_.n_head_kv, pos);
    std::memcpy(&kc[pos * kv_dim], k, kv_dim * sizeof(float));
    std::memcpy(&vc[pos * kv_dim], v, kv_dim * sizeof(float));
  }
  // Causal attention: token t attends to positions [0, n_past + t]. The
  // contiguous F32 cache is one block of a paged cache (kernels/attention.h).
  const AttentionShape shape{.n_head = c_.n_head,
                             .n_head_kv = c_.n_head_kv,
                             .head_dim = hd,
                             .block_size = n_past_ + n_tokens,
                             .scale = 1.0f / std::sqrt(static_cast<float>(hd))};
  const int32_t block_table[1] = {0};
  auto heads = [&](int64_t j0, int64_t j1) {  // j = t * n_head_kv + kv head
    for (int64_t j = j0; j < j1; ++j) {
      const int64_t t = j / c_.n_head_kv, kvh = j % c_.n_head_kv;
      attention(shape, &q_[t * q_dim], kc.data(), vc.data(), KvType::kF32, block_table, n_past_ + t + 1,
                &attn_[t * q_dim], kvh, kvh + 1);
    }
  };
  if (pool_) {
    pool_->parallel_for(n_tokens * c_.n_head_kv, heads);
  } else {
    heads(0, n_tokens * c_.n_head_kv);
  }
  matmul(*l.wo, attn_.data(), n_tokens, tmp_.data());
  for (int64_t i = 0; i < n_tokens * n_embd; ++i) x_[i] += tmp_[i];
}

void ReferenceForward::ffn_block(const LayerWeights& l, int64_t n_tokens) {
  const int64_t n_embd = c_.n_embd, n_ff = c_.n_ff;
  for (int64_t t = 0; t < n_tokens; ++t) {
    rms_norm(&x_[t * n_embd], f32_data(l.ffn_norm), &xn_[t * n_embd], n_embd, c_.rms_eps);
  }
  matmul(*l.ffn_gate, xn_.data(), n_tokens, gate_.data());
  matmul(*l.ffn_up, xn_.data(), n_tokens, up_.data());
  for (int64_t i = 0; i < n_tokens * n_ff; ++i) gate_[i] = silu(gate_[i]) * up_[i];
  matmul(*l.ffn_down, gate_.data(), n_tokens, tmp_.data());
  for (int64_t i = 0; i < n_tokens * n_embd; ++i) x_[i] += tmp_[i];
}

Result<std::vector<float>> ReferenceForward::forward(std::span<const int32_t> tokens, bool all_logits) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) return invalid_argument("no tokens to feed");
  if (n_past_ + n > n_ctx_) {
    return out_of_range("context overflow: " + std::to_string(n_past_) + " + " + std::to_string(n) +
                        " tokens exceed the context of " + std::to_string(n_ctx_));
  }
  for (int32_t id : tokens) {
    if (id < 0 || id >= c_.n_vocab) {
      return invalid_argument("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                              std::to_string(c_.n_vocab) + ")");
    }
  }
  const int64_t n_embd = c_.n_embd;
  x_.resize(n * n_embd);
  xn_.resize(n * n_embd);
  q_.resize(n * c_.q_dim());
  attn_.resize(n * c_.q_dim());
  k_.resize(n * c_.kv_dim());
  v_.resize(n * c_.kv_dim());
  gate_.resize(n * c_.n_ff);
  up_.resize(n * c_.n_ff);
  tmp_.resize(n * n_embd);
  for (int64_t il = 0; il < c_.n_layer; ++il) {
    const size_t need = static_cast<size_t>((n_past_ + n) * c_.kv_dim());
    if (k_cache_[il].size() < need) {
      k_cache_[il].resize(need);
      v_cache_[il].resize(need);
    }
  }

  const GgufTensor& emb = *model_.token_embd;
  const size_t emb_row = row_size(emb.type, n_embd);
  for (int64_t t = 0; t < n; ++t) dequantize_row(emb.type, emb.data + tokens[t] * emb_row, &x_[t * n_embd], n_embd);

  for (int64_t il = 0; il < c_.n_layer; ++il) {
    attention_block(model_.layers[il], il, n);
    ffn_block(model_.layers[il], n);
  }

  const int64_t first_out = all_logits ? 0 : n - 1;
  const int64_t n_out = n - first_out;
  for (int64_t t = first_out; t < n; ++t) {
    rms_norm(&x_[t * n_embd], f32_data(model_.output_norm), &xn_[(t - first_out) * n_embd], n_embd, c_.rms_eps);
  }
  std::vector<float> logits(n_out * c_.n_vocab);
  matmul(*model_.output, xn_.data(), n_out, logits.data());
  n_past_ += n;
  return logits;
}

}  // namespace zl
