#include "tokenizer/unicode.h"

#include <array>
#include <vector>

#include "core/check.h"

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

inline bool is_cont(uint8_t b) { return (b & 0xC0) == 0x80; }

// Bytes a lead byte announces (0: cannot start a sequence), and the allowed
// range of the second byte (the later ones are always 0x80..0xBF).
struct LeadInfo {
  uint8_t len;
  uint8_t lo;
  uint8_t hi;
};
constexpr LeadInfo lead_info(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b < 0xC2) return {0, 0, 0};
  if (b < 0xE0) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b < 0xF0) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b < 0xF4) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
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

size_t valid_sequence_length(std::string_view s, size_t pos) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  const LeadInfo li = lead_info(p[pos]);
  if (li.len <= 1) return li.len;
  if (pos + li.len > n) return 0;
  if (p[pos + 1] < li.lo || p[pos + 1] > li.hi) return 0;
  for (size_t k = 2; k < li.len; ++k) {
    if (!is_cont(p[pos + k])) return 0;
  }
  return li.len;
}

uint32_t decode_one(std::string_view s, size_t* pos) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data()) + *pos;
  const size_t len = valid_sequence_length(s, *pos);
  switch (len) {
    case 1:
      *pos += 1;
      return p[0];
    case 2:
      *pos += 2;
      return ((p[0] & 0x1Fu) << 6) | (p[1] & 0x3Fu);
    case 3:
      *pos += 3;
      return ((p[0] & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
    case 4:
      *pos += 4;
      return ((p[0] & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu);
    default:
      *pos += 1;
      return kReplacementChar;
  }
}

bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const size_t len = valid_sequence_length(s, i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

std::string sanitize_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  size_t i = 0;
  while (i < s.size()) {
    const size_t len = valid_sequence_length(s, i);
    if (len == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s.data() + i, len);
      i += len;
    }
  }
  return out;
}

void append_utf8(uint32_t cp, std::string* out) {
  CHECK(cp <= 0x10FFFF) << "code point out of range: " << cp;
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string to_utf8(uint32_t cp) {
  std::string s;
  append_utf8(cp, &s);
  return s;
}

size_t incomplete_suffix_length(std::string_view s) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  for (size_t j = 1; j <= 3 && j <= n; ++j) {
    const uint8_t b = p[n - j];
    if (is_cont(b)) continue;
    const LeadInfo li = lead_info(b);
    if (li.len <= j) return 0;  // ASCII, invalid lead, or a complete/overlong run
    if (j >= 2 && (p[n - j + 1] < li.lo || p[n - j + 1] > li.hi)) return 0;
    return j;  // bytes after the second are continuation bytes by construction
  }
  return 0;
}

}  // namespace zl::unicode
