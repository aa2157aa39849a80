#include "tokenizer/unicode.h"

#include <algorithm>
#include <array>
#include <vector>


namespace zl::unicode {
namespace {

// Two-level lookup built once from the range table: stage1 maps the high
// bits (cp >> 8) to a 256-entry block in stage2; identical blocks are shared.
class FlagTable {
 public:
  FlagTable() {
    constexpr uint32_t kMax = 0x110000;
    std::vector<uint8_t> full(kMax, 0);
    for (size_t i = 0; i < detail::kNumFlagRanges; ++i) {
      uint32_t start = detail::kFlagRanges[i].start;
      uint32_t end = i + 1 < detail::kNumFlagRanges ? detail::kFlagRanges[i + 1].start : kMax;
      for (uint32_t cp = start; cp < end; ++cp) full[cp] = detail::kFlagRanges[i].flags;
    }
    stage1_.resize(kMax >> 8);
    for (uint32_t block = 0; block < (kMax >> 8); ++block) {
      const uint8_t* src = &full[block << 8];
      size_t found = stage2_.size();
      for (size_t b = 0; b < stage2_.size(); b += 256) {
        if (std::equal(src, src + 256, stage2_.begin() + b)) {
          found = b;
          break;
        }
      }
      if (found == stage2_.size()) stage2_.insert(stage2_.end(), src, src + 256);
      stage1_[block] = static_cast<uint32_t>(found);
    }
  }
  uint8_t get(uint32_t cp) const {
    if (cp >= 0x110000) return 0;
    return stage2_[stage1_[cp >> 8] + (cp & 0xFF)];
  }

 private:
  std::vector<uint32_t> stage1_;
  std::vector<uint8_t> stage2_;
};

const FlagTable& flag_table() {
  static const FlagTable table;
  return table;
}

}  // namespace

uint8_t flags(uint32_t cp) {
  if (cp < 0x80) {
    // ASCII fast path, computed once from the same table.
    static const std::array<uint8_t, 128> ascii = [] {
      std::array<uint8_t, 128> a{};
      for (uint32_t c = 0; c < 128; ++c) a[c] = flag_table().get(c);
      return a;
    }();
    return ascii[cp];
  }
  return flag_table().get(cp);
}

const char* table_version() { return detail::kUnicodeVersion; }

}  // namespace zl::unicode
