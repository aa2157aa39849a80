// core/memory: the checked path for large buffers (allocate_large), the byte
// budget, and the sizes the engine checks with it (KV cache, step scratch).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>

#include "core/memory.h"
#include "engine/engine.h"
#include "model/runner.h"

namespace zl {
namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(Memory, AllocatesAlignedZeroedBuffers) {
  for (size_t bytes : {size_t{1}, size_t{100}, size_t{3} << 20}) {
    auto b = allocate_large(bytes, "a test buffer");
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    EXPECT_EQ(b->size(), bytes);
    const size_t align = bytes >= (size_t{2} << 20) ? size_t{2} << 20 : 64;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data()) % align, 0u) << bytes;
    for (size_t i = 0; i < bytes; i += 4093) ASSERT_EQ(b->data()[i], 0) << i;
    std::memset(b->data(), 0xAB, bytes);  // all of it is writable
  }
}

TEST(Memory, OverBudgetIsATypedErrorNamingWhatAndTheBytes) {
  auto b = allocate_large(size_t{3} << 30, "the KV cache", /*zeroed=*/true, /*available=*/uint64_t{1} << 30);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().kind(), ErrorKind::kResourceExhausted);
  EXPECT_EQ(b.status().message(), "the KV cache needs 3.0 GiB, 1.0 GiB available");
  // Exactly the budget is allowed.
  EXPECT_TRUE(allocate_large(4096, "x", true, 4096).ok());
  EXPECT_FALSE(allocate_large(4097, "x", true, 4096).ok());
}

TEST(Memory, AbsurdSizesFailWithoutThrowingOrAborting) {
  for (size_t bytes : {std::numeric_limits<size_t>::max(), std::numeric_limits<size_t>::max() / 2 + 1,
                       size_t{1} << 60}) {
    auto b = allocate_large(bytes, "a huge buffer");
    ASSERT_FALSE(b.ok()) << bytes;
    EXPECT_EQ(b.status().kind(), ErrorKind::kResourceExhausted);
    EXPECT_TRUE(contains(b.status().message(), "a huge buffer needs")) << b.status().message();
  }
}

TEST(Memory, MoveAndRelease) {
  auto a = allocate_large(256, "x");
  ASSERT_TRUE(a.ok());
  uint8_t* p = a->data();
  LargeBuffer b = std::move(a).value();
  EXPECT_EQ(b.data(), p);
  LargeBuffer c;
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(b.data(), nullptr);
  void* raw = c.release();
  EXPECT_EQ(raw, p);
  EXPECT_EQ(c.size(), 0u);
  std::free(raw);
}

TEST(Memory, AvailableMemoryIsKnownOnLinux) {
  const uint64_t avail = available_memory_bytes();
  EXPECT_GT(avail, uint64_t{1} << 20);
  EXPECT_LT(avail, kMax);
}

TEST(Memory, FormatAndCheckedArithmetic) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(uint64_t{48} << 30), "48.0 GiB");
  EXPECT_EQ(format_bytes(kMax), "16.0 EiB");
  EXPECT_EQ(checked_mul(uint64_t{1} << 32, uint64_t{1} << 31), uint64_t{1} << 63);
  EXPECT_FALSE(checked_mul(uint64_t{1} << 32, uint64_t{1} << 32).has_value());
  EXPECT_EQ(saturating_mul(kMax, 2), kMax);
  EXPECT_EQ(saturating_add(kMax - 1, 2), kMax);
  EXPECT_EQ(saturating_add(2, 3), 5u);
  EXPECT_TRUE(check_memory_budget(10, "x", 10).ok());
  EXPECT_FALSE(check_memory_budget(11, "x", 10).ok());
}

ModelConfig small_model() {
  ModelConfig c;
  c.n_vocab = 512;
  c.n_embd = 64;
  c.n_layer = 5;
  c.n_head = 8;
  c.n_head_kv = 4;
  c.head_dim = 8;
  c.n_ff = 172;
  c.n_ctx_train = 512;
  c.rope_dim = 8;
  return c;
}

TEST(Memory, KvStorageOverTheBudgetIsAnErrorNotBadAlloc) {
  const ModelConfig m = small_model();
  // 5 layers × K and V × 32 values × 2 bytes = 640 B a token.
  EXPECT_EQ(KvStorage::bytes_per_token(m, KvType::kF16), 640u);
  EXPECT_EQ(KvStorage::bytes_for(m, 10, 16, KvType::kF16), 640u * 160);
  auto ok = KvStorage::create(m, 4, 16, KvType::kF16);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->bytes(), 640u * 64);
  auto huge = KvStorage::create(m, int64_t{1} << 40, 16, KvType::kF32);
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().kind(), ErrorKind::kResourceExhausted);
  EXPECT_TRUE(contains(huge.status().message(), "the KV cache (17592186044416 tokens × 1.2 KiB) needs"))
      << huge.status().message();
  // Sizes past 64 bits saturate instead of wrapping to something small.
  EXPECT_EQ(KvStorage::bytes_for(m, int64_t{1} << 62, int64_t{1} << 20, KvType::kF32), kMax);
}

TEST(Memory, EngineMemorySaturatesOnAbsurdSettings) {
  const ModelConfig m = small_model();
  EngineConfig c = resolve_engine_config(m, EngineConfig{.n_ctx = 2'000'000'000, .max_seqs = 4096,
                                                         .n_kv_tokens = 0});
  EXPECT_GE(c.n_kv_tokens, c.n_ctx);  // no overflow into a negative or small size
  EngineMemory need = engine_memory(m, c);
  EXPECT_GE(need.kv_bytes, uint64_t{2'000'000'000} * 640);
  c.max_step_tokens = std::numeric_limits<int32_t>::max();
  need = engine_memory(m, c);
  EXPECT_GT(need.step_bytes, uint64_t{1} << 40);
  // The step scratch grows with the step budget and the logits rows.
  EXPECT_LT(ModelRunner::step_bytes(m, 16, 1), ModelRunner::step_bytes(m, 512, 1));
  EXPECT_EQ(ModelRunner::step_bytes(m, 16, 3) - ModelRunner::step_bytes(m, 16, 1), 2u * 4 * 512);
}

TEST(Memory, AnExplicitKvSizeMayHoldLessThanOneContext) {
  const ModelConfig m = small_model();
  // The default holds at least one context whatever the memory.
  EngineConfig d = resolve_engine_config(m, EngineConfig{.n_ctx = 256, .max_seqs = 1, .n_kv_tokens = 0});
  EXPECT_GE(d.n_kv_tokens, 256);
  // An explicit size is kept, in whole blocks, even below n_ctx.
  EngineConfig c = resolve_engine_config(m, EngineConfig{.n_ctx = 256, .n_kv_tokens = 70, .block_size = 16});
  EXPECT_EQ(c.n_kv_tokens, 80);
  EXPECT_EQ(resolve_engine_config(m, c).n_kv_tokens, 80);  // idempotent
  // ... but never below kMinKvBlocks blocks.
  c = resolve_engine_config(m, EngineConfig{.n_ctx = 256, .n_kv_tokens = 1, .block_size = 16});
  EXPECT_EQ(c.n_kv_tokens, int64_t{kMinKvBlocks} * 16);
}

}  // namespace
}  // namespace zl
