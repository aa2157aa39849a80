// Mixture of experts: routing (top-k, normalised weights, deterministic
// ties), grouping tokens by expert, and the runner's grouped expert
// execution (one matmul per expert over its tokens) against each token run
// on its own.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "core/thread_pool.h"
#include "format/gguf.h"
#include "model/make_model.h"
#include "model/moe.h"
#include "model/runner.h"
#include "support/temp_files.h"

namespace zl {
namespace {

const auto* const kTempCleanup = testing_support::register_temp_cleanup("zl_moe");

std::vector<ExpertChoice> route(MoeGating g, const std::vector<float>& logits, int64_t k) {
  std::vector<ExpertChoice> out(k);
  route_token(g, logits.data(), static_cast<int64_t>(logits.size()), k, out.data());
  return out;
}

TEST(MoeRouting, SoftmaxTopKNormalisesTheChosenProbabilities) {
  const std::vector<float> r = {0.1f, 2.0f, -1.0f, 1.5f, 0.3f};
  const auto c = route(MoeGating::kSoftmaxTopkNorm, r, 2);
  EXPECT_EQ(c[0].expert, 1);
  EXPECT_EQ(c[1].expert, 3);
  const double w1 = std::exp(2.0) / (std::exp(2.0) + std::exp(1.5));
  EXPECT_NEAR(c[0].weight, w1, 1e-6);
  EXPECT_NEAR(c[1].weight, 1 - w1, 1e-6);
  // k = n: every expert, weights the softmax.
  const auto all = route(MoeGating::kSoftmaxTopkNorm, r, 5);
  float sum = 0;
  for (const auto& x : all) sum += x.weight;
  EXPECT_NEAR(sum, 1.0f, 1e-6);
  EXPECT_EQ(all[4].expert, 2);
}

TEST(MoeRouting, TopKSoftmaxSelectsOnLogitsAndSoftmaxesTheChosen) {
  const std::vector<float> r = {0.1f, 2.0f, -1.0f, 1.5f, 0.3f};
  const auto a = route(MoeGating::kTopkSoftmax, r, 3);
  const auto b = route(MoeGating::kSoftmaxTopkNorm, r, 3);
  for (int j = 0; j < 3; ++j) {
    EXPECT_EQ(a[j].expert, b[j].expert);
    EXPECT_NEAR(a[j].weight, b[j].weight, 1e-6);  // the same function, computed another way
  }
  EXPECT_EQ(a[2].expert, 4);
}

TEST(MoeRouting, TiesGoToTheLowerExpertIdDeterministically) {
  for (MoeGating g : {MoeGating::kSoftmaxTopkNorm, MoeGating::kTopkSoftmax}) {
    const auto flat = route(g, std::vector<float>(8, 0.25f), 3);
    EXPECT_EQ(flat[0].expert, 0);
    EXPECT_EQ(flat[1].expert, 1);
    EXPECT_EQ(flat[2].expert, 2);
    for (const auto& x : flat) EXPECT_FLOAT_EQ(x.weight, 1.0f / 3);
    // 2nd and 3rd scores equal: the lower id of the two wins, every time.
    const std::vector<float> r = {0.0f, 0.7f, 0.2f, 0.9f, 0.7f, -3.0f};
    for (int rep = 0; rep < 3; ++rep) {
      const auto c = route(g, r, 2);
      EXPECT_EQ(c[0].expert, 3);
      EXPECT_EQ(c[1].expert, 1);
    }
    // NaN never wins.
    const auto n = route(g, {NAN, 0.5f, 0.1f}, 1);
    if (g == MoeGating::kTopkSoftmax) {
      EXPECT_EQ(n[0].expert, 1);
    }
  }
}

TEST(MoeRouting, GroupsListEachExpertsRowsInBatchOrder) {
  // 3 tokens, k = 2, 4 experts.
  const std::vector<ExpertChoice> c = {{2, 0.6f}, {0, 0.4f}, {2, 0.5f}, {3, 0.5f}, {0, 0.9f}, {2, 0.1f}};
  ExpertGroups g;
  group_by_expert(c, 4, &g);
  EXPECT_EQ(g.offsets, (std::vector<int32_t>{0, 2, 2, 5, 6}));
  EXPECT_EQ(g.rows, (std::vector<int32_t>{1, 4, 0, 2, 5, 3}));
  EXPECT_EQ(g.size(1), 0);
}

std::unique_ptr<Model> moe_model(GgmlType type, const std::string& arch = "qwen3moe", int64_t n_expert = 8) {
  const std::string dir = testing_support::temp_file("zl_moe", "");
  GgufWriter vw;
  vw.set("tokenizer.ggml.tokens", GgufValue::string_array(std::vector<std::string>(80, "t")));
  EXPECT_TRUE(vw.write(dir + "vocab.gguf").ok());
  ModelShape s = *model_shape_preset("tiny-moe");
  s.arch = arch;
  s.n_embd = 64, s.n_layer = 2, s.n_head = 4, s.n_head_kv = 2, s.n_ctx = 64, s.n_ff_exp = 32;
  s.n_expert = n_expert;
  if (arch == "gpt-oss") s.sliding_window = 4;  // layer 0 local, layer 1 global
  MakeModelOptions o{.shape = s, .type = type, .vocab_path = dir + "vocab.gguf",
                     .out_path = dir + arch + "-" + std::to_string(n_expert) + ".gguf",
                     .seed = 5};
  EXPECT_TRUE(make_model(o, nullptr, nullptr).ok());
  auto m = load_model(o.out_path);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return std::move(m).value();
}

// split_row_jobs: every row of every job exactly once, in job and row
// order; bounds on the grain; pieces of about equal cost.
TEST(MoeSplit, PiecesCoverEveryRowOnceInOrderAndBalanceCost) {
  std::mt19937 rng(11);
  for (int round = 0; round < 200; ++round) {
    std::vector<RowJob> jobs(1 + rng() % 40);
    for (RowJob& j : jobs) {
      j.n_rows = rng() % 5 == 0 ? 0 : 1 + rng() % 3000;
      j.n_tokens = 1 + rng() % 20;
      j.grain = std::vector<int64_t>{1, 4, 16}[rng() % 3];
    }
    const int64_t n_pieces = 1 + rng() % 100;
    std::vector<RowPiece> pieces;
    split_row_jobs(jobs, n_pieces, &pieces);
    std::vector<int64_t> next(jobs.size(), 0);
    int32_t last_job = -1;
    double total = 0, max_cost = 0, max_grain_cost = 0;
    for (const RowJob& j : jobs) {
      const double row_cost = static_cast<double>(kWeightPassCost + j.n_tokens);
      total += static_cast<double>(j.n_rows) * row_cost;
      max_grain_cost = std::max(max_grain_cost, static_cast<double>(j.grain) * row_cost);
    }
    for (const RowPiece& p : pieces) {
      ASSERT_GE(p.job, last_job);
      last_job = p.job;
      const RowJob& j = jobs[p.job];
      ASSERT_EQ(p.r0, next[p.job]) << "a gap or an overlap in job " << p.job;
      ASSERT_LT(p.r0, p.r1);
      ASSERT_EQ(p.r0 % j.grain, 0);
      ASSERT_TRUE(p.r1 == j.n_rows || p.r1 % j.grain == 0);
      next[p.job] = p.r1;
      const double cost = static_cast<double>(p.r1 - p.r0) * static_cast<double>(kWeightPassCost + j.n_tokens);
      max_cost = std::max(max_cost, cost);
    }
    for (size_t i = 0; i < jobs.size(); ++i) ASSERT_EQ(next[i], jobs[i].n_rows) << "job " << i << " not covered";
    // A piece costs at most 1.5 shares (rounding the count of a job's
    // pieces) plus one grain, unless its job is a single grain.
    ASSERT_LE(max_cost, 1.5 * total / static_cast<double>(n_pieces) + 2 * max_grain_cost);
    // About n_pieces pieces: one per job at least, never many more.
    ASSERT_LE(static_cast<int64_t>(pieces.size()), 2 * n_pieces + static_cast<int64_t>(jobs.size()));
  }
  std::vector<RowPiece> pieces = {{.job = 3}};
  split_row_jobs({}, 8, &pieces);
  EXPECT_TRUE(pieces.empty());
}

// The decode shape (8 experts of 1536 rows, one token): pieces of equal
// size, whole groups of 16 rows, enough of them for 2 threads to balance.
TEST(MoeSplit, DecodeSplitsEveryExpertEvenly) {
  std::vector<RowJob> jobs(8, RowJob{.n_rows = 1536, .n_tokens = 1, .grain = 16});
  std::vector<RowPiece> pieces;
  split_row_jobs(jobs, 64, &pieces);
  ASSERT_EQ(pieces.size(), 64u);
  for (const RowPiece& p : pieces) EXPECT_EQ(p.r1 - p.r0, 192);
}

// A batch of many tokens runs each expert once over all the tokens routed
// to it; every token's logits must be bit for bit those of the token run
// alone (one token: each of its experts a one-row matmul). With 8 experts
// the batch's experts split their rows across the threads; with 32, the
// batch (66 (token, expert) rows over ~28 experts) takes the decode-batch
// path, each expert's whole FFN one work item (ModelRunner::moe_ffn).
TEST(MoeRunner, GroupedExpertsEqualPerTokenExecution) {
  for (auto [arch, type, n_expert] :
       {std::tuple{"qwen3moe", GgmlType::kF32, 8}, std::tuple{"qwen3moe", GgmlType::kQ4_0, 8},
        std::tuple{"qwen3moe", GgmlType::kQ8_0, 8}, std::tuple{"gpt-oss", GgmlType::kF32, 8},
        std::tuple{"gpt-oss", GgmlType::kMXFP4, 8}, std::tuple{"qwen3moe", GgmlType::kQ4_0, 32},
        std::tuple{"qwen3moe", GgmlType::kF32, 32}, std::tuple{"gpt-oss", GgmlType::kMXFP4, 32}}) {
    auto model = moe_model(type, arch, n_expert);
    ASSERT_EQ(model->config.n_expert, n_expert);
    const int64_t n_vocab = model->config.n_vocab;
    ThreadPool pool(2);
    ModelRunner runner(*model, &pool);
    std::mt19937 rng(3);
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < 24; ++i) prompts.push_back({static_cast<int32_t>(rng() % 80)});
    prompts.push_back({1, 5, 9, 13, 17, 21, 25, 29, 33});  // a prefill among decode tokens
    std::vector<std::vector<float>> alone;
    for (const auto& p : prompts) {
      KvStorage kv(model->config, 4, 16, KvType::kF32);
      std::vector<int32_t> table = {0};
      BatchSequence s{.tokens = p, .n_past = 0, .block_table = table, .all_logits = true};
      std::vector<float> out;
      ASSERT_TRUE(runner.forward(std::span(&s, 1), kv, out).ok());
      alone.push_back(out);
    }
    KvStorage kv(model->config, static_cast<int64_t>(prompts.size()), 16, KvType::kF32);
    std::vector<std::vector<int32_t>> tables;
    for (size_t i = 0; i < prompts.size(); ++i) tables.push_back({static_cast<int32_t>(i)});
    std::vector<BatchSequence> batch;
    for (size_t i = 0; i < prompts.size(); ++i) {
      batch.push_back({.tokens = prompts[i], .n_past = 0, .block_table = tables[i], .all_logits = true});
    }
    std::vector<float> together;
    ASSERT_TRUE(runner.forward(batch, kv, together).ok());
    size_t off = 0;
    for (size_t i = 0; i < prompts.size(); ++i) {
      ASSERT_LE(off + alone[i].size(), together.size());
      for (size_t v = 0; v < alone[i].size(); ++v) {
        ASSERT_EQ(together[off + v], alone[i][v])
            << arch << " " << ggml_type_name(type) << " " << n_expert << " experts, seq " << i << " value " << v;
      }
      off += alone[i].size();
    }
    EXPECT_EQ(off, together.size());
    (void)n_vocab;
  }
}

// gpt-oss: a prompt's logits computed in one prefill equal, bit for bit,
// those of the same tokens fed one by one (sinks, the window of layer 0).
TEST(MoeRunner, GptOssPrefillEqualsDecode) {
  auto model = moe_model(GgmlType::kQ8_0, "gpt-oss");
  ASSERT_NE(model->layers[0].attn_sinks, nullptr);
  EXPECT_EQ(model->config.layers[0].sliding_window, 4);
  EXPECT_EQ(model->config.layers[1].sliding_window, 0);
  ThreadPool pool(2);
  ModelRunner runner(*model, &pool);
  const std::vector<int32_t> ids = {1, 7, 3, 9, 22, 5, 40, 11, 2, 63};
  std::vector<int32_t> table = {0};
  KvStorage kv1(model->config, 1, 16, KvType::kF32), kv2(model->config, 1, 16, KvType::kF32);
  BatchSequence all{.tokens = ids, .n_past = 0, .block_table = table, .all_logits = true};
  std::vector<float> prefill, decode;
  ASSERT_TRUE(runner.forward(std::span(&all, 1), kv1, prefill).ok());
  for (size_t i = 0; i < ids.size(); ++i) {
    BatchSequence one{.tokens = std::span(ids).subspan(i, 1), .n_past = static_cast<int64_t>(i), .block_table = table};
    ASSERT_TRUE(runner.forward(std::span(&one, 1), kv2, decode).ok());
  }
  ASSERT_EQ(prefill.size(), decode.size());
  for (size_t i = 0; i < prefill.size(); ++i) ASSERT_EQ(prefill[i], decode[i]) << i;
}

// The roofline bytes of a MoE model count the router and the used experts.
TEST(MoeRunner, BytesPerTokenCountActiveExperts) {
  auto model = moe_model(GgmlType::kQ8_0);
  PackedWeights w(*model);
  const ModelConfig& c = model->config;
  const GgufTensor* e = model->layers[0].ffn_gate_exps;
  const uint64_t all_experts = 3 * e->n_bytes * c.n_layer;
  const uint64_t active = all_experts / c.n_expert * c.n_expert_used;
  EXPECT_LT(w.n_bytes_per_token(), model->n_weight_bytes() - all_experts + active + 1);
  EXPECT_GT(w.n_bytes_per_token(), active);
}

}  // namespace
}  // namespace zl
