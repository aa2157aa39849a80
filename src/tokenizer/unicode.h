// UTF-8 and Unicode helpers for the tokenizers and the detokenizer.
//
// Invalid UTF-8 policy (used everywhere in src/tokenizer/): a byte that does
// not start a well-formed UTF-8 sequence (a stray continuation byte, a lead
// byte whose continuation is missing or wrong, an overlong form, a surrogate,
// anything above U+10FFFF, 0xF5..0xFF) is replaced by U+FFFD, one U+FFFD per
// such byte, and decoding resumes at the next byte. This is what llama.cpp's
// unicode_cpts_from_utf8 does for malformed lead bytes (it is slightly more
// lenient about overlong forms and surrogates, which we also replace, so our
// output is always valid UTF-8). NUL, U+FEFF, U+200B and friends are ordinary
// code points.
//
// Code point classes come from a generated table (unicode_data.cc, see
// tools/gen_unicode_flags.py) of Unicode general category groups plus the
// White_Space property. All functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace zl::unicode {

constexpr uint32_t kReplacementChar = 0xFFFD;

// Category flags of one code point (one byte, see flags()).
enum Flag : uint8_t {
  kLetter = 1 << 0,      // \p{L}
  kNumber = 1 << 1,      // \p{N}
  kPunctuation = 1 << 2, // \p{P}
  kSymbol = 1 << 3,      // \p{S}
  kMark = 1 << 4,        // \p{M}
  kSeparator = 1 << 5,   // \p{Z}
  kControl = 1 << 6,     // \p{C} except unassigned (Cn has no category bit)
  kWhitespace = 1 << 7,  // White_Space property (\s in the pre-tokenizers)
};

// Flags of `cp`; 0 for unassigned code points and anything above U+10FFFF.
// Cost: two table loads.
uint8_t flags(uint32_t cp);
inline bool is_letter(uint32_t cp) { return flags(cp) & kLetter; }
inline bool is_number(uint32_t cp) { return flags(cp) & kNumber; }
inline bool is_whitespace(uint32_t cp) { return flags(cp) & kWhitespace; }

// Unicode version of the flag table ("14.0.0").
const char* table_version();

// Decodes one code point at s[*pos] under the policy above and advances *pos
// by the bytes consumed (1..4). Precondition: *pos < s.size().
uint32_t decode_one(std::string_view s, size_t* pos);

// Number of bytes of the well-formed sequence starting at s[pos], or 0 if the
// byte at pos does not start one (then it decodes to U+FFFD by itself).
size_t valid_sequence_length(std::string_view s, size_t pos);

// True if `s` is entirely well-formed UTF-8. O(n), fast path for ASCII.
bool is_valid_utf8(std::string_view s);

// `s` with every invalid byte replaced by U+FFFD (the policy above).
std::string sanitize_utf8(std::string_view s);

// Appends the UTF-8 encoding of `cp` (CHECKs cp <= 0x10FFFF).
void append_utf8(uint32_t cp, std::string* out);
std::string to_utf8(uint32_t cp);

// Length of an incomplete-but-possibly-valid UTF-8 sequence at the end of
// `s`: the number of trailing bytes that form a proper prefix of a valid
// sequence (0..3). Used by the incremental detokenizer to hold them back.
size_t incomplete_suffix_length(std::string_view s);

namespace detail {
struct FlagRange {
  uint32_t start;  // the range runs up to the next entry's start
  uint8_t flags;
};
extern const FlagRange kFlagRanges[];
extern const size_t kNumFlagRanges;
extern const char kUnicodeVersion[];
}  // namespace detail

}  // namespace zl::unicode
