// Shared between matmul.cc and the per-ISA translation units (not a public
// header). The ISA files are compiled with their own -m flags; nothing here
// may use intrinsics.
#pragma once

#include <cstdint>

#include "kernels/matmul.h"
#include "kernels/quant_blocks.h"

namespace zl::kern {

// Repacked Q4_0/Q8_0 (avx2 and avx512): rows in groups of kGroupRows (the last group
// zero-padded). For group g and block b (32 values):
//   scales[(g * nb + b) * 16 + r]       f16 scale of row 16g + r
//   quants + (g * nb + b) * kGroupBlock  Q4_0: 4 x 64 bytes, vector j lane r
//       (4 bytes) = qs[4j .. 4j+3] of row r, i.e. low nibbles are values
//       4j..4j+3, high nibbles 16+4j..16+4j+3.
//     Q8_0: 8 x 64 bytes, vector j lane r = (qs[4j .. 4j+3] of row r) ^ 0x80
//       (unsigned, = q + 128, for vpdpbusd).
inline constexpr int kGroupRows = 16;
inline constexpr int kGroupBlockQ4_0 = 256;
inline constexpr int kGroupBlockQ8_0 = 512;
inline constexpr int kTokenTile = 12;  // tokens per micro-kernel call (registers: 2 x 12 accumulators)

// Repacked Q4_K/Q6_K (avx2 and avx512): rows in groups of kGroupRows, one stream per
// group, super-block after super-block (nbk = n_in / 256 per row). Every
// 64-byte vector holds, in lane r (4 bytes), bytes of row 16g + r; all
// values are unsigned (vpdpbusd's first operand).
//   Q4_K, kGroupBlockQ4_K bytes per super-block:
//     vectors 8j + k (j < 4, k < 8)   qs[32j + 4k .. +3]: low nibbles are
//         values 64j + 4k .. +3 (sub-block 2j), high nibbles 64j + 32 + 4k ..
//         (sub-block 2j + 1)
//     vectors 32 + i (i < 3)          scales[4i .. 4i + 3] (6-bit packed)
//     bytes 2240 + 2r, 2272 + 2r      d, dmin of row r (f16)
//   Q6_K, kGroupBlockQ6_K bytes per super-block, plus the f16 scale d of
//   row 16g + r at scales()[(g * nbk + b) * 16 + r]:
//     vectors 24h + 3k + {0, 1, 2} (h < 2, k < 8)  A, B, C: byte i of a lane
//         holds bits of the 4 values 128h + 32j + 4k + i (j < 4; ql and qh
//         of GGUF's block rearranged so that few operations rebuild the
//         6-bit values):
//           A: value j=0's low nibble | its 2 high bits << 4 | j=2's high bits << 6
//           B: value j=1's low nibble | its 2 high bits << 4 | j=3's high bits << 6
//           C: value j=2's low nibble | j=3's low nibble << 4
//     vectors 48 + i (i < 4)          scales[4i .. 4i + 3] (int8)
inline constexpr int kGroupBlockQ4_K = 2304;
inline constexpr int kGroupBlockQ6_K = 3328;
inline constexpr int kTokenTileK = 8;  // tokens per K-quant micro-kernel call (3 x 8 accumulators)

// The formats added later (matmul_repack_more.cc; kernels in
// matmul_avx512_more.cc and matmul_avx2_more.cc) use the same grouping: 16
// rows, every 64-byte vector holding 4 bytes of each row in lane r.
//   32-value blocks (Q4_1, Q5_0, IQ4_NL, MXFP4), kGroupBlock bytes a block:
//     vectors 0-3   qs[4j .. 4j+3] of row r, Q4_0's nibble layout
//     vector 4      (Q5_0 only) byte i of lane r holds, at bit 2j + h, the
//                   fifth bit of value 16h + 4j + i (j < 4, h < 2)
//   and per block in the scales stream (scale_bytes_per_block bytes):
//     Q5_0, IQ4_NL: 16 f16 d; Q4_1: 16 f16 d then 16 f16 m; MXFP4: 16 e8m0.
//   256-value super-blocks, kGroupBlock bytes each:
//     Q5_K  vectors 0-34 and the d/dmin bytes 2240-2303 as Q4_K, then
//           vectors 36 + k (k < 8): qh[4k .. 4k+3]
//     Q3_K  vectors 3s + {0, 1, 2} (s < 8) = A, B, C of sub-block s: byte i
//           of lane r holds bits of the 8 values q_k = 32s + 4k + i (k < 8,
//           as 0..7 = q + 4) of row r, so that every 3-bit value is one or
//           two operations away (matmul_avx512_more.cc Q3K::vec), those of
//           the second 16-value half (k >= 4) one mask away as 8 q_k:
//             A: q_0 | q_4 << 3 | (q_3 & 3) << 6
//             B: q_1 | q_5 << 3 | (q_7 & 3) << 6
//             C: q_2 | q_6 << 3 | (q_3 >> 2) << 6 | (q_7 >> 2) << 7
//           vectors 24 + i (i < 3): scales[4i .. +3] (packed); the f16 d in
//           the scales stream as for Q6_K
//     Q2_K  vectors 8h + k: qs[32h + 4k .. +3]; vectors 16 + i (i < 4):
//           scales[4i .. +3]; bytes 1280 + 2r, 1312 + 2r: d, dmin of row r
//     IQ4_XS vectors 4s + k (s < 8, k < 4): qs[16s + 4k .. +3]; vector 32:
//           scales_l[0 .. 3]; bytes 2112 + 2r, 2144 + 2r: d, scales_h of row r
inline constexpr int kGroupBlockQ4_1 = 256;
inline constexpr int kGroupBlockQ5_0 = 320;
inline constexpr int kGroupBlockIq4Nl = 256;
inline constexpr int kGroupBlockMxfp4 = 256;
inline constexpr int kGroupBlockQ5_K = 2816;
inline constexpr int kGroupBlockQ3_K = 1728;
inline constexpr int kGroupBlockQ2_K = 1344;
inline constexpr int kGroupBlockIq4Xs = 2176;

// Bytes of one block (32 values; a K-quant super-block: 256) of one group in
// the repacked stream of `type` (a type the SIMD ISAs repack).
inline constexpr int64_t group_block_bytes(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0: return kGroupBlockQ4_0;
    case GgmlType::kQ8_0: return kGroupBlockQ8_0;
    case GgmlType::kQ4_K: return kGroupBlockQ4_K;
    case GgmlType::kQ6_K: return kGroupBlockQ6_K;
    case GgmlType::kQ4_1: return kGroupBlockQ4_1;
    case GgmlType::kQ5_0: return kGroupBlockQ5_0;
    case GgmlType::kIQ4_NL: return kGroupBlockIq4Nl;
    case GgmlType::kMXFP4: return kGroupBlockMxfp4;
    case GgmlType::kQ5_K: return kGroupBlockQ5_K;
    case GgmlType::kQ3_K: return kGroupBlockQ3_K;
    case GgmlType::kQ2_K: return kGroupBlockQ2_K;
    case GgmlType::kIQ4_XS: return kGroupBlockIq4Xs;
    default: return 0;
  }
}

