// kernels/matmul: every instruction-set path against the scalar reference
// (quant.h vec_dot) on random inputs of awkward sizes; activation
// quantization bit-exact with quantize_row.
#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/matmul_float.h"
#include "kernels/matmul_internal.h"
#include "kernels/quant.h"

namespace zl {
namespace {

std::vector<float> random_floats(int64_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

struct Case {
  GgmlType type;
  std::vector<int64_t> n_ins;
};

const Case kCases[] = {
    {GgmlType::kQ4_0, {32, 96, 160, 544}},  {GgmlType::kQ8_0, {32, 96, 160, 544}},
    {GgmlType::kQ4_K, {256, 768}},          {GgmlType::kQ6_K, {256, 768}},
    {GgmlType::kF32, {1, 7, 37, 100, 264}}, {GgmlType::kF16, {1, 7, 37, 100, 264}},
    {GgmlType::kBF16, {1, 7, 37, 100, 264}},
    {GgmlType::kQ4_1, {32, 96, 160, 544}},  {GgmlType::kQ5_0, {32, 96, 160, 544}},
    {GgmlType::kIQ4_NL, {32, 96, 160, 544}}, {GgmlType::kMXFP4, {32, 96, 160, 544}},
    {GgmlType::kQ5_K, {256, 768}},          {GgmlType::kQ3_K, {256, 768}},
    {GgmlType::kQ2_K, {256, 768}},          {GgmlType::kIQ4_XS, {256, 768}},
};
const int64_t kNOuts[] = {1, 15, 17, 50};
const int64_t kNTokens[] = {1, 2, 3, 5, 8, 16, 17};

// Checks matmul on `isa` against vec_dot for every size combination. The
// tolerance is relative to sum |w_i * x_i| (float rounding only: integer
// block sums are exact in both).
void check_isa(KernelIsa isa, ThreadPool* pool) {
  std::mt19937 rng(1234);
  for (const Case& c : kCases) {
    for (int64_t n_in : c.n_ins) {
      for (int64_t n_out : kNOuts) {
        const size_t w_row = row_size(c.type, n_in);
        std::vector<uint8_t> w(w_row * n_out);
        std::vector<float> w_deq(n_in * n_out);
        for (int64_t r = 0; r < n_out; ++r) {
          auto row = random_floats(n_in, rng);
          quantize_row(c.type, row.data(), w.data() + r * w_row, n_in);
          dequantize_row(c.type, w.data() + r * w_row, w_deq.data() + r * n_in, n_in);
        }
        const PackedMatrix packed(c.type, w.data(), n_in, n_out, isa);
        for (int64_t n_tokens : kNTokens) {
          auto x = random_floats(n_in * n_tokens, rng, 2.0f);
          std::vector<float> y(n_tokens * n_out, NAN);
          matmul(packed, x.data(), n_tokens, y.data(), pool);
          std::vector<uint8_t> act;
          for (int64_t t = 0; t < n_tokens; ++t) {
            quantize_activations(c.type, x.data() + t * n_in, act, n_in);
            for (int64_t r = 0; r < n_out; ++r) {
              const float want = vec_dot(c.type, w.data() + r * w_row, act.data(), n_in);
              double mag = 0;
              for (int64_t i = 0; i < n_in; ++i) mag += std::fabs(w_deq[r * n_in + i] * x[t * n_in + i]);
              const float got = y[t * n_out + r];
              ASSERT_NEAR(got, want, 2e-5 * mag + 1e-6)
                  << isa_name(isa) << " " << ggml_type_name(c.type) << " n_in=" << n_in << " n_out=" << n_out
                  << " n_tokens=" << n_tokens << " t=" << t << " r=" << r;
            }
          }
        }
      }
    }
  }
}

// The SIMD kernels keep some partial sums in int16 (the 16-value sums of
// the sub16 K-quants, vpmaddubsw's pairs on AVX2): weights at the ends of
// their range against activations quantized to -128 / 127 must not overflow
// them. Rows and activations of constant sign per 16 values, |x| = 1.
TEST(MatmulExtremes, KQuantsAtTheEndsOfTheirRanges) {
  const int64_t n_in = 512, n_out = 32;
  auto sign_pattern = [](int64_t n, int pattern, int64_t row) {
    std::vector<float> v(n);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t unit = i / 16 + row;
      v[i] = pattern == 0 ? 1.0f : pattern == 1 ? -1.0f : (unit % 2 ? 1.0f : -1.0f);
      if (pattern == 3) v[i] *= (i % 16 == 0) ? 1.0f : 0.99f;  // one largest value per 16
    }
    return v;
  };
  for (KernelIsa isa : {KernelIsa::kAvx2, KernelIsa::kAvx512}) {
    if (!isa_supported(isa)) continue;
    for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kQ3_K, GgmlType::kQ2_K,
                          GgmlType::kIQ4_XS}) {
      for (int wp = 0; wp < 4; ++wp) {
        const size_t w_row = row_size(type, n_in);
        std::vector<uint8_t> w(w_row * n_out);
        std::vector<float> w_deq(n_in * n_out);
        for (int64_t r = 0; r < n_out; ++r) {
          quantize_row(type, sign_pattern(n_in, wp, r).data(), w.data() + r * w_row, n_in);
          dequantize_row(type, w.data() + r * w_row, w_deq.data() + r * n_in, n_in);
        }
        const PackedMatrix packed(type, w.data(), n_in, n_out, isa);
        for (int ap = 0; ap < 4; ++ap) {
          for (int64_t n_tokens : {1, 3, 8}) {
            std::vector<float> x;
            for (int64_t t = 0; t < n_tokens; ++t) {
              const auto row = sign_pattern(n_in, ap, t);
              x.insert(x.end(), row.begin(), row.end());
            }
            std::vector<float> y(n_tokens * n_out, NAN);
            matmul(packed, x.data(), n_tokens, y.data(), nullptr);
            std::vector<uint8_t> act;
            for (int64_t t = 0; t < n_tokens; ++t) {
              quantize_activations(type, x.data() + t * n_in, act, n_in);
              for (int64_t r = 0; r < n_out; ++r) {
                const float want = vec_dot(type, w.data() + r * w_row, act.data(), n_in);
                double mag = 0;  // as check_isa: float rounding only
                for (int64_t i = 0; i < n_in; ++i) mag += std::fabs(w_deq[r * n_in + i] * x[t * n_in + i]);
                ASSERT_NEAR(y[t * n_out + r], want, 2e-5 * mag + 1e-6)
                    << isa_name(isa) << " " << ggml_type_name(type) << " weights " << wp << " acts " << ap
                    << " n_tokens=" << n_tokens << " t=" << t << " r=" << r;
              }
            }
          }
        }
      }
    }
  }
}

