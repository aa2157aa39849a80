// Prefill attention in tiles (kernels/attention_impl.h head_rows): many
// tokens of one chunk walk the context together, several row groups per
// range of K/V rows. Each token's output must be bitwise what the one-token
// path and split decode give (a row never depends on its tile or group), and
// close to the scalar twin; over F16 and Q8_0 caches, GQA ratios 1, 4 and 8,
// odd lengths, contexts crossing range and block boundaries, sliding
// windows. Run with ZL_KERNELS=avx2 for the AVX2 path.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention.h"

namespace zl {
namespace {

struct Case {
  int64_t n_head, n_head_kv, head_dim, block_size;
};

// K ~ 2 N(0, 1) and V ~ N(0, 1) rows of kv_dim values stored as `type`.
std::vector<uint8_t> random_rows(KvType type, int64_t n_rows, int64_t kv_dim, float sigma, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, sigma);
  const int64_t rb = kv_row_bytes(type, kv_dim);
  std::vector<uint8_t> out(n_rows * rb);
  std::vector<float> row(kv_dim);
  for (int64_t r = 0; r < n_rows; ++r) {
    for (float& x : row) x = dist(rng);
    store_kv_row(type, row.data(), &out[r * rb], kv_dim);
  }
  return out;
}

TEST(AttentionTile, ManyTokensAreBitwiseTheSingleTokenAndSplitPaths) {
  const AttentionShape probe{.n_head = 8, .n_head_kv = 2, .head_dim = 64, .block_size = 16, .scale = 1};
  if (!attention_range_supported(probe)) GTEST_SKIP() << "no SIMD attention on this machine";
  std::mt19937 rng(41);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  // GQA 4 (Llama 3.2 1B's shape), 8, 1, 3; block sizes that do and do not
  // divide the chunk and range sizes.
  const Case cases[] = {{32, 8, 64, 16}, {16, 2, 64, 7}, {4, 4, 32, 33}, {12, 4, 64, 16}};
  for (const Case& c : cases) {
    for (KvType type : {KvType::kF16, KvType::kQ8_0}) {
      // n_q 90: more rows than a tile (kAttentionTileRows), and with GQA 3
      // a tile that ends inside a token's heads (270 rows); contexts end
      // inside a chunk and cross range boundaries.
      for (auto [n_q, n_kv_first] : {std::pair<int64_t, int64_t>{90, 230}, {37, 230}, {19, 501}, {5, 1}}) {
        for (int64_t window : {0, 200}) {
          SCOPED_TRACE("n_head " + std::to_string(c.n_head) + " n_head_kv " + std::to_string(c.n_head_kv) + " " +
                       kv_type_name(type) + " n_q " + std::to_string(n_q) + " n_kv_first " +
                       std::to_string(n_kv_first) + " window " + std::to_string(window));
          const int64_t kv_dim = c.n_head_kv * c.head_dim, q_dim = c.n_head * c.head_dim;
          const int64_t n_kv = n_kv_first + n_q - 1;
          const int64_t n_blocks = (n_kv + c.block_size - 1) / c.block_size + 1;
          std::vector<int32_t> table(n_blocks);
          std::iota(table.begin(), table.end(), 0);
          std::shuffle(table.begin(), table.end(), rng);
          const auto k = random_rows(type, n_blocks * c.block_size, kv_dim, 2.0f, rng);
          const auto v = random_rows(type, n_blocks * c.block_size, kv_dim, 1.0f, rng);
          std::vector<float> q(n_q * q_dim);
          for (auto& x : q) x = dist(rng);
          const AttentionShape s{.n_head = c.n_head, .n_head_kv = c.n_head_kv, .head_dim = c.head_dim,
                                 .block_size = c.block_size,
                                 .scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim)), .window = window};
          std::vector<float> tiled(q.size(), NAN);
          attention_chunk(s, q.data(), n_q, k.data(), v.data(), type, table.data(), n_kv_first, tiled.data(), 0,
                          c.n_head_kv);
          std::vector<float> single(q_dim), split(q_dim), want(q_dim);
          for (int64_t t = 0; t < n_q; ++t) {
            const float* qt = q.data() + t * q_dim;
            const int64_t limit = n_kv_first + t;
            attention_chunk(s, qt, 1, k.data(), v.data(), type, table.data(), limit, single.data(), 0, c.n_head_kv);
            ASSERT_EQ(std::memcmp(single.data(), tiled.data() + t * q_dim, q_dim * sizeof(float)), 0) << "token " << t;
            const int64_t first = attention_first_position(s, limit) / kAttentionRange;
            const int64_t n_ranges = (limit + kAttentionRange - 1) / kAttentionRange - first;
            std::vector<float> partials(n_ranges * attention_partial_floats(s), NAN);
            for (int64_t j = n_ranges - 1; j >= 0; --j) {  // any order
              attention_range(s, qt, k.data(), v.data(), type, table.data(), limit, first + j,
                              partials.data() + j * attention_partial_floats(s));
            }
            attention_merge(s, partials.data(), n_ranges, split.data());
            ASSERT_EQ(std::memcmp(split.data(), single.data(), q_dim * sizeof(float)), 0) << "token " << t;
            attention_scalar(s, qt, k.data(), v.data(), type, table.data(), limit, want.data(), 0, c.n_head_kv);
            for (int64_t i = 0; i < q_dim; ++i) {
              ASSERT_NEAR(single[i], want[i], 3e-5f * (1.0f + std::fabs(want[i]))) << "token " << t << " i " << i;
            }
          }
        }
      }
    }
  }
}

// A head range ([kv_h0, kv_h1), as the runner splits work items) computes
// exactly those heads of a many-token tile, the same numbers as all heads.
TEST(AttentionTile, HeadRangeOfATileIsTheSameNumbers) {
  std::mt19937 rng(43);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const AttentionShape s{.n_head = 32, .n_head_kv = 8, .head_dim = 64, .block_size = 16, .scale = 0.125f};
  const int64_t n_q = 40, n_kv_first = 300, kv_dim = s.n_head_kv * s.head_dim, q_dim = s.n_head * s.head_dim;
  const int64_t n_blocks = (n_kv_first + n_q) / s.block_size + 1;
  std::vector<int32_t> table(n_blocks);
  std::iota(table.begin(), table.end(), 0);
  const auto k = random_rows(KvType::kF16, n_blocks * s.block_size, kv_dim, 2.0f, rng);
  const auto v = random_rows(KvType::kF16, n_blocks * s.block_size, kv_dim, 1.0f, rng);
  std::vector<float> q(n_q * q_dim);
  for (auto& x : q) x = dist(rng);
  std::vector<float> all(q.size(), NAN), parts(q.size(), NAN);
  attention_chunk(s, q.data(), n_q, k.data(), v.data(), KvType::kF16, table.data(), n_kv_first, all.data(), 0, 8);
  for (int64_t h = 0; h < 8; h += 3) {
    attention_chunk(s, q.data(), n_q, k.data(), v.data(), KvType::kF16, table.data(), n_kv_first, parts.data(), h,
                    std::min<int64_t>(h + 3, 8));
  }
  ASSERT_EQ(std::memcmp(all.data(), parts.data(), all.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace zl
