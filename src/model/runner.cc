#include "model/runner.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "kernels/fused.h"
#include "kernels/quant.h"

namespace zl {
namespace {

const float* f32_data(const GgufTensor* t) { return reinterpret_cast<const float*>(t->data); }

}  // namespace

// ---------------------------------------------------------------- KvStorage

KvStorage::KvStorage(const ModelConfig& c, int64_t n_blocks, int64_t block_size, KvType type, LargeBuffer data)
    : n_layer_(c.n_layer),
      n_blocks_(n_blocks),
      block_size_(block_size),
      kv_dim_(c.kv_dim()),
      type_(type),
      row_bytes_(kv_row_bytes(type, c.kv_dim())),
      data_(std::move(data)) {}

KvStorage::KvStorage(const ModelConfig& c, int64_t n_blocks, int64_t block_size, KvType type)
    : KvStorage([&] {
        auto kv = create(c, n_blocks, block_size, type);
        CHECK(kv.ok()) << kv.status().to_string();
        return std::move(kv).value();
      }()) {}

uint64_t KvStorage::bytes_for(const ModelConfig& c, int64_t n_blocks, int64_t block_size, KvType type) {
  if (n_blocks <= 0 || block_size <= 0) return 0;
  return saturating_mul(saturating_mul(static_cast<uint64_t>(n_blocks), static_cast<uint64_t>(block_size)),
                        bytes_per_token(c, type));
}

Result<KvStorage> KvStorage::create(const ModelConfig& c, int64_t n_blocks, int64_t block_size, KvType type) {
  CHECK(n_blocks > 0 && block_size > 0);
  if (!kv_type_fits(type, c.kv_dim())) {
    return invalid_argument(std::string("KV cache type ") + kv_type_name(type) + " needs rows of a multiple of 32 values; " +
                            "this model's K/V rows have " + std::to_string(c.kv_dim()) + " (use f16)");
  }
  const uint64_t bytes = bytes_for(c, n_blocks, block_size, type);
  const std::string what = "the KV cache (" +
                           std::to_string(saturating_mul(static_cast<uint64_t>(n_blocks), static_cast<uint64_t>(block_size))) +
                           " tokens × " +
                           format_bytes(bytes_per_token(c, type)) + ")";
  ASSIGN_OR_RETURN(LargeBuffer data, allocate_large(bytes, what));
  return KvStorage(c, n_blocks, block_size, type, std::move(data));
}

size_t KvStorage::bytes_per_token(const ModelConfig& c, KvType type) {
  return static_cast<size_t>(c.n_layer) * 2 * static_cast<size_t>(kv_row_bytes(type, c.kv_dim()));
}

uint8_t* KvStorage::row(int64_t layer, int which, int64_t block, int64_t slot) {
  DCHECK(layer < n_layer_ && block < n_blocks_ && slot < block_size_);
  const size_t index = ((static_cast<size_t>(layer) * 2 + which) * n_blocks_ + block) * block_size_ + slot;
  return data_.data() + index * row_bytes_;
}

void* KvStorage::k_row(int64_t layer, int64_t block, int64_t slot) { return row(layer, 0, block, slot); }
void* KvStorage::v_row(int64_t layer, int64_t block, int64_t slot) { return row(layer, 1, block, slot); }

// -------------------------------------------------------------- ModelRunner

ModelRunner::ModelRunner(const Model& model, ThreadPool* pool, std::shared_ptr<const PackedWeights> weights,
                         int64_t n_ctx)
    : model_(model),
      c_(model.config),
      weights_(weights ? std::move(weights) : std::make_shared<const PackedWeights>(model)),
      pool_(pool),
      rope_factors_(model.rope_factors(n_ctx)) {}

Status ModelRunner::validate(std::span<const BatchSequence> batch, const KvStorage& kv) const {
  for (const auto& s : batch) {
    if (s.tokens.empty()) return invalid_argument("a batch sequence has no tokens");
    for (int32_t id : s.tokens) {
      if (id < 0 || id >= c_.n_vocab) {
        return invalid_argument("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                                std::to_string(c_.n_vocab) + ")");
      }
    }
    const int64_t end = s.n_past + static_cast<int64_t>(s.tokens.size());
    if (static_cast<int64_t>(s.block_table.size()) * kv.block_size() < end) {
      return out_of_range("block table of " + std::to_string(s.block_table.size()) + " blocks cannot hold " +
                          std::to_string(end) + " tokens");
    }
    for (int32_t b : s.block_table) {
      if (b < 0 || b >= kv.n_blocks()) return internal_error("block id " + std::to_string(b) + " out of range");
    }
  }
  return Status();
}

// The kernels of kernels/matmul.h (ZL_KERNELS=scalar gives quant.h's
// reference vec_dot per row and token). A token's outputs do not depend on
// the other tokens of the batch.
void ModelRunner::matmul(const GgufTensor& w, const float* x, int64_t n_tokens, float* y) {
  zl::matmul(weights_->get(w), x, n_tokens, y, pool_);
}

const PackedMatrix& ModelRunner::attention_in(int64_t il) const {
  const PackedMatrix* qkv = weights_->qkv(il);
  return qkv ? *qkv : weights_->get(*model_.layers[il].wq);
}

const PackedMatrix& ModelRunner::ffn_in(int64_t il) const {
  if (model_.layers[il].ffn_gate_inp) return weights_->get(*model_.layers[il].ffn_gate_inp);
  const PackedMatrix* gate_up = weights_->gate_up(il);
  return gate_up ? *gate_up : weights_->get(*model_.layers[il].ffn_gate);
}

// RoPE as ggml computes it: theta advances by repeated float multiplication,
// divided by the optional per-dimension frequency factors; cos and sin are
// multiplied by rope_attn_factor (LongRoPE's magnitude scaling, else 1). The
// cos/sin of a position are computed once per forward and rope setting
// (rope_table) and applied to q and k of every layer using that setting.
void ModelRunner::rope_table(int64_t pos, const RopeParams& rope, float* cs) const {
  const int64_t half = c_.rope_dim / 2;
  const float theta_scale = std::pow(rope.freq_base, -2.0f / static_cast<float>(c_.rope_dim));
  const float* factors = rope_factors_;
  const float mscale = c_.rope_attn_factor;
  float theta = static_cast<float>(pos);
  if (c_.yarn && rope.freq_scale != 1.0f) {
    // YaRN as ggml's rope_yarn: the ramp between the correction dimensions
    // mixes the interpolated angle (low dimensions) with the original one.
    const float n_dims = static_cast<float>(c_.rope_dim), orig = static_cast<float>(c_.rope_orig_ctx);
    auto corr_dim = [&](float n_rot) {
      return n_dims * std::log(orig / (n_rot * 2.0f * static_cast<float>(M_PI))) / (2.0f * std::log(rope.freq_base));
    };
    const float low = std::max(0.0f, std::floor(corr_dim(c_.yarn_beta_fast)));
    const float high = std::min(n_dims - 1, std::ceil(corr_dim(c_.yarn_beta_slow)));
    const float ymscale = mscale * (1.0f + 0.1f * std::log(1.0f / rope.freq_scale));
    for (int64_t i = 0; i < half; ++i) {
      const float extrap = theta / (factors ? factors[i] : 1.0f);
      const float interp = rope.freq_scale * extrap;
      const float y = (static_cast<float>(i) - low) / std::max(0.001f, high - low);
      const float ramp = 1.0f - std::min(1.0f, std::max(0.0f, y));
      const float angle = interp * (1.0f - ramp) + extrap * ramp;
      cs[i] = std::cos(angle) * ymscale;
      cs[half + i] = std::sin(angle) * ymscale;
      theta *= theta_scale;
    }
    return;
  }
  for (int64_t i = 0; i < half; ++i) {
    const float angle = rope.freq_scale * (theta / (factors ? factors[i] : 1.0f));
    cs[i] = std::cos(angle) * mscale;
    cs[half + i] = std::sin(angle) * mscale;
    theta *= theta_scale;
  }
}

void ModelRunner::rope(float* x, int64_t n_heads, const float* cs) const {
  const int64_t half = c_.rope_dim / 2;
  const float* cos_t = cs;
  const float* sin_t = cs + half;
  const bool neox = c_.rope_type == RopeType::kNeox;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * c_.head_dim;
    for (int64_t i = 0; i < half; ++i) {
      // kNorm pairs adjacent values, kNeox pairs the two halves of the rotated dims.
      const int64_t a = neox ? i : 2 * i;
      const int64_t b = neox ? i + half : 2 * i + 1;
      const float x0 = v[a], x1 = v[b];
      v[a] = x0 * cos_t[i] - x1 * sin_t[i];
      v[b] = x0 * sin_t[i] + x1 * cos_t[i];
    }
  }
}

