// Model loading and make-model: configs, shape checks, clear errors, determinism.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <unistd.h>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "cli/model_loading.h"
#include "core/memory.h"
#include "core/thread_pool.h"
#include "kernels/attention.h"  // attention_simd_head_dim
#include "kernels/matmul.h"  // active_isa
#include "kernels/quant.h"
#include "model/forward.h"
#include "format/gguf.h"
#include "model/make_model.h"
#include "model/model.h"
#include "model/packed_weights.h"
#include "model/runner.h"
#include "support/process.h"
#include "support/temp_files.h"

namespace zl {
namespace {

const auto* const kTempCleanup = testing_support::register_temp_cleanup("zl_model_test");

std::string temp_path(const std::string& name) { return testing_support::temp_file("zl_model_test", name); }

// A vocabulary-only GGUF with n tokens (SPM-style metadata).
std::string write_vocab(int n) {
  GgufWriter w;
  std::vector<std::string> tokens;
  for (int i = 0; i < n; ++i) tokens.push_back(std::to_string(i).insert(0, 1, 't'));  // (not "t" + ...: GCC 12 -Wrestrict false positive)
  w.set("tokenizer.ggml.model", GgufValue::string("llama"));
  w.set("tokenizer.ggml.tokens", GgufValue::string_array(tokens));
  w.set("tokenizer.ggml.bos_token_id", GgufValue::u32(1));
  w.set("tokenizer.ggml.eos_token_id", GgufValue::u32(2));
  const std::string path = temp_path("vocab.gguf");
  EXPECT_TRUE(w.write(path).ok());
  return path;
}

ModelShape small_shape(const std::string& arch) {
  ModelShape s = *model_shape_preset("tiny");
  s.arch = arch;
  s.n_embd = 64;
  s.n_layer = 2;
  s.n_head = 4;
  s.n_head_kv = 2;
  s.n_ff = 96;
  s.n_ctx = 64;
  return s;
}

std::string make(const std::string& arch, GgmlType type, uint64_t seed, const std::string& name) {
  MakeModelOptions o{.shape = small_shape(arch), .type = type, .vocab_path = write_vocab(96),
                     .out_path = temp_path(name), .seed = seed, .name = ""};
  Status st = make_model(o, nullptr, nullptr);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return o.out_path;
}

TEST(MakeModel, EveryArchAndTypeLoadsAndRuns) {
  for (const char* arch : {"llama", "qwen2", "qwen3", "gemma3", "phi3"}) {
    for (GgmlType t : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ8_0, GgmlType::kQ4_0,
                       GgmlType::kQ4_K, GgmlType::kQ6_K}) {
      SCOPED_TRACE(std::string(arch) + " " + ggml_type_name(t));
      auto m = load_model(make(arch, t, 7, "m.gguf"));
      ASSERT_TRUE(m.ok()) << m.status().to_string();
      const ModelConfig& c = (*m)->config;
      EXPECT_EQ(c.arch_name, arch);
      EXPECT_EQ(c.n_vocab, 96);
      EXPECT_EQ(c.head_dim, 16);
      EXPECT_EQ(c.rope_type, std::string(arch) == "llama" ? RopeType::kNorm : RopeType::kNeox);
      ReferenceForward fwd(**m, 16, nullptr);
      const int32_t ids[] = {1, 5, 9};
      auto logits = fwd.forward(ids, /*all_logits=*/true);
      ASSERT_TRUE(logits.ok());
      EXPECT_EQ(logits->size(), 3u * 96);
      for (float v : *logits) ASSERT_TRUE(std::isfinite(v));
    }
  }
}

TEST(MakeModel, SameSeedSameBytesOtherSeedOtherBytes) {
  const std::string a = read_file_bytes(make("llama", GgmlType::kQ4_0, 3, "a.gguf"));
  ThreadPool pool(3);
  MakeModelOptions o{.shape = small_shape("llama"), .type = GgmlType::kQ4_0, .vocab_path = write_vocab(96),
                     .out_path = temp_path("b.gguf"), .seed = 3, .name = ""};
  ASSERT_TRUE(make_model(o, &pool, nullptr).ok());  // threads must not change the bytes
  EXPECT_EQ(a, read_file_bytes(o.out_path));
  EXPECT_NE(a, read_file_bytes(make("llama", GgmlType::kQ4_0, 4, "c.gguf")));
}

TEST(MakeModel, RejectsBadShapes) {
  MakeModelOptions o{.shape = small_shape("llama"), .type = GgmlType::kF32, .vocab_path = write_vocab(96),
                     .out_path = temp_path("bad.gguf"), .seed = 1, .name = ""};
  o.shape.n_head_kv = 3;  // 4 heads are not a multiple of 3
  EXPECT_EQ(make_model(o, nullptr, nullptr).kind(), ErrorKind::kInvalidArgument);
  o.shape = small_shape("gpt-j");
  EXPECT_EQ(make_model(o, nullptr, nullptr).kind(), ErrorKind::kInvalidArgument);
  o.shape = small_shape("llama");
  o.vocab_path = temp_path("does-not-exist.gguf");
  EXPECT_FALSE(make_model(o, nullptr, nullptr).ok());
}

// Each shape rule the loader applies is told up front with the flags to
// change, and nothing is written (issue 22 D6, D7).
TEST(MakeModel, ShapeErrorsNameTheFlagsAndWriteNothing) {
  MakeModelOptions o{.shape = small_shape("llama"), .type = GgmlType::kQ4_K, .vocab_path = write_vocab(96),
                     .out_path = temp_path("shape.gguf"), .seed = 1, .name = ""};
  std::remove(o.out_path.c_str());
  auto error = [&](const ModelShape& s) {
    o.shape = s;
    Status st = make_model(o, nullptr, nullptr);
    EXPECT_EQ(st.kind(), ErrorKind::kInvalidArgument) << st.to_string();
    EXPECT_FALSE(test::file_exists(o.out_path));
    return st.message();
  };
  ModelShape s = small_shape("llama");
  s.n_embd = 90;  // 4 heads
  s.head_dim = 0;
  EXPECT_EQ(error(s), "--n-embd 90 is not a multiple of --n-head 4 (or give --head-dim)");
  s = small_shape("llama");
  s.n_head_kv = 3;
  EXPECT_EQ(error(s), "--n-head 4 is not a multiple of --n-head-kv 3");
  s = small_shape("llama");
  s.head_dim = 7;
  EXPECT_EQ(error(s), "the head dimension 7 must be even (rope rotates pairs)");
  s = small_shape("llama");
  s.n_ff = 0;
  EXPECT_EQ(error(s), "--n-ff must be positive, not 0");
  s = small_shape("llama");
  s.n_vocab = 50;
  EXPECT_EQ(error(s), "the shape's 50 embedding rows are fewer than the 96 tokens of " + o.vocab_path +
                          " (give a smaller vocabulary or --n-vocab 96)");
  s = *model_shape_preset("tiny-moe");
  s.n_expert_used = 9;
  EXPECT_EQ(error(s), "--n-expert-used 9 exceeds --n-expert 8");
  s.n_expert = 0;
  EXPECT_NE(error(s).find("qwen3moe needs experts"), std::string::npos);
  // A head size that does not divide n_embd is fine when given: key_length
  // is written, and the rows of 100 fall back from Q4_K to F16.
  s = small_shape("llama");
  s.n_embd = 100;
  s.head_dim = 16;
  o.shape = s;
  ASSERT_TRUE(make_model(o, nullptr, nullptr).ok());
  auto m = load_model(o.out_path);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ((*m)->config.head_dim, 16);
  EXPECT_EQ((*m)->config.n_embd, 100);
}

// Writes `vocab`, then a small Q8_0 model of `arch` with n_vocab embedding
// rows on it; returns the model's path.
std::string make_on_vocab(const GgufWriter& vocab, const std::string& arch, int64_t n_vocab, const std::string& name) {
  const std::string vocab_path = temp_path(name + "-vocab.gguf");
  EXPECT_TRUE(vocab.write(vocab_path).ok());
  MakeModelOptions o{.shape = small_shape(arch), .type = GgmlType::kQ8_0, .vocab_path = vocab_path,
                     .out_path = temp_path(name), .seed = 1, .name = ""};
  o.shape.n_vocab = n_vocab;
  Status st = make_model(o, nullptr, nullptr);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return o.out_path;
}

// A shape with more embedding rows than the vocabulary has tokens (gemma3-1b,
// gpt-oss-20b with a smaller --vocab; --n-vocab) pads the tokenizer with
// unique UNUSED placeholders, as llama.cpp's converters do (issue 22 D5).
TEST(MakeModel, PadsTheTokenizerToTheEmbeddingRows) {
  GgufWriter vw;
  std::vector<std::string> texts = {"<unk>", "<s>", "</s>"};
  for (int i = 3; i < 40; ++i) texts.push_back(std::to_string(i).insert(0, 1, 'w'));
  vw.set("tokenizer.ggml.model", GgufValue::string("llama"));
  vw.set("tokenizer.ggml.tokens", GgufValue::string_array(texts));
  vw.set("tokenizer.ggml.scores", GgufValue::f32_array(std::vector<float>(40, -1.0f)));
  std::vector<int32_t> types(40, 1);
  types[0] = 2, types[1] = 3, types[2] = 3;
  vw.set("tokenizer.ggml.token_type", GgufValue::i32_array(types));
  vw.set("tokenizer.ggml.bos_token_id", GgufValue::u32(1));
  vw.set("tokenizer.ggml.eos_token_id", GgufValue::u32(2));
  auto m = load_model(make_on_vocab(vw, "gemma3", 64, "padded.gguf"));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ((*m)->config.n_vocab, 64);
  const GgufFile& f = *(*m)->file;
  const GgufArray* tokens = f.get_array("tokenizer.ggml.tokens");
  const GgufArray* scores = f.get_array("tokenizer.ggml.scores");
  const GgufArray* type = f.get_array("tokenizer.ggml.token_type");
  ASSERT_TRUE(tokens && scores && type);
  ASSERT_EQ(tokens->items.size(), 64u);
  ASSERT_EQ(scores->items.size(), 64u);
  ASSERT_EQ(type->items.size(), 64u);
  EXPECT_EQ(*tokens->items[39].as_string(), "w39");
  EXPECT_EQ(*tokens->items[40].as_string(), "[PAD40]");
  EXPECT_EQ(*tokens->items[63].as_string(), "[PAD63]");
  EXPECT_EQ(type->items[0].as_int(), 2);
  EXPECT_EQ(type->items[39].as_int(), 1);
  EXPECT_EQ(type->items[40].as_int(), 5);  // UNUSED
  EXPECT_EQ(scores->items[39].as_float(), -1.0);
  EXPECT_EQ(scores->items[63].as_float(), -1000.0);
  // Without scores or types in the vocabulary: types are written (NORMAL,
  // then UNUSED), scores stay absent.
  MakeModelOptions o{.shape = small_shape("llama"), .type = GgmlType::kF32, .vocab_path = write_vocab(96),
                     .out_path = temp_path("padded2.gguf"), .seed = 1, .name = ""};
  o.shape.n_vocab = 100;
  ASSERT_TRUE(make_model(o, nullptr, nullptr).ok());
  auto f2 = GgufFile::open(o.out_path);
  ASSERT_TRUE(f2.ok());
  EXPECT_EQ((*f2)->get_array("tokenizer.ggml.scores"), nullptr);
  type = (*f2)->get_array("tokenizer.ggml.token_type");
  ASSERT_TRUE(type && type->items.size() == 100u);
  EXPECT_EQ(type->items[95].as_int(), 1);
  EXPECT_EQ(type->items[96].as_int(), 5);
  EXPECT_EQ(*(*f2)->get_array("tokenizer.ggml.tokens")->items[99].as_string(), "[PAD99]");
}

TEST(MakeModel, PaddedTokenTextsStayUnique) {
  GgufWriter vw;
  vw.set("tokenizer.ggml.tokens", GgufValue::string_array({"a", "[PAD4]", "[PAD4]_", "b"}));
  auto f = GgufFile::open(make_on_vocab(vw, "llama", 6, "clash.gguf"));
  ASSERT_TRUE(f.ok());
  const GgufArray* tokens = (*f)->get_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens && tokens->items.size() == 6u);
  EXPECT_EQ(*tokens->items[4].as_string(), "[PAD4]__");
  EXPECT_EQ(*tokens->items[5].as_string(), "[PAD5]");
}

