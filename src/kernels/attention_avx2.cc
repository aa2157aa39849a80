// AVX2 + FMA + F16C attention (compiled with those flags; called only when
// CPUID reports them). Per kv head, the query heads sharing it are processed
// together in chunks of kChunk positions: scores (q · k, one K row load per
// chunk position for up to 4 heads), online softmax with a vectorised exp,
// then the V rows accumulated into per-head registers.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/attention.h"

namespace zl::kern {
namespace {

constexpr int kChunk = 16;
constexpr int kHeadBlock = 4;  // query heads whose accumulators share a K/V load

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// e^x for x <= 0 (Cephes polynomial, ~2 ulp); x below -87 gives ~0.
inline __m256 exp_neg(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
  const __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500E-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507E-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073E-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894E-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459E-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201E-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

template <KvType kType>
inline __m256 load8(const void* base, int64_t off) {
  if constexpr (kType == KvType::kF32) {
    return _mm256_loadu_ps(static_cast<const float*>(base) + off);
  } else {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(static_cast<const uint16_t*>(base) + off)));
  }
}

// Up to kHeadBlock query heads (q, out: nh rows of head_dim) against one kv head.
template <KvType kType>
void head_block(const AttentionShape& s, const float* q, int nh, const void* k_cache, const void* v_cache,
                const int32_t* block_table, int64_t n_kv, int64_t kv_off, float* out) {
  const int64_t hd = s.head_dim, nv = hd / 8, kv_dim = s.n_head_kv * hd, bs = s.block_size;
  alignas(32) float acc[kHeadBlock][kMaxHeadDim] = {};
  alignas(32) float pr[kHeadBlock][kChunk];
  float m[kHeadBlock], l[kHeadBlock];
  for (int g = 0; g < nh; ++g) m[g] = -INFINITY, l[g] = 0.0f;
  int64_t offs[kChunk];
  for (int64_t p0 = 0; p0 < n_kv; p0 += kChunk) {
    const int n = static_cast<int>(std::min<int64_t>(kChunk, n_kv - p0));
    for (int c = 0; c < n; ++c) {
      const int64_t p = p0 + c;
      offs[c] = (block_table[p / bs] * bs + p % bs) * kv_dim + kv_off;
    }
    // Scores.
    for (int c = 0; c < n; ++c) {
      __m256 d[kHeadBlock] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
      for (int64_t v = 0; v < nv; ++v) {
        const __m256 k = load8<kType>(k_cache, offs[c] + 8 * v);
        for (int g = 0; g < nh; ++g) d[g] = _mm256_fmadd_ps(_mm256_loadu_ps(q + g * hd + 8 * v), k, d[g]);
      }
      for (int g = 0; g < nh; ++g) pr[g][c] = hsum(d[g]) * s.scale;
    }
    // Online softmax: rescale what was accumulated to the new running max.
    for (int g = 0; g < nh; ++g) {
      for (int c = n; c < kChunk; ++c) pr[g][c] = -INFINITY;
      const float m_chunk = *std::max_element(pr[g], pr[g] + n);
      const float m_new = std::max(m[g], m_chunk);
      const float corr = std::exp(m[g] - m_new);  // 0 on the first chunk
      const __m256 mv = _mm256_set1_ps(m_new);
      __m256 sum = _mm256_setzero_ps();
      for (int c = 0; c < kChunk; c += 8) {
        const __m256 x = _mm256_loadu_ps(pr[g] + c);
        const __m256 valid = _mm256_cmp_ps(x, _mm256_set1_ps(-INFINITY), _CMP_NEQ_OQ);
        const __m256 e = _mm256_and_ps(exp_neg(_mm256_sub_ps(x, mv)), valid);
        _mm256_storeu_ps(pr[g] + c, e);
        sum = _mm256_add_ps(sum, e);
      }
      l[g] = l[g] * corr + hsum(sum);
      m[g] = m_new;
      if (corr != 1.0f) {
        const __m256 cv = _mm256_set1_ps(corr);
        for (int64_t v = 0; v < nv; ++v) {
          _mm256_store_ps(acc[g] + 8 * v, _mm256_mul_ps(_mm256_load_ps(acc[g] + 8 * v), cv));
        }
      }
    }
    // Weighted V rows.
    for (int64_t v = 0; v < nv; ++v) {
      __m256 a[kHeadBlock];
      for (int g = 0; g < nh; ++g) a[g] = _mm256_load_ps(acc[g] + 8 * v);
      for (int c = 0; c < n; ++c) {
        const __m256 x = load8<kType>(v_cache, offs[c] + 8 * v);
        for (int g = 0; g < nh; ++g) a[g] = _mm256_fmadd_ps(_mm256_set1_ps(pr[g][c]), x, a[g]);
      }
      for (int g = 0; g < nh; ++g) _mm256_store_ps(acc[g] + 8 * v, a[g]);
    }
  }
  for (int g = 0; g < nh; ++g) {
    const __m256 inv = _mm256_set1_ps(1.0f / l[g]);
    for (int64_t v = 0; v < nv; ++v) _mm256_storeu_ps(out + g * hd + 8 * v, _mm256_mul_ps(_mm256_load_ps(acc[g] + 8 * v), inv));
  }
}

}  // namespace

void avx2_attention(const AttentionShape& s, const float* q, const void* k_cache, const void* v_cache,
                    KvType kv_type, const int32_t* block_table, int64_t n_kv, float* out, int64_t kv_h0,
                    int64_t kv_h1) {
  const int64_t group = s.n_head / s.n_head_kv, hd = s.head_dim;
  for (int64_t kvh = kv_h0; kvh < kv_h1; ++kvh) {
    for (int64_t g0 = 0; g0 < group; g0 += kHeadBlock) {
      const int nh = static_cast<int>(std::min<int64_t>(kHeadBlock, group - g0));
      const int64_t h = kvh * group + g0;
      if (kv_type == KvType::kF32) {
        head_block<KvType::kF32>(s, q + h * hd, nh, k_cache, v_cache, block_table, n_kv, kvh * hd, out + h * hd);
      } else {
        head_block<KvType::kF16>(s, q + h * hd, nh, k_cache, v_cache, block_table, n_kv, kvh * hd, out + h * hd);
      }
    }
  }
}

}  // namespace zl::kern