class MatmulIsaTest : public ::testing::TestWithParam<KernelIsa> {
 protected:
  void SetUp() override {
    if (!isa_supported(GetParam())) {
      std::printf("SKIPPED: this CPU does not support %s\n", isa_name(GetParam()));
      GTEST_SKIP() << isa_name(GetParam()) << " not supported by this CPU";
    }
  }
};

TEST_P(MatmulIsaTest, MatchesScalarSingleThreaded) { check_isa(GetParam(), nullptr); }

TEST_P(MatmulIsaTest, MatchesScalarOnTwoThreads) {
  ThreadPool pool(2);
  check_isa(GetParam(), &pool);
}

INSTANTIATE_TEST_SUITE_P(Isa, MatmulIsaTest,
                         ::testing::Values(KernelIsa::kScalar, KernelIsa::kAvx2, KernelIsa::kAvx512),
                         [](const auto& info) { return std::string(isa_name(info.param)); });

// The SIMD Q8_0 quantizers must equal quantize_row bit for bit, ties of
// roundf (x.5, away from zero) included.
// n_tokens rows of x quantized to Q8_0 blocks in row order, corr[b] =
// corr_mul * sum of block b's values.
using QuantizeQ8_0 = void (*)(const float* x, int64_t n_in, int64_t n_tokens, int32_t corr_mul, int8_t* qs,
                              float* d, int32_t* corr);