void ModelRunner::attention_block(const LayerWeights& l, int64_t il, std::span<const BatchSequence> batch,
                                  KvStorage& kv) {
  const int64_t n_tokens = static_cast<int64_t>(tokens_.size());
  const int64_t n_embd = c_.n_embd, q_dim = c_.q_dim(), kv_dim = c_.kv_dim(), hd = c_.head_dim;
  const LayerConfig& lc = c_.layers[il];
  const int64_t n_ropes = static_cast<int64_t>(c_.ropes.size());
  for (int64_t t = 0; t < n_tokens; ++t) {
    rms_norm(&x_[t * n_embd], f32_data(l.attn_norm), &xn_[t * n_embd], n_embd, c_.rms_eps);
  }
  // Token t's q, k and v rows: q_, k_, v_ (stride q_dim, kv_dim), or one
  // stacked row of stacked_ (stride q_dim + 2 kv_dim); q is copied to q_,
  // where attention reads it.
  const PackedMatrix* qkv = weights_->qkv(il);
  const int64_t qkv_stride = q_dim + 2 * kv_dim;
  if (qkv) {
    zl::matmul(*qkv, xn_.data(), n_tokens, stacked_.data(), pool_);
  } else {
    matmul(*l.wq, xn_.data(), n_tokens, q_.data());
    hint(weights_->get(*l.wk), n_tokens);
    matmul(*l.wk, xn_.data(), n_tokens, k_.data());
    hint(weights_->get(*l.wv), n_tokens);
    matmul(*l.wv, xn_.data(), n_tokens, v_.data());
  }
  const int64_t bs = kv.block_size();
  for (int64_t t = 0; t < n_tokens; ++t) {
    float* q = &q_[t * q_dim];
    float* k = qkv ? &stacked_[t * qkv_stride + q_dim] : &k_[t * kv_dim];
    float* v = qkv ? &stacked_[t * qkv_stride + q_dim + kv_dim] : &v_[t * kv_dim];
    if (qkv) std::memcpy(q, &stacked_[t * qkv_stride], q_dim * sizeof(float));
    if (l.bq) {
      for (int64_t i = 0; i < q_dim; ++i) q[i] += f32_data(l.bq)[i];
      for (int64_t i = 0; i < kv_dim; ++i) k[i] += f32_data(l.bk)[i];
      for (int64_t i = 0; i < kv_dim; ++i) v[i] += f32_data(l.bv)[i];
    }
    if (l.q_norm) {
      for (int64_t h = 0; h < c_.n_head; ++h) rms_norm(q + h * hd, f32_data(l.q_norm), q + h * hd, hd, c_.rms_eps);
      for (int64_t h = 0; h < c_.n_head_kv; ++h) rms_norm(k + h * hd, f32_data(l.k_norm), k + h * hd, hd, c_.rms_eps);
    }
    const TokenRef& ref = tokens_[t];
    const float* cs = &rope_cs_[(t * n_ropes + lc.rope) * c_.rope_dim];
    rope(q, c_.n_head, cs);
    rope(k, c_.n_head_kv, cs);
    const int32_t block = batch[ref.seq].block_table[ref.pos / bs];
    store_kv_row(kv.type(), k, kv.k_row(il, block, ref.pos % bs), kv_dim);
    store_kv_row(kv.type(), v, kv.v_row(il, block, ref.pos % bs), kv_dim);
  }
  // Causal attention through each sequence's block table: the token at
  // position p attends to positions [0, p] (a sliding-window layer to
  // [p - window + 1, p], the ranges wholly before it skipped). Work items are (sequence, kv head,
  // up to 16 of its tokens): each reads the K/V rows once for all
  // its tokens and query heads (kernels/attention.h). A decode token over a
  // context longer than kAttentionRange is split by position range instead
  // (all heads per item, the whole K/V rows read in order, the ranges merged
  // after): bitwise the same result, and enough items for every thread.
  const AttentionShape shape{.n_head = c_.n_head,
                             .n_head_kv = c_.n_head_kv,
                             .head_dim = hd,
                             .block_size = bs,
                             .scale = c_.attn_scale,
                             .window = lc.sliding_window};
  // Tokens per prefill work item: enough to fill the kernel's tile
  // (kAttentionTileRows rows: 64 tokens with 4 query heads per kv head, so
  // that a chunk of K/V read, transposed and converted once serves them all;
  // ~10% less attention time at depth 8192 than 16 tokens), halved while
  // that would leave under 4 items a thread, down to 16, else 4.
  const int64_t n_threads = pool_ ? pool_->n_threads() : 1;
  const int64_t group = c_.n_head / c_.n_head_kv;
  const auto tokens_per_item = [&](int64_t n_s) {
    for (int64_t t = std::max<int64_t>(16, kAttentionTileRows / group / 16 * 16); t >= 16; t /= 2) {
      if ((n_s + t - 1) / t * c_.n_head_kv >= 4 * n_threads) return t;
    }
    return int64_t{4};
  };
  struct Item {
    int64_t seq, first, n;  // first: index into tokens_
  };
  struct Split {
    int64_t seq, token, range, slot;  // slot: index of its partial state in partials_
  };
  std::vector<Item> items;
  std::vector<Split> splits;
  const bool can_split = attention_range_supported(shape);
  // Attention sinks (gpt-oss): every token goes through the split path, its
  // ranges' partial states followed by one holding only the sink (m = the
  // head's sink logit, l = 1, no value), so that the merge adds exp(sink)
  // to each head's softmax denominator.
  const float* sinks = l.attn_sinks ? f32_data(l.attn_sinks) : nullptr;
  int64_t n_slots = 0;
  auto split_token = [&](int64_t si, int64_t token) {
    const int64_t n_kv = tokens_[token].pos + 1;
    for (int64_t j = attention_first_position(shape, n_kv) / kAttentionRange; j * kAttentionRange < n_kv; ++j) {
      splits.push_back({si, token, j, n_slots++});
    }
    if (sinks) ++n_slots;
  };
  for (int64_t si = 0; si < static_cast<int64_t>(batch.size()); ++si) {
    const int64_t n_s = static_cast<int64_t>(batch[si].tokens.size()), first = seq_first_token_[si];
    if (sinks) {
      for (int64_t i = 0; i < n_s; ++i) split_token(si, first + i);
      continue;
    }
    const int64_t n_kv = tokens_[first].pos + 1;
    const int64_t first_range = attention_first_position(shape, n_kv) / kAttentionRange;
    if (can_split && n_s == 1 && n_kv - first_range * kAttentionRange > kAttentionRange) {
      split_token(si, first);
      continue;
    }
    const int64_t per_item = tokens_per_item(n_s);
    for (int64_t i = 0; i < n_s; i += per_item) items.push_back({si, first + i, std::min(per_item, n_s - i)});
  }
  const int64_t n_items = static_cast<int64_t>(items.size()), n_head_items = n_items * c_.n_head_kv;
  const int64_t partial_floats = attention_partial_floats(shape);
  partials_.resize(n_slots * partial_floats);
  const void* k_layer = kv.k_layer(il);
  const void* v_layer = kv.v_layer(il);
  auto work = [&](int64_t j0, int64_t j1) {
    for (int64_t j = j0; j < j1; ++j) {
      if (j >= n_head_items) {
        const Split& sp = splits[j - n_head_items];
        attention_range(shape, &q_[sp.token * q_dim], k_layer, v_layer, kv.type(), batch[sp.seq].block_table.data(),
                        tokens_[sp.token].pos + 1, sp.range, &partials_[sp.slot * partial_floats]);
        continue;
      }
      const Item& it = items[j % n_items];
      const int64_t kvh = j / n_items;
      attention_chunk(shape, &q_[it.first * q_dim], it.n, k_layer, v_layer, kv.type(),
                      batch[it.seq].block_table.data(), tokens_[it.first].pos + 1, &attn_[it.first * q_dim], kvh,
                      kvh + 1);
    }
  };
  const int64_t n_work = n_head_items + static_cast<int64_t>(splits.size());
  if (pool_) {
    pool_->parallel_for(n_work, work);
  } else {
    work(0, n_work);
  }
  hint(weights_->get(*l.wo), n_tokens);
  for (size_t i = 0; i < splits.size();) {  // each split token's ranges are consecutive, in order
    size_t e = i;
    while (e < splits.size() && splits[e].token == splits[i].token) ++e;
    int64_t n_parts = static_cast<int64_t>(e - i);
    if (sinks) {  // the partial state layout of kernels/attention.h: acc [n_head][head_dim], m [n_head], l [n_head]
      float* p = &partials_[(splits[i].slot + n_parts) * partial_floats];
      std::fill(p, p + c_.n_head * hd, 0.0f);
      for (int64_t h = 0; h < c_.n_head; ++h) p[c_.n_head * hd + h] = sinks[h], p[c_.n_head * (hd + 1) + h] = 1.0f;
      ++n_parts;
    }
    attention_merge(shape, &partials_[splits[i].slot * partial_floats], n_parts, &attn_[splits[i].token * q_dim]);
    i = e;
  }
  matmul(*l.wo, attn_.data(), n_tokens, tmp_.data());
  if (l.bo) {
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (int64_t i = 0; i < n_embd; ++i) tmp_[t * n_embd + i] += f32_data(l.bo)[i];
    }
  }
  hint(ffn_in(il), n_tokens);
  add_residual(l.post_attn_norm, n_tokens);
}

