#include "grammar/regex.h"

#include <algorithm>
#include <bitset>
#include <cctype>

namespace zl::grammar {
namespace {

using Seq = GrammarBuilder::Seq;

// A set of characters: ASCII ones, every non-ASCII one, or listed non-ASCII ones.
struct CharSet {
  std::bitset<128> ascii;
  bool non_ascii = false;
  std::vector<std::string> multi;  // UTF-8 sequences

  void add_range(int lo, int hi) {
    for (int c = lo; c <= hi; ++c) ascii.set(static_cast<size_t>(c));
  }
  void negate() {  // a class with listed non-ASCII characters is never negated
    ascii.flip();
    non_ascii = !non_ascii;
  }
};

struct RegexError {
  Status status;
};

[[noreturn]] void unsupported_regex(std::string what, size_t at) {
  throw RegexError{invalid_argument("unsupported regex feature in pattern: " + what + " at offset " + std::to_string(at),
                                    {.reason = ErrorReason::kUnsupportedValue})};
}

[[noreturn]] void bad_regex(std::string what, size_t at) {
  throw RegexError{invalid_argument("invalid pattern: " + what + " at offset " + std::to_string(at),
                                    {.reason = ErrorReason::kInvalidValue})};
}

size_t utf8_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xe0) == 0xc0) return 2;
  if ((lead & 0xf0) == 0xe0) return 3;
  if ((lead & 0xf8) == 0xf0) return 4;
  return 0;
}

class RegexCompiler {
 public:
  // raw: the characters themselves (guided_regex), not their JSON text.
  RegexCompiler(JsonRules& j, std::string_view p, bool raw = false) : j_(j), b_(j.builder()), p_(p), raw_(raw) {}

  uint32_t run() {
    if (!p_.empty() && p_[0] == '^') ++i_;
    int64_t weight = 1;
    const uint32_t r = alternation(0, &weight);
    if (i_ != p_.size()) bad_regex("unbalanced ')'", i_);
    return r;
  }

 private:
  static constexpr int kMaxDepth = 32;

  bool at(char c) const { return i_ < p_.size() && p_[i_] == c; }

  // *weight: the most that the counted repetitions nested in what was
  // parsed multiply to (1 without any). Each nested repetition multiplies the
  // ways to split a text between the copies of what it repeats, hence the
  // parse stacks the matcher carries: a product above kMaxRepeat is refused.
  uint32_t alternation(int depth, int64_t* weight) {
    if (depth > kMaxDepth) unsupported_regex("groups nested deeper than " + std::to_string(kMaxDepth), i_);
    std::vector<Seq> alts{sequence(depth, weight)};
    while (at('|')) {
      ++i_;
      int64_t w = 1;
      alts.push_back(sequence(depth, &w));
      *weight = std::max(*weight, w);
    }
    return b_.rule(std::move(alts));
  }

  Seq sequence(int depth, int64_t* weight) {
    Seq s;
    *weight = 1;
    while (i_ < p_.size() && !at('|') && !at(')')) {
      if (at('$') && i_ + 1 == p_.size()) {
        ++i_;
        break;
      }
      int64_t w = 1;
      Seq a = atom(depth, &w);
      Seq q = quantified(std::move(a), &w);
      s.insert(s.end(), q.begin(), q.end());
      *weight = std::max(*weight, w);
    }
    return s;
  }

  // Reads {n}, {n,}, {n,m} at i_; false (i_ unchanged) when it is not one.
  bool counted(int64_t* min, int64_t* max) {
    size_t k = i_ + 1;
    auto number = [&](int64_t* out) {
      const size_t start = k;
      int64_t v = 0;
      while (k < p_.size() && p_[k] >= '0' && p_[k] <= '9' && k - start < 9) v = v * 10 + (p_[k++] - '0');
      *out = v;
      return k > start;
    };
    if (!number(min)) return false;
    *max = *min;
    if (k < p_.size() && p_[k] == ',') {
      ++k;
      if (!number(max)) *max = -1;
    }
    if (k >= p_.size() || p_[k] != '}') return false;
    i_ = k + 1;
    return true;
  }

