#include "template/text.h"

namespace zl::tmpl {
namespace {

size_t char_len(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c >> 5) == 6) return 2;
  if ((c >> 4) == 14) return 3;
  if ((c >> 3) == 30) return 4;
  return 1;
}

// The code point at s[i] and its length (an invalid sequence: its byte, 1).
uint32_t decode(std::string_view s, size_t i, size_t* len) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n = char_len(c);
  if (i + n > s.size()) n = 1;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) n = 1;
  }
  *len = n;
  if (n == 1) return c;
  uint32_t cp = c & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return cp;
}

bool in_set(uint32_t cp, const std::string* chars) {
  if (!chars) return py_isspace(cp);
  for (size_t i = 0; i < chars->size();) {
    size_t n = 0;
    if (decode(*chars, i, &n) == cp) return true;
    i += n;
  }
  return false;
}

bool is_alpha_ascii(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }
char upper(char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c; }

}  // namespace

bool py_isspace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
         cp == 0x3000;
}

size_t utf8_length(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) {
    size_t len = 0;
    decode(s, i, &len);
    i += len;
  }
  return n;
}

std::vector<std::string_view> utf8_chars(std::string_view s) {
  std::vector<std::string_view> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t len = 0;
    decode(s, i, &len);
    out.push_back(s.substr(i, len));
    i += len;
  }
  return out;
}

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = lower(c);
  return out;
}

std::string ascii_upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = upper(c);
  return out;
}

std::string py_capitalize(std::string_view s) {
  std::string out = ascii_lower(s);
  if (!out.empty()) out[0] = upper(out[0]);
  return out;
}

std::string py_title(std::string_view s) {
  std::string out(s);
  bool prev_letter = false;
  for (char& c : out) {
    const bool letter = is_alpha_ascii(c);
    c = letter ? (prev_letter ? lower(c) : upper(c)) : c;
    prev_letter = letter;
  }
  return out;
}

std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right) {
  size_t b = 0;
  size_t e = s.size();
  if (left) {
    while (b < e) {
      size_t n = 0;
      if (!in_set(decode(s, b, &n), chars)) break;
      b += n;
    }
  }
  if (right) {
    while (e > b) {
      size_t start = e - 1;
      while (start > b && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80 && e - start < 4) --start;
      size_t n = 0;
      const uint32_t cp = decode(s, start, &n);
      if (start + n != e) {  // not one whole sequence: treat the last byte alone
        start = e - 1;
        if (!in_set(static_cast<unsigned char>(s[start]), chars)) break;
        e = start;
        continue;
      }
      if (!in_set(cp, chars)) break;
      e = start;
    }
  }
  return std::string(s.substr(b, e - b));
}

std::vector<std::string> py_split(std::string_view s, const std::string* sep, int64_t maxsplit, bool from_right) {
  std::vector<std::string> out;
  if (sep) {
    if (from_right) {
      size_t end = s.size();
      while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
        const size_t p = end >= sep->size() ? s.rfind(*sep, end - sep->size()) : std::string_view::npos;
        if (p == std::string_view::npos || sep->empty()) break;
        out.emplace_back(s.substr(p + sep->size(), end - p - sep->size()));
        end = p;
      }
      out.emplace_back(s.substr(0, end));
      return {out.rbegin(), out.rend()};
    }
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      const size_t p = s.find(*sep, start);
      if (p == std::string_view::npos) break;
      out.emplace_back(s.substr(start, p - start));
      start = p + sep->size();
    }
    out.emplace_back(s.substr(start));
    return out;
  }
  size_t i = 0;
  while (i < s.size()) {
    size_t n = 0;
    while (i < s.size() && py_isspace(decode(s, i, &n))) i += n;
    if (i >= s.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      out.emplace_back(py_strip(s.substr(i), nullptr, false, true));
      break;
    }
    size_t j = i;
    while (j < s.size() && !py_isspace(decode(s, j, &n))) j += n;
    out.emplace_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

std::string py_replace(std::string_view s, std::string_view from, std::string_view to, int64_t count) {
  std::string out;
  if (from.empty()) {
    // Python inserts `to` between every code point (and at both ends).
    int64_t done = 0;
    for (std::string_view c : utf8_chars(s)) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      out += c;
    }
    if (count < 0 || done < count) out += to;
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t p = s.find(from, start);
    if (p == std::string_view::npos) break;
    out.append(s.substr(start, p - start)).append(to);
    start = p + from.size();
    ++done;
  }
  out.append(s.substr(start));
  return out;
}

std::string py_indent(std::string_view s, std::string_view pad, bool first, bool blank) {
  std::string out;
  size_t start = 0;
  bool is_first = true;
  while (start <= s.size()) {
    const size_t nl = s.find('\n', start);
    const std::string_view line = s.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start);
    if ((!is_first || first) && (blank || !line.empty())) out += pad;
    out += line;
    if (nl == std::string_view::npos) break;
    out += '\n';
    start = nl + 1;
    is_first = false;
  }
  return out;
}

std::string html_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace zl::tmpl