void ModelRunner::add_residual(const GgufTensor* post_norm, int64_t n_tokens) {
  const int64_t n_embd = c_.n_embd;
  if (post_norm) {
    for (int64_t t = 0; t < n_tokens; ++t) {
      rms_norm(&tmp_[t * n_embd], f32_data(post_norm), &tmp_[t * n_embd], n_embd, c_.rms_eps);
    }
  }
  for (int64_t i = 0; i < n_tokens * n_embd; ++i) x_[i] += tmp_[i];
}

// The mixture-of-experts FFN as three steps with one parallel region each
// (the barriers its data dependencies need): the router matmul; every
// expert in use times its tokens, [gate; up] (model/moe.h's split_row_jobs
// over all of them, one parallel_for); the activation, then every down
// matmul (one more). Each expert multiplies its gathered tokens as one
// matrix (rows in batch order), so every value is bit-identical to one
// matmul per expert, whatever the batch.
void ModelRunner::moe_ffn(const LayerWeights& l, int64_t il) {
  const int64_t n_tokens = static_cast<int64_t>(tokens_.size());
  const int64_t n_embd = c_.n_embd, n_exp = c_.n_expert, k = c_.n_expert_used, n_ff = c_.n_ff_exp;
  router_.resize(n_tokens * n_exp);
  matmul(*l.ffn_gate_inp, xn_.data(), n_tokens, router_.data());
  if (l.ffn_gate_inp_b) {
    for (int64_t t = 0; t < n_tokens; ++t) {
      for (int64_t e = 0; e < n_exp; ++e) router_[t * n_exp + e] += f32_data(l.ffn_gate_inp_b)[e];
    }
  }
  choices_.resize(n_tokens * k);
  for (int64_t t = 0; t < n_tokens; ++t) route_token(c_.moe_gating, &router_[t * n_exp], n_exp, k, &choices_[t * k]);
  group_by_expert(choices_, n_exp, &groups_);
  active_.clear();
  for (int64_t e = 0; e < n_exp; ++e) {
    if (groups_.size(e) > 0) active_.push_back(static_cast<int32_t>(e));
  }
  // Rows of the grouped buffers: position p = groups_.offsets[e] + i is the
  // i-th (token, choice) of expert e.
  const int64_t n_rows = n_tokens * k;
  xe_.resize(n_rows * n_embd);
  gu_.resize(n_rows * 2 * n_ff);
  act_.resize(n_rows * n_ff);
  ye_.resize(n_rows * n_embd);
  const std::vector<PackedExpert>& experts = weights_->experts(il);
  // Expert e's tokens' rows of xn_: gathered into xe_ (at its positions),
  // or xn_ itself where the expert has every token of the batch.
  auto expert_input = [&](int32_t e) -> const float* {
    const int64_t n_e = groups_.size(e), off = groups_.offsets[e];
    if (n_e == n_tokens) return xn_.data();
    const int32_t* rows = &groups_.rows[off];
    for (int64_t i = 0; i < n_e; ++i) {
      std::memcpy(&xe_[(off + i) * n_embd], &xn_[(rows[i] / k) * n_embd], n_embd * sizeof(float));
    }
    return &xe_[off * n_embd];
  };
  // The activation of active expert a's rows of gu_ into act_, and its down
  // matmul's input prepared in `down_in`.
  auto activate = [&](int64_t a, MatmulInput& down_in) {
    const int32_t e = active_[a];
    const int64_t n_e = groups_.size(e), off = groups_.offsets[e];
    const bool stacked = experts[e].gate_up.has_value();
    const float* gate = &gu_[off * 2 * n_ff];
    const float* up = stacked ? gate + n_ff : gate + n_e * n_ff;
    const int64_t stride = stacked ? 2 * n_ff : n_ff;
    float* act = &act_[off * n_ff];
    if (l.ffn_gate_exps_b) {  // gpt-oss: biases, the clamped SwiGLU
      const float* bg = f32_data(l.ffn_gate_exps_b) + e * n_ff;
      const float* bu = f32_data(l.ffn_up_exps_b) + e * n_ff;
      for (int64_t i = 0; i < n_e; ++i) {
        swiglu_clamped(gate + i * stride, bg, up + i * stride, bu, c_.expert_swiglu_alpha, c_.expert_swiglu_limit,
                       act + i * n_ff, n_ff);
      }
    } else {
      for (int64_t i = 0; i < n_e; ++i) swiglu(gate + i * stride, up + i * stride, act + i * n_ff, n_ff);
    }
    down_in.prepare(experts[e].down, act, n_e);
  };
  const int64_t n_active = static_cast<int64_t>(active_.size());
  const int64_t n_threads = pool_ ? pool_->n_threads() : 1;
  if (n_threads > 1 && n_rows < kParallelExpertRows && n_active >= kWholeExpertsPerThread * n_threads) {
    // A decode batch of several sequences: many experts, each with a token
    // or two. Each expert's whole FFN — its input gathered and quantized,
    // [gate; up], the activation, down — is one work item on one thread, all
    // in one parallel region: no serial preparation between barriers and one
    // barrier instead of two, while the experts (~2.7 MB each for Qwen3-30B)
    // are many enough per thread for stealing to balance the end.
    constexpr int64_t kInputs = 3;  // [gate; up] or gate, up (a type of its own), down
    if (static_cast<int64_t>(inputs_.size()) < kInputs * n_active) inputs_.resize(kInputs * n_active);
    pool_->parallel_for(n_active, [&](int64_t a0, int64_t a1) {
      for (int64_t a = a0; a < a1; ++a) {
        const int32_t e = active_[a];
        const int64_t n_e = groups_.size(e), off = groups_.offsets[e];
        const PackedExpert& ex = experts[e];
        const float* x = expert_input(e);
        float* y = &gu_[off * 2 * n_ff];
        MatmulInput* in = &inputs_[kInputs * a];
        if (ex.gate_up) {
          in[0].prepare(*ex.gate_up, x, n_e);
          in[0].rows(*ex.gate_up, y, 0, ex.gate_up->n_out());
        } else {
          in[0].prepare(ex.gate, x, n_e);
          in[0].rows(ex.gate, y, 0, n_ff);
          in[1].prepare(ex.up, x, n_e);
          in[1].rows(ex.up, y + n_e * n_ff, 0, n_ff);
        }
        activate(a, in[2]);
        in[2].rows(ex.down, &ye_[off * n_embd], 0, n_embd);
      }
    });
  } else {
    n_inputs_ = 0;
    jobs_.clear();
    // [gate; up] (or gate and up) of every expert in use, over its tokens:
    // their rows gathered, except where the expert has every token of the
    // batch (always at decode), which all such experts then share.
    int32_t all_tokens[2] = {-1, -1};
    for (int32_t e : active_) {
      const int64_t n_e = groups_.size(e), off = groups_.offsets[e];
      const float* x = expert_input(e);
      const PackedExpert& ex = experts[e];
      float* y = &gu_[off * 2 * n_ff];
      if (ex.gate_up) {
        add_expert_job(*ex.gate_up, x, n_e, y, n_e == n_tokens ? &all_tokens[0] : nullptr);
      } else {
        add_expert_job(ex.gate, x, n_e, y, n_e == n_tokens ? &all_tokens[0] : nullptr);
        add_expert_job(ex.up, x, n_e, y + n_e * n_ff, n_e == n_tokens ? &all_tokens[1] : nullptr);
      }
    }
    for_each_expert(n_inputs_, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) inputs_[i].prepare(*pending_[i].w, pending_[i].x, pending_[i].n_tokens);
    });
    run_expert_jobs();
    // The activation of each expert's rows, then its down matmul's input.
    jobs_.clear();
    const int64_t first_input = n_inputs_;
    for (int32_t e : active_) {
      add_expert_job(experts[e].down, nullptr, groups_.size(e), &ye_[groups_.offsets[e] * n_embd], nullptr);
    }
    for_each_expert(n_active, [&](int64_t a0, int64_t a1) {
      for (int64_t a = a0; a < a1; ++a) activate(a, inputs_[first_input + a]);
    });
    run_expert_jobs();
  }
  // Weighted sum in choice order (whatever the batch, the same order per
  // token), the down bias (gpt-oss) added to each expert output first.
  pos_.resize(n_rows);
  for (int64_t p = 0; p < n_rows; ++p) pos_[groups_.rows[p]] = static_cast<int32_t>(p);
  for (int64_t t = 0; t < n_tokens; ++t) {
    float* out = &tmp_[t * n_embd];
    for (int64_t j = 0; j < k; ++j) {
      const ExpertChoice& ch = choices_[t * k + j];
      float* y = &ye_[pos_[t * k + j] * n_embd];
      if (l.ffn_down_exps_b) {
        const float* bd = f32_data(l.ffn_down_exps_b) + ch.expert * n_embd;
        for (int64_t i = 0; i < n_embd; ++i) y[i] += bd[i];
      }
      const float w = ch.weight;
      if (j == 0) {
        for (int64_t i = 0; i < n_embd; ++i) out[i] = y[i] * w;
      } else {
        for (int64_t i = 0; i < n_embd; ++i) out[i] += y[i] * w;
      }
    }
  }
}

