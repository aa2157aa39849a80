// Attention over a Q8_0 cache scores with the query quantized to Q8_0 blocks
// (kernels/attention_query_q8.h): on AVX-512 the int8 dot products run on
// VNNI (vpdpbusd over K rows transposed 16 positions a vector), on AVX2 and
// for head sizes that are not a multiple of 32 the float kernels take the
// dequantized query; the scalar twin dequantizes too. Every path must agree
// with the scalar twin within float rounding: split decode (attention_range
// + attention_merge) and the chunk path, GQA ratios 1, 4 and 8, head_dim
// 32/64/128 (int path) and 16/48 (float path on AVX-512), more than 64 query
// heads, odd depths, pages of 16 and 7 positions (blocks straddling chunks),
// block scales of 0. Run
// with ZL_KERNELS=avx2 for the non-VNNI path (ctest does: *_avx2).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

namespace zl {
namespace {

struct Case {
  int64_t n_head, n_head_kv, head_dim, block_size;
};

std::vector<uint8_t> q8_rows(int64_t n_rows, int64_t kv_dim, float sigma, std::mt19937& rng, bool zero_blocks) {
  std::normal_distribution<float> dist(0.0f, sigma);
  const int64_t rb = kv_row_bytes(KvType::kQ8_0, kv_dim);
  std::vector<uint8_t> out(n_rows * rb);
  std::vector<float> row(kv_dim);
  for (int64_t r = 0; r < n_rows; ++r) {
    for (float& x : row) x = dist(rng);
    // Every 5th row's first block all zero: scale 0, values 0.
    if (zero_blocks && r % 5 == 0) std::fill(row.begin(), row.begin() + 32, 0.0f);
    store_kv_row(KvType::kQ8_0, row.data(), &out[r * rb], kv_dim);
  }
  return out;
}

std::vector<int32_t> shuffled_table(int64_t n_blocks, std::mt19937& rng) {
  std::vector<int32_t> table(n_blocks);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  return table;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], 3e-5f * (1.0f + std::fabs(want[i]))) << what << " i " << i;
  }
}

TEST(AttentionQ8Query, SplitAndChunkPathsMatchTheScalarTwin) {
  std::printf("kernels: %s\n", isa_name(active_isa()));
  std::mt19937 rng(21);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const Case cases[] = {{8, 8, 64, 16},  {32, 8, 64, 16}, {16, 2, 128, 7}, {8, 1, 32, 16},
                        {4, 4, 128, 7},  {16, 2, 64, 7},  {8, 2, 16, 16},  {4, 2, 48, 16},
                        // More than 64 query heads: split decode quantizes them 64 at a time,
                        // a pass boundary inside a kv head's group (80/8) or within it (128/1).
                        {80, 8, 32, 16}, {128, 1, 32, 16}};
  for (const Case& c : cases) {
    for (int64_t n_kv : {1, 15, 16, 17, 255, 257, 700}) {
      const std::string what = "heads " + std::to_string(c.n_head) + "/" + std::to_string(c.n_head_kv) + " head_dim " +
                               std::to_string(c.head_dim) + " block " + std::to_string(c.block_size) + " n_kv " +
                               std::to_string(n_kv);
      SCOPED_TRACE(what);
      const int64_t kv_dim = c.n_head_kv * c.head_dim, n_blocks = (n_kv + c.block_size - 1) / c.block_size + 1;
      const auto k = q8_rows(n_blocks * c.block_size, kv_dim, 2.0f, rng, true);
      const auto v = q8_rows(n_blocks * c.block_size, kv_dim, 1.0f, rng, true);
      const auto table = shuffled_table(n_blocks, rng);
      const int64_t q_dim = c.n_head * c.head_dim;
      std::vector<float> q(q_dim);
      for (float& x : q) x = dist(rng);
      std::fill(q.begin(), q.begin() + c.head_dim, 0.0f);  // head 0: an all-zero query (scale 0)
      const AttentionShape s{.n_head = c.n_head, .n_head_kv = c.n_head_kv, .head_dim = c.head_dim,
                             .block_size = c.block_size, .scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim))};
      std::vector<float> want(q_dim, NAN), chunk(q_dim, NAN);
      attention_scalar(s, q.data(), k.data(), v.data(), KvType::kQ8_0, table.data(), n_kv, want.data(), 0,
                       c.n_head_kv);
      attention_chunk(s, q.data(), 1, k.data(), v.data(), KvType::kQ8_0, table.data(), n_kv, chunk.data(), 0,
                      c.n_head_kv);
      expect_close(chunk, want, "chunk");
      if (!attention_range_supported(s)) continue;
      const int64_t n_ranges = (n_kv + kAttentionRange - 1) / kAttentionRange, pf = attention_partial_floats(s);
      std::vector<float> partials(n_ranges * pf, NAN), split(q_dim, NAN);
      for (int64_t j = 0; j < n_ranges; ++j) {
        attention_range(s, q.data(), k.data(), v.data(), KvType::kQ8_0, table.data(), n_kv, j, &partials[j * pf]);
      }
      attention_merge(s, partials.data(), n_ranges, split.data());
      expect_close(split, want, "split");
    }
  }
}

