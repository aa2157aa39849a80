// UTF-8: validation, decoding, encoding and safe cut points, the one copy
// the tree uses (tokenizer, detokenizer hold-back, stream shaper, JSON
// escaping and scanning, stop strings).
//
// Well-formed means RFC 3629 / Unicode Table 3-7: no overlong forms, no
// encoded surrogates (U+D800..U+DFFF), nothing above U+10FFFF, no 0xC0,
// 0xC1, 0xF5..0xFF. Invalid-input policy (used by sanitize, decode_one and
// everything built on them): a byte that does not start a well-formed
// sequence -- a stray continuation byte, a lead byte whose continuation is
// missing or wrong, a truncated sequence, any of the forms above -- is one
// U+FFFD, and decoding resumes at the next byte. NUL, U+FEFF and U+200B are
// ordinary code points.
//
// All functions are pure and thread-safe; each costs O(bytes it reads).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace zl::utf8 {

constexpr uint32_t kReplacementChar = 0xFFFD;
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD encoded
constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// 10xxxxxx
constexpr bool is_continuation(uint8_t b) { return (b & 0xC0) == 0x80; }
constexpr bool is_continuation(char c) { return is_continuation(static_cast<uint8_t>(c)); }

// What a lead byte announces: the sequence length (1 for ASCII, 0 for a byte
// that cannot start a sequence) and the allowed range of the SECOND byte,
// which is what rules out overlong forms, surrogates and > U+10FFFF (later
// bytes are always 0x80..0xBF). For byte-at-a-time validators.
struct Lead {
  uint8_t len;
  uint8_t lo;
  uint8_t hi;
};
constexpr Lead lead(uint8_t b) {
  if (b < 0x80) return {1, 0, 0};
  if (b < 0xC2) return {0, 0, 0};  // continuation bytes, overlong 2-byte leads
  if (b < 0xE0) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};  // no overlong 3-byte forms
  if (b == 0xED) return {3, 0x80, 0x9F};  // no surrogates
  if (b < 0xF0) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};  // no overlong 4-byte forms
  if (b < 0xF4) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};  // nothing above U+10FFFF
  return {0, 0, 0};
}

// Bytes of the well-formed sequence starting at s[pos] (1..4), or 0 if the
// byte at pos does not start one. Precondition: pos < s.size().
size_t valid_sequence_length(std::string_view s, size_t pos);

// Decodes the code point at s[*pos] under the policy above (U+FFFD for an
// invalid byte) and advances *pos by the bytes consumed (1..4).
// Precondition: *pos < s.size().
uint32_t decode_one(std::string_view s, size_t* pos);

// True if `s` is entirely well-formed. Fast path for ASCII.
bool is_valid(std::string_view s);

// Appends `s` to *out with every invalid byte replaced by U+FFFD.
void append_sanitized(std::string_view s, std::string* out);
// `s` with every invalid byte replaced by U+FFFD (always valid UTF-8).
std::string sanitize(std::string_view s);

// Appends the encoding of `cp` (CHECKs cp <= U+10FFFF; a surrogate code
// point is encoded as it is, which callers must not ask for).
void append(uint32_t cp, std::string* out);
std::string encode(uint32_t cp);

// Bytes at the end of `s` (0..3) that form a proper prefix of a well-formed
// sequence: held back by a streaming decoder until the next bytes come.
// A tail that can never complete (e.g. "\xE0\x80") counts 0.
size_t incomplete_suffix_length(std::string_view s);

// The longest prefix of `s` of at most `max` bytes that does not end inside
// a character: a cut point for streaming. If that prefix is empty (the first
// character is longer than `max`), the first whole character instead, so
// that a caller cutting repeatedly always advances. Bytes that belong to no
// well-formed character are cut like one-byte characters. Cost O(1): looks
// at no more than 4 bytes around the cut.
size_t safe_prefix_length(std::string_view s, size_t max);

}  // namespace zl::utf8