// gpt-oss has no q/k norms, and the tiny-moe shape gives it a 32-token
// window on its even layers (what tiny-gpt-oss-F32 has).
TEST(MakeModel, GptOssHasNoQkNormsAndTinyMoeAWindow) {
  ModelShape s = *model_shape_preset("tiny-moe");
  s.arch = "gpt-oss";
  s.n_embd = 64, s.n_head = 4, s.n_head_kv = 2, s.n_ff_exp = 32;
  MakeModelOptions o{.shape = s, .type = GgmlType::kF32, .vocab_path = write_vocab(96),
                     .out_path = temp_path("goss.gguf"), .seed = 1, .name = ""};
  ASSERT_TRUE(make_model(o, nullptr, nullptr).ok());
  auto m = load_model(o.out_path);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const GgufFile& f = *(*m)->file;
  for (const auto& t : f.tensors()) {
    EXPECT_EQ(t.name.find("attn_q_norm"), std::string::npos) << t.name;
    EXPECT_EQ(t.name.find("attn_k_norm"), std::string::npos) << t.name;
  }
  EXPECT_NE(f.find_tensor("blk.0.attn_sinks.weight"), nullptr);
  ASSERT_EQ((*m)->config.layers.size(), 4u);
  for (int il = 0; il < 4; ++il) EXPECT_EQ((*m)->config.layers[il].sliding_window, il % 2 == 0 ? 32 : 0) << il;
  // qwen3moe (the preset's own arch) keeps its q/k norms and has no window.
  o.shape.arch = "qwen3moe";
  ASSERT_TRUE(make_model(o, nullptr, nullptr).ok());
  auto q = load_model(o.out_path);
  ASSERT_TRUE(q.ok()) << q.status().to_string();
  EXPECT_NE((*q)->file->find_tensor("blk.0.attn_q_norm.weight"), nullptr);
  EXPECT_EQ((*q)->config.layers[0].sliding_window, 0);
}

