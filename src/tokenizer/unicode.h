// Unicode code point classes for the tokenizers' pre-tokenizers.
//
// UTF-8 itself (validation, decoding, the invalid-UTF-8 policy: one U+FFFD
// per byte that starts no well-formed sequence) is core/utf8.h; the
// tokenizers apply that policy to every input and output, so their text is
// always valid UTF-8. llama.cpp's unicode_cpts_from_utf8 replaces malformed
// lead bytes the same way (it is slightly more lenient about overlong forms
// and surrogates, which we also replace).
//
// Code point classes come from a generated table (unicode_data.cc, see
// tools/gen_unicode_flags.py) of Unicode general category groups plus the
// White_Space property. All functions are pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

namespace zl::unicode {

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
