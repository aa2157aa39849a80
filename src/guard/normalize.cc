// The normalised view (guard/normalize.h): ICU NFKC_Casefold per segment,
// then spaces, digits and homoglyphs, with a per-byte map to the original.
#include "guard/normalize.h"

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include "core/check.h"
#include "core/utf8.h"

namespace zl::guard {
namespace {

const icu::Normalizer2& nfkc_casefold() {
  static const icu::Normalizer2* instance = [] {
    UErrorCode err = U_ZERO_ERROR;
    const icu::Normalizer2* n = icu::Normalizer2::getNFKCCasefoldInstance(err);
    CHECK(U_SUCCESS(err) && n != nullptr) << "ICU NFKC_Casefold data missing: " << u_errorName(err);
    return n;
  }();
  return *instance;
}

// Homoglyph tables, keyed by the case-folded code point. kBoth applies
// whatever the original case; kUpperOnly when the original was uppercase
// (Cyrillic В looks like B, в does not); kLowerOnly when it was lowercase.
struct Glyph {
  uint32_t cp;
  char latin;
};
constexpr Glyph kBoth[] = {
    {0x0430, 'a'}, {0x0435, 'e'}, {0x0456, 'i'}, {0x0458, 'j'}, {0x043A, 'k'}, {0x043E, 'o'},
    {0x0440, 'p'}, {0x0441, 'c'}, {0x0443, 'y'}, {0x0445, 'x'}, {0x0455, 's'}, {0x04BB, 'h'},
    {0x0501, 'd'}, {0x051B, 'q'}, {0x051D, 'w'}, {0x04CF, 'l'}, {0x03B1, 'a'}, {0x03B2, 'b'},
    {0x03B5, 'e'}, {0x03B9, 'i'}, {0x03BA, 'k'}, {0x03BF, 'o'}, {0x03C1, 'p'}, {0x03C4, 't'},
    {0x03C7, 'x'},
};
constexpr Glyph kUpperOnly[] = {
    {0x0432, 'b'}, {0x043C, 'm'}, {0x043D, 'h'}, {0x0442, 't'}, {0x03B6, 'z'},
    {0x03B7, 'h'}, {0x03BC, 'm'}, {0x03BD, 'n'}, {0x03C5, 'y'},
};
constexpr Glyph kLowerOnly[] = {
    {0x03B3, 'y'}, {0x03B7, 'n'}, {0x03BC, 'u'}, {0x03BD, 'v'}, {0x03C5, 'u'},
};

template <size_t N>
int lookup(const Glyph (&table)[N], uint32_t cp) {
  for (const Glyph& g : table) {
    if (g.cp == cp) return g.latin;
  }
  return -1;
}

// Appends one view code point with its map entries.
void emit(uint32_t cp, uint32_t src_begin, uint32_t src_end, uint8_t flags, NormalizedText* out) {
  const size_t before = out->text.size();
  if (cp < 0x80) {
    out->text.push_back(static_cast<char>(cp));
  } else {
    utf8::append(cp, &out->text);
  }
  const size_t added = out->text.size() - before;
  out->src_begin.insert(out->src_begin.end(), added, src_begin);
  out->src_end.insert(out->src_end.end(), added, src_end);
  out->flags.insert(out->flags.end(), added, flags);
}

// The end of the segment that starts at `pos` (at least one code point).
size_t segment_end(std::string_view s, size_t pos) {
  const icu::Normalizer2& n = nfkc_casefold();
  size_t p = pos;
  uint32_t prev = utf8::decode_one(s, &p);
  while (p < s.size()) {
    if (n.hasBoundaryAfter(static_cast<UChar32>(prev))) break;
    size_t q = p;
    const uint32_t cp = utf8::decode_one(s, &q);
    if (n.hasBoundaryBefore(static_cast<UChar32>(cp))) break;
    prev = cp;
    p = q;
  }
  return p;
}

// Normalises one non-ASCII (or mixed) segment [b, e) of `s`.
void normalize_segment(std::string_view s, size_t b, size_t e, uint32_t base, NormalizedText* out) {
  icu::UnicodeString in;
  size_t p = b;
  uint32_t first = 0;
  while (p < e) {
    const uint32_t cp = utf8::decode_one(s, &p);
    if (in.isEmpty()) first = cp;
    in.append(static_cast<UChar32>(cp));
  }
  const bool upper = u_isUUppercase(static_cast<UChar32>(first)) || u_istitle(static_cast<UChar32>(first));
  UErrorCode err = U_ZERO_ERROR;
  const icu::UnicodeString folded = nfkc_casefold().normalize(in, err);
  const icu::UnicodeString& view = U_SUCCESS(err) ? folded : in;
  for (int32_t i = 0; i < view.length(); i = view.moveIndex32(i, 1)) {
    const UChar32 c = view.char32At(i);
    if (u_charType(c) == U_FORMAT_CHAR) continue;
    uint32_t cp = static_cast<uint32_t>(c);
    if (u_charType(c) == U_SPACE_SEPARATOR) cp = ' ';
    if (u_charType(c) == U_DASH_PUNCTUATION || c == 0x2212) cp = '-';  // hyphens, dashes, minus
    cp = fold_code_point(cp, upper);
    emit(cp, base + static_cast<uint32_t>(b), base + static_cast<uint32_t>(e),
         upper ? NormalizedText::kWasUpper : 0, out);
  }
}

}  // namespace

uint32_t fold_code_point(uint32_t cp, bool was_upper) {
  if (cp < 0x80) return cp;
  if (u_charType(static_cast<UChar32>(cp)) == U_DECIMAL_DIGIT_NUMBER) {
    return '0' + static_cast<uint32_t>(u_charDigitValue(static_cast<UChar32>(cp)));
  }
  if (cp < 0x0370 || cp > 0x052F) return cp;  // outside Greek and Cyrillic
  int latin = lookup(kBoth, cp);
  if (latin < 0) latin = was_upper ? lookup(kUpperOnly, cp) : lookup(kLowerOnly, cp);
  return latin < 0 ? cp : static_cast<uint32_t>(latin);
}

NormalizedText normalize(std::string_view s, uint32_t base) {
  CHECK(s.size() < (size_t{1} << 32) - base) << "guard: text too long to normalise";
  NormalizedText out;
  out.text.reserve(s.size());
  out.src_begin.reserve(s.size());
  out.src_end.reserve(s.size());
  out.flags.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    // ASCII followed by ASCII (or the end) is its own segment, and
    // NFKC_Casefold leaves it alone except for the case.
    if (c < 0x80 && (i + 1 == s.size() || static_cast<unsigned char>(s[i + 1]) < 0x80)) {
      const bool upper = c >= 'A' && c <= 'Z';
      out.text.push_back(static_cast<char>(upper ? c + 32 : c));
      out.src_begin.push_back(base + static_cast<uint32_t>(i));
      out.src_end.push_back(base + static_cast<uint32_t>(i + 1));
      out.flags.push_back(upper ? NormalizedText::kWasUpper : 0);
      ++i;
      continue;
    }
    const size_t e = segment_end(s, i);
    normalize_segment(s, i, e, base, &out);
    i = e;
  }
  return out;
}

std::string normalize_text(std::string_view original) { return normalize(original).text; }

size_t stable_prefix_length(std::string_view s) {
  size_t end = s.size() - utf8::incomplete_suffix_length(s);
  if (end == 0) return 0;
  // The last code point: a combining mark that follows could change it.
  size_t last = end - 1;
  while (last > 0 && utf8::is_continuation(s[last])) --last;
  size_t p = last;
  const uint32_t cp = utf8::decode_one(s, &p);
  const icu::Normalizer2& n = nfkc_casefold();
  if (p == end && n.hasBoundaryAfter(static_cast<UChar32>(cp))) return end;
  // Back to the start of the last segment.
  while (last > 0) {
    size_t q = last;
    const uint32_t c = utf8::decode_one(s, &q);
    if (n.hasBoundaryBefore(static_cast<UChar32>(c))) break;
    --last;
    while (last > 0 && utf8::is_continuation(s[last])) --last;
  }
  return last;
}

}  // namespace zl::guard