void ModelRunner::add_expert_job(const PackedMatrix& w, const float* x, int64_t n_tokens, float* y, int32_t* shared) {
  int32_t in = shared ? *shared : -1;
  if (in < 0) {
    in = static_cast<int32_t>(n_inputs_++);
    if (static_cast<int64_t>(inputs_.size()) < n_inputs_) inputs_.resize(n_inputs_);
    if (static_cast<int64_t>(pending_.size()) < n_inputs_) pending_.resize(n_inputs_);
    pending_[in] = {.w = &w, .x = x, .n_tokens = n_tokens};
    if (shared) *shared = in;
  }
  jobs_.push_back({.w = &w, .input = in, .y = y, .n_tokens = n_tokens});
}

void ModelRunner::for_each_expert(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (pool_ && static_cast<int64_t>(groups_.rows.size()) >= kParallelExpertRows) {
    pool_->parallel_for(n, fn);
  } else {
    fn(0, n);
  }
}

void ModelRunner::run_expert_jobs() {
  row_jobs_.clear();
  for (const ExpertJob& j : jobs_) {
    row_jobs_.push_back({.n_rows = j.w->n_out(), .n_tokens = j.n_tokens, .grain = inputs_[j.input].grain(*j.w)});
  }
  // Pieces enough for stealing to balance the end to ~1/32 of a thread's share.
  constexpr int64_t kPiecesPerThread = 32;
  const int64_t n_threads = pool_ ? pool_->n_threads() : 1;
  split_row_jobs(row_jobs_, n_threads * kPiecesPerThread, &pieces_);
  auto work = [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const RowPiece& piece = pieces_[p];
      const ExpertJob& j = jobs_[piece.job];
      inputs_[j.input].rows(*j.w, j.y, piece.r0, piece.r1);
    }
  };
  const int64_t n_pieces = static_cast<int64_t>(pieces_.size());
  if (pool_) {
    pool_->parallel_for(n_pieces, work);
  } else {
    work(0, n_pieces);
  }
}

