// kernels/attention and kernels/fused: the dispatched kernels against their
// scalar twins; attention over a paged cache with a shuffled block table,
// awkward lengths and GQA groups.
#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/fused.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

namespace zl {
namespace {

struct Case {
  int64_t n_head, n_head_kv, head_dim, block_size;
};

TEST(Attention, MatchesScalarTwinOnPagedCache) {
  if (active_isa() == KernelIsa::kScalar) std::printf("NOTE: ZL_KERNELS=scalar, comparing the scalar path with itself\n");
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const Case cases[] = {{4, 4, 64, 16}, {8, 2, 64, 16}, {32, 8, 64, 7}, {12, 2, 128, 32}, {6, 1, 8, 5}, {4, 2, 36, 16}};
  for (const Case& c : cases) {
    for (KvType kv_type : {KvType::kF32, KvType::kF16}) {
      for (int64_t n_kv : {1, 15, 17, 100, 300}) {
        const int64_t kv_dim = c.n_head_kv * c.head_dim;
        const int64_t n_blocks = (n_kv + c.block_size - 1) / c.block_size + 3;
        std::vector<int32_t> table(n_blocks);
        std::iota(table.begin(), table.end(), 0);
        std::shuffle(table.begin(), table.end(), rng);
        std::vector<float> kf(n_blocks * c.block_size * kv_dim), vf(kf.size());
        for (auto& x : kf) x = 2.0f * dist(rng);
        for (auto& x : vf) x = dist(rng);
        std::vector<uint16_t> kh(kf.size()), vh(vf.size());
        for (size_t i = 0; i < kf.size(); ++i) kh[i] = fp32_to_fp16(kf[i]), vh[i] = fp32_to_fp16(vf[i]);
        const void* k = kv_type == KvType::kF32 ? static_cast<const void*>(kf.data()) : kh.data();
        const void* v = kv_type == KvType::kF32 ? static_cast<const void*>(vf.data()) : vh.data();
        std::vector<float> q(c.n_head * c.head_dim);
        for (auto& x : q) x = dist(rng);
        const AttentionShape s{.n_head = c.n_head,
                               .n_head_kv = c.n_head_kv,
                               .head_dim = c.head_dim,
                               .block_size = c.block_size,
                               .scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim))};
        std::vector<float> got(q.size(), NAN), want(q.size(), NAN);
        attention(s, q.data(), k, v, kv_type, table.data(), n_kv, got.data());
        attention_scalar(s, q.data(), k, v, kv_type, table.data(), n_kv, want.data(), 0, c.n_head_kv);
        for (size_t i = 0; i < q.size(); ++i) {
          ASSERT_NEAR(got[i], want[i], 2e-5f * (1.0f + std::fabs(want[i])))
              << "n_head " << c.n_head << " n_head_kv " << c.n_head_kv << " head_dim " << c.head_dim << " n_kv "
              << n_kv << " f16 " << (kv_type == KvType::kF16) << " i " << i;
        }
      }
    }
  }
}

TEST(Attention, CausalChunkMatchesPerTokenScalar) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const Case cases[] = {{32, 8, 64, 16}, {6, 2, 32, 5}, {4, 1, 16, 8}};
  for (const Case& c : cases) {
    for (int64_t n_q : {1, 3, 5, 9}) {
      for (int64_t n_kv_first : {1, 17, 40}) {
        const int64_t kv_dim = c.n_head_kv * c.head_dim, q_dim = c.n_head * c.head_dim;
        const int64_t n_kv = n_kv_first + n_q - 1;
        const int64_t n_blocks = (n_kv + c.block_size - 1) / c.block_size + 1;
        std::vector<int32_t> table(n_blocks);
        std::iota(table.begin(), table.end(), 0);
        std::shuffle(table.begin(), table.end(), rng);
        std::vector<uint16_t> k(n_blocks * c.block_size * kv_dim), v(k.size());
        for (auto& x : k) x = fp32_to_fp16(dist(rng));
        for (auto& x : v) x = fp32_to_fp16(dist(rng));
        std::vector<float> q(n_q * q_dim);
        for (auto& x : q) x = dist(rng);
        const AttentionShape s{.n_head = c.n_head, .n_head_kv = c.n_head_kv, .head_dim = c.head_dim,
                               .block_size = c.block_size, .scale = 0.125f};
        std::vector<float> got(q.size(), NAN), want(q.size(), NAN);
        attention_chunk(s, q.data(), n_q, k.data(), v.data(), KvType::kF16, table.data(), n_kv_first, got.data(), 0,
                        c.n_head_kv);
        for (int64_t i = 0; i < n_q; ++i) {
          attention_scalar(s, q.data() + i * q_dim, k.data(), v.data(), KvType::kF16, table.data(), n_kv_first + i,
                           want.data() + i * q_dim, 0, c.n_head_kv);
        }
        for (size_t i = 0; i < q.size(); ++i) {
          ASSERT_NEAR(got[i], want[i], 2e-5f * (1.0f + std::fabs(want[i])))
              << "n_head " << c.n_head << " n_q " << n_q << " n_kv_first " << n_kv_first << " i " << i;
        }
      }
    }
  }
}