// gpt-oss's attention sinks run on the SIMD attention kernels only: a head
// dimension they refuse (not a multiple of 8, or above kMaxHeadDim) is a
// shape error before anything is written, not a file no command can run
// (review 22 #6). Other architectures keep such heads.
TEST(MakeModel, GptOssHeadDimTheSinkKernelsRefuseIsAShapeError) {
  ModelShape s = *model_shape_preset("tiny-moe");
  s.arch = "gpt-oss";
  s.n_embd = 64, s.n_head = 4, s.n_head_kv = 2, s.n_ff_exp = 32, s.n_layer = 1;
  MakeModelOptions o{.shape = s, .type = GgmlType::kF32, .vocab_path = write_vocab(96),
                     .out_path = temp_path("goss-hd.gguf"), .seed = 1, .name = ""};
  const struct {
    int64_t n_embd, n_head, head_dim, want;  // head_dim 0: n_embd / n_head
  } cases[] = {{16, 4, 0, 4}, {48, 4, 0, 12}, {512, 1, 0, 512}, {64, 4, 264, 264}};
  for (const auto& c : cases) {
    std::remove(o.out_path.c_str());
    o.shape = s;
    o.shape.n_embd = c.n_embd, o.shape.n_head = c.n_head, o.shape.n_head_kv = 1, o.shape.head_dim = c.head_dim;
    Status st = make_model(o, nullptr, nullptr);
    EXPECT_EQ(st.kind(), ErrorKind::kInvalidArgument) << c.want << ": " << st.to_string();
    EXPECT_EQ(st.message(), "gpt-oss's attention sinks need a head dimension that is a multiple of 8 up to 256, not " +
                                std::to_string(c.want) + " (--n-embd / --n-head, or --head-dim)");
    EXPECT_FALSE(test::file_exists(o.out_path)) << c.want;
    EXPECT_FALSE(attention_simd_head_dim(c.want));  // the rule ModelRunner::check_kernels applies
  }
  // The sizes the kernels take: 8 and 256 (n_embd 64, 8 heads; --head-dim 256).
  for (const auto& [n_head, head_dim] : {std::pair<int64_t, int64_t>{8, 0}, {4, 256}}) {
    o.shape = s;
    o.shape.n_head = n_head, o.shape.n_head_kv = 2, o.shape.head_dim = head_dim;
    Status st = make_model(o, nullptr, nullptr);
    EXPECT_TRUE(st.ok()) << st.to_string();
    auto m = load_model(o.out_path);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    EXPECT_TRUE(ModelRunner::check_kernels(**m).ok() || active_isa() == KernelIsa::kScalar);
  }
  // A llama shape with 4-wide heads has no sinks: written.
  ModelShape l = small_shape("llama");
  l.n_embd = 16, l.n_head = 4, l.n_head_kv = 2;
  o.shape = l;
  EXPECT_TRUE(make_model(o, nullptr, nullptr).ok());
}