  // *weight: the atom's on entry, times this repetition's count on return.
  Seq quantified(Seq a, int64_t* weight) {
    int64_t min = 1, max = 1;
    if (at('*')) {
      min = 0, max = -1, ++i_;
    } else if (at('+')) {
      min = 1, max = -1, ++i_;
    } else if (at('?')) {
      min = 0, max = 1, ++i_;
    } else if (!(at('{') && counted(&min, &max))) {
      return a;
    }
    if (at('?') || at('+')) ++i_;  // lazy / possessive: the same strings
    if (max >= 0 && min > max) bad_regex("{n,m} with n > m", i_);
    if (min > kMaxRepeat || max > kMaxRepeat) unsupported_regex("a repetition count above " + std::to_string(kMaxRepeat), i_);
    // The copies that are unrolled (a loop, * + {n,}, is one whatever it takes).
    *weight *= std::max<int64_t>(1, max >= 0 ? max : min);
    if (*weight > kMaxRepeat) {
      unsupported_regex("nested repetitions whose counts multiply to more than " + std::to_string(kMaxRepeat), i_);
    }
    if (min == 1 && max == 1) return a;
    return {b_.ref(b_.repeat(a, min, max))};
  }

  // *weight: a group's (alternation); 1 for anything else.
  Seq atom(int depth, int64_t* weight) {
    const size_t start = i_;
    const char c = p_[i_];
    if (c == '(') {
      ++i_;
      if (at('?')) {
        if (i_ + 1 < p_.size() && p_[i_ + 1] == ':') {
          i_ += 2;
        } else {
          unsupported_regex("look-arounds and named groups", start);
        }
      }
      const uint32_t r = alternation(depth + 1, weight);
      if (!at(')')) bad_regex("missing ')'", start);
      ++i_;
      return {b_.ref(r)};
    }
    if (c == '*' || c == '+' || c == '?') bad_regex("nothing to repeat", start);
    if (c == '[') return emit(char_class(), start);
    if (c == '.') {
      ++i_;
      CharSet s;
      s.ascii.set('\n');
      s.negate();
      return emit(s, start);
    }
    if (c == '^' || c == '$') unsupported_regex("an anchor inside the pattern", start);
    if (c == '\\') {
      CharSet s;
      std::string multi;
      escape(&s, &multi);
      return multi.empty() ? emit(s, start) : b_.literal(multi);
    }
    const size_t n = utf8_length(static_cast<uint8_t>(c));
    if (n == 0 || i_ + n > p_.size()) bad_regex("invalid UTF-8", start);
    i_ += n;
    if (n > 1) return b_.literal(p_.substr(start, n));
    CharSet s;
    s.ascii.set(static_cast<uint8_t>(c));
    return emit(s, start);
  }