void check_quantizer(QuantizeQ8_0 quantize) {
  std::mt19937 rng(7);
  for (int64_t n_tokens : {1, 3, 2 * kern::kTokenTile + 5}) {
    const int64_t n_in = 96;
    auto x = random_floats(n_in * n_tokens, rng, 3.0f);
    // Block 1 of token 0: amax 127 makes d = 1, so halves are exact ties.
    x[32] = 127.0f;
    for (int i = 1; i < 32; ++i) x[32 + i] = static_cast<float>(i % 9) - 4.5f;
    for (int i = 0; i < 32; ++i) x[64 + i] = 0.0f;  // an all-zero block
    std::vector<int8_t> qs(n_in * n_tokens);
    std::vector<float> d(n_in / 32 * n_tokens);
    std::vector<int32_t> corr(d.size());
    quantize(x.data(), n_in, n_tokens, -8, qs.data(), d.data(), corr.data());
    std::vector<BlockQ8_0> ref(n_in / 32 * n_tokens);
    for (int64_t t = 0; t < n_tokens; ++t) quantize_row(GgmlType::kQ8_0, x.data() + t * n_in, &ref[t * n_in / 32], n_in);
    for (size_t b = 0; b < ref.size(); ++b) {
      EXPECT_EQ(d[b], fp16_to_fp32(ref[b].d)) << "block " << b;
      int32_t sum = 0;
      for (int j = 0; j < 32; ++j) {
        EXPECT_EQ(qs[32 * b + j], ref[b].qs[j]) << "block " << b << " value " << j;
        sum += ref[b].qs[j];
      }
      EXPECT_EQ(corr[b], -8 * sum);
    }
  }
}

TEST(MatmulQuantize, Avx2Q8_0IsBitExact) {
  if (!isa_supported(KernelIsa::kAvx2)) GTEST_SKIP() << "no AVX2";
  check_quantizer([](const float* x, int64_t n_in, int64_t n_tokens, int32_t corr_mul, int8_t* qs, float* d,
                     int32_t* corr) { kern::avx2_quantize_q8_0(x, n_in / 32 * n_tokens, 1, corr_mul, qs, d, corr); });
}

// The tiled Q8_K quantizer of the repacked K-quant kernels equals
// quantize_row(kQ8_K) bit for bit (values, scale; the pair sums from bsums),
// including the sign rule of d (the first value of largest magnitude) and
// all-zero super-blocks.
void check_tiled_q8_k(kern::RowQ8_K row) {
  std::mt19937 rng(11);
  const int64_t n_in = 768, nbk = 3;
  for (GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    for (int64_t n_tokens : {1, 5, 2 * kern::kTokenTileK + 3}) {
      auto x = random_floats(n_in * n_tokens, rng, 3.0f);
      for (int i = 0; i < 256; ++i) x[256 + i] = 0.0f;  // token 0, super-block 1: all zero
      x[512 + 7] = -9.0f;                               // super-block 2: -9 first, then +9
      x[512 + 100] = 9.0f;
      std::vector<int8_t> qs(n_in * n_tokens);
      std::vector<float> d(nbk * n_tokens);
      std::vector<int32_t> pairs(8 * nbk * n_tokens);
      kern::quantize_q8_k_tiled(row, type, x.data(), n_in, n_tokens, 0, n_tokens, qs.data(), d.data(), pairs.data());
      std::vector<BlockQ8_K> ref(nbk);
      for (int64_t i = 0; i < n_tokens; ++i) {
        quantize_row(GgmlType::kQ8_K, x.data() + i * n_in, ref.data(), n_in);
        const int64_t t0 = i / kern::kTokenTileK * kern::kTokenTileK;
        const int64_t width = std::min<int64_t>(kern::kTokenTileK, n_tokens - t0);
        for (int64_t b = 0; b < nbk; ++b) {
          const int64_t o = t0 * nbk + b * width + (i - t0);
          SCOPED_TRACE(testing::Message() << ggml_type_name(type) << " token " << i << " super-block " << b);
          EXPECT_EQ(d[o], ref[b].d);
          for (int j = 0; j < 256; ++j) ASSERT_EQ(qs[256 * o + j], ref[b].qs[j]) << "value " << j;
          const int16_t* bs = ref[b].bsums;
          auto pair = [](int32_t lo, int32_t hi) {
            return static_cast<int32_t>((static_cast<uint32_t>(lo) & 0xFFFFu) | (static_cast<uint32_t>(hi) << 16));
          };
          std::vector<int32_t> want(8, 0);
          if (type == GgmlType::kQ6_K) {
            for (int k = 0; k < 4; ++k) {
              want[2 * k] = pair(bs[4 * k], bs[4 * k + 2]);
              want[2 * k + 1] = pair(bs[4 * k + 1], bs[4 * k + 3]);
            }
          } else {
            int32_t s32[8];
            for (int k = 0; k < 8; ++k) s32[k] = bs[2 * k] + bs[2 * k + 1];
            want[0] = pair(s32[0], s32[2]);
            want[1] = pair(s32[1], s32[3]);
            want[2] = pair(s32[4], s32[6]);
            want[3] = pair(s32[5], s32[7]);
          }
          for (int k = 0; k < 8; ++k) EXPECT_EQ(pairs[8 * o + k], want[k]) << "pair " << k;
        }
      }
    }
  }
}