TEST(MakeModel, TensorsThatDoNotFitInMemoryAreAnErrorBeforeWriting) {
  MakeModelOptions o{.shape = small_shape("llama"), .type = GgmlType::kF32, .vocab_path = write_vocab(96),
                     .out_path = temp_path("too-big.gguf"), .seed = 1, .name = "", .memory_budget = 1000};
  std::remove(o.out_path.c_str());
  Status st = make_model(o, nullptr, nullptr);
  EXPECT_EQ(st.kind(), ErrorKind::kResourceExhausted);
  // 64 x 96 F32 values, and one row of 64 floats for the one thread.
  EXPECT_EQ(st.message(), "the token_embd tensor [64, 96] in F32 needs 24.2 KiB, 1000 B available");
  EXPECT_FALSE(test::file_exists(o.out_path));
  // Dimensions whose product overflows 64 bits: the same error, no abort
  // (whatever the budget: the overflow saturates past any).
  o.memory_budget = UINT64_MAX - 1;
  o.shape.n_head = o.shape.n_head_kv = o.shape.head_dim = o.shape.n_embd = int64_t{1} << 22;
  st = make_model(o, nullptr, nullptr);
  EXPECT_EQ(st.kind(), ErrorKind::kResourceExhausted) << st.to_string();
  EXPECT_NE(st.message().find("the attn_q tensor [4194304, 17592186044416]"), std::string::npos) << st.message();
  EXPECT_FALSE(test::file_exists(o.out_path));
}

TEST(MakeModel, Llama3PresetWritesRopeFreqs) {
  ModelShape s = *model_shape_preset("llama3.2-1b");
  EXPECT_TRUE(s.tied_output);
  EXPECT_TRUE(s.llama3_rope);
  s.n_embd = 128;
  s.n_layer = 1;
  s.n_head = 2;
  s.n_head_kv = 1;
  s.n_ff = 256;
  MakeModelOptions o{.shape = s, .type = GgmlType::kQ8_0, .vocab_path = write_vocab(64),
                     .out_path = temp_path("l3.gguf"), .seed = 1, .name = ""};
  ASSERT_TRUE(make_model(o, nullptr, nullptr).ok());
  auto m = load_model(o.out_path);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  ASSERT_NE((*m)->rope_freqs, nullptr);
  EXPECT_TRUE((*m)->config.tied_output);
  EXPECT_EQ((*m)->output, (*m)->token_embd);
  const float* f = reinterpret_cast<const float*>((*m)->rope_freqs->data);
  EXPECT_FLOAT_EQ(f[0], 1.0f);   // high frequencies are not scaled
  EXPECT_FLOAT_EQ(f[31], 32.0f);  // the lowest ones by the full factor
}

// Rewrites one model file with a tensor dropped, renamed or reshaped.
// `src` rewritten without tensor `drop`, with `reshape`'s two dimensions
// swapped, and with `retype` (zero bytes) in type `new_type`.
// `set`: metadata keys replaced (or added).
std::string mutate(const std::string& src, const std::string& drop, const std::string& reshape,
                   const std::string& retype = "", GgmlType new_type = GgmlType::kF32,
                   const std::vector<std::pair<std::string, GgufValue>>& set = {}) {
  auto f = GgufFile::open(src);
  EXPECT_TRUE(f.ok());
  GgufWriter w;
  for (const auto& [k, v] : (*f)->metadata()) {
    if (k != "general.alignment") w.set(k, v);
  }
  for (const auto& [k, v] : set) w.set(k, v);
  for (const auto& t : (*f)->tensors()) {
    if (t.name == drop) continue;
    std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + t.n_dims);
    const uint8_t* data = t.data;
    uint64_t n = t.n_bytes;
    if (t.name == reshape) std::swap(ne[0], ne[1]);
    if (t.name == retype) {
      w.add_tensor(t.name, new_type, ne, [](uint8_t* dst, uint64_t size) { std::memset(dst, 0, size); });
      continue;
    }
    w.add_tensor(t.name, t.type, ne, [data, n](uint8_t* dst, uint64_t) { std::memcpy(dst, data, n); });
  }
  const std::string out = temp_path("mutated.gguf");
  EXPECT_TRUE(w.write(out).ok());
  return out;
}

TEST(LoadModel, MissingTensorIsAClearError) {
  auto m = load_model(mutate(make("llama", GgmlType::kF32, 1, "x.gguf"), "blk.1.ffn_up.weight", ""));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().kind(), ErrorKind::kCorruptFile);
  EXPECT_NE(m.status().message().find("blk.1.ffn_up.weight"), std::string::npos) << m.status().message();
}

TEST(LoadModel, WrongShapeIsAClearError) {
  auto m = load_model(mutate(make("llama", GgmlType::kF32, 1, "y.gguf"), "", "blk.0.ffn_gate.weight"));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("blk.0.ffn_gate.weight"), std::string::npos) << m.status().message();
  EXPECT_NE(m.status().message().find("expected [64, 96]"), std::string::npos) << m.status().message();
}

// One embedding row per token (issue 22 D4): fewer rows would make prompt
// ids fail per request, more would let the model sample ids with no text.
TEST(LoadModel, EmbeddingRowsMustMatchTheTokenizersTokens) {
  const std::string model = make("llama", GgmlType::kF32, 1, "rows.gguf");  // 96 tokens, 96 rows
  for (int n_tokens : {90, 100}) {
    std::vector<std::string> tokens;
    for (int i = 0; i < n_tokens; ++i) tokens.push_back(std::to_string(i).insert(0, 1, 't'));
    auto m = load_model(mutate(model, "", "", "", GgmlType::kF32,
                               {{"tokenizer.ggml.tokens", GgufValue::string_array(tokens)}}));
    ASSERT_FALSE(m.ok()) << n_tokens;
    EXPECT_EQ(m.status().kind(), ErrorKind::kCorruptFile);
    EXPECT_EQ(m.status().message(), "token_embd.weight has 96 rows but the tokenizer has " + std::to_string(n_tokens) +
                                        " tokens (tokenizer.ggml.tokens); the vocabulary and the embedding must match");
  }
  // output.weight is held to the same count.
  auto m = load_model(mutate(model, "", "output.weight"));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("'output.weight' has shape [96, 64, 1, 1], expected [64, 96]"), std::string::npos)
      << m.status().message();
}

TEST(LoadModel, Qwen2WithoutBiasesIsRejected) {
  auto m = load_model(mutate(make("qwen2", GgmlType::kF32, 1, "q.gguf"), "blk.0.attn_k.bias", ""));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("attn_k.bias"), std::string::npos);
}