// Bytes of the scales stream per block of one group (0: none, the scales
// live in the quants stream).
inline constexpr int64_t scale_bytes_per_block(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0:
    case GgmlType::kQ8_0:
    case GgmlType::kQ6_K:
    case GgmlType::kQ5_0:
    case GgmlType::kIQ4_NL:
    case GgmlType::kQ3_K: return 32;
    case GgmlType::kQ4_1: return 64;
    case GgmlType::kMXFP4: return 16;
    default: return 0;
  }
}

// Whether `type` pairs with Q8_K activations (256-value super-blocks).
inline constexpr bool uses_q8_k(GgmlType type) {
  return type == GgmlType::kQ4_K || type == GgmlType::kQ6_K || type == GgmlType::kQ5_K || type == GgmlType::kQ3_K ||
         type == GgmlType::kQ2_K || type == GgmlType::kIQ4_XS;
}

// Whether the Q8_K pair sums of `type` are over 16 values (Q6_K's layout)
// rather than 32 (Q4_K's): the formats with 16 sub-block scales.
inline constexpr bool pairs_of_16(GgmlType type) {
  return type == GgmlType::kQ6_K || type == GgmlType::kQ3_K || type == GgmlType::kQ2_K;
}

// Activations quantized for one matmul, n_tokens rows.
struct Acts {
  int64_t n_tokens = 0;
  int64_t n_in = 0;
  // Q8_0 (Q4_0/Q8_0 weights): values, the f16-rounded scales as floats, and a
  // per-block integer correction for the unsigned weight encoding, added to
  // the integer sum before scaling (-8 * sum(qs) for Q4_0, -128 * sum(qs)
  // for Q8_0). Tokens in tiles of kTokenTile (the last one narrower),
  // block-interleaved: with t0 = i / kTokenTile * kTokenTile and w =
  // min(kTokenTile, n_tokens - t0) the tile's width, token i, block b at
  // index t0 * nb + b * w + (i - t0) (qs in units of 32 bytes). A lone token
  // is thus contiguous (decode reads its activations from L1).
  const int8_t* qs = nullptr;     // n_tokens * n_in
  const float* d = nullptr;       // n_tokens * n_in / 32
  const int32_t* corr = nullptr;  // n_tokens * n_in / 32
  // Q4_1 only: Q8_1's s = f16(d * sum(qs)) per block (d before rounding),
  // as floats, tiled like d.
  const float* sa = nullptr;
  // Q8_K (Q4_K/Q6_K weights), tiled like the Q8_0 ones above with
  // kTokenTileK and super-blocks for blocks: index t0 * nbk + b * w + (i -
  // t0) holds 256 values at kqs + 256 * index, the scale at kd[index] and 8
  // int32 at kpairs + 8 * index, each two int16 block sums (low, high half)
  // for a pairwise multiply-add (vpdpwssd, vpmaddwd) against the weights'
  // scales:
  //   Q4_K: sums of 32 values s32[k]: (s32[0], s32[2]), (s32[1], s32[3]),
  //         (s32[4], s32[6]), (s32[5], s32[7]); the other 4 unused.
  //   Q6_K: Q8_K bsums (16 values) bs: (bs[4i], bs[4i + 2]), (bs[4i + 1],
  //         bs[4i + 3]) for i < 4.
  const int8_t* kqs = nullptr;
  const float* kd = nullptr;
  const int32_t* kpairs = nullptr;
  // Float types: x rounded through the weight type (F16/BF16) or as is.
  const float* f = nullptr;       // [n_tokens][n_in]
};