TEST(MatmulQuantize, Avx512TiledQ8_KIsBitExact) {
  if (!isa_supported(KernelIsa::kAvx512)) GTEST_SKIP() << "no AVX-512 VNNI";
  check_tiled_q8_k(kern::avx512_quantize_q8_k);
}

TEST(MatmulQuantize, Avx2TiledQ8_KIsBitExact) {
  if (!isa_supported(KernelIsa::kAvx2)) GTEST_SKIP() << "no AVX2";
  check_tiled_q8_k(kern::avx2_quantize_q8_k);
}

// A product that rounds to exactly x.5 must round to even as in scalar
// code: fused into an FMA with nearest_int's addition (GCC contracts by
// default in C++) the exact product, a little above or below, decides.
// Here iscale = -127 / 5.137259 = -24.721354 and iscale * -0.7483409 is
// 18.50000007 exactly, 18.5 rounded (ties to even: 18).
TEST(MatmulQuantize, Q8_KRoundsTheRoundedProduct) {
  std::vector<float> x(256, 0.0f);
  x[0] = 5.137259006500244f;
  x[1] = -0.748340904712677f;
  std::vector<BlockQ8_K> ref(1);
  quantize_row(GgmlType::kQ8_K, x.data(), ref.data(), 256);
  ASSERT_EQ(ref[0].qs[1], 18);
  for (KernelIsa isa : {KernelIsa::kAvx2, KernelIsa::kAvx512}) {
    if (!isa_supported(isa)) continue;
    int8_t qs[256];
    float d = 0;
    int32_t pairs[8];
    (isa == KernelIsa::kAvx2 ? kern::avx2_quantize_q8_k : kern::avx512_quantize_q8_k)(GgmlType::kQ6_K, x.data(), 1, 1, qs,
                                                                                     &d, pairs);
    EXPECT_EQ(d, ref[0].d) << isa_name(isa);
    for (int i = 0; i < 256; ++i) ASSERT_EQ(qs[i], ref[0].qs[i]) << isa_name(isa) << " value " << i;
  }
}

// Wraps a tiled Q8_0 quantizer into the row layout check_quantizer expects.
template <kern::RowQ8_0 kRow>
void tiled_as_rows(const float* x, int64_t n_in, int64_t n_tokens, int32_t corr_mul, int8_t* qs, float* d,
                   int32_t* corr) {
    const int64_t nb = n_in / 32, n_rows = (n_tokens + kern::kTokenTile - 1) / kern::kTokenTile * kern::kTokenTile;
    std::vector<int8_t> tq(n_rows * n_in);
    std::vector<float> td(n_rows * nb);
    std::vector<int32_t> tc(n_rows * nb);
    kern::quantize_q8_0_tiled(kRow, x, n_in, n_tokens, 0, n_tokens, corr_mul, tq.data(), td.data(), tc.data());
    for (int64_t i = 0; i < n_tokens; ++i) {
      const int64_t t0 = i / kern::kTokenTile * kern::kTokenTile;
      const int64_t width = std::min<int64_t>(kern::kTokenTile, n_tokens - t0);
      for (int64_t b = 0; b < nb; ++b) {
        const int64_t o = t0 * nb + b * width + (i - t0);
        std::copy(&tq[32 * o], &tq[32 * o] + 32, qs + (i * nb + b) * 32);
        d[i * nb + b] = td[o];
        corr[i * nb + b] = tc[o];
      }
    }
}

TEST(MatmulQuantize, Avx512TiledQ8_0IsBitExact) {
  if (!isa_supported(KernelIsa::kAvx512)) GTEST_SKIP() << "no AVX-512 VNNI";
  check_quantizer(tiled_as_rows<kern::avx512_quantize_q8_0>);
}

TEST(MatmulQuantize, Avx2TiledQ8_0IsBitExact) {
  if (!isa_supported(KernelIsa::kAvx2)) GTEST_SKIP() << "no AVX2";
  check_quantizer(tiled_as_rows<kern::avx2_quantize_q8_0>);
}

