// Attention kernel benchmark (bench/README.md "Attention at depth"), one
// thread, timed in thread CPU time so that a shared, loaded machine changes
// the figures little (memory stalls count, being descheduled does not):
//   decode   one query token over `--depth` positions of every layer (16
//            layers of Llama 3.2 1B's shape: 32 query heads, 8 kv heads,
//            head_dim 64, blocks of 16 in shuffled order), split by position
//            range and merged as the runner does; the layers' K/V (16 x 2 x
//            depth rows) are far larger than the caches, as in a real step.
//   prefill  64 query tokens at the end of the context (one layer), work
//            items of --tokens-per-item tokens per kv head as the runner
//            makes them.
// Reports ns per (query head x position) and, for decode, the GB/s of K/V
// read next to a plain read of the same bytes (the single-thread roofline).
// The K/V pool comes from allocate_large as the runner's KvStorage does (2 MiB
// aligned, MADV_HUGEPAGE); --small-pages puts it in plain 4 KiB pages (a
// std::vector) to see what the TLB costs.
//   attention_bench [--kv-type f16|q8_0] [--depth 8192] [--reps 5] [--tokens-per-item 64] [--small-pages] [--decode-only]
//                   [--layers 16]
// --layers 1 --depth 256 keeps the K/V in L2 (the kernel's compute floor).
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/memory.h"
#include "kernels/attention.h"

