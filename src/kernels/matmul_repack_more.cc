// Repacking of the later integer formats (Q4_1, Q5_0, IQ4_NL, MXFP4, Q5_K,
// Q3_K, Q2_K, IQ4_XS) into the grouped layouts of matmul_internal.h. Plain
// C++: the same layout serves the AVX2 and AVX-512 kernels.
#include <cstring>

#include "kernels/matmul_internal.h"
#include "kernels/quant.h"

namespace zl::kern {
namespace {

// Where one row's block goes: lane `lane` of vector v of block b of group g.
struct Dest {
  uint8_t* stream;
  uint8_t* scales;
  int64_t nb, gb, sb;  // blocks per row, bytes per group block, scale bytes per group block
  int64_t g, lane;
  uint8_t* vec(int64_t b, int v) const { return stream + (g * nb + b) * gb + 64 * v + 4 * lane; }
  uint8_t* at(int64_t b, int offset) const { return stream + (g * nb + b) * gb + offset; }
  uint8_t* scale(int64_t b) const { return scales + (g * nb + b) * sb; }
};

// Vectors v0 .. v0 + n - 1 of block b: 4 bytes each from src.
void put_vectors(const Dest& d, int64_t b, int v0, int n, const uint8_t* src) {
  for (int v = 0; v < n; ++v) std::memcpy(d.vec(b, v0 + v), src + 4 * v, 4);
}

void put_f16(uint8_t* base, int64_t lane, uint16_t h) { std::memcpy(base + 2 * lane, &h, 2); }

// Q5_0's fifth bits rearranged (matmul_internal.h): byte i, bit 2j + h =
// bit 16h + 4j + i of qh.
void q5_0_high_bits(const BlockQ5_0& blk, uint8_t out[4]) {
  uint32_t qh;
  std::memcpy(&qh, blk.qh, 4);
  for (int i = 0; i < 4; ++i) {
    uint8_t v = 0;
    for (int j = 0; j < 4; ++j) {
      for (int h = 0; h < 2; ++h) v |= static_cast<uint8_t>(((qh >> (16 * h + 4 * j + i)) & 1) << (2 * j + h));
    }
    out[i] = v;
  }
}

// Q3_K's values (0..7) rearranged (matmul_internal.h): sub-block s's
// vectors A, B, C = 3s, 3s + 1, 3s + 2; byte i of a lane holds the values
// q_k = 32s + 4k + i (k < 8) of the row.
void q3_k_values(const BlockQ3_K& blk, const Dest& d, int64_t b) {
  for (int s = 0; s < 8; ++s) {
    for (int i = 0; i < 4; ++i) {
      int q[8];
      for (int k = 0; k < 8; ++k) q[k] = q3_k_value(blk, 32 * s + 4 * k + i);
      d.vec(b, 3 * s)[i] = static_cast<uint8_t>(q[0] | q[4] << 3 | (q[3] & 3) << 6);
      d.vec(b, 3 * s + 1)[i] = static_cast<uint8_t>(q[1] | q[5] << 3 | (q[7] & 3) << 6);
      d.vec(b, 3 * s + 2)[i] = static_cast<uint8_t>(q[2] | q[6] << 3 | (q[3] >> 2) << 6 | (q[7] >> 2) << 7);
    }
  }
}

void repack_block(GgmlType type, const uint8_t* row, int64_t b, const Dest& d) {
  switch (type) {
    case GgmlType::kQ4_1: {
      const auto& blk = reinterpret_cast<const BlockQ4_1*>(row)[b];
      put_vectors(d, b, 0, 4, blk.qs);
      put_f16(d.scale(b), d.lane, blk.d);
      put_f16(d.scale(b) + 32, d.lane, blk.m);
      return;
    }
    case GgmlType::kQ5_0: {
      const auto& blk = reinterpret_cast<const BlockQ5_0*>(row)[b];
      put_vectors(d, b, 0, 4, blk.qs);
      q5_0_high_bits(blk, d.vec(b, 4));
      put_f16(d.scale(b), d.lane, blk.d);
      return;
    }
    case GgmlType::kIQ4_NL: {
      const auto& blk = reinterpret_cast<const BlockIq4Nl*>(row)[b];
      put_vectors(d, b, 0, 4, blk.qs);
      put_f16(d.scale(b), d.lane, blk.d);
      return;
    }
    case GgmlType::kMXFP4: {
      const auto& blk = reinterpret_cast<const BlockMxfp4*>(row)[b];
      put_vectors(d, b, 0, 4, blk.qs);
      d.scale(b)[d.lane] = blk.e;
      return;
    }
    case GgmlType::kQ5_K: {
      const auto& blk = reinterpret_cast<const BlockQ5_K*>(row)[b];
      put_vectors(d, b, 0, 32, blk.qs);
      put_vectors(d, b, 32, 3, blk.scales);
      put_f16(d.at(b, 2240), d.lane, blk.d);
      put_f16(d.at(b, 2272), d.lane, blk.dmin);
      put_vectors(d, b, 36, 8, blk.qh);
      return;
    }
    case GgmlType::kQ3_K: {
      const auto& blk = reinterpret_cast<const BlockQ3_K*>(row)[b];
      q3_k_values(blk, d, b);
      put_vectors(d, b, 24, 3, blk.scales);
      put_f16(d.scale(b), d.lane, blk.d);
      return;
    }
    case GgmlType::kQ2_K: {
      const auto& blk = reinterpret_cast<const BlockQ2_K*>(row)[b];
      put_vectors(d, b, 0, 16, blk.qs);
      put_vectors(d, b, 16, 4, blk.scales);
      put_f16(d.at(b, 1280), d.lane, blk.d);
      put_f16(d.at(b, 1312), d.lane, blk.dmin);
      return;
    }
    case GgmlType::kIQ4_XS: {
      const auto& blk = reinterpret_cast<const BlockIq4Xs*>(row)[b];
      put_vectors(d, b, 0, 32, blk.qs);
      put_vectors(d, b, 32, 1, blk.scales_l);
      put_f16(d.at(b, 2112), d.lane, blk.d);
      put_f16(d.at(b, 2144), d.lane, blk.scales_h);
      return;
    }
    default: return;
  }
}

}  // namespace

void repack_more(GgmlType type, const uint8_t* data, int64_t n_in, int64_t n_out, uint8_t* stream, uint8_t* scales) {
  const int64_t nb = n_in / (uses_q8_k(type) ? kQkK : kQk32);
  const size_t w_row = row_size(type, n_in);
  for (int64_t r = 0; r < n_out; ++r) {
    const Dest d{.stream = stream, .scales = scales, .nb = nb, .gb = group_block_bytes(type),
                 .sb = scale_bytes_per_block(type), .g = r / kGroupRows, .lane = r % kGroupRows};
    for (int64_t b = 0; b < nb; ++b) repack_block(type, data + r * w_row, b, d);
  }
  // Padding rows of the last group stay zero (the buffers are zeroed): zero
  // scales, so their outputs, never stored, are finite.
}

}  // namespace zl::kern