TEST(LoadModel, ABlockCountTheFileCannotHoldIsRefusedBeforeSizingLayers) {
  auto f = GgufFile::open(make("llama", GgmlType::kF32, 1, "layers.gguf"));
  ASSERT_TRUE(f.ok());
  GgufWriter w;
  for (const auto& [k, v] : (*f)->metadata()) {
    if (k != "general.alignment") w.set(k, v);
  }
  w.set("llama.block_count", GgufValue::u32(1u << 24));  // 16M layer records of ~120 B: 2 GiB
  for (const auto& t : (*f)->tensors()) {
    const uint8_t* data = t.data;
    const uint64_t n = t.n_bytes;
    w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims),
                 [data, n](uint8_t* dst, uint64_t) { std::memcpy(dst, data, n); });
  }
  const std::string path = temp_path("layers-mutated.gguf");
  ASSERT_TRUE(w.write(path).ok());
  auto m = load_model(path);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().kind(), ErrorKind::kCorruptFile);
  EXPECT_NE(m.status().message().find("block_count 16777216 exceeds the file's "), std::string::npos)
      << m.status().message();
}

TEST(LoadModel, UnknownArchitectureIsUnsupported) {
  GgufWriter w;
  w.set("general.architecture", GgufValue::string("mamba"));
  const std::string p = temp_path("mamba.gguf");
  ASSERT_TRUE(w.write(p).ok());
  auto m = load_model(p);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().kind(), ErrorKind::kUnsupported);
  EXPECT_NE(m.status().message().find("mamba"), std::string::npos);
  EXPECT_NE(m.status().message().find("supported: llama, qwen2, qwen3, gemma3, phi3"), std::string::npos)
      << m.status().message();
}

// Strings read from the file reach the messages escaped as the bad-magic
// error escapes them (review 22 #5): a NUL does not cut the message short,
// and control bytes and invalid UTF-8 do not reach the terminal raw.
TEST(LoadModel, StringsFromTheFileAreEscapedInErrors) {
  const std::string model = make("llama", GgmlType::kF32, 1, "esc.gguf");
  const std::string arch = std::string("ll") + '\0' + "a\x1b[31m\xff\xfe'\\";
  auto m = load_model(mutate(model, "", "", "", GgmlType::kF32, {{"general.architecture", GgufValue::string(arch)}}));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().kind(), ErrorKind::kUnsupported);
  EXPECT_EQ(m.status().message(), "architecture 'll\\x00a\\x1b[31m\\xff\\xfe\\x27\\x5c' is not supported (supported: " +
                                      supported_arch_names() + ")");
  m = load_model(mutate(model, "", "", "", GgmlType::kF32,
                        {{"llama.rope.scaling.type", GgufValue::string(std::string("\x1b[2J") + '\0' + "x")}}));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), "rope scaling type '\\x1b[2J\\x00x' is not supported");
}

// The training context and the norm epsilon are required, as llama.cpp
// requires them (review 22 #9): a file without one is refused naming the
// key, where a default was silently taken (2048 tokens; 1e-5, 1e-6 for
// gemma3). Every supported architecture reads the RMS epsilon.
TEST(LoadModel, MissingContextLengthOrRmsEpsilonIsAnErrorNamingTheKey) {
  for (const std::string arch : {"llama", "gemma3", "phi3"}) {
    const std::string model = make(arch, GgmlType::kF32, 1, arch + "-keys.gguf");
    ASSERT_TRUE(load_model(model).ok()) << arch;
    for (const std::string& key : {arch + ".context_length", arch + ".attention.layer_norm_rms_epsilon"}) {
      auto f = GgufFile::open(model);
      ASSERT_TRUE(f.ok());
      GgufWriter w;
      for (const auto& [k, v] : (*f)->metadata()) {
        if (k != key && k != "general.alignment") w.set(k, v);
      }
      for (const auto& t : (*f)->tensors()) {
        const uint8_t* data = t.data;
        const uint64_t n = t.n_bytes;
        w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims),
                     [data, n](uint8_t* dst, uint64_t) { std::memcpy(dst, data, n); });
      }
      const std::string path = temp_path("without-key.gguf");
      ASSERT_TRUE(w.write(path).ok());
      auto m = load_model(path);
      ASSERT_FALSE(m.ok()) << key;
      EXPECT_EQ(m.status().kind(), ErrorKind::kNotFound) << key;
      EXPECT_EQ(m.status().message(), "metadata key '" + key + "' not found");
    }
  }
}

// The per-layer data read from gemma3 metadata: sliding_window_pattern 3
// makes 2 local : 1 global, the local layers with rope.freq_base_swa and no
// rope scaling; the traits of the architecture.
TEST(LoadModel, Gemma3LayersFollowTheSlidingWindowPattern) {
  ModelShape s = small_shape("gemma3");
  s.n_layer = 6, s.sliding_window = 16, s.sliding_window_pattern = 3, s.rope_freq_base = 1e6f,
  s.rope_freq_base_swa = 1e4f;
  MakeModelOptions o{.shape = s, .type = GgmlType::kF32, .vocab_path = write_vocab(96),
                     .out_path = temp_path("g3.gguf"), .seed = 1, .name = ""};
  ASSERT_TRUE(make_model(o, nullptr, nullptr).ok());
  auto m = load_model(o.out_path);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const ModelConfig& c = (*m)->config;
  ASSERT_EQ(c.layers.size(), 6u);
  ASSERT_EQ(c.ropes.size(), 2u);
  EXPECT_EQ(c.ropes[0].freq_base, 1e6f);
  EXPECT_EQ(c.ropes[1].freq_base, 1e4f);
  for (int i = 0; i < 6; ++i) {
    const bool local = i % 3 < 2;
    EXPECT_EQ(c.layers[i].sliding_window, local ? 16 : 0) << i;
    EXPECT_EQ(c.layers[i].rope, local ? 1 : 0) << i;
  }
  EXPECT_EQ(c.embd_scale, std::sqrt(64.0f));
  EXPECT_EQ(c.ffn_act, FfnActivation::kGelu);
  EXPECT_EQ(c.attn_scale, 0.25f);  // 1/sqrt(head_dim 16)
  EXPECT_EQ(c.rope_type, RopeType::kNeox);
  EXPECT_NE((*m)->layers[0].post_attn_norm, nullptr);
  EXPECT_NE((*m)->layers[0].post_ffn_norm, nullptr);
  EXPECT_NE((*m)->layers[0].q_norm, nullptr);
}