void ModelRunner::ffn_block(const LayerWeights& l, int64_t il) {
  const int64_t n_tokens = static_cast<int64_t>(tokens_.size());
  const int64_t n_embd = c_.n_embd, n_ff = c_.n_ff;
  for (int64_t t = 0; t < n_tokens; ++t) {
    rms_norm(&x_[t * n_embd], f32_data(l.ffn_norm), &xn_[t * n_embd], n_embd, c_.rms_eps);
  }
  if (l.ffn_gate_exps) {
    moe_ffn(l, il);
    hint(il + 1 < c_.n_layer ? attention_in(il + 1) : weights_->get(*model_.output), n_tokens);
    add_residual(l.post_ffn_norm, n_tokens);
    return;
  }
  // Token t's gate and up rows: gate_, up_ (stride n_ff), or one stacked row
  // of stacked_ (stride 2 n_ff). The activation goes to gate_.
  const PackedMatrix* gate_up = weights_->gate_up(il);
  const float* gate = gate_up ? stacked_.data() : gate_.data();
  const float* up = gate_up ? stacked_.data() + n_ff : up_.data();
  const int64_t stride = gate_up ? 2 * n_ff : n_ff;
  if (gate_up) {
    zl::matmul(*gate_up, xn_.data(), n_tokens, stacked_.data(), pool_);
  } else {
    matmul(*l.ffn_gate, xn_.data(), n_tokens, gate_.data());
    hint(weights_->get(*l.ffn_up), n_tokens);
    matmul(*l.ffn_up, xn_.data(), n_tokens, up_.data());
  }
  const auto activation = c_.ffn_act == FfnActivation::kGelu ? &geglu : &swiglu;
  auto act = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) activation(gate + t * stride, up + t * stride, &gate_[t * n_ff], n_ff);
  };
  // Decode: split the one row (chunks of a multiple of 8 values, so every
  // value goes through the same SIMD lanes as unsplit), ~2 us saved a layer.
  constexpr int64_t kSplitChunk = 1024;
  if (pool_ && n_tokens == 1 && n_ff >= 4 * kSplitChunk) {
    pool_->parallel_for(n_ff, [&](int64_t i0, int64_t i1) { activation(gate + i0, up + i0, &gate_[i0], i1 - i0); },
                        kSplitChunk);
  } else if (pool_ && n_tokens > 1) {
    pool_->parallel_for(n_tokens, act);
  } else {
    act(0, n_tokens);
  }
  hint(weights_->get(*l.ffn_down), n_tokens);
  matmul(*l.ffn_down, gate_.data(), n_tokens, tmp_.data());
  hint(il + 1 < c_.n_layer ? attention_in(il + 1) : weights_->get(*model_.output), n_tokens);
  add_residual(l.post_ffn_norm, n_tokens);
}