  // An escape at i_ ('\\'): a class into *s, or one non-ASCII character into *multi.
  void escape(CharSet* s, std::string* multi) {
    const size_t start = i_;
    if (i_ + 1 >= p_.size()) bad_regex("a trailing backslash", start);
    const char e = p_[i_ + 1];
    i_ += 2;
    switch (e) {
      case 'd': s->add_range('0', '9'); return;
      case 'D': s->add_range('0', '9'); s->negate(); return;
      case 'w': s->add_range('a', 'z'); s->add_range('A', 'Z'); s->add_range('0', '9'); s->ascii.set('_'); return;
      case 'W': s->add_range('a', 'z'); s->add_range('A', 'Z'); s->add_range('0', '9'); s->ascii.set('_'); s->negate(); return;
      case 's': for (char x : std::string_view(" \t\n\r\f\v")) s->ascii.set(static_cast<uint8_t>(x)); return;
      case 'S': for (char x : std::string_view(" \t\n\r\f\v")) s->ascii.set(static_cast<uint8_t>(x)); s->negate(); return;
      case 't': s->ascii.set('\t'); return;
      case 'n': s->ascii.set('\n'); return;
      case 'r': s->ascii.set('\r'); return;
      case 'f': s->ascii.set('\f'); return;
      case 'v': s->ascii.set('\v'); return;
      case 'x': {
        int v = 0;
        for (int k = 0; k < 2; ++k, ++i_) {
          if (i_ >= p_.size() || !std::isxdigit(static_cast<unsigned char>(p_[i_]))) {
            bad_regex("\\x needs two hex digits", start);
          }
          const char h = static_cast<char>(std::tolower(static_cast<unsigned char>(p_[i_])));
          v = v * 16 + (h <= '9' ? h - '0' : h - 'a' + 10);
        }
        if (v >= 0x80) unsupported_regex("\\x above 7F", start);
        s->ascii.set(static_cast<size_t>(v));
        return;
      }
      default: break;
    }
    if ((e >= '0' && e <= '9') || e == 'k') unsupported_regex("back-references", start);
    if (e == 'b' || e == 'B') unsupported_regex("word boundaries", start);
    if (e == 'p' || e == 'P' || e == 'u') unsupported_regex("\\" + std::string(1, e) + " escapes", start);
    if (std::isalnum(static_cast<unsigned char>(e))) bad_regex("unknown escape \\" + std::string(1, e), start);
    const size_t n = utf8_length(static_cast<uint8_t>(e));
    if (n == 0 || start + 1 + n > p_.size()) bad_regex("invalid UTF-8", start);
    if (n > 1) {
      *multi = std::string(p_.substr(start + 1, n));
      i_ = start + 1 + n;
      return;
    }
    s->ascii.set(static_cast<uint8_t>(e));
  }

  CharSet char_class() {
    const size_t start = i_++;
    CharSet s;
    const bool negated = at('^');
    if (negated) ++i_;
    bool first = true;
    while (i_ < p_.size() && (first || !at(']'))) {
      first = false;
      // One member: a character (possibly a range start) or an escape class.
      int lo = -1;
      if (at('\\')) {
        CharSet e;
        std::string multi;
        escape(&e, &multi);
        if (!multi.empty()) {
          s.multi.push_back(multi);
          continue;
        }
        if (e.ascii.count() == 1 && !e.non_ascii) {
          for (int c = 0; c < 128; ++c) {
            if (e.ascii.test(c)) lo = c;
          }
        } else {
          s.ascii |= e.ascii;
          s.non_ascii |= e.non_ascii;
          continue;
        }
      } else {
        const size_t n = utf8_length(static_cast<uint8_t>(p_[i_]));
        if (n == 0 || i_ + n > p_.size()) bad_regex("invalid UTF-8", i_);
        if (n > 1) {
          s.multi.emplace_back(p_.substr(i_, n));
          i_ += n;
          if (at('-') && i_ + 1 < p_.size() && p_[i_ + 1] != ']') unsupported_regex("a range of non-ASCII characters", i_);
          continue;
        }
        lo = static_cast<uint8_t>(p_[i_++]);
      }
      if (at('-') && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
        ++i_;
        int hi;
        if (at('\\')) {
          CharSet e;
          std::string multi;
          escape(&e, &multi);
          if (!multi.empty() || e.ascii.count() != 1) bad_regex("a range ending in a class", i_);
          hi = 0;
          for (int c = 0; c < 128; ++c) {
            if (e.ascii.test(c)) hi = c;
          }
        } else {
          hi = static_cast<uint8_t>(p_[i_++]);
          if (hi >= 0x80) unsupported_regex("a range of non-ASCII characters", i_);
        }
        if (hi < lo) bad_regex("a range out of order", i_);
        s.add_range(lo, hi);
      } else {
        s.ascii.set(static_cast<size_t>(lo));
      }
    }
    if (!at(']')) bad_regex("missing ']'", start);
    ++i_;
    if (negated) {
      if (!s.multi.empty()) unsupported_regex("non-ASCII characters in a negated class", start);
      s.negate();
    }
    return s;
  }