// The query is quantized, not scored in float: a query and its own Q8_0
// round trip (the same int8 values and scales) give bitwise the same output,
// while a float query would differ by the quantization (~1e-2 here). Each
// block's largest value is 127/64, so the scale is 1/64 exactly (also as
// ggml's F16 scale), and no value is a rounding tie.
TEST(AttentionQ8Query, ScoresWithTheQuantizedQuery) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> dist(-1.9f, 1.9f);
  const AttentionShape s{.n_head = 8, .n_head_kv = 2, .head_dim = 64, .block_size = 16, .scale = 0.125f};
  const int64_t n_kv = 300, n_blocks = 20, q_dim = 8 * 64;
  const auto k = q8_rows(n_blocks * 16, 128, 2.0f, rng, false);
  const auto v = q8_rows(n_blocks * 16, 128, 1.0f, rng, false);
  const auto table = shuffled_table(n_blocks, rng);
  std::vector<float> q(q_dim);
  for (float& x : q) x = dist(rng);
  for (int64_t b = 0; b < q_dim / 32; ++b) q[b * 32 + b % 32] = (b % 2 ? -127.0f : 127.0f) / 64.0f;
  std::vector<uint8_t> q8(kv_row_bytes(KvType::kQ8_0, q_dim));
  std::vector<float> q_rt(q_dim);
  store_kv_row(KvType::kQ8_0, q.data(), q8.data(), q_dim);
  dequantize_row(GgmlType::kQ8_0, q8.data(), q_rt.data(), q_dim);
  double moved = 0;
  for (int64_t i = 0; i < q_dim; ++i) moved = std::max(moved, static_cast<double>(std::fabs(q[i] - q_rt[i])));
  ASSERT_GT(moved, 1e-3);  // the round trip did change the query
  std::vector<float> a(q_dim), b(q_dim);
  attention(s, q.data(), k.data(), v.data(), KvType::kQ8_0, table.data(), n_kv, a.data());
  attention(s, q_rt.data(), k.data(), v.data(), KvType::kQ8_0, table.data(), n_kv, b.data());
  for (int64_t i = 0; i < q_dim; ++i) ASSERT_EQ(a[i], b[i]) << "i " << i << ": the kernels do not score with the quantized query";
  std::vector<float> c(q_dim);
  attention_scalar(s, q.data(), k.data(), v.data(), KvType::kQ8_0, table.data(), n_kv, c.data(), 0, 2);
  std::vector<float> d(q_dim);
  attention_scalar(s, q_rt.data(), k.data(), v.data(), KvType::kQ8_0, table.data(), n_kv, d.data(), 0, 2);
  for (int64_t i = 0; i < q_dim; ++i) ASSERT_EQ(c[i], d[i]) << "i " << i << ": the scalar twin";
}

}  // namespace
}  // namespace zl
