// ModelRunner: the batched paged forward equals the reference forward, and a
// token's result does not depend on what else is in the batch.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "model/forward.h"
#include "format/gguf.h"
#include "model/make_model.h"
#include "model/model.h"
#include "model/runner.h"
#include "support/temp_files.h"

namespace zl {
namespace {

const auto* const kTempCleanup = testing_support::register_temp_cleanup("zl_runner");

// gemma3 gets 2 layers of pattern 2 (layer 0 sliding, window `window`, layer 1
// global); phi3 a window on both layers and LongRoPE factors past an
// original context of 32.
std::unique_ptr<Model> small_model(const std::string& arch, GgmlType type, int64_t n_ctx = 128, int64_t window = 8) {
  const std::string dir = testing_support::temp_file("zl_runner", "");
  GgufWriter vw;
  std::vector<std::string> tokens(80, "t");
  vw.set("tokenizer.ggml.tokens", GgufValue::string_array(tokens));
  EXPECT_TRUE(vw.write(dir + "vocab.gguf").ok());
  ModelShape s = *model_shape_preset("tiny");
  s.arch = arch;
  s.n_embd = 64;
  s.n_layer = 2;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_ff = 96;
  s.n_ctx = n_ctx;
  if (arch == "gemma3") s.sliding_window = window, s.sliding_window_pattern = 2;
  if (arch == "phi3") s.sliding_window = window, s.rope_orig_ctx = 32;
  MakeModelOptions o{.shape = s, .type = type, .vocab_path = dir + "vocab.gguf", .out_path = dir + arch + ".gguf",
                     .seed = 11, .name = ""};
  EXPECT_TRUE(make_model(o, nullptr, nullptr).ok());
  auto m = load_model(o.out_path);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return std::move(m).value();
}

std::vector<int32_t> random_ids(std::mt19937& rng, int n) {
  std::vector<int32_t> ids(n);
  for (auto& id : ids) id = static_cast<int32_t>(rng() % 80);
  return ids;
}

TEST(ModelRunner, MatchesReferenceForwardWithF32Cache) {
  for (const char* arch : {"llama", "qwen2", "qwen3", "gemma3", "phi3"}) {
    auto model = small_model(arch, GgmlType::kQ8_0);
    std::mt19937 rng(1);
    const auto ids = random_ids(rng, 21);
    ReferenceForward ref(*model, 64, nullptr);
    auto want = ref.forward(ids, /*all_logits=*/true);
    ASSERT_TRUE(want.ok());
    // Non-contiguous, shuffled block ids with block size 4.
    KvStorage kv(model->config, 16, 4, KvType::kF32);
    std::vector<int32_t> table = {9, 3, 14, 0, 7, 1};
    ModelRunner runner(*model, nullptr, nullptr, /*n_ctx=*/64);  // phi3: the long rope factors, as ref's
    std::vector<float> got;
    // Feed in two chunks (chunked prefill) then compare all positions.
    BatchSequence a{.tokens = std::span(ids).subspan(0, 13), .n_past = 0, .block_table = table, .all_logits = true};
    ASSERT_TRUE(runner.forward(std::span(&a, 1), kv, got).ok());
    BatchSequence b{.tokens = std::span(ids).subspan(13), .n_past = 13, .block_table = table, .all_logits = true};
    ASSERT_TRUE(runner.forward(std::span(&b, 1), kv, got).ok());
    ASSERT_EQ(got.size(), want->size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], (*want)[i], 1e-5) << arch << " " << i;
  }
}

TEST(ModelRunner, ResultsDoNotDependOnTheRestOfTheBatch) {
  auto model = small_model("llama", GgmlType::kQ4_0);
  const int64_t n_vocab = model->config.n_vocab;
  std::mt19937 rng(2);
  const std::vector<std::vector<int32_t>> prompts = {random_ids(rng, 5), random_ids(rng, 17), random_ids(rng, 1),
                                                     random_ids(rng, 9)};
  ThreadPool pool(2);
  ModelRunner runner(*model, &pool);
  // Alone: each prompt in its own cache.
  std::vector<std::vector<float>> alone;
  for (const auto& p : prompts) {
    KvStorage kv(model->config, 8, 4, KvType::kF16);
    std::vector<int32_t> table = {0, 1, 2, 3, 4};
    BatchSequence s{.tokens = p, .n_past = 0, .block_table = table};
    std::vector<float> out;
    ASSERT_TRUE(runner.forward(std::span(&s, 1), kv, out).ok());
    alone.push_back(out);
  }
  // Together: one batch, one shared storage, interleaved block ids.
  KvStorage kv(model->config, 32, 4, KvType::kF16);
  std::vector<std::vector<int32_t>> tables = {{0, 4, 8, 12, 16}, {1, 5, 9, 13, 17}, {2, 6, 10, 14, 18}, {3, 7, 11, 15, 19}};
  std::vector<BatchSequence> batch;
  for (size_t i = 0; i < prompts.size(); ++i) batch.push_back({.tokens = prompts[i], .n_past = 0, .block_table = tables[i]});
  std::vector<float> together;
  ASSERT_TRUE(runner.forward(batch, kv, together).ok());
  ASSERT_EQ(together.size(), prompts.size() * n_vocab);
  for (size_t i = 0; i < prompts.size(); ++i) {
    for (int64_t v = 0; v < n_vocab; ++v) ASSERT_EQ(together[i * n_vocab + v], alone[i][v]) << "seq " << i << " id " << v;
  }
}

// Past kAttentionRange positions a decode token's attention is split by
// position range over the threads (kernels/attention.h): its logits must be
// bit for bit those of the same position computed inside a prefill chunk
// (what preemption recompute and prefix caching rely on), whatever the
// batch, in both cache types.
// gemma3's sliding layer (window 200) starts its walk at the window's range.
TEST(ModelRunner, LongContextDecodeEqualsPrefillBitwise) {
 for (const char* arch : {"qwen2", "gemma3"}) {
  SCOPED_TRACE(arch);
  auto model = small_model(arch, GgmlType::kQ4_0, 1024, /*window=*/200);
  const int64_t n_vocab = model->config.n_vocab;
  std::mt19937 rng(4);
  const auto ids = random_ids(rng, 560);  // decode positions 540..559: three ranges
  ThreadPool pool(2);
  ModelRunner runner(*model, &pool);
  for (KvType type : {KvType::kF16, KvType::kF32, KvType::kQ8_0}) {
    if (!kv_type_fits(type, model->config.kv_dim())) continue;
    std::vector<int32_t> table(70);
    std::iota(table.begin(), table.end(), 0);
    std::shuffle(table.begin(), table.end(), rng);
    KvStorage kv_a(model->config, 71, 8, type), kv_b(model->config, 71, 8, type);  // block 70: the other sequence
    BatchSequence all{.tokens = ids, .n_past = 0, .block_table = table, .all_logits = true};
    std::vector<float> prefill;
    ASSERT_TRUE(runner.forward(std::span(&all, 1), kv_a, prefill).ok());
    BatchSequence head{.tokens = std::span(ids).subspan(0, 540), .n_past = 0, .block_table = table};
    std::vector<float> ignored;
    ASSERT_TRUE(runner.forward(std::span(&head, 1), kv_b, ignored).ok());
    for (int64_t p = 540; p < 560; ++p) {
      // Decoded next to a short sequence, which takes the per-head path.
      std::vector<int32_t> other_table = {70};
      const int32_t other_id = 3;
      std::vector<BatchSequence> batch = {
          {.tokens = std::span(ids).subspan(p, 1), .n_past = p, .block_table = table},
          {.tokens = std::span(&other_id, 1), .n_past = 0, .block_table = other_table}};
      std::vector<float> got;
      ASSERT_TRUE(runner.forward(batch, kv_b, got).ok());
      for (int64_t v = 0; v < n_vocab; ++v) {
        ASSERT_EQ(got[v], prefill[p * n_vocab + v]) << kv_type_name(type) << " pos " << p;
      }
    }
  }
 }
}

// A sliding-window layer really forgets. phi3's window covers every layer:
// after 2 layers of window 6 the last of 20 tokens depends on tokens 9..19
// only, so sequences differing at token 2 give the same logits, bit for bit
// (masked positions weigh exactly 0). gemma3's layer 1 is global: there the
// difference shows.
TEST(ModelRunner, SlidingWindowForgetsOlderTokens) {
  std::mt19937 rng(9);
  const auto a = random_ids(rng, 20);
  auto b = a;
  b[2] = (b[2] + 1) % 80;
  for (const char* arch : {"phi3", "gemma3"}) {
    auto model = small_model(arch, GgmlType::kF32, 128, /*window=*/6);
    ReferenceForward fa(*model, 64, nullptr), fb(*model, 64, nullptr);
    auto la = fa.forward(a, false), lb = fb.forward(b, false);
    ASSERT_TRUE(la.ok() && lb.ok());
    if (std::string(arch) == "phi3") {
      EXPECT_EQ(*la, *lb);
    } else {
      EXPECT_NE(*la, *lb);
    }
  }
}

TEST(ModelRunner, StackedWeightsGiveTheSameLogitsAsSeparateOnes) {
  for (GgmlType type : {GgmlType::kQ4_0, GgmlType::kQ8_0, GgmlType::kF16}) {
    auto model = small_model("qwen2", type);  // qwen2: q/k/v biases on the stacked outputs
    std::mt19937 rng(3);
    const auto ids = random_ids(rng, 11);
    ThreadPool pool(2);
    std::vector<std::vector<float>> logits;
    for (bool stack : {true, false}) {
      auto weights = std::make_shared<const PackedWeights>(*model, active_isa(), stack);
      ASSERT_EQ(weights->qkv(0) != nullptr, stack);
      ASSERT_EQ(weights->gate_up(1) != nullptr, stack);
      ReferenceForward ref(*model, 64, &pool, weights);
      auto out = ref.forward(ids, /*all_logits=*/true);
      ASSERT_TRUE(out.ok());
      logits.push_back(*out);
    }
    ASSERT_EQ(logits[0], logits[1]) << ggml_type_name(type);
  }
}

TEST(ModelRunner, RejectsBadBatches) {
  auto model = small_model("llama", GgmlType::kF32);
  ModelRunner runner(*model, nullptr);
  KvStorage kv(model->config, 4, 4, KvType::kF32);
  std::vector<float> out;
  const std::vector<int32_t> ids = {1, 2, 3, 4, 5};
  std::vector<int32_t> short_table = {0};
  BatchSequence s{.tokens = ids, .n_past = 0, .block_table = short_table};
  EXPECT_EQ(runner.forward(std::span(&s, 1), kv, out).kind(), ErrorKind::kOutOfRange);
  std::vector<int32_t> bad_block = {0, 9};
  s.block_table = bad_block;
  EXPECT_FALSE(runner.forward(std::span(&s, 1), kv, out).ok());
  const std::vector<int32_t> bad_id = {1, 80};
  std::vector<int32_t> table = {0, 1};
  BatchSequence t{.tokens = bad_id, .n_past = 0, .block_table = table};
  EXPECT_EQ(runner.forward(std::span(&t, 1), kv, out).kind(), ErrorKind::kInvalidArgument);
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace zl