namespace {

using namespace zl;

double cpu_now() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

constexpr int64_t kHead = 32, kHeadKv = 8, kHeadDim = 64, kBlock = 16;

// A byte buffer: huge pages (allocate_large) or 4 KiB pages (a vector).
struct Bytes {
  LargeBuffer large;
  std::vector<uint8_t> small;
  uint8_t* p = nullptr;
  size_t n = 0;
  void allocate(size_t bytes, bool huge) {
    n = bytes;
    if (huge) {
      auto b = allocate_large(bytes, "the benchmark's KV cache");
      if (!b.ok()) {
        std::fprintf(stderr, "%s\n", b.status().to_string().c_str());
        std::exit(1);
      }
      large = std::move(b).value();
      p = large.data();
    } else {
      small.resize(bytes);
      p = small.data();
    }
  }
  size_t size() const { return n; }
  uint8_t& operator[](size_t i) const { return p[i]; }
};

struct Cache {
  int64_t n_blocks, row_bytes;
  Bytes k, v;  // n_layers layers
  std::vector<int32_t> table;
  const uint8_t* k_layer(int64_t il) const { return k.p + il * n_blocks * kBlock * row_bytes; }
  const uint8_t* v_layer(int64_t il) const { return v.p + il * n_blocks * kBlock * row_bytes; }
};

void make_cache(Cache& c, KvType type, int64_t n_kv, int64_t n_layers, bool huge, std::mt19937& rng) {
  c.n_blocks = (n_kv + kBlock - 1) / kBlock;
  c.row_bytes = kv_row_bytes(type, kHeadKv * kHeadDim);
  const int64_t n_rows = n_layers * c.n_blocks * kBlock;
  c.k.allocate(n_rows * c.row_bytes, huge), c.v.allocate(n_rows * c.row_bytes, huge);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> row(kHeadKv * kHeadDim);
  for (int64_t r = 0; r < n_rows; ++r) {
    for (float& x : row) x = 2.0f * dist(rng);
    store_kv_row(type, row.data(), &c.k[r * c.row_bytes], kHeadKv * kHeadDim);
    for (float& x : row) x = dist(rng);
    store_kv_row(type, row.data(), &c.v[r * c.row_bytes], kHeadKv * kHeadDim);
  }
  c.table.resize(c.n_blocks);
  for (int64_t i = 0; i < c.n_blocks; ++i) c.table[i] = static_cast<int32_t>(i);
  std::shuffle(c.table.begin(), c.table.end(), rng);
}

// Seconds (CPU) of the fastest of `reps` plain reads of the cache's bytes.
double read_seconds(const Cache& c, int reps) {
  double best = 1e30;
  volatile uint64_t sink = 0;
  for (int rep = 0; rep < reps; ++rep) {
    const double t0 = cpu_now();
    uint64_t s0 = 0, s1 = 0;
    for (size_t i = 0; i + 64 <= c.k.size(); i += 64) {
      uint64_t a, b;
      std::memcpy(&a, &c.k[i], 8), std::memcpy(&b, &c.v[i], 8);
      s0 += a, s1 += b;
    }
    sink = s0 + s1;
    best = std::min(best, cpu_now() - t0);
  }
  (void)sink;
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  KvType type = KvType::kF16;
  // per_item: what the runner makes for this shape (a whole tile of rows).
  int64_t depth = 8192, per_item = kAttentionTileRows / (kHead / kHeadKv), n_layers = 16;
  int reps = 5;
  bool huge = true, decode_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--small-pages") {
      huge = false;
    } else if (a == "--decode-only") {
      decode_only = true;
    } else if (a == "--kv-type" && value != nullptr && parse_kv_type(value, &type)) {
      ++i;
    } else if (a == "--depth" && value != nullptr) {
      depth = std::max<int64_t>(64, std::atoll(value)), ++i;
    } else if (a == "--reps" && value != nullptr) {
      reps = std::max(1, std::atoi(value)), ++i;
    } else if (a == "--layers" && value != nullptr) {
      n_layers = std::max<int64_t>(1, std::atoll(value)), ++i;
    } else if (a == "--tokens-per-item" && value != nullptr) {
      per_item = std::max<int64_t>(1, std::atoll(value)), ++i;
    } else {
      std::fprintf(stderr,
                   "usage: attention_bench [--kv-type f16|q8_0] [--depth N] [--reps N] [--tokens-per-item N] "
                   "[--small-pages] [--decode-only] [--layers N]\n");
      return 2;
    }
  }
  std::mt19937 rng(7);
  Cache cache;
  make_cache(cache, type, depth, n_layers, huge, rng);
  const AttentionShape s{.n_head = kHead, .n_head_kv = kHeadKv, .head_dim = kHeadDim, .block_size = kBlock,
                         .scale = 0.125f};
  if (!attention_range_supported(s)) {
    std::fprintf(stderr, "no SIMD attention on this machine\n");
    return 1;
  }
  std::normal_distribution<float> dist(0.0f, 1.0f);
  constexpr int64_t kPrefillTokens = 64;
  std::vector<float> q(kPrefillTokens * kHead * kHeadDim), out(q.size());
  for (float& x : q) x = dist(rng);

  // Decode: every layer once per rep.
  const int64_t n_ranges = (depth + kAttentionRange - 1) / kAttentionRange, pf = attention_partial_floats(s);
  std::vector<float> partials(n_ranges * pf);
  double decode_s = 1e30;
  for (int rep = 0; rep < reps; ++rep) {
    const double t0 = cpu_now();
    for (int64_t il = 0; il < n_layers; ++il) {
      for (int64_t j = 0; j < n_ranges; ++j) {
        attention_range(s, q.data(), cache.k_layer(il), cache.v_layer(il), type, cache.table.data(), depth, j,
                        &partials[j * pf]);
      }
      attention_merge(s, partials.data(), n_ranges, out.data());
    }
    decode_s = std::min(decode_s, cpu_now() - t0);
  }
  const double kv_bytes = 2.0 * static_cast<double>(n_layers * depth * cache.row_bytes);
  const double read_s = read_seconds(cache, 3) * static_cast<double>(n_layers * depth) /
                        static_cast<double>(n_layers * cache.n_blocks * kBlock);

  // Prefill: the last kPrefillTokens tokens of the context, layer 0.
  const int64_t q_dim = kHead * kHeadDim, n_kv_first = depth - kPrefillTokens + 1;
  double prefill_s = 1e30;
  for (int rep = 0; rep < (decode_only ? 0 : reps); ++rep) {
    const double t0 = cpu_now();
    for (int64_t h = 0; h < kHeadKv; ++h) {
      for (int64_t t = 0; t < kPrefillTokens; t += per_item) {
        attention_chunk(s, q.data() + t * q_dim, std::min(per_item, kPrefillTokens - t), cache.k_layer(0),
                        cache.v_layer(0), type, cache.table.data(), n_kv_first + t, out.data() + t * q_dim, h, h + 1);
      }
    }
    prefill_s = std::min(prefill_s, cpu_now() - t0);
  }
  const double prefill_pairs = static_cast<double>(kHead) * (kPrefillTokens * n_kv_first + kPrefillTokens * (kPrefillTokens - 1) / 2);
  std::printf("kv %s depth %lld, %s pages, 1 thread, CPU time, best of %d\n", kv_type_name(type),
              static_cast<long long>(depth), huge ? "huge" : "4 KiB", reps);
  std::printf("decode   %.3f ms a step (%lld layers), %.2f ns per (head, position), K/V %.2f GB/s = %.0f%% of a plain read (%.2f GB/s)\n",
              decode_s * 1e3, static_cast<long long>(n_layers), decode_s * 1e9 / static_cast<double>(n_layers * kHead * depth), kv_bytes / decode_s / 1e9,
              100.0 * read_s / decode_s, kv_bytes / read_s / 1e9);
  if (!decode_only) {
    std::printf("prefill  %.2f ns per (head, position), %lld tokens per item\n", prefill_s * 1e9 / prefill_pairs,
                static_cast<long long>(per_item));
  }
  return 0;
}