// The 8 pair sums of Acts::kpairs for `type` (pairs_of_16 or not) from a Q8_K
// super-block's 16-value sums bs[16].
inline void q8_k_pair_sums(GgmlType type, const int32_t bs[16], int32_t pairs[8]) {
  auto pack = [](int32_t lo, int32_t hi) {
    return static_cast<int32_t>((static_cast<uint32_t>(lo) & 0xFFFFu) | (static_cast<uint32_t>(hi) << 16));
  };
  if (pairs_of_16(type)) {
    for (int k = 0; k < 4; ++k) {
      pairs[2 * k] = pack(bs[4 * k], bs[4 * k + 2]);
      pairs[2 * k + 1] = pack(bs[4 * k + 1], bs[4 * k + 3]);
    }
    return;
  }
  int32_t s32[8];
  for (int k = 0; k < 8; ++k) s32[k] = bs[2 * k] + bs[2 * k + 1];
  pairs[0] = pack(s32[0], s32[2]);
  pairs[1] = pack(s32[1], s32[3]);
  pairs[2] = pack(s32[4], s32[6]);
  pairs[3] = pack(s32[5], s32[7]);
  for (int k = 4; k < 8; ++k) pairs[k] = 0;
}

// Writes y[t * n_out + r] for rows [r0, r1) and all tokens.
using RowsKernel = void (*)(const PackedMatrix& w, const Acts& a, float* y, int64_t r0, int64_t r1);

// Per-ISA activation quantizers of one token's row of nb blocks (Q8_0: 32
// values; Q8_K: 256) into block slots `stride` apart: block b's values at
// qs + 32 * b * stride (Q8_K: 256 *), its scale at d[b * stride] and its
// correction corr_mul * sum(values) (Q8_K: `type`'s 8 pair sums, see Acts)
// at corr[b * stride] (pairs + 8 * b * stride). Bit-exact with
// quantize_row(kQ8_0 / kQ8_K).
using RowQ8_0 = void (*)(const float* x, int64_t nb, int64_t stride, int32_t corr_mul, int8_t* qs, float* d,
                         int32_t* corr);