// phi3: fused matrices bound as such; LongRoPE's short factors up to the
// original context, the long ones beyond it.
TEST(LoadModel, Phi3FusedMatricesAndLongRopeFactors) {
  ModelShape s = small_shape("phi3");
  s.rope_orig_ctx = 32;
  MakeModelOptions o{.shape = s, .type = GgmlType::kQ8_0, .vocab_path = write_vocab(96),
                     .out_path = temp_path("p3.gguf"), .seed = 1, .name = ""};
  ASSERT_TRUE(make_model(o, nullptr, nullptr).ok());
  auto m = load_model(o.out_path);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const Model& model = **m;
  EXPECT_NE(model.layers[0].wqkv, nullptr);
  EXPECT_EQ(model.layers[0].wq, nullptr);
  EXPECT_EQ(model.layers[0].ffn_gate, nullptr);
  EXPECT_EQ(model.layers[0].ffn_up->ne[1], 2 * 96);
  ASSERT_NE(model.rope_factors_long, nullptr);
  EXPECT_EQ(model.rope_factors(32), reinterpret_cast<const float*>(model.rope_factors_short->data));
  EXPECT_EQ(model.rope_factors(0), reinterpret_cast<const float*>(model.rope_factors_short->data));
  EXPECT_EQ(model.rope_factors(33), reinterpret_cast<const float*>(model.rope_factors_long->data));
  EXPECT_EQ(model.config.rope_orig_ctx, 32);
  EXPECT_GT(model.config.rope_attn_factor, 1.0f);
  // Fused in the file: the stacked matrices whether or not stacking is asked for.
  for (bool stack : {true, false}) {
    PackedWeights w(model, active_isa(), stack);
    EXPECT_NE(w.qkv(0), nullptr);
    EXPECT_NE(w.gate_up(0), nullptr);
  }
}

TEST(LoadModel, Phi3WithoutItsFusedTensorsIsAClearError) {
  GgufWriter w;
  auto f = GgufFile::open(make("phi3", GgmlType::kF32, 1, "p3b.gguf"));
  ASSERT_TRUE(f.ok());
  for (const auto& [key, value] : (*f)->metadata()) w.set(key, value);
  for (const auto& t : (*f)->tensors()) {
    if (t.name == "blk.1.ffn_up.weight") continue;
    const GgufTensor* src = &t;
    std::vector<int64_t> shape;
    for (int d = 0; d < 4 && (d == 0 || t.ne[d] > 1); ++d) shape.push_back(t.ne[d]);
    w.add_tensor(t.name, t.type, shape, [src](uint8_t* dst, uint64_t n) { std::memcpy(dst, src->data, n); });
  }
  const std::string p = temp_path("p3c.gguf");
  ASSERT_TRUE(w.write(p).ok());
  auto m = load_model(p);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().kind(), ErrorKind::kCorruptFile);
  EXPECT_NE(m.status().message().find("blk.1.ffn_up.weight"), std::string::npos) << m.status().message();
}

// A tensor in a type zerolayer cannot compute with (Q5_1 here) is refused
// by name, with the list of the supported types.
TEST(LoadModel, UnsupportedTensorTypeNamesItAndListsTheSupportedOnes) {
  const std::string path = mutate(make("llama", GgmlType::kF32, 1, "q51.gguf"), "", "", "blk.0.ffn_gate.weight",
                                  GgmlType::kQ5_1);
  auto m = load_model(path);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().kind(), ErrorKind::kUnsupported);
  const std::string msg = m.status().message();
  EXPECT_NE(msg.find("blk.0.ffn_gate.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Q5_1"), std::string::npos) << msg;
  for (const char* supported : {"Q4_K", "Q5_K", "Q3_K", "Q2_K", "IQ4_XS", "IQ4_NL", "MXFP4", "Q4_1", "Q5_0"}) {
    EXPECT_NE(msg.find(supported), std::string::npos) << supported << " missing from: " << msg;
  }
}

TEST(LoadModel, MissingFileIsAnError) {
  auto m = load_model("/nonexistent/model.gguf");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("/nonexistent/model.gguf"), std::string::npos) << m.status().message();
}

TEST(Forward, RejectsOutOfVocabularyIdsAndContextOverflow) {
  auto m = load_model(make("llama", GgmlType::kF32, 1, "f.gguf"));
  ASSERT_TRUE(m.ok());
  ReferenceForward fwd(**m, 4, nullptr);
  const int32_t bad[] = {1, 96};
  EXPECT_EQ(fwd.forward(bad, false).status().kind(), ErrorKind::kInvalidArgument);
  const int32_t neg[] = {-1};
  EXPECT_EQ(fwd.forward(neg, false).status().kind(), ErrorKind::kInvalidArgument);
  const int32_t five[] = {1, 2, 3, 4, 5};
  EXPECT_EQ(fwd.forward(five, false).status().kind(), ErrorKind::kOutOfRange);
  EXPECT_EQ(fwd.n_past(), 0);
}

TEST(Forward, IncrementalEqualsBatchAndThreadsDoNotChangeResults) {
  auto m = load_model(make("qwen3", GgmlType::kQ8_0, 5, "g.gguf"));
  ASSERT_TRUE(m.ok());
  const std::vector<int32_t> ids = {1, 17, 33, 2, 60, 61};
  ReferenceForward batch(**m, 16, nullptr);
  auto all = batch.forward(ids, /*all_logits=*/true);
  ASSERT_TRUE(all.ok());
  ThreadPool pool(2);
  ReferenceForward inc(**m, 16, &pool);
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t one[] = {ids[i]};
    auto l = inc.forward(one, false);
    ASSERT_TRUE(l.ok());
    for (int64_t v = 0; v < 96; ++v) EXPECT_NEAR((*l)[v], (*all)[i * 96 + v], 1e-5) << "pos " << i;
  }
}

