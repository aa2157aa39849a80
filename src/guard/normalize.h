// The normalised view the guard matches on, with a map back to the bytes of
// the original text.
//
// The view is the original text, segment by segment (a segment is a run of
// code points that Unicode normalisation treats as a unit: a base character
// and the marks that follow it), put through:
//   1. NFKC with full case folding (ICU NFKC_Casefold): full-width forms,
//      ligatures, superscripts fold to ASCII ("＠" is "@", "Ａ" is "a");
//      default-ignorable code points vanish: U+200B..U+200D, U+2060, U+FEFF,
//      U+00AD (soft hyphen) and the other format characters;
//   2. every Unicode space separator (NBSP, U+2000..U+200A, U+3000, ...) as ' ';
//      every dash (U+2010..U+2015, U+2212 minus, ...) as '-';
//      every decimal digit of any script as its ASCII digit;
//   3. common Cyrillic and Greek homoglyphs as the Latin letter they imitate
//      (fold_code_point below), so that "prоject" with a Cyrillic о is "project".
// Invalid UTF-8 bytes become U+FFFD, one per byte (core/utf8.h policy).
//
// Offsets: every byte of the view records the original byte range of the
// segment it came from, so a match on the view covers whole original code
// points (whole segments) and never splits a UTF-8 sequence. Removed code
// points (zero-width) produce no view bytes; a match spanning them covers
// them in the original.
//
// Cost: O(original bytes); ASCII takes a fast path without ICU. The view
// holds 9 bytes of map per view byte. Thread-safe (ICU's normaliser
// instances are immutable singletons).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zl::guard {

struct NormalizedText {
  static constexpr uint8_t kWasUpper = 1;  // the code point was an uppercase letter before folding

  std::string text;                 // the view, valid UTF-8
  std::vector<uint32_t> src_begin;  // per view byte: start of its original segment
  std::vector<uint32_t> src_end;    // per view byte: end of its original segment
  std::vector<uint8_t> flags;       // per view byte: kWasUpper

  size_t size() const { return text.size(); }
  // The original bytes [first, second) that view bytes [begin, end) came
  // from (whole segments, including code points the view dropped between
  // them). Precondition: begin < end <= size().
  std::pair<size_t, size_t> original_range(size_t begin, size_t end) const {
    return {src_begin[begin], src_end[end - 1]};
  }
};

// The view of `original` (any bytes; at most 4 GiB). `base` is added to
// every recorded offset (the stream redactor normalises a window of a
// longer text).
NormalizedText normalize(std::string_view original, uint32_t base = 0);

// The view's text only: what phrases are compared as, and what the output
// automaton folds token strings with.
std::string normalize_text(std::string_view original);

// The longest prefix of `original` whose view cannot change when more text
// is appended: it stops before an incomplete UTF-8 sequence at the end and
// before the last segment when that segment could still take a combining
// mark. A streaming caller normalises only this prefix.
size_t stable_prefix_length(std::string_view original);

// Step 3 alone: the Latin letter a case-folded Cyrillic or Greek homoglyph
// imitates, `cp` itself otherwise. `was_upper` picks the uppercase look
// (Greek Ν looks like N, ν like v). Decimal digits of any script map to
// ASCII here too.
uint32_t fold_code_point(uint32_t cp, bool was_upper);

}  // namespace zl::guard
