// The PII detectors (guard/detectors.h). Each match function parses the
// longest well-formed candidate at s and validates it; candidates end only
// at group boundaries, never inside a run of digits or letters.
#include "guard/detectors.h"

#include <string>

namespace zl::guard::detect {
namespace {

// The byte at i, or 0 past the end (the end of text is a boundary).
unsigned char at(View v, size_t i) { return i < v.text.size() ? static_cast<unsigned char>(v.text[i]) : 0; }
unsigned char prev(View v, size_t s) { return s == 0 ? 0 : static_cast<unsigned char>(v.text[s - 1]); }
bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
bool is_lower(unsigned char c) { return c >= 'a' && c <= 'z'; }
bool is_alnum(unsigned char c) { return is_digit(c) || is_lower(c); }
bool is_sep(unsigned char c) { return c == ' ' || c == '.' || c == '-'; }
bool one_of(unsigned char c, std::string_view set) { return c != 0 && set.find(static_cast<char>(c)) != std::string_view::npos; }
// Whether a number may start after `p`: not glued to a word, a number, or
// number punctuation ("v1.555-0199", "#-4111").
// Reads two bytes back: "DE89 3704" and "1234 4111" do not start a number
// at "3704"/"4111", which continue a run of digit groups.
bool number_start_ok(View v, size_t s) {
  const unsigned char p = prev(v, s);
  if (is_alnum(p) || one_of(p, "+._/@$")) return false;
  if (p == '-') return false;
  return !(p == ' ' && s >= 2 && is_digit(static_cast<unsigned char>(v.text[s - 2])));
}
size_t count_digits(View v, size_t p) {
  size_t n = 0;
  while (is_digit(at(v, p + n))) ++n;
  return n;
}

// ---- email ------------------------------------------------------------------

// Bytes >= 0x80 are letters of other scripts (the view is valid UTF-8):
// internationalised addresses (m.müller@example.de, user@bücher.de).
bool email_local(unsigned char c) { return is_alnum(c) || c >= 0x80 || one_of(c, "._%+-"); }
bool email_label(unsigned char c) { return is_alnum(c) || c >= 0x80 || c == '-'; }
bool email_class(unsigned char c) { return email_local(c) || c == '@'; }
bool email_start(View v, size_t s) {
  const unsigned char c = at(v, s);
  return (is_alnum(c) || c >= 0xC0) && !email_local(prev(v, s)) && prev(v, s) != '@';
}
// A run without '@' is a local part for at most 64 bytes: "hello" is held
// (it could become hello@x.com), a long word of another script is not.
bool email_prefix(View v, size_t s) {
  const size_t at_sign = v.text.find('@', s);
  return at_sign != std::string_view::npos || v.text.size() - s <= 64;
}

bool tld_ok(View v, size_t b, size_t e) {
  if (e - b < 2 || e - b > 24) return false;
  for (size_t i = b; i < e; ++i) {
    if (!is_lower(at(v, i)) && at(v, i) < 0x80) return false;
  }
  return true;
}

size_t email_match(View v, size_t s) {
  size_t p = s;
  while (email_local(at(v, p)) && p - s <= 64) {
    if (at(v, p) == '.' && at(v, p + 1) == '.') return 0;
    ++p;
  }
  if (p == s || p - s > 64 || at(v, p) != '@' || at(v, p - 1) == '.') return 0;
  ++p;
  const size_t domain = p;
  size_t best = 0;
  for (int labels = 1;; ++labels) {
    const size_t q = p;
    while (email_label(at(v, p))) ++p;
    if (p == q || p - q > 63 || at(v, q) == '-' || at(v, p - 1) == '-' || p - domain > 253) return best;
    if (labels >= 2 && tld_ok(v, q, p)) best = p - s;
    if (at(v, p) != '.' || !email_label(at(v, p + 1)) || at(v, p + 1) == '-') return best;
    ++p;
  }
}

bool always(View, size_t) { return true; }

// ---- phone ------------------------------------------------------------------

bool phone_class(unsigned char c) { return is_digit(c) || one_of(c, " .-()+"); }
bool phone_start(View v, size_t s) {
  const unsigned char c = at(v, s);
  return (is_digit(c) || c == '+' || c == '(') && number_start_ok(v, s);
}
bool phone_end_ok(View v, size_t p) {
  const unsigned char c = at(v, p);
  return !is_alnum(c) && !((c == '-' || c == '.') && is_digit(at(v, p + 1)));
}

// +1 555 123 4567, 1-555-123-4567, (555) 123-4567, 555.123.4567,
// +15551234567. Area code and exchange start with 2..9.
size_t nanp_match(View v, size_t s) {
  size_t p = s;
  const bool compact_ok = at(v, s) == '+';
  if (at(v, p) == '+') {
    if (at(v, p + 1) != '1') return 0;
    p += 2;
    if (is_sep(at(v, p))) ++p;
  } else if (at(v, p) == '1' && is_sep(at(v, p + 1)) && (is_digit(at(v, p + 2)) || at(v, p + 2) == '(')) {
    p += 2;
  }
  size_t area = p;
  bool paren = false;
  if (at(v, p) == '(') {
    if (count_digits(v, p + 1) != 3 || at(v, p + 4) != ')') return 0;
    area = p + 1;
    p += 5;
    paren = true;
    if (is_sep(at(v, p))) ++p;
  } else {
    if (count_digits(v, p) != 3) return 0;
    p += 3;
    if (is_sep(at(v, p))) {
      ++p;
    } else if (!compact_ok) {
      return 0;
    }
  }
  const size_t exchange = p;
  if (count_digits(v, p) < 3) return 0;
  p += 3;
  if (is_sep(at(v, p))) {
    ++p;
  } else if (!compact_ok) {
    return 0;
  }
  if (count_digits(v, p) != 4) return 0;
  p += 4;
  if (!phone_end_ok(v, p) || at(v, area) < '2' || at(v, exchange) < '2') return 0;
  (void)paren;
  return p - s;
}

// E.164: +CC then groups of digits (one may be parenthesised) separated by
// single spaces, dots or dashes; 8..15 digits in all.
size_t intl_match(View v, size_t s) {
  if (at(v, s) != '+' || !is_digit(at(v, s + 1)) || at(v, s + 1) == '0') return 0;
  size_t p = s + 1;
  size_t digits = 0;
  size_t best = 0;
  while (true) {
    if (at(v, p) == '(') {
      const size_t n = count_digits(v, p + 1);
      if (n == 0 || at(v, p + 1 + n) != ')') break;
      digits += n;
      p += n + 2;
    } else if (is_digit(at(v, p))) {
      while (is_digit(at(v, p)) && digits <= 15) ++p, ++digits;
    } else {
      break;
    }
    if (digits > 15) break;
    if (digits >= 8 && !is_alnum(at(v, p))) best = p - s;
    const bool after_paren = at(v, p - 1) == ')';
    if (is_sep(at(v, p)) && (is_digit(at(v, p + 1)) || at(v, p + 1) == '(')) {
      ++p;
    } else if (at(v, p) != '(' && !(after_paren && is_digit(at(v, p)))) {
      break;
    }
  }
  return best;
}

size_t phone_match(View v, size_t s) {
  const size_t a = nanp_match(v, s);
  const size_t b = intl_match(v, s);
  return a > b ? a : b;
}

// ---- credit card ------------------------------------------------------------

bool card_class(unsigned char c) { return is_digit(c) || c == ' ' || c == '-'; }
bool card_start(View v, size_t s) {
  const unsigned char c = at(v, s);
  return c >= '2' && c <= '6' && number_start_ok(v, s);
}

size_t card_match(View v, size_t s) {
  std::string digits;
  size_t p = s;
  size_t best = 0;
  while (true) {
    while (is_digit(at(v, p))) {
      if (digits.size() == 19) return best;  // a group runs past 19 digits
      digits.push_back(static_cast<char>(at(v, p++)));
    }
    if (digits.size() >= 13 && !is_lower(at(v, p)) && luhn_ok(digits) &&
        digits.find_first_not_of(digits[0]) != std::string::npos) {
      best = p - s;
    }
    if ((at(v, p) == ' ' || at(v, p) == '-') && is_digit(at(v, p + 1))) {
      ++p;
    } else {
      return best;
    }
  }
}

// ---- IBAN -------------------------------------------------------------------

bool iban_class(unsigned char c) { return is_alnum(c) || c == ' '; }
// Reads nothing after s (in a stream v[s + 1] may not have come yet);
// iban_match and iban_prefix check the second letter.
bool iban_start(View v, size_t s) { return is_lower(at(v, s)) && !is_alnum(prev(v, s)); }

size_t iban_match(View v, size_t s) {
  std::string compact;
  size_t p = s;
  size_t best = 0;
  while (true) {
    while (is_alnum(at(v, p))) {
      if (compact.size() == 34) return best;
      // Country letters, then check digits: most words fail here, cheaply.
      if (compact.size() < 2 ? !is_lower(at(v, p)) : compact.size() < 4 && !is_digit(at(v, p))) return best;
      compact.push_back(static_cast<char>(at(v, p++)));
    }
    if (compact.size() >= 15 && iban_ok(compact)) best = p - s;
    // Country and check digits are one group (as iban_prefix requires).
    if (at(v, p) == ' ' && is_alnum(at(v, p + 1)) && compact.size() >= 4) {
      ++p;
    } else {
      return best;
    }
  }
}

bool iban_prefix(View v, size_t s) {
  size_t i = 0;
  for (size_t p = s; p < v.text.size(); ++p) {
    const unsigned char c = at(v, p);
    if (c == ' ') {
      if (i < 4 || at(v, p + 1) == ' ') return false;
      continue;
    }
    if (i < 2 ? !is_lower(c) : i < 4 ? !is_digit(c) : !is_alnum(c)) return false;
    ++i;
  }
  return true;
}

// ---- US SSN -----------------------------------------------------------------

bool ssn_class(unsigned char c) { return is_digit(c) || c == ' ' || c == '-'; }
bool ssn_start(View v, size_t s) { return is_digit(at(v, s)) && number_start_ok(v, s); }

size_t ssn_match(View v, size_t s) {
  const unsigned char sep = at(v, s + 3);
  if (count_digits(v, s) != 3 || (sep != '-' && sep != ' ')) return 0;
  if (count_digits(v, s + 4) != 2 || at(v, s + 6) != sep || count_digits(v, s + 7) != 4) return 0;
  const unsigned char next = at(v, s + 11);
  if (is_lower(next) || (next == '-' && is_digit(at(v, s + 12)))) return 0;
  if (!ssn_ok(v.text.substr(s, 3), v.text.substr(s + 4, 2), v.text.substr(s + 7, 4))) return 0;
  return 11;
}

// ---- API keys ---------------------------------------------------------------

constexpr size_t kMaxKey = 200;
constexpr std::string_view kGithubPrefixes[] = {"ghp_", "gho_", "ghu_", "ghs_", "ghr_"};
constexpr std::string_view kKeyPrefixes[] = {"sk-", "akia", "asia", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"};

bool key_class(unsigned char c) { return is_alnum(c) || c == '-' || c == '_'; }
bool key_start(View v, size_t s) { return is_lower(at(v, s)) && !key_class(prev(v, s)); }

// A secret body: long enough, with both letters and digits (prose such as
// "sk-this-is-not-a-key" has no digits).
bool random_body(std::string_view body, size_t min_len) {
  if (body.size() < min_len) return false;
  bool digit = false, letter = false;
  for (unsigned char c : body) {
    digit |= is_digit(c);
    letter |= is_lower(c);
  }
  return digit && letter;
}

bool all_alnum(std::string_view t) {
  for (unsigned char c : t) {
    if (!is_alnum(c)) return false;
  }
  return true;
}

size_t key_match(View v, size_t s) {
  size_t p = s;
  while (key_class(at(v, p)) && p - s <= kMaxKey) ++p;
  if (p - s > kMaxKey) return 0;
  const std::string_view t = v.text.substr(s, p - s);
  const size_t n = t.size();
  if (t.starts_with("sk-ant-")) return random_body(t.substr(7), 20) ? n : 0;
  if (t.starts_with("sk-")) return random_body(t.substr(3), 20) ? n : 0;
  if (t.starts_with("akia") || t.starts_with("asia")) {
    if (n != 20 || !all_alnum(t)) return 0;
    for (size_t i = 0; v.flags != nullptr && i < n; ++i) {
      if (is_lower(at(v, s + i)) && !(v.flags[s + i] & 1)) return 0;  // AWS key ids are upper case
    }
    return n;
  }
  for (std::string_view prefix : kGithubPrefixes) {
    if (t.starts_with(prefix)) return n == 40 && all_alnum(t.substr(4)) ? n : 0;
  }
  if (t.starts_with("github_pat_")) return n >= 82 && random_body(t.substr(11), 60) ? n : 0;
  return 0;
}

bool key_prefix(View v, size_t s) {
  const std::string_view t = v.text.substr(s);
  for (std::string_view prefix : kKeyPrefixes) {
    const size_t k = std::min(t.size(), prefix.size());
    if (t.substr(0, k) == prefix.substr(0, k)) return true;
  }
  return false;
}

// ---- table ------------------------------------------------------------------

const Detector kDetectors[] = {
    {PiiKind::kEmail, 64 + 1 + 253, email_class, email_start, email_match, email_prefix},
    {PiiKind::kPhone, 60, phone_class, phone_start, phone_match, always},
    {PiiKind::kCreditCard, 40, card_class, card_start, card_match, always},
    {PiiKind::kIban, 68, iban_class, iban_start, iban_match, iban_prefix},
    {PiiKind::kUsSsn, 11, ssn_class, ssn_start, ssn_match, always},
    {PiiKind::kApiKey, kMaxKey, key_class, key_start, key_match, key_prefix},
};

// Registered IBAN lengths of the common countries; others need 15..34.
struct IbanLength {
  char cc[3];
  uint8_t len;
};
constexpr IbanLength kIbanLengths[] = {
    {"at", 20}, {"be", 16}, {"bg", 22}, {"ch", 21}, {"cy", 28}, {"cz", 24}, {"de", 22}, {"dk", 18},
    {"ee", 20}, {"es", 24}, {"fi", 18}, {"fr", 27}, {"gb", 22}, {"gr", 27}, {"hr", 21}, {"hu", 28},
    {"ie", 22}, {"is", 26}, {"it", 27}, {"li", 21}, {"lt", 20}, {"lu", 20}, {"lv", 21}, {"mt", 31},
    {"nl", 18}, {"no", 15}, {"pl", 28}, {"pt", 25}, {"ro", 24}, {"se", 24}, {"si", 19}, {"sk", 24},
    {"tr", 26}, {"ae", 23}, {"sa", 24}, {"il", 23}, {"br", 29}, {"ua", 29},
};

}  // namespace

const Detector& detector(PiiKind kind) { return kDetectors[static_cast<int>(kind)]; }

bool luhn_ok(std::string_view digits) {
  int sum = 0;
  bool dbl = false;
  for (size_t i = digits.size(); i-- > 0;) {
    int d = digits[i] - '0';
    if (d < 0 || d > 9) return false;
    if (dbl) d = d * 2 > 9 ? d * 2 - 9 : d * 2;
    sum += d;
    dbl = !dbl;
  }
  return !digits.empty() && sum % 10 == 0;
}

bool iban_ok(std::string_view s) {
  auto lower = [](char c) { return static_cast<unsigned char>(c >= 'A' && c <= 'Z' ? c + 32 : c); };
  if (s.size() < 15 || s.size() > 34) return false;
  if (!is_lower(lower(s[0])) || !is_lower(lower(s[1])) || !is_digit(lower(s[2])) || !is_digit(lower(s[3]))) return false;
  for (const IbanLength& c : kIbanLengths) {
    if (lower(s[0]) == c.cc[0] && lower(s[1]) == c.cc[1] && s.size() != c.len) return false;
  }
  // mod 97 of BBAN + country + check digits, letters as 10..35, digit by digit.
  int rem = 0;
  for (size_t k = 0; k < s.size(); ++k) {
    const unsigned char c = lower(s[(k + 4) % s.size()]);
    if (is_digit(c)) {
      rem = (rem * 10 + (c - '0')) % 97;
    } else if (is_lower(c)) {
      rem = (rem * 100 + (c - 'a' + 10)) % 97;
    } else {
      return false;
    }
  }
  return rem == 1;
}

bool ssn_ok(std::string_view area, std::string_view group, std::string_view serial) {
  if (area == "000" || area == "666" || area[0] == '9') return false;
  return group != "00" && serial != "0000";
}

}  // namespace zl::guard::detect
