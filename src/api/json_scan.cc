#include "api/json_scan.h"

#include "api/json_util.h"  // kMaxJsonDepth, is_json_space
#include "core/utf8.h"

namespace zl::api {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

JsonScanner::Byte JsonScanner::feed(char c) {
  switch (state_) {
    case State::kValue:
    case State::kArrayFirst:
      if (is_json_space(c)) return Byte::kSpace;
      if (c == ']' && state_ == State::kArrayFirst) return close_container(c);
      return start_value(c);
    case State::kObjectFirst:
    case State::kKey:
      if (is_json_space(c)) return Byte::kSpace;
      if (c == '}' && state_ == State::kObjectFirst) return close_container(c);
      if (c != '"') return fail();
      state_ = State::kString;
      key_ = true;
      return Byte::kKey;
    case State::kColon:
      if (is_json_space(c)) return Byte::kSpace;
      if (c != ':') return fail();
      state_ = State::kValue;
      return Byte::kStructural;
    case State::kAfterValue:
      if (is_json_space(c)) return Byte::kSpace;
      if (c == ',') {
        state_ = stack_.back() == '{' ? State::kKey : State::kValue;
        return Byte::kStructural;
      }
      return close_container(c);
    case State::kString:
    case State::kEscape:
    case State::kUnicode:
      return string_byte(static_cast<unsigned char>(c));
    case State::kNumber:
      return number_byte(c);
    case State::kLiteral:
      if (c != literal_[literal_pos_]) return fail();
      if (++literal_pos_ == literal_.size()) end_value();
      return Byte::kScalar;
    case State::kDone:
      return is_json_space(c) ? Byte::kSpace : fail();
    case State::kError:
      return Byte::kError;
  }
  return fail();
}

JsonScanner::Byte JsonScanner::start_value(char c) {
  if (c == '{' || c == '[') {
    if (depth() >= kMaxJsonDepth) return fail();
    stack_.push_back(c);
    state_ = c == '{' ? State::kObjectFirst : State::kArrayFirst;
    return Byte::kStructural;
  }
  if (c == '"') {
    state_ = State::kString;
    key_ = false;
    return Byte::kString;
  }
  if (c == '-' || is_digit(c)) {
    state_ = State::kNumber;
    number_ = c == '-' ? Num::kMinus : c == '0' ? Num::kZero : Num::kInt;
    return Byte::kScalar;
  }
  for (std::string_view lit : {std::string_view("true"), std::string_view("false"), std::string_view("null")}) {
    if (c == lit[0]) {
      state_ = State::kLiteral;
      literal_ = lit;
      literal_pos_ = 1;
      return Byte::kScalar;
    }
  }
  return fail();
}

JsonScanner::Byte JsonScanner::end_value() {
  state_ = stack_.empty() ? State::kDone : State::kAfterValue;
  return Byte::kStructural;
}

JsonScanner::Byte JsonScanner::close_container(char c) {
  if (stack_.empty() || c != (stack_.back() == '{' ? '}' : ']')) return fail();
  stack_.pop_back();
  return end_value();
}

JsonScanner::Byte JsonScanner::string_byte(unsigned char c) {
  const Byte kind = key_ ? Byte::kKey : Byte::kString;
  if (state_ == State::kEscape) {
    // After a high surrogate only its low half may follow.
    if (high_surrogate_ && c != 'u') return fail();
    if (c == 'u') {
      state_ = State::kUnicode;
      n_hex_ = 0;
      code_unit_ = 0;
      return kind;
    }
    if (c != '"' && c != '\\' && c != '/' && c != 'b' && c != 'f' && c != 'n' && c != 'r' && c != 't') return fail();
    state_ = State::kString;
    return kind;
  }
  if (state_ == State::kUnicode) {
    const int h = hex_value(static_cast<char>(c));
    if (h < 0) return fail();
    code_unit_ = static_cast<uint16_t>(code_unit_ << 4 | h);
    if (++n_hex_ < 4) return kind;
    const bool high = code_unit_ >= 0xD800 && code_unit_ <= 0xDBFF;
    const bool low = code_unit_ >= 0xDC00 && code_unit_ <= 0xDFFF;
    if (high_surrogate_ != low || (high_surrogate_ && high)) return fail();  // unpaired halves
    high_surrogate_ = high;
    state_ = State::kString;
    return kind;
  }
  // kString.
  if (utf8_left_ > 0) {
    if (c < utf8_lo_ || c > utf8_hi_) return fail();
    --utf8_left_;
    utf8_lo_ = 0x80;
    utf8_hi_ = 0xBF;
    return kind;
  }
  if (high_surrogate_ && c != '\\') return fail();
  if (c == '"') {
    end_value();
    if (key_) state_ = State::kColon;
    return kind;
  }
  if (c == '\\') {
    state_ = State::kEscape;
    return kind;
  }
  if (c < 0x20) return fail();
  if (c < 0x80) return kind;
  // The lead byte of a multi-byte character: how many follow, and the range
  // of the first one (which rules out overlong forms, surrogates and > U+10FFFF).
  const utf8::Lead lead = utf8::lead(c);
  if (lead.len < 2) return fail();
  utf8_left_ = static_cast<uint8_t>(lead.len - 1);
  utf8_lo_ = lead.lo;
  utf8_hi_ = lead.hi;
  return kind;
}

JsonScanner::Byte JsonScanner::number_byte(char c) {
  switch (number_) {
    case Num::kMinus:
      if (!is_digit(c)) return fail();
      number_ = c == '0' ? Num::kZero : Num::kInt;
      return Byte::kScalar;
    case Num::kZero:
    case Num::kInt:
      if (is_digit(c) && number_ == Num::kInt) return Byte::kScalar;
      if (c == '.') {
        number_ = Num::kDot;
        return Byte::kScalar;
      }
      if (c == 'e' || c == 'E') {
        number_ = Num::kE;
        exponent_ = 0;
        return Byte::kScalar;
      }
      break;  // the number ended before c (a digit after a leading 0 fails below)
    case Num::kDot:
      if (!is_digit(c)) return fail();
      number_ = Num::kFrac;
      return Byte::kScalar;
    case Num::kFrac:
      if (is_digit(c)) return Byte::kScalar;
      if (c == 'e' || c == 'E') {
        number_ = Num::kE;
        exponent_ = 0;
        return Byte::kScalar;
      }
      break;
    case Num::kE:
      if (c == '+' || c == '-') {
        number_ = Num::kExpSign;
        return Byte::kScalar;
      }
      [[fallthrough]];
    case Num::kExpSign:
    case Num::kExp:
      if (is_digit(c)) {
        // Boost.JSON refuses exponents past INT_MAX (exponent_overflow).
        const uint32_t d = static_cast<uint32_t>(c - '0');
        if (exponent_ > 214748364 || (exponent_ == 214748364 && d > 7)) return fail();
        exponent_ = exponent_ * 10 + d;
        number_ = Num::kExp;
        return Byte::kScalar;
      }
      if (number_ != Num::kExp) return fail();  // 1e, 1e+
      break;
  }
  // The number is complete; c is the byte after it.
  if (is_digit(c)) return fail();  // 01
  end_value();
  return feed(c);
}

std::string minify_json(std::string_view json) {
  std::string out;
  out.reserve(json.size());
  bool in_string = false, escape = false;
  for (char c : json) {
    if (in_string) {
      if (escape) {
        escape = false;
      } else if (c == '\\') {
        escape = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (is_json_space(c)) {
      continue;
    }
    out += c;
  }
  return out;
}

}  // namespace zl::api