uint64_t ModelRunner::step_bytes(const ModelConfig& c, int64_t n_tokens, int64_t n_logit_rows) {
  // Floats per token of x_, xn_, tmp_, q_, attn_, k_, v_, gate_, up_,
  // stacked_ and rope_cs_ (as forward() sizes them), plus about a byte per
  // value for the int8 activations of the widest matmul input.
  const uint64_t floats = 3 * c.n_embd + 2 * c.q_dim() + 2 * c.kv_dim() + 2 * c.n_ff +
                          std::max(c.q_dim() + 2 * c.kv_dim(), 2 * c.n_ff) +
                          c.rope_dim * std::max<int64_t>(1, static_cast<int64_t>(c.ropes.size()));
  // MoE: router logits, the choices and their positions, and per (token,
  // choice) its gathered input, [gate; up], activation and expert output,
  // plus the experts' int8 inputs (about a byte per value with the scales:
  // a quarter of a float each, counted as a half).
  const uint64_t moe_floats =
      c.n_expert > 0 ? c.n_expert + 3 * c.n_expert_used +
                           c.n_expert_used * (2 * c.n_embd + 3 * c.n_ff_exp + (c.n_embd + c.n_ff_exp) / 2)
                     : 0;
  const uint64_t per_token = 4 * (floats + moe_floats) + static_cast<uint64_t>(std::max(c.n_embd, c.n_ff)) + 64;
  const uint64_t logits = saturating_mul(static_cast<uint64_t>(std::max<int64_t>(n_logit_rows, 0)),
                                         4 * static_cast<uint64_t>(c.n_vocab));
  const uint64_t scratch = saturating_mul(static_cast<uint64_t>(std::max<int64_t>(n_tokens, 0)), per_token);
  return saturating_add(scratch, logits);
}