TEST(MatmulPack, RepacksTheIntegerFormatsForTheSimdPaths) {
  std::vector<uint8_t> wf(row_size(GgmlType::kF16, 256) * 3);
  for (KernelIsa isa : {KernelIsa::kAvx2, KernelIsa::kAvx512}) {
    if (!isa_supported(isa)) continue;
    EXPECT_FALSE(PackedMatrix(GgmlType::kF16, wf.data(), 256, 3, isa).repacked());
    for (GgmlType type : {GgmlType::kQ4_0, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kQ4_1,
                          GgmlType::kQ5_0, GgmlType::kIQ4_NL, GgmlType::kMXFP4, GgmlType::kQ5_K, GgmlType::kQ3_K,
                          GgmlType::kQ2_K, GgmlType::kIQ4_XS}) {
      std::vector<uint8_t> w(row_size(type, 256) * 3);
      PackedMatrix p(type, w.data(), 256, 3, isa);
      EXPECT_TRUE(p.repacked()) << ggml_type_name(type) << " " << isa_name(isa);
      EXPECT_EQ(p.n_bytes(), w.size());
      EXPECT_FALSE(PackedMatrix(type, w.data(), 256, 3, KernelIsa::kScalar).repacked());
    }
  }
}

// A stacked matrix gives, for every ISA, exactly the outputs of its parts
// side by side; part sizes straddle the 16-row groups of the repacked layout.
TEST(MatmulPack, StackedEqualsItsPartsSideBySide) {
  std::mt19937 rng(7);
  const int64_t n_in = 96, n_tokens = 5;
  const std::vector<int64_t> n_outs = {21, 8, 35};
  for (GgmlType type : {GgmlType::kQ4_0, GgmlType::kQ8_0, GgmlType::kF16}) {
    const size_t w_row = row_size(type, n_in);
    std::vector<std::vector<uint8_t>> parts;
    std::vector<PackedMatrix::Rows> rows;
    for (int64_t n_out : n_outs) {
      parts.emplace_back(w_row * n_out);
      for (int64_t r = 0; r < n_out; ++r) {
        quantize_row(type, random_floats(n_in, rng).data(), parts.back().data() + r * w_row, n_in);
      }
      rows.push_back({parts.back().data(), n_out});
    }
    const auto x = random_floats(n_in * n_tokens, rng);
    for (KernelIsa isa : {KernelIsa::kScalar, KernelIsa::kAvx2, KernelIsa::kAvx512}) {
      if (!isa_supported(isa)) continue;
      const PackedMatrix stacked = PackedMatrix::stacked(type, n_in, rows, isa);
      ASSERT_EQ(stacked.n_out(), 64);
      ASSERT_EQ(stacked.n_bytes(), w_row * 64);
      EXPECT_EQ(stacked.data() == nullptr, stacked.repacked());
      std::vector<float> y(n_tokens * 64);
      matmul(stacked, x.data(), n_tokens, y.data(), nullptr);
      int64_t first = 0;
      for (size_t p = 0; p < parts.size(); ++p) {
        const int64_t n_out = n_outs[p];
        std::vector<float> want(n_tokens * n_out);
        matmul(PackedMatrix(type, parts[p].data(), n_in, n_out, isa), x.data(), n_tokens, want.data(), nullptr);
        for (int64_t t = 0; t < n_tokens; ++t) {
          for (int64_t r = 0; r < n_out; ++r) {
            ASSERT_EQ(y[t * 64 + first + r], want[t * n_out + r]) << ggml_type_name(type) << " " << isa_name(isa);
          }
        }
        first += n_out;
      }
    }
  }
}

