// An incremental JSON validator: bytes in one at a time, as a model writes
// them; after each byte it knows whether everything so far is a prefix of one
// valid JSON value, and what the byte was (whitespace, structure, key,
// string, scalar). Used to stream a tool call's arguments while they are
// written (api/tool_calls.h) without ever sending bytes that cannot be part
// of valid JSON.
//
// What it accepts is what Boost.JSON's parser accepts with max_depth =
// kMaxJsonDepth (the verdict on a complete call is still Boost's): RFC 8259
// grammar, strings of valid UTF-8 (no overlong forms, no encoded surrogates,
// nothing past U+10FFFF) without raw control characters, \u escapes whose
// surrogates pair up, numbers as the grammar writes them (any magnitude;
// Boost rejects an exponent over INT_MAX, and so does the scanner, though
// Boost's own bookkeeping can refuse one a few digits short of that that the
// scanner takes), containers nested at most kMaxJsonDepth deep, and only
// whitespace after the value. A number at the top level is never done: its end is the end of the
// input, which the scanner does not see.
//
// Costs: O(1) per byte; memory O(depth). Not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace zl::api {

class JsonScanner {
 public:
  // What a byte was.
  enum class Byte : uint8_t {
    kSpace,       // whitespace outside strings (insignificant)
    kStructural,  // { } [ ] : ,
    kKey,         // part of an object key, its quotes included
    kString,      // part of a string value, its quotes included
    kScalar,      // part of a number, true, false or null
    kError,       // not valid here; the scanner has failed for good
  };

  Byte feed(char c);
  bool done() const { return state_ == State::kDone; }    // the value is complete
  bool failed() const { return state_ == State::kError; }
  // Containers open after the last byte fed (1 inside a top-level object).
  int depth() const { return static_cast<int>(stack_.size()); }

 private:
  enum class State : uint8_t {
    kValue,        // a value must come
    kArrayFirst,   // after '[': a value or ']'
    kObjectFirst,  // after '{': a key or '}'
    kKey,          // after ',' in an object: a key
    kColon,        // after a key
    kAfterValue,   // in a container after a value: ',' or its closer
    kString,       // inside a string (key_ tells which kind)
    kEscape,       // after '\' in a string
    kUnicode,      // inside \uXXXX (n_hex_ digits read)
    kNumber,       // inside a number (number_ says where)
    kLiteral,      // inside true / false / null
    kDone,         // the value is complete: whitespace only
    kError,
  };
  // Where a number is; the names say what was read last.
  enum class Num : uint8_t { kMinus, kZero, kInt, kDot, kFrac, kE, kExpSign, kExp };

  Byte fail() {
    state_ = State::kError;
    return Byte::kError;
  }
  Byte start_value(char c);  // the first byte of a value (kValue / kArrayFirst)
  Byte end_value();          // a scalar or string or container closed: what may follow
  Byte string_byte(unsigned char c);
  Byte number_byte(char c);
  Byte close_container(char c);

  State state_ = State::kValue;
  std::string stack_;        // '{' or '[' per open container
  bool key_ = false;         // kString/kEscape/kUnicode: the string is an object key
  Num number_ = Num::kInt;
  std::string_view literal_; // kLiteral: "true", "false" or "null"
  uint8_t literal_pos_ = 0;  // bytes of literal_ read
  uint8_t n_hex_ = 0;        // kUnicode: hex digits read
  uint16_t code_unit_ = 0;   // kUnicode: the value so far
  uint32_t exponent_ = 0;    // kNumber: the exponent's digits so far
  bool high_surrogate_ = false;  // a \u high surrogate waits for its low half
  uint8_t utf8_left_ = 0;    // continuation bytes the current character still needs
  uint8_t utf8_lo_ = 0x80, utf8_hi_ = 0xBF;  // the range of the next continuation byte
};

// `json` (valid JSON text) without the whitespace outside its strings.
std::string minify_json(std::string_view json);

}  // namespace zl::api