Status ModelRunner::check_kernels(const Model& model) {
  const ModelConfig& c = model.config;
  // Only the SIMD range kernels fold the sinks into the softmax; whether
  // they apply depends on the ISA and head_dim, not on the cache blocks.
  const AttentionShape shape{.n_head = c.n_head, .n_head_kv = c.n_head_kv, .head_dim = c.head_dim, .block_size = 1};
  const bool sinks = std::any_of(model.layers.begin(), model.layers.end(),
                                 [](const LayerWeights& l) { return l.attn_sinks != nullptr; });
  if (sinks && !attention_range_supported(shape)) {
    return unsupported("attention sinks need the AVX2 or AVX-512 attention kernels, for a head_dim that is a "
                       "multiple of 8 up to " + std::to_string(kMaxHeadDim) + " (head_dim " +
                       std::to_string(c.head_dim) + ", kernels " + isa_name(active_isa()) + ")");
  }
  return Status();
}

Status ModelRunner::forward(std::span<const BatchSequence> batch, KvStorage& kv, std::vector<float>& logits) {
  RETURN_IF_ERROR(validate(batch, kv));
  RETURN_IF_ERROR(check_kernels(model_));
  tokens_.clear();
  seq_first_token_.clear();
  for (int64_t si = 0; si < static_cast<int64_t>(batch.size()); ++si) {
    seq_first_token_.push_back(static_cast<int64_t>(tokens_.size()));
    for (size_t i = 0; i < batch[si].tokens.size(); ++i) tokens_.push_back({si, batch[si].n_past + static_cast<int64_t>(i)});
  }
  const int64_t n = static_cast<int64_t>(tokens_.size());
  if (n == 0) return Status();
  const int64_t n_embd = c_.n_embd;
  x_.resize(n * n_embd);
  xn_.resize(n * n_embd);
  q_.resize(n * c_.q_dim());
  attn_.resize(n * c_.q_dim());
  k_.resize(n * c_.kv_dim());
  v_.resize(n * c_.kv_dim());
  gate_.resize(n * c_.n_ff);
  up_.resize(n * c_.n_ff);
  stacked_.resize(n * std::max(c_.q_dim() + 2 * c_.kv_dim(), 2 * c_.n_ff));
  tmp_.resize(n * n_embd);
  const int64_t n_ropes = static_cast<int64_t>(c_.ropes.size());
  rope_cs_.resize(n * n_ropes * c_.rope_dim);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t r = 0; r < n_ropes; ++r) rope_table(tokens_[i].pos, c_.ropes[r], &rope_cs_[(i * n_ropes + r) * c_.rope_dim]);
  }

  const GgufTensor& emb = *model_.token_embd;
  const size_t emb_row = row_size(emb.type, n_embd);
  int64_t t = 0;
  for (const auto& s : batch) {
    for (int32_t id : s.tokens) dequantize_row(emb.type, emb.data + id * emb_row, &x_[t++ * n_embd], n_embd);
  }
  if (c_.embd_scale != 1.0f) {
    for (float& v : x_) v *= c_.embd_scale;
  }
  for (int64_t il = 0; il < c_.n_layer; ++il) {
    attention_block(model_.layers[il], il, batch, kv);
    ffn_block(model_.layers[il], il);
  }

  // Final norm only on the rows whose logits are wanted, then one output matmul.
  std::vector<int64_t> out_rows;
  t = 0;
  for (const auto& s : batch) {
    const int64_t n_s = static_cast<int64_t>(s.tokens.size());
    if (s.want_logits) {
      for (int64_t i = s.all_logits ? 0 : n_s - 1; i < n_s; ++i) out_rows.push_back(t + i);
    }
    t += n_s;
  }
  if (out_rows.empty()) return Status();
  for (size_t r = 0; r < out_rows.size(); ++r) {
    rms_norm(&x_[out_rows[r] * n_embd], f32_data(model_.output_norm), &xn_[r * n_embd], n_embd, c_.rms_eps);
  }
  const size_t base = logits.size();
  logits.resize(base + out_rows.size() * c_.n_vocab);
  matmul(*model_.output, xn_.data(), static_cast<int64_t>(out_rows.size()), logits.data() + base);
  if (const float cap = c_.final_logit_softcap; cap > 0) {
    for (size_t i = base; i < logits.size(); ++i) logits[i] = cap * std::tanh(logits[i] / cap);
  }
  hint(attention_in(0), n);  // for the next forward (typically the next decode step)
  return Status();
}

}  // namespace zl