// Batch invariance (kernels/matmul_float.h; the engine relies on it): a
// token's outputs are bit-identical whether it is multiplied alone or in a
// batch of any size, in any tile position, on one thread or two.
void check_batch_invariance(KernelIsa isa, GgmlType type, int64_t n_in, ThreadPool* pool) {
  std::mt19937 rng(99);
  const size_t w_row = row_size(type, n_in);
  for (int64_t n_out : kNOuts) {
    std::vector<uint8_t> w(w_row * n_out);
    for (int64_t r = 0; r < n_out; ++r) quantize_row(type, random_floats(n_in, rng).data(), w.data() + r * w_row, n_in);
    const PackedMatrix packed(type, w.data(), n_in, n_out, isa);
    for (int64_t n_tokens : {1, 2, 3, 5, 8, 13, 16, 17, 28, 40}) {
      const auto x = random_floats(n_in * n_tokens, rng, 2.0f);
      std::vector<float> y(n_tokens * n_out), alone(n_out);
      matmul(packed, x.data(), n_tokens, y.data(), pool);
      for (int64_t t = 0; t < n_tokens; ++t) {
        matmul(packed, x.data() + t * n_in, 1, alone.data(), pool);
        for (int64_t r = 0; r < n_out; ++r) {
          ASSERT_EQ(y[t * n_out + r], alone[r]) << isa_name(isa) << " " << ggml_type_name(type) << " n_in=" << n_in
                                                << " n_out=" << n_out << " n_tokens=" << n_tokens << " t=" << t
                                                << " r=" << r << (pool ? " 2 threads" : "");
        }
      }
    }
  }
}

TEST_P(MatmulIsaTest, BatchInvariant) {
  ThreadPool pool(2);
  for (const Case& c : kCases) {
    for (int64_t n_in : c.n_ins) {
      check_batch_invariance(GetParam(), c.type, n_in, nullptr);
      check_batch_invariance(GetParam(), c.type, n_in, &pool);
    }
  }
}

// MatmulInput (a matmul in two steps, model/runner.cc's MoE layer): rows
// computed piece by piece, in any order, in pieces of any multiple of the
// grain, equal matmul's bit for bit; one object reused across shapes and
// types (its buffers only grow).
TEST_P(MatmulIsaTest, MatmulInputRowsEqualMatmul) {
  std::mt19937 rng(17);
  MatmulInput in;
  for (const Case& c : kCases) {
    for (int64_t n_in : c.n_ins) {
      for (int64_t n_out : {17, 50, 100}) {
        const size_t w_row = row_size(c.type, n_in);
        std::vector<uint8_t> w(w_row * n_out);
        for (int64_t r = 0; r < n_out; ++r) {
          quantize_row(c.type, random_floats(n_in, rng).data(), w.data() + r * w_row, n_in);
        }
        const PackedMatrix packed(c.type, w.data(), n_in, n_out, GetParam());
        for (int64_t n_tokens : {1, 3, 13}) {
          const auto x = random_floats(n_in * n_tokens, rng, 2.0f);
          std::vector<float> want(n_tokens * n_out), got(n_tokens * n_out, NAN);
          matmul(packed, x.data(), n_tokens, want.data(), nullptr);
          in.prepare(packed, x.data(), n_tokens);
          ASSERT_EQ(in.n_tokens(), n_tokens);
          const int64_t grain = in.grain(packed);
          ASSERT_GT(grain, 0);
          std::vector<std::pair<int64_t, int64_t>> pieces;
          for (int64_t r0 = 0; r0 < n_out;) {
            const int64_t r1 = std::min(n_out, r0 + grain * static_cast<int64_t>(1 + rng() % 3));
            pieces.push_back({r0, r1});
            r0 = r1;
          }
          std::shuffle(pieces.begin(), pieces.end(), rng);
          for (auto [r0, r1] : pieces) in.rows(packed, got.data(), r0, r1);
          for (int64_t i = 0; i < n_tokens * n_out; ++i) {
            ASSERT_EQ(got[i], want[i]) << isa_name(GetParam()) << " " << ggml_type_name(c.type) << " n_in=" << n_in
                                       << " n_out=" << n_out << " n_tokens=" << n_tokens << " i=" << i;
          }
        }
      }
    }
  }
}