// Split decode (attention_range + attention_merge) against attention_chunk,
// bit for bit: a decode token's attention must not depend on the path (a
// preempted sequence recomputes its KV by prefill; prefix-cache hits reuse
// prefill KV). Ranges are computed in a shuffled order, as threads would.
TEST(Attention, SplitDecodeIsBitwiseTheChunkPath) {
  if (!attention_range_supported({.n_head = 8, .n_head_kv = 2, .head_dim = 64, .block_size = 16, .scale = 1})) {
    GTEST_SKIP() << "no SIMD attention on this machine";
  }
  std::mt19937 rng(21);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const Case cases[] = {{32, 8, 64, 16}, {8, 8, 32, 7}, {14, 2, 64, 256}, {6, 2, 16, 5}, {16, 2, 128, 32}, {3, 1, 32, 64}};
  for (const Case& c : cases) {
    for (KvType type : {KvType::kF16, KvType::kF32}) {
      for (int64_t n_kv : {1, 15, 256, 257, 600, 1100}) {
       for (int64_t window : {0, 37, 300}) {  // sliding windows: ranges before the window are skipped
        SCOPED_TRACE("n_head " + std::to_string(c.n_head) + " n_kv " + std::to_string(n_kv) +
                     (type == KvType::kF16 ? " f16" : " f32") + " window " + std::to_string(window));
        const int64_t kv_dim = c.n_head_kv * c.head_dim, q_dim = c.n_head * c.head_dim;
        const int64_t n_blocks = (n_kv + c.block_size - 1) / c.block_size + 1;
        std::vector<int32_t> table(n_blocks);
        std::iota(table.begin(), table.end(), 0);
        std::shuffle(table.begin(), table.end(), rng);
        const size_t n = static_cast<size_t>(n_blocks * c.block_size * kv_dim);
        std::vector<float> kf(n), vf(n);
        std::vector<uint16_t> kh(n), vh(n);
        for (size_t i = 0; i < n; ++i) {
          kh[i] = fp32_to_fp16(2.0f * dist(rng)), vh[i] = fp32_to_fp16(dist(rng));
          kf[i] = fp16_to_fp32(kh[i]), vf[i] = fp16_to_fp32(vh[i]);
        }
        const void* k = type == KvType::kF16 ? static_cast<const void*>(kh.data()) : kf.data();
        const void* v = type == KvType::kF16 ? static_cast<const void*>(vh.data()) : vf.data();
        // Two tokens of a prefill chunk; the second is the decode token.
        std::vector<float> q(2 * q_dim);
        for (auto& x : q) x = dist(rng);
        const AttentionShape s{.n_head = c.n_head, .n_head_kv = c.n_head_kv, .head_dim = c.head_dim,
                               .block_size = c.block_size, .scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim)),
                               .window = window};
        std::vector<float> chunk(2 * q_dim, NAN), single(q_dim, NAN), split(q_dim, NAN);
        if (n_kv >= 2) {
          attention_chunk(s, q.data(), 2, k, v, type, table.data(), n_kv - 1, chunk.data(), 0, c.n_head_kv);
        }
        attention_chunk(s, q.data() + q_dim, 1, k, v, type, table.data(), n_kv, single.data(), 0, c.n_head_kv);
        const int64_t n_ranges = (n_kv + kAttentionRange - 1) / kAttentionRange;
        std::vector<float> partials(n_ranges * attention_partial_floats(s), NAN);
        std::vector<int64_t> order(n_ranges);
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), rng);
        for (int64_t j : order) {
          attention_range(s, q.data() + q_dim, k, v, type, table.data(), n_kv, j,
                          partials.data() + j * attention_partial_floats(s));
        }
        std::vector<float> partials_copy = partials;  // attention_merge overwrites the first partial
        attention_merge(s, partials.data(), n_ranges, split.data());
        ASSERT_EQ(std::memcmp(split.data(), single.data(), q_dim * sizeof(float)), 0);
        // The runner merges only the ranges from the window's first one on.
        const int64_t first_range = attention_first_position(s, n_kv) / kAttentionRange;
        std::vector<float> from_window(q_dim, NAN);
        attention_merge(s, partials_copy.data() + first_range * attention_partial_floats(s), n_ranges - first_range,
                        from_window.data());
        ASSERT_EQ(std::memcmp(from_window.data(), single.data(), q_dim * sizeof(float)), 0);
        if (n_kv >= 2) {
          ASSERT_EQ(std::memcmp(split.data(), chunk.data() + q_dim, q_dim * sizeof(float)), 0);
        }
        // And close to the scalar twin (two passes, double sums).
        std::vector<float> want(q_dim);
        attention_scalar(s, q.data() + q_dim, k, v, type, table.data(), n_kv, want.data(), 0, c.n_head_kv);
        for (int64_t i = 0; i < q_dim; ++i) ASSERT_NEAR(split[i], want[i], 3e-5f * (1.0f + std::fabs(want[i]))) << i;
       }
      }
    }
  }
}