// Resident bytes of this process's mappings of `path` (/proc/self/smaps).
uint64_t mapped_rss(const std::string& path) {
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool inside = false;
  uint64_t kb = 0;
  while (std::getline(in, line)) {
    // A mapping's header line: "start-end perms offset dev inode   path".
    if (!line.empty() && std::isxdigit(static_cast<unsigned char>(line[0])) && line.find('-') < 17) {
      inside = line.size() >= path.size() && line.compare(line.size() - path.size(), path.size(), path) == 0;
    } else if (inside && line.rfind("Rss:", 0) == 0) {
      kb += std::stoull(line.substr(4));
    }
  }
  return kb * 1024;
}

uint64_t checksum(const GgufTensor& t) {
  uint64_t h = 1469598103934665603ull;
  for (uint64_t i = 0; i < t.n_bytes; ++i) h = (h ^ t.data[i]) * 1099511628211ull;
  return h;
}

TEST(PackedWeights, CopiedMatricesLeaveTheResidentSetAndStayReadable) {
  if (active_isa() == KernelIsa::kScalar) GTEST_SKIP() << "the scalar ISA reads the mapping in place";
  ModelShape shape = small_shape("llama");
  shape.n_embd = 256, shape.n_ff = 1024, shape.n_head = 4, shape.n_head_kv = 4;
  MakeModelOptions o{.shape = shape, .type = GgmlType::kF32, .vocab_path = write_vocab(96),
                     .out_path = temp_path("rss.gguf"), .seed = 3, .name = ""};
  ASSERT_TRUE(make_model(o, nullptr, nullptr).ok());
  char real[PATH_MAX];
  ASSERT_NE(::realpath(o.out_path.c_str(), real), nullptr);
  auto m = load_model(o.out_path);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const Model& model = **m;
  const GgufTensor& gate = *model.layers[0].ffn_gate;  // 1 MiB: stacked with ffn_up, then released
  const uint64_t gate_sum = checksum(gate);
  uint64_t matrix_bytes = 0;
  volatile uint64_t sink = 0;
  for (const LayerWeights& l : model.layers) {
    for (const GgufTensor* t : {l.wq, l.wk, l.wv, l.wo, l.ffn_gate, l.ffn_up, l.ffn_down}) {
      matrix_bytes += t->n_bytes;
      sink = sink + checksum(*t);  // resident now, as after the copy
    }
  }
  const uint64_t rss_before = mapped_rss(real);
  ASSERT_GT(rss_before, matrix_bytes);

  const int32_t ids[] = {1, 5, 9};
  std::vector<float> reference;
  {
    PackedWeights w(model, active_isa());
    // Every matrix but the ones inside shared edge pages (F32 rows of 1 KiB: each is page-aligned bar the ends).
    EXPECT_GE(w.released_bytes(), matrix_bytes * 9 / 10);
    const uint64_t rss_after = mapped_rss(real);
    EXPECT_LE(rss_after + w.released_bytes() * 9 / 10, rss_before) << rss_before << " -> " << rss_after;
    // The forward pass reads the copies; the embeddings (read in place) stay.
    ReferenceForward fwd(model, 8, nullptr, std::make_shared<const PackedWeights>(model, active_isa()));
    auto logits = fwd.forward(ids, false);
    ASSERT_TRUE(logits.ok());
    reference = *logits;
  }
  // Released pages are not lost: reading them in place faults them back in.
  EXPECT_EQ(checksum(gate), gate_sum);
  // And the scalar kernels, which read the mapping in place, agree closely.
  ReferenceForward scalar(model, 8, nullptr, std::make_shared<const PackedWeights>(model, KernelIsa::kScalar));
  auto logits = scalar.forward(ids, false);
  ASSERT_TRUE(logits.ok());
  ASSERT_EQ(logits->size(), reference.size());
  for (size_t i = 0; i < reference.size(); ++i) EXPECT_NEAR((*logits)[i], reference[i], 1e-3);
}

TEST(PackedWeights, BytesForCountsEveryCopyAndCreateChecksTheBudget) {
  if (active_isa() == KernelIsa::kScalar) GTEST_SKIP() << "the scalar ISA copies only stacked matrices";
  for (GgmlType type : {GgmlType::kF32, GgmlType::kQ8_0}) {
    SCOPED_TRACE(ggml_type_name(type));
    auto m = load_model(make("llama", type, 5, "budget.gguf"));
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    const Model& model = **m;
    const uint64_t bytes = PackedWeights::bytes_for(model, active_isa());
    const uint64_t per_token = PackedWeights(model, active_isa()).n_bytes_per_token();
    // F32 rows are copied as they are; Q8_0 is repacked with its scales
    // widened for 16-row groups (never fewer bytes than the rows).
    if (type == GgmlType::kF32) {
      EXPECT_EQ(bytes, per_token);
    } else {
      EXPECT_GE(bytes, per_token);
    }
    // Stacking changes no byte count of these shapes (whole 16-row groups).
    EXPECT_EQ(PackedWeights::bytes_for(model, active_isa(), /*stack=*/false), bytes);
    auto short_one = PackedWeights::create(model, {.name = "m.gguf", .available = bytes - 1});
    ASSERT_FALSE(short_one.ok());
    EXPECT_EQ(short_one.status().kind(), ErrorKind::kResourceExhausted);
    EXPECT_EQ(short_one.status().message(), "repacked weights of m.gguf need " + format_bytes(bytes) + ", " +
                                                format_bytes(bytes - 1) + " available");
    auto exact = PackedWeights::create(model, {.name = "m.gguf", .available = bytes});
    ASSERT_TRUE(exact.ok()) << exact.status().to_string();
    EXPECT_EQ((*exact)->n_bytes_per_token(), per_token);
  }
  // The scalar kernels read the file in place: only stacked matrices copy.
  auto m = load_model(make("llama", GgmlType::kF32, 5, "budget.gguf"));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(PackedWeights::bytes_for(**m, KernelIsa::kScalar, /*stack=*/false), 0u);
  EXPECT_GT(PackedWeights::bytes_for(**m, KernelIsa::kScalar), 0u);
}