// rows_view: a view of whole groups of rows multiplies exactly as those
// rows of the whole matrix, and reads the whole matrix's copy in place.
TEST_P(MatmulIsaTest, RowsViewEqualsItsRowsOfTheWhole) {
  std::mt19937 rng(23);
  for (const Case& c : kCases) {
    const int64_t n_in = c.n_ins.back(), n_out = 50, n_tokens = 3;
    const size_t w_row = row_size(c.type, n_in);
    std::vector<uint8_t> w(w_row * n_out);
    for (int64_t r = 0; r < n_out; ++r) {
      quantize_row(c.type, random_floats(n_in, rng).data(), w.data() + r * w_row, n_in);
    }
    const PackedMatrix whole(c.type, w.data(), n_in, n_out, GetParam());
    const int64_t unit = whole.view_unit();
    EXPECT_EQ(unit, PackedMatrix::view_unit(c.type, GetParam()));
    const auto x = random_floats(n_in * n_tokens, rng, 2.0f);
    std::vector<float> y(n_tokens * n_out);
    matmul(whole, x.data(), n_tokens, y.data(), nullptr);
    for (int64_t first = 0; first < n_out; first += unit) {
      for (int64_t n : {unit, 2 * unit, n_out - first}) {
        if (first + n > n_out) continue;
        const PackedMatrix view = whole.rows_view(first, n);
        EXPECT_EQ(view.n_out(), n);
        EXPECT_EQ(view.n_bytes(), w_row * n);
        std::vector<float> yv(n_tokens * n);
        matmul(view, x.data(), n_tokens, yv.data(), nullptr);
        for (int64_t t = 0; t < n_tokens; ++t) {
          for (int64_t r = 0; r < n; ++r) {
            ASSERT_EQ(yv[t * n + r], y[t * n_out + first + r]) << isa_name(GetParam()) << " " << ggml_type_name(c.type)
                                                              << " first=" << first << " n=" << n << " t=" << t;
          }
        }
      }
    }
  }
}

// Long rows: the float kernels walk n_in in blocks and tokens in blocks of
// about 1 MiB of activations (70 x 4100 floats is two).
TEST_P(MatmulIsaTest, BatchInvariantLongRows) {
  ThreadPool pool(2);
  for (GgmlType type : {GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16}) {
    std::mt19937 rng(5);
    const int64_t n_in = 4100, n_out = 21, n_tokens = 70;
    const size_t w_row = row_size(type, n_in);
    std::vector<uint8_t> w(w_row * n_out);
    for (int64_t r = 0; r < n_out; ++r) quantize_row(type, random_floats(n_in, rng).data(), w.data() + r * w_row, n_in);
    const PackedMatrix packed(type, w.data(), n_in, n_out, GetParam());
    const auto x = random_floats(n_in * n_tokens, rng);
    std::vector<float> y(n_tokens * n_out), alone(n_out);
    matmul(packed, x.data(), n_tokens, y.data(), &pool);
    for (int64_t t = 0; t < n_tokens; ++t) {
      matmul(packed, x.data() + t * n_in, 1, alone.data(), nullptr);
      for (int64_t r = 0; r < n_out; ++r) {
        ASSERT_EQ(y[t * n_out + r], alone[r]) << isa_name(GetParam()) << " " << ggml_type_name(type) << " t=" << t
                                              << " r=" << r;
      }
    }
  }
}

// The vector F16/BF16 activation rounding equals the scalar conversions bit
// for bit: ties, subnormals, overflow, infinities and NaNs.
TEST(MatmulQuantize, Avx512RoundThroughIsBitExact) {
  if (!isa_supported(KernelIsa::kAvx512)) GTEST_SKIP() << "no AVX-512";
  std::mt19937 rng(3);
  std::vector<uint32_t> bits = {0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001,
                                0x7F800001, 0x7FBFFFFF, 0x00000001, 0x807FFFFF, 0x477FEFFF, 0x477FF000,
                                0x477FF001, 0xC77FF000, 0x33000000, 0x33000001, 0x387FC000, 0x3F808000,
                                0x3F818000, 0x3F800FFF, 0x3F801000, 0x3F803000, 0x7F7FFFFF, 0xFF7FFFFF};
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 5000; ++i) bits.push_back(any(rng));
  std::vector<float> x(bits.size()), out(bits.size());
  std::memcpy(x.data(), bits.data(), bits.size() * 4);
  for (GgmlType type : {GgmlType::kF16, GgmlType::kBF16}) {
    for (size_t n : {bits.size(), size_t{7}, size_t{1}}) {  // with and without a masked tail
      kern::avx512_round_through(type, x.data(), static_cast<int64_t>(n), out.data());
      for (size_t i = 0; i < n; ++i) {
        const float want = type == GgmlType::kF16 ? fp16_to_fp32(fp32_to_fp16(x[i])) : bf16_to_fp32(fp32_to_bf16(x[i]));
        uint32_t got_bits, want_bits;
        std::memcpy(&got_bits, &out[i], 4);
        std::memcpy(&want_bits, &want, 4);
        ASSERT_EQ(got_bits, want_bits) << ggml_type_name(type) << " input 0x" << std::hex << bits[i];
      }
    }
  }
}

}  // namespace
}  // namespace zl