// A sliding window is the same attention as no window over the window's
// positions alone: with one position per block, dropping the first
// table entries drops those positions. Prefill rows (attention_chunk, each
// row its own window) and the scalar twin both.
TEST(Attention, SlidingWindowSeesOnlyTheLastPositions) {
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const int64_t n_head = 8, n_head_kv = 2, hd = 64, q_dim = n_head * hd, kv_dim = n_head_kv * hd, n_pos = 700;
  std::vector<int32_t> table(n_pos);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  std::vector<float> k(n_pos * kv_dim), v(n_pos * kv_dim);
  for (auto& x : k) x = 2.0f * dist(rng);
  for (auto& x : v) x = dist(rng);
  const int64_t n_q = 5;
  std::vector<float> q(n_q * q_dim);
  for (auto& x : q) x = dist(rng);
  for (int64_t window : {1, 16, 40, 300}) {
    for (int64_t n_kv_first : {1, 30, 290, 600}) {
      SCOPED_TRACE("window " + std::to_string(window) + " n_kv_first " + std::to_string(n_kv_first));
      const AttentionShape s{.n_head = n_head, .n_head_kv = n_head_kv, .head_dim = hd, .block_size = 1,
                             .scale = 0.125f, .window = window};
      std::vector<float> got(n_q * q_dim, NAN);
      attention_chunk(s, q.data(), n_q, k.data(), v.data(), KvType::kF32, table.data(), n_kv_first, got.data(), 0,
                      n_head_kv);
      AttentionShape full = s;
      full.window = 0;
      for (int64_t t = 0; t < n_q; ++t) {
        const int64_t n_kv = n_kv_first + t, lo = std::max<int64_t>(0, n_kv - window);
        std::vector<float> want(q_dim), scalar(q_dim);
        attention_scalar(full, &q[t * q_dim], k.data(), v.data(), KvType::kF32, table.data() + lo, n_kv - lo,
                         want.data(), 0, n_head_kv);
        attention_scalar(s, &q[t * q_dim], k.data(), v.data(), KvType::kF32, table.data(), n_kv, scalar.data(), 0,
                         n_head_kv);
        for (int64_t i = 0; i < q_dim; ++i) {
          ASSERT_NEAR(got[t * q_dim + i], want[i], 3e-5f * (1.0f + std::fabs(want[i]))) << "token " << t << " " << i;
          ASSERT_EQ(scalar[i], want[i]) << "token " << t << " " << i;
        }
      }
    }
  }
}

TEST(Fused, GegluIsTheF16TableGelu) {
  // Exactly representable inputs: the table's value times up.
  const float gate[] = {-12.0f, -10.0f, -1.5f, -0.25f, 0.0f, 0.5f, 1.0f, 3.0f, 9.5f, 10.0f, 20.0f};
  constexpr int n = sizeof(gate) / sizeof(gate[0]);
  float up[n], out[n];
  for (int i = 0; i < n; ++i) up[i] = 0.5f + 0.25f * static_cast<float>(i);
  geglu(gate, up, out, n);
  for (int i = 0; i < n; ++i) {
    const double x = gate[i];
    const double exact = x <= -10 ? 0.0 : x >= 10 ? x : 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    // F16 rounding of the GELU value: relative 2^-11, plus tiny absolute near 0.
    EXPECT_NEAR(out[i], exact * up[i], (std::fabs(exact) * 1e-3 + 1e-6) * up[i]) << "x " << x;
    if (x > -10 && x < 10) {  // the value is an F16 number times up
      const float g = out[i] / up[i];
      EXPECT_EQ(fp16_to_fp32(fp32_to_fp16(g)), g) << "x " << x;
    }
  }
  // Inputs between two F16 numbers read the entry of the rounded input.
  const float a = 1.0f + 1.0f / 4096.0f, b = 1.0f, one = 1.0f;
  float ga, gb;
  geglu(&a, &one, &ga, 1);
  geglu(&b, &one, &gb, 1);
  EXPECT_EQ(ga, gb);
}