// The commands' loader (cli/model_loading.h) on a real model with an
// injected budget: what `zerolayer serve|generate|bench` report on a machine
// without the memory, instead of aborting in the repack.
TEST(PackedWeights, LoadingAModelThatDoesNotFitIsAnError) {
  const std::string path = test::shared_dir() + "/models/stories260K.gguf";
  if (!test::file_exists(path)) GTEST_SKIP() << "SKIPPED: " << path << " is absent (needs ../shared)";
  auto fits = cli::load_model_with_progress(path);
  ASSERT_TRUE(fits.ok()) << fits.status().to_string();
  ASSERT_NE(fits->weights, nullptr);
  const uint64_t need = PackedWeights::bytes_for(*fits->model);
  ASSERT_GT(need, 0u);
  auto short_one = cli::load_model_with_progress(path, /*memory_budget=*/need / 2);
  ASSERT_FALSE(short_one.ok());
  EXPECT_EQ(short_one.status().kind(), ErrorKind::kResourceExhausted);
  EXPECT_EQ(short_one.status().to_string(), "resource_exhausted: repacked weights of " + path + " need " +
                                                format_bytes(need) + ", " + format_bytes(need / 2) + " available");
  EXPECT_TRUE(cli::load_model_with_progress(path, /*memory_budget=*/need).ok());
}

// Past the budget check, each copy is allocated through allocate_large: a
// refusal is an error, never an abort (the data is not read before).
TEST(PackedWeights, AMatrixWhoseCopyCannotBeAllocatedIsAnError) {
  if (active_isa() == KernelIsa::kScalar) GTEST_SKIP() << "the scalar ISA copies only stacked matrices";
  const int64_t n_in = 4096, n_out = int64_t{1} << 40;  // petabytes
  for (GgmlType type : {GgmlType::kF32, GgmlType::kQ8_0, GgmlType::kQ4_K}) {
    SCOPED_TRACE(ggml_type_name(type));
    auto m = PackedMatrix::create(type, /*data=*/nullptr, n_in, n_out);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().kind(), ErrorKind::kResourceExhausted);
    EXPECT_EQ(m.status().message().rfind("a copy of a weight matrix needs ", 0), 0u) << m.status().message();
    const PackedMatrix::Rows parts[] = {{nullptr, n_out}, {nullptr, n_out}};
    auto stacked = PackedMatrix::create_stacked(type, n_in, parts);
    ASSERT_FALSE(stacked.ok());
    EXPECT_EQ(stacked.status().kind(), ErrorKind::kResourceExhausted);
  }
}

TEST(PackedWeights, AnInMemoryImageIsNeverReleased) {
  const std::string path = make("llama", GgmlType::kF32, 4, "mem.gguf");
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  auto file = GgufFile::parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  for (const GgufTensor& t : (*file)->tensors()) {
    const uint64_t sum = checksum(t);
    EXPECT_EQ((*file)->release_pages(t), 0u) << t.name;  // madvise would zero heap memory
    EXPECT_EQ(checksum(t), sum) << t.name;
  }
}

}  // namespace
}  // namespace zl

namespace zl {
namespace {

// The mixes follow llama-quantize's choices; for the tiny 4-layer shape
// ../shared/models/README.md lists them (Q4_K_M, Q5_K_M: Q6_K output and
// attn_v/ffn_down of blocks 2 and 3; Q4_K_S: Q5_K attn_v everywhere).
TEST(QuantMix, TypesPerTensorAsLlamaQuantize) {
  const auto q4km = parse_quant_mix("q4_k_m"), q4ks = parse_quant_mix("Q4_K_S"), q3km = parse_quant_mix("Q3_K_M");
  ASSERT_TRUE(q4km && q4ks && q3km);
  EXPECT_FALSE(parse_quant_mix("Q4_K"));
  EXPECT_EQ(mix_tensor_type(*q4km, "output.weight", 4), GgmlType::kQ6_K);
  EXPECT_EQ(mix_tensor_type(*q4km, "token_embd.weight", 4), GgmlType::kQ4_K);
  for (int il = 0; il < 4; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    const GgmlType more = il >= 2 ? GgmlType::kQ6_K : GgmlType::kQ4_K;
    EXPECT_EQ(mix_tensor_type(*q4km, p + "attn_v.weight", 4), more) << il;
    EXPECT_EQ(mix_tensor_type(*q4km, p + "ffn_down.weight", 4), more) << il;
    EXPECT_EQ(mix_tensor_type(*q4km, p + "attn_q.weight", 4), GgmlType::kQ4_K) << il;
    EXPECT_EQ(mix_tensor_type(*q4ks, p + "attn_v.weight", 4), GgmlType::kQ5_K) << il;
    EXPECT_EQ(mix_tensor_type(*q4ks, p + "ffn_down.weight", 4), GgmlType::kQ4_K) << il;
    EXPECT_EQ(mix_tensor_type(*q3km, p + "attn_v.weight", 4), il < 2 ? GgmlType::kQ5_K : GgmlType::kQ4_K) << il;
    EXPECT_EQ(mix_tensor_type(*q3km, p + "attn_output.weight", 4), GgmlType::kQ4_K) << il;
    EXPECT_EQ(mix_tensor_type(*q3km, p + "ffn_gate.weight", 4), GgmlType::kQ3_K) << il;
  }
  // 16 layers (Llama 3.2 1B): more bits in 0, 1, 4, 7, 10, 13, 14, 15.
  const auto q5km = parse_quant_mix("Q5_K_M");
  ASSERT_TRUE(q5km);
  for (int il = 0; il < 16; ++il) {
    const bool more = il < 2 || il >= 14 || (il - 2) % 3 == 2;
    EXPECT_EQ(mix_tensor_type(*q5km, "blk." + std::to_string(il) + ".ffn_down.weight", 16),
              more ? GgmlType::kQ6_K : GgmlType::kQ5_K)
        << il;
  }
}

}  // namespace
}  // namespace zl