  // The JSON text of one character of `s`. Control characters are escaped:
  // \t \n \r by name, the others as \u00XX (at most two alternatives, so `.`
  // stays small). A set that matches nothing is an error: its rule would have
  // no alternative, a dead end for the matcher.
  Seq emit(const CharSet& s, size_t where) {
    if (s.ascii.none() && !s.non_ascii && s.multi.empty()) {
      unsupported_regex("a class that matches no character", where);
    }
    static constexpr char kHex[] = "0123456789abcdef";
    ByteSet plain;
    ByteSet low_nibbles[2];
    std::vector<Seq> alts;
    for (int c = 0; c < 0x80; ++c) {
      if (!s.ascii.test(c)) continue;
      if (raw_) {  // as they are; control characters other than \t \n \r never
        if (c >= 0x20 || c == '\t' || c == '\n' || c == '\r') plain.add(static_cast<uint8_t>(c));
        continue;
      }
      if (c == '"') {
        alts.push_back(b_.literal("\\\""));
      } else if (c == '\\') {
        alts.push_back(b_.literal("\\\\"));
      } else if (c == '\t' || c == '\n' || c == '\r') {
        alts.push_back(b_.literal(c == '\t' ? "\\t" : c == '\n' ? "\\n" : "\\r"));
      } else if (c < 0x20) {
        low_nibbles[c >> 4].add(static_cast<uint8_t>(kHex[c & 15]));
      } else {
        plain.add(static_cast<uint8_t>(c));  // DEL (0x7f) too: JSON needs no escape for it
      }
    }
    for (int hi = 0; hi < 2; ++hi) {
      if (low_nibbles[hi].empty()) continue;
      Seq u = b_.literal(std::string("\\u00") + kHex[hi]);
      u.push_back(b_.bytes(low_nibbles[hi]));
      alts.push_back(std::move(u));
    }
    if (!plain.empty()) alts.push_back({b_.bytes(plain)});
    for (const std::string& m : s.multi) alts.push_back(b_.literal(m));
    if (s.non_ascii) alts.push_back({b_.ref(j_.multibyte_char())});
    if (alts.empty()) unsupported_regex("a class of control characters only", where);
    if (alts.size() == 1) return alts[0];
    return {b_.ref(b_.rule(std::move(alts)))};
  }

  JsonRules& j_;
  GrammarBuilder& b_;
  std::string_view p_;
  bool raw_;
  size_t i_ = 0;
};

}  // namespace

namespace {

Result<uint32_t> compile_pattern(JsonRules& rules, std::string_view pattern, bool raw) {
  if (pattern.size() > kMaxPatternBytes) {
    return invalid_argument("pattern longer than " + std::to_string(kMaxPatternBytes) + " bytes",
                            {.reason = ErrorReason::kUnsupportedValue});
  }
  try {
    return RegexCompiler(rules, pattern, raw).run();
  } catch (const RegexError& e) {
    return e.status;
  }
}

}  // namespace

Result<uint32_t> add_regex(JsonRules& rules, std::string_view pattern) { return compile_pattern(rules, pattern, false); }

Result<std::shared_ptr<const Grammar>> compile_text_regex(std::string_view pattern) {
  GrammarBuilder b;
  JsonRules j(b);
  ASSIGN_OR_RETURN(uint32_t root, compile_pattern(j, pattern, true));
  ASSIGN_OR_RETURN(Grammar g, b.build(root));
  return std::make_shared<const Grammar>(std::move(g));
}

Result<std::shared_ptr<const Grammar>> compile_text_choice(std::span<const std::string> choices) {
  if (choices.empty()) return invalid_argument("no choices", {.reason = ErrorReason::kInvalidValue});
  size_t bytes = 0;
  GrammarBuilder b;
  std::vector<GrammarBuilder::Seq> alts;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (choices[i].empty()) {
      return invalid_argument("choice " + std::to_string(i) + " is empty", {.reason = ErrorReason::kInvalidValue});
    }
    bytes += choices[i].size();
    if (bytes > kMaxChoiceBytes) {
      return invalid_argument("choices longer than " + std::to_string(kMaxChoiceBytes) + " bytes in all",
                              {.reason = ErrorReason::kUnsupportedValue});
    }
    alts.push_back(b.literal(choices[i]));
  }
  const uint32_t root = b.rule(std::move(alts));
  ASSIGN_OR_RETURN(Grammar g, b.build(root));
  return std::make_shared<const Grammar>(std::move(g));
}

}  // namespace zl::grammar