TEST(Attention, HeadRangeComputesOnlyItsHeads) {
  const AttentionShape s{.n_head = 4, .n_head_kv = 2, .head_dim = 8, .block_size = 4, .scale = 0.5f};
  std::vector<float> k(4 * 16, 0.25f), v(4 * 16, 1.5f), q(32, 1.0f), out(32, -7.0f);
  const int32_t table[1] = {0};
  attention(s, q.data(), k.data(), v.data(), KvType::kF32, table, 3, out.data(), 1, 2);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(out[i], -7.0f);     // kv head 0's query heads untouched
  for (int i = 16; i < 32; ++i) EXPECT_NEAR(out[i], 1.5f, 1e-6f);  // uniform softmax over equal V rows
}

// RMSNorm's SIMD path is bitwise the scalar one (the golden tests and the
// prefill/decode equality rest on one arithmetic), in place too, for sizes
// around the 8-wide partial sums and values far apart in magnitude.
TEST(Fused, RmsNormIsBitwiseTheScalarTwin) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 2.0f);
  for (int64_t n : {1, 7, 8, 9, 15, 16, 64, 2048, 2051}) {
    std::vector<float> x(n), w(n), got(n), want(n);
    for (auto& v : x) v = dist(rng);
    for (auto& v : w) v = dist(rng);
    if (n > 3) x[1] = 3e4f, x[2] = 1e-30f, x[3] = -7e-3f;
    rms_norm(x.data(), w.data(), got.data(), n, 1e-5f);
    rms_norm_scalar(x.data(), w.data(), want.data(), n, 1e-5f);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], want[i]) << "n " << n << " i " << i;
    rms_norm(x.data(), w.data(), x.data(), n, 1e-5f);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(x[i], want[i]) << "in place, n " << n << " i " << i;
  }
}

}  // namespace
}  // namespace zl

namespace zl {
namespace {

TEST(Fused, SwigluMatchesScalarTwin) {
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  for (int64_t n : {1, 7, 8, 9, 100, 1027}) {
    std::vector<float> g(n), u(n), got(n), want(n);
    for (auto& x : g) x = dist(rng);
    for (auto& x : u) x = dist(rng);
    g[0] = -100.0f;  // e^100 overflows the polynomial range: silu -> -0
    swiglu(g.data(), u.data(), got.data(), n);
    swiglu_scalar(g.data(), u.data(), want.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(got[i], want[i], 1e-6f * (1.0f + std::fabs(want[i]))) << n << " " << i;
  }
}

// sum_exp (logprobs' log-sum-exp) matches its scalar twin to ~1e-7 relative, with -inf, NaN and
// terms below e^-87 adding nothing, at vocabulary sizes and at tails shorter than a vector.
TEST(Fused, SumExpMatchesTheScalarSum) {
  std::mt19937 rng(8);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  for (int64_t n : {1, 7, 8, 37, 32000, 151936}) {
    std::vector<float> x(n);
    for (auto& v : x) v = dist(rng);
    if (n > 3) {
      x[1] = -INFINITY;
      x[2] = std::nanf("");
      x[3] = -200.0f;
    }
    float shift = -INFINITY;
    for (float v : x) shift = v > shift ? v : shift;  // (NaN is never greater)
    const double want = sum_exp_scalar(x.data(), n, shift);
    EXPECT_GE(want, 1.0);
    EXPECT_NEAR(sum_exp(x.data(), n, shift), want, 1e-6 * want) << n;
  }
  const float only_inf[] = {-INFINITY, -INFINITY};
  EXPECT_EQ(sum_exp(only_inf, 2, 0.0f), 0.0);
}

// The F16 row conversion (K/V cache stores) is bit-exact with the scalar
// one: ties to even, subnormals, overflow to infinity, signed zeros.
TEST(Fused, Fp32ToFp16RowIsBitExact) {
  std::mt19937 rng(6);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  for (int64_t n : {1, 7, 8, 37, 1029}) {
    std::vector<float> x(n);
    for (auto& v : x) v = dist(rng);
    const float specials[] = {0.0f, -0.0f, 65504.0f, 65520.0f, 1e6f, -1e6f, 6e-8f, 3e-8f, 1e-9f,
                              1.0f + 1.0f / 2048.0f, 1.0f + 3.0f / 2048.0f, 1e-5f, -2.5e-6f};
    for (size_t i = 0; i < std::size(specials) && i < x.size(); ++i) x[i] = specials[i];
    std::vector<uint16_t> got(n), want(n);
    fp32_to_fp16_row(x.data(), got.data(), n);
    fp32_to_fp16_row_scalar(x.data(), want.data(), n);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], want[i]) << "n " << n << " x " << x[i];
  }
}

}  // namespace
}  // namespace zl