using RowQ8_K = void (*)(GgmlType type, const float* x, int64_t nbk, int64_t stride, int8_t* qs, float* d,
                         int32_t* pairs);

// Quantize tokens [t0, t1) of x (n_tokens rows of n_in) into the tiled layout
// of Acts (qs/d/corr or pairs point at token 0 of the whole buffer), one
// `row` call per token (matmul.cc).
void quantize_q8_0_tiled(RowQ8_0 row, const float* x, int64_t n_in, int64_t n_tokens, int64_t t0, int64_t t1,
                         int32_t corr_mul, int8_t* qs, float* d, int32_t* corr);
void quantize_q8_k_tiled(RowQ8_K row, GgmlType type, const float* x, int64_t n_in, int64_t n_tokens, int64_t t0,
                         int64_t t1, int8_t* qs, float* d, int32_t* pairs);

// Repacks n_out rows of a Q4_K/Q6_K matrix (GGUF layout) into the layout
// above: `stream` gets n_groups * nbk * kGroupBlock bytes, `scales`
// (Q6_K only) n_groups * nbk * 16 f16. Padding rows are zero.
void repack_k_quant(GgmlType type, const uint8_t* data, int64_t n_in, int64_t n_out, uint8_t* stream,
                    uint16_t* scales);
// The same for the later formats (Q4_1, Q5_0, IQ4_NL, MXFP4, Q5_K, Q3_K,
// Q2_K, IQ4_XS; matmul_repack_more.cc): `scales` gets
// scale_bytes_per_block(type) bytes per group and block, where not 0.
void repack_more(GgmlType type, const uint8_t* data, int64_t n_in, int64_t n_out, uint8_t* stream, uint8_t* scales);

// AVX2 kernels. matmul_avx2.cc: the float formats and the Q8_0 row
// quantizer; matmul_avx2_repacked.cc: the repacked integer formats (rows
// split in whole groups as for avx512) and the Q8_K row quantizer.
RowsKernel avx2_rows_kernel(GgmlType type);
RowsKernel avx2_repacked_rows_kernel(GgmlType type);
void avx2_quantize_q8_0(const float* x, int64_t nb, int64_t stride, int32_t corr_mul, int8_t* qs, float* d,
                        int32_t* corr);
void avx2_quantize_q8_k(GgmlType type, const float* x, int64_t nbk, int64_t stride, int8_t* qs, float* d,
                        int32_t* pairs);

// Kernels of the later formats: avx512 in matmul_avx512_more.cc, avx2 in
// matmul_avx2_more.cc (null for other types).
RowsKernel avx512_more_rows_kernel(GgmlType type);
RowsKernel avx2_more_rows_kernel(GgmlType type);

// AVX-512 kernels (matmul_avx512.cc): repacked Q4_0/Q8_0/Q4_K/Q6_K; rows are
// split in whole groups (r0, r1 multiples of kGroupRows, r1 may be n_out).
RowsKernel avx512_rows_kernel(GgmlType type);
void avx512_quantize_q8_0(const float* x, int64_t nb, int64_t stride, int32_t corr_mul, int8_t* qs, float* d,
                          int32_t* corr);
void avx512_quantize_q8_k(GgmlType type, const float* x, int64_t nbk, int64_t stride, int8_t* qs, float* d,
                          int32_t* pairs);

// Int8 peak microbenchmarks (kernels/peak.h): `rounds` iterations of a
// register-only loop of independent multiply-adds; returns a checksum.
int64_t avx2_int8_peak(int64_t rounds);
double avx2_int8_peak_ops_per_round();
int64_t avx512_int8_peak(int64_t rounds);
double avx512_int8_peak_ops_per_round();

// Streaming read of n bytes (a multiple of 256, 64-byte aligned) for the
// bandwidth bound (kernels/peak.h): wide loads, prefetch ahead like the
// matmul kernels; returns a checksum.
uint64_t avx2_read_bytes(const uint8_t* p, size_t n);
uint64_t avx512_read_bytes(const uint8_t* p, size_t n);

}  // namespace zl::kern
