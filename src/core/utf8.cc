#include "core/utf8.h"

#include "core/check.h"

namespace zl::utf8 {
namespace {

inline uint8_t byte_at(std::string_view s, size_t i) { return static_cast<uint8_t>(s[i]); }

// Bytes of the (possibly truncated) character that starts at s[pos]: the
// run that its lead byte announces, as far as the bytes present continue it
// correctly; 1 for a byte that starts nothing.
size_t char_extent(std::string_view s, size_t pos) {
  const Lead l = lead(byte_at(s, pos));
  if (l.len <= 1 || pos + 1 >= s.size()) return 1;
  const uint8_t second = byte_at(s, pos + 1);
  if (second < l.lo || second > l.hi) return 1;
  size_t n = 2;
  while (n < l.len && pos + n < s.size() && is_continuation(s[pos + n])) ++n;
  return n;
}

}  // namespace

size_t valid_sequence_length(std::string_view s, size_t pos) {
  const Lead l = lead(byte_at(s, pos));
  if (l.len <= 1) return l.len;
  if (pos + l.len > s.size()) return 0;
  const uint8_t second = byte_at(s, pos + 1);
  if (second < l.lo || second > l.hi) return 0;
  for (size_t k = 2; k < l.len; ++k) {
    if (!is_continuation(s[pos + k])) return 0;
  }
  return l.len;
}

uint32_t decode_one(std::string_view s, size_t* pos) {
  const auto* p = reinterpret_cast<const uint8_t*>(s.data()) + *pos;
  switch (valid_sequence_length(s, *pos)) {
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

bool is_valid(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    if (byte_at(s, i) < 0x80) {
      ++i;
      continue;
    }
    const size_t len = valid_sequence_length(s, i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

void append_sanitized(std::string_view s, std::string* out) {
  out->reserve(out->size() + s.size());
  size_t i = 0;
  while (i < s.size()) {
    // Copy the longest valid run in one go.
    const size_t run = i;
    while (i < s.size()) {
      if (byte_at(s, i) < 0x80) {
        ++i;
        continue;
      }
      const size_t len = valid_sequence_length(s, i);
      if (len == 0) break;
      i += len;
    }
    out->append(s.data() + run, i - run);
    if (i < s.size()) {
      out->append(kReplacement);
      ++i;
    }
  }
}

std::string sanitize(std::string_view s) {
  std::string out;
  append_sanitized(s, &out);
  return out;
}

void append(uint32_t cp, std::string* out) {
  CHECK(cp <= kMaxCodePoint) << "code point out of range: " << cp;
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

std::string encode(uint32_t cp) {
  std::string s;
  append(cp, &s);
  return s;
}

size_t incomplete_suffix_length(std::string_view s) {
  const size_t n = s.size();
  for (size_t j = 1; j <= 3 && j <= n; ++j) {
    const uint8_t b = byte_at(s, n - j);
    if (is_continuation(b)) continue;
    const Lead l = lead(b);
    if (l.len <= j) return 0;  // ASCII, an invalid lead, or a complete/overlong run
    if (j >= 2 && (byte_at(s, n - j + 1) < l.lo || byte_at(s, n - j + 1) > l.hi)) return 0;
    return j;  // bytes after the second are continuation bytes by construction
  }
  return 0;
}

size_t safe_prefix_length(std::string_view s, size_t max) {
  if (s.size() <= max) return s.size();
  // The byte s[max] is the first one left out. Back over at most 3
  // continuation bytes to the lead of the character that may hold it.
  size_t start = max;
  while (start > 0 && max - start < 3 && is_continuation(s[start])) --start;
  // Cut before that character only if it really reaches past the cut;
  // otherwise s[max] starts something (or belongs to nothing) and max is fine.
  if (start < max && start + char_extent(s, start) <= max) start = max;
  if (start > 0) return start;
  return char_extent(s, 0);  // the first character is longer than max
}

}  // namespace zl::utf8
