#include "tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <string>

#include "core/check.h"
#include "core/utf8.h"
#include "format/gguf.h"  // gguf_quoted
#include "tokenizer/unicode.h"

namespace zl {
namespace {

using unicode::kLetter;
using unicode::kNumber;
using unicode::kPunctuation;
using unicode::kWhitespace;

constexpr uint32_t kOutOfRange = 0xFFFFFFFF;

struct CpRange {
  uint32_t lo, hi;
};

bool in_ranges(uint32_t cp, const CpRange* ranges, size_t n) {
  const CpRange* end = ranges + n;
  const CpRange* it = std::upper_bound(ranges, end, cp, [](uint32_t c, const CpRange& r) { return c < r.lo; });
  return it != ranges && cp <= (it - 1)->hi;
}

// deepseek-llm's letter class: the cased letters (Lu, Ll, Lt) of its regex
// "[A-Za-zµÀ-ÖØ-öø-ƺ...𞤀-𞥃]".
constexpr CpRange kDeepseekLetters[] = {
    {0x41, 0x5A},       {0x61, 0x7A},       {0xB5, 0xB5},       {0xC0, 0xD6},       {0xD8, 0xF6},
    {0xF8, 0x1BA},      {0x1BC, 0x1BF},     {0x1C4, 0x293},     {0x295, 0x2AF},     {0x370, 0x373},
    {0x376, 0x377},     {0x37B, 0x37D},     {0x37F, 0x37F},     {0x386, 0x386},     {0x388, 0x38A},
    {0x38C, 0x38C},     {0x38E, 0x3A1},     {0x3A3, 0x3F5},     {0x3F7, 0x481},     {0x48A, 0x52F},
    {0x531, 0x556},     {0x10A0, 0x10C5},   {0x13A0, 0x13F5},   {0x13F8, 0x13FD},   {0x1C90, 0x1CBA},
    {0x1CBD, 0x1CBF},   {0x1D00, 0x1D2B},   {0x1D6B, 0x1D77},   {0x1D79, 0x1D9A},   {0x1E00, 0x1F15},
    {0x1F18, 0x1F1D},   {0x1F20, 0x1F45},   {0x1F48, 0x1F4D},   {0x1F50, 0x1F57},   {0x1F59, 0x1F59},
    {0x1F5B, 0x1F5B},   {0x1F5D, 0x1F5D},   {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},   {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE},   {0x1FC2, 0x1FC4},   {0x1FC6, 0x1FCC},   {0x1FD0, 0x1FD3},   {0x1FD6, 0x1FDB},
    {0x1FE0, 0x1FEC},   {0x1FF2, 0x1FF4},   {0x1FF6, 0x1FFC},   {0x2102, 0x2102},   {0x2107, 0x2107},
    {0x210A, 0x2113},   {0x2115, 0x2115},   {0x2119, 0x211D},   {0x2124, 0x2124},   {0x2126, 0x2126},
    {0x2128, 0x2128},   {0x212A, 0x212D},   {0x212F, 0x2134},   {0x2139, 0x2139},   {0x213C, 0x213F},
    {0x2145, 0x2149},   {0x214E, 0x214E},   {0x2183, 0x2184},   {0x2C00, 0x2C7B},   {0x2C7E, 0x2CE4},
    {0x2CEB, 0x2CEE},   {0x2CF2, 0x2CF3},   {0xA640, 0xA66D},   {0xA680, 0xA69B},   {0xA722, 0xA76F},
    {0xA771, 0xA787},   {0xA78B, 0xA78E},   {0xAB70, 0xABBF},   {0xFB00, 0xFB06},   {0xFB13, 0xFB17},
    {0xFF21, 0xFF3A},   {0xFF41, 0xFF5A},   {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};
// deepseek-llm's punctuation class "[!-/:-~！-／：-～‘-‟　-。]".
constexpr CpRange kDeepseekPunct[] = {
    {0x21, 0x2F}, {0x3A, 0x7E}, {0x2018, 0x201F}, {0x3000, 0x3002}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E},
};
// The CJK class of deepseek-llm/coder "[一-龥ࠀ-一가-퟿]".
constexpr CpRange kDeepseekCjk[] = {{0x800, 0x9FA5}, {0xAC00, 0xD7FF}};

// One pre-tokenizer stage applied to one piece [b, e) of the code points.
// Emitted spans are appended to *out_ in code point indices.
class Piece {
 public:
  Piece(const PreTokenizerScratch& s, TextSpan span, std::vector<TextSpan>* out)
      : cps_(s.cps.data()), fl_(s.flags.data()), b_(span.begin), e_(span.end), prev_(span.begin), out_(out) {}

  uint32_t cp(size_t p) const { return p < e_ ? cps_[p] : kOutOfRange; }
  uint8_t fl(size_t p) const { return p < e_ ? fl_[p] : 0; }
  bool ws(size_t p) const { return fl(p) & kWhitespace; }
  // Membership in a literal class of a std::wregex-based upstream regex:
  // llama.cpp replaces non-ASCII whitespace by U+000B before matching, so
  // those never match a literal class.
  bool in_literal_class(size_t p, const CpRange* r, size_t n) const {
    if (p >= e_) return false;
    const uint32_t c = cps_[p];
    if (c > 0x7F && (fl_[p] & kWhitespace)) return false;
    return in_ranges(c, r, n);
  }
  void emit(size_t end) {
    if (end > prev_) out_->push_back({static_cast<uint32_t>(prev_), static_cast<uint32_t>(end)});
    prev_ = end;
  }

  void split_llama3(int max_digits);
  void split_gpt2();
  // Generic "find all matches, keep the gaps": `match(p)` returns the end of
  // the match starting at p, or p if there is none.
  template <typename Match>
  void split_matches(Match match) {
    size_t p = b_;
    while (p < e_) {
      const size_t q = match(p);
      if (q > p) {
        emit(p);  // the gap before the match
        emit(q);
        p = q;
      } else {
        ++p;
      }
    }
    emit(e_);
  }
  // A run of code points satisfying pred, starting at p (p if none).
  template <typename Pred>
  size_t run(size_t p, Pred pred) const {
    while (p < e_ && pred(p)) ++p;
    return p;
  }

  size_t begin() const { return b_; }
  size_t end() const { return e_; }

 private:
  const uint32_t* cps_;
  const uint8_t* fl_;
  size_t b_, e_, prev_;
  std::vector<TextSpan>* out_;
};

uint32_t ascii_lower(uint32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

// Llama 3 (max_digits 3) and Qwen2 (max_digits 1):
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
void Piece::split_llama3(int max_digits) {
  size_t pos = b_;
  while (pos < e_) {
    const uint32_t c = cps_[pos];
    const uint8_t f = fl_[pos];
    if (c == '\'' && pos + 1 < e_) {
      const uint32_t n1 = ascii_lower(cps_[pos + 1]);
      if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') {
        emit(pos += 2);
        continue;
      }
      if (pos + 2 < e_) {
        const uint32_t n2 = ascii_lower(cps_[pos + 2]);
        if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) {
          emit(pos += 3);
          continue;
        }
      }
    }
    if (!(c == '\r' || c == '\n' || (f & kNumber)) && ((f & kLetter) || (fl(pos + 1) & kLetter))) {
      pos = run(pos + 1, [&](size_t p) { return fl_[p] & kLetter; });
      emit(pos);
      continue;
    }
    if (f & kNumber) {
      const size_t end = run(pos, [&](size_t p) { return fl_[p] & kNumber; });
      while (pos < end) emit(pos = std::min(end, pos + max_digits));
      continue;
    }
    const bool lead_space = c == ' ';
    const uint8_t f2 = lead_space ? fl(pos + 1) : f;
    if (!(f2 & (kWhitespace | kLetter | kNumber))) {
      pos = run(pos + lead_space, [&](size_t p) { return !(fl_[p] & (kWhitespace | kLetter | kNumber)); });
      while (cp(pos) == '\r' || cp(pos) == '\n') ++pos;
      emit(pos);
      continue;
    }
    size_t n_ws = 0;
    size_t last_newline_end = 0;
    while (ws(pos + n_ws)) {
      const uint32_t c2 = cps_[pos + n_ws];
      ++n_ws;
      if (c2 == '\r' || c2 == '\n') last_newline_end = pos + n_ws;
    }
    if (last_newline_end > 0) {  // \s*[\r\n]+
      emit(pos = last_newline_end);
    } else if (n_ws > 1 && pos + n_ws < e_) {  // \s+(?!\S)
      emit(pos += n_ws - 1);
    } else if (n_ws > 0) {  // \s+
      emit(pos += n_ws);
    } else {
      emit(++pos);
    }
  }
  emit(e_);
}

// GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
void Piece::split_gpt2() {
  size_t pos = b_;
  while (pos < e_) {
    const uint32_t c = cps_[pos];
    if (c == '\'' && pos + 1 < e_) {
      const uint32_t n1 = cps_[pos + 1];
      if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd') {
        emit(pos += 2);
        continue;
      }
      if (pos + 2 < e_) {
        const uint32_t n2 = cps_[pos + 2];
        if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') || (n1 == 'l' && n2 == 'l')) {
          emit(pos += 3);
          continue;
        }
      }
    }
    const bool lead_space = c == ' ';
    const size_t p2 = pos + lead_space;
    const uint8_t f2 = fl(p2);
    if (f2 & kLetter) {
      emit(pos = run(p2, [&](size_t p) { return fl_[p] & kLetter; }));
      continue;
    }
    if (f2 & kNumber) {
      emit(pos = run(p2, [&](size_t p) { return fl_[p] & kNumber; }));
      continue;
    }
    if (p2 < e_ && !(f2 & kWhitespace)) {
      emit(pos = run(p2, [&](size_t p) { return !(fl_[p] & (kWhitespace | kLetter | kNumber)); }));
      continue;
    }
    size_t n_ws = 0;
    while (ws(pos + n_ws)) ++n_ws;
    if (n_ws > 1 && pos + n_ws < e_) {
      emit(pos += n_ws - 1);
    } else if (n_ws > 0) {
      emit(pos += n_ws);
    } else {
      emit(++pos);
    }
  }
  emit(e_);
}

bool is_ascii_digit(uint32_t c) { return c >= '0' && c <= '9'; }

// Applies one stage to every piece in s->pieces.
enum class Stage {
  kLlama3,
  kQwen2,
  kGpt2,
  kNumberSingle,        // \p{N}
  kNumberRun,           // \p{N}+
  kDigitTriple,         // [0-9][0-9][0-9]
  kFalconPunct,         // [\p{P}\$\+<=>\^~\|`]+
  kDefaultPunct,        // [\p{P}\$\+<=>\^~\|]+
  kNewline,             // [\r\n]
  kDeepseekLetters,     // \s?[A-Za-zµÀ-Ö...]+
  kDeepseekPunct,       // \s?[!-/:-~！-／：-～‘-‟　-。]+
  kTrailingSpace,       // \s+$
  kCjk,                 // [一-龥ࠀ-一가-퟿]+
  kLetterRun,           // \s?\p{L}+
  kPunctRun,            // \s?\p{P}+
};

bool is_ascii_symbol_for(Stage st, uint32_t c) {
  switch (c) {
    case '$': case '+': case '<': case '=': case '>': case '^': case '~': case '|':
      return true;
    case '`':
      return st == Stage::kFalconPunct;
    default:
      return false;
  }
}

void apply_stage(Stage st, PreTokenizerScratch* s) {
  s->next.clear();
  for (const TextSpan& span : s->pieces) {
    Piece pc(*s, span, &s->next);
    const uint8_t* fl = s->flags.data();
    const uint32_t* cps = s->cps.data();
    switch (st) {
      case Stage::kLlama3: pc.split_llama3(3); break;
      case Stage::kQwen2: pc.split_llama3(1); break;
      case Stage::kGpt2: pc.split_gpt2(); break;
      case Stage::kNumberSingle:
        pc.split_matches([&](size_t p) { return (fl[p] & kNumber) ? p + 1 : p; });
        break;
      case Stage::kNumberRun:
        pc.split_matches([&](size_t p) { return pc.run(p, [&](size_t q) { return fl[q] & kNumber; }); });
        break;
      case Stage::kDigitTriple:
        pc.split_matches([&](size_t p) {
          return (p + 3 <= pc.end() && is_ascii_digit(cps[p]) && is_ascii_digit(cps[p + 1]) &&
                  is_ascii_digit(cps[p + 2]))
                     ? p + 3
                     : p;
        });
        break;
      case Stage::kFalconPunct:
      case Stage::kDefaultPunct:
        pc.split_matches([&](size_t p) {
          return pc.run(p, [&](size_t q) {
            return (fl[q] & kPunctuation) && !(fl[q] & kWhitespace) ? true : is_ascii_symbol_for(st, cps[q]);
          });
        });
        break;
      case Stage::kNewline:
        pc.split_matches([&](size_t p) { return (cps[p] == '\r' || cps[p] == '\n') ? p + 1 : p; });
        break;
      case Stage::kDeepseekLetters:
      case Stage::kDeepseekPunct: {
        const CpRange* r = st == Stage::kDeepseekLetters ? kDeepseekLetters : kDeepseekPunct;
        const size_t n = st == Stage::kDeepseekLetters ? std::size(kDeepseekLetters) : std::size(kDeepseekPunct);
        auto in_class = [&](size_t q) { return pc.in_literal_class(q, r, n); };
        pc.split_matches([&](size_t p) {
          if (pc.ws(p) && in_class(p + 1)) return pc.run(p + 1, in_class);
          return pc.run(p, in_class);
        });
        break;
      }
      case Stage::kTrailingSpace: {
        size_t t = pc.end();
        while (t > pc.begin() && (fl[t - 1] & kWhitespace)) --t;
        pc.emit(t);
        pc.emit(pc.end());
        break;
      }
      case Stage::kCjk: {
        auto in_class = [&](size_t q) { return pc.in_literal_class(q, kDeepseekCjk, std::size(kDeepseekCjk)); };
        pc.split_matches([&](size_t p) { return pc.run(p, in_class); });
        break;
      }
      case Stage::kLetterRun:
      case Stage::kPunctRun: {
        const uint8_t want = st == Stage::kLetterRun ? kLetter : kPunctuation;
        auto in_class = [&](size_t q) { return q < pc.end() && (fl[q] & want) && !(fl[q] & kWhitespace); };
        pc.split_matches([&](size_t p) {
          if (pc.ws(p) && in_class(p + 1)) return pc.run(p + 1, in_class);
          return pc.run(p, in_class);
        });
        break;
      }
    }
  }
  s->pieces.swap(s->next);
}

struct Pipeline {
  const Stage* stages;
  size_t n;
};

Pipeline pipeline_of(PreTokenizerKind kind) {
  static constexpr Stage kLlama3[] = {Stage::kLlama3};
  static constexpr Stage kQwen2[] = {Stage::kQwen2};
  static constexpr Stage kGpt2[] = {Stage::kGpt2};
  static constexpr Stage kFalcon[] = {Stage::kFalconPunct, Stage::kGpt2, Stage::kDigitTriple};
  static constexpr Stage kStarcoder[] = {Stage::kNumberSingle, Stage::kGpt2};
  static constexpr Stage kDeepseekLlm[] = {Stage::kNewline,       Stage::kDeepseekLetters, Stage::kDeepseekPunct,
                                           Stage::kTrailingSpace, Stage::kCjk,             Stage::kNumberRun};
  static constexpr Stage kDeepseekCoder[] = {Stage::kNewline, Stage::kLetterRun, Stage::kPunctRun, Stage::kCjk,
                                             Stage::kNumberSingle};
  static constexpr Stage kDefault[] = {Stage::kDefaultPunct, Stage::kGpt2, Stage::kNumberRun, Stage::kDigitTriple};
  switch (kind) {
    case PreTokenizerKind::kLlama3: return {kLlama3, std::size(kLlama3)};
    case PreTokenizerKind::kQwen2: return {kQwen2, std::size(kQwen2)};
    case PreTokenizerKind::kGpt2: return {kGpt2, std::size(kGpt2)};
    case PreTokenizerKind::kFalcon: return {kFalcon, std::size(kFalcon)};
    case PreTokenizerKind::kStarcoder: return {kStarcoder, std::size(kStarcoder)};
    case PreTokenizerKind::kDeepseekLlm: return {kDeepseekLlm, std::size(kDeepseekLlm)};
    case PreTokenizerKind::kDeepseekCoder: return {kDeepseekCoder, std::size(kDeepseekCoder)};
    case PreTokenizerKind::kDefault: return {kDefault, std::size(kDefault)};
  }
  return {kDefault, std::size(kDefault)};
}

}  // namespace

Result<PreTokenizerKind> pre_tokenizer_from_name(std::string_view name) {
  struct Entry {
    std::string_view name;
    PreTokenizerKind kind;
  };
  static constexpr Entry kNames[] = {
      {"default", PreTokenizerKind::kDefault},          {"llama-bpe", PreTokenizerKind::kLlama3},
      {"llama3", PreTokenizerKind::kLlama3},            {"llama-v3", PreTokenizerKind::kLlama3},
      {"dbrx", PreTokenizerKind::kLlama3},              {"smaug-bpe", PreTokenizerKind::kLlama3},
      {"qwen2", PreTokenizerKind::kQwen2},              {"stablelm2", PreTokenizerKind::kQwen2},
      {"hunyuan", PreTokenizerKind::kQwen2},            {"gpt-2", PreTokenizerKind::kGpt2},
      {"mpt", PreTokenizerKind::kGpt2},                 {"olmo", PreTokenizerKind::kGpt2},
      {"jais", PreTokenizerKind::kGpt2},                {"trillion", PreTokenizerKind::kGpt2},
      {"falcon", PreTokenizerKind::kFalcon},            {"starcoder", PreTokenizerKind::kStarcoder},
      {"refact", PreTokenizerKind::kStarcoder},         {"command-r", PreTokenizerKind::kStarcoder},
      {"smollm", PreTokenizerKind::kStarcoder},         {"codeshell", PreTokenizerKind::kStarcoder},
      {"exaone", PreTokenizerKind::kStarcoder},         {"minerva-7b", PreTokenizerKind::kStarcoder},
      {"deepseek-llm", PreTokenizerKind::kDeepseekLlm}, {"deepseek-coder", PreTokenizerKind::kDeepseekCoder},
  };
  for (const Entry& e : kNames) {
    if (e.name == name) return e.kind;
  }
  return unsupported("BPE pre-tokenizer " + gguf_quoted(name));  // tokenizer.ggml.pre
}

const char* pre_tokenizer_name(PreTokenizerKind kind) {
  switch (kind) {
    case PreTokenizerKind::kDefault: return "default";
    case PreTokenizerKind::kLlama3: return "llama3";
    case PreTokenizerKind::kQwen2: return "qwen2";
    case PreTokenizerKind::kGpt2: return "gpt-2";
    case PreTokenizerKind::kFalcon: return "falcon";
    case PreTokenizerKind::kStarcoder: return "starcoder";
    case PreTokenizerKind::kDeepseekLlm: return "deepseek-llm";
    case PreTokenizerKind::kDeepseekCoder: return "deepseek-coder";
  }
  return "?";
}

size_t safe_split_point(std::string_view text, size_t from) {
  for (size_t p = std::max<size_t>(from, 2); p < text.size(); ++p) {
    const char c = text[p];
    const char before = text[p - 2];
    if (text[p - 1] == '\n' && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) && before > 0x20 && before < 0x7F) {
      return p;
    }
  }
  return text.size();
}

void pre_tokenize(PreTokenizerKind kind, std::string_view text, std::vector<TextSpan>* words,
                  PreTokenizerScratch* s) {
  CHECK(text.size() < 0xFFFFFFFFu) << "pre_tokenize input too large";
  s->cps.clear();
  s->flags.clear();
  s->offsets.clear();
  size_t pos = 0;
  while (pos < text.size()) {
    s->offsets.push_back(static_cast<uint32_t>(pos));
    const uint32_t cp = static_cast<uint8_t>(text[pos]) < 0x80 ? static_cast<uint8_t>(text[pos++])
                                                               : utf8::decode_one(text, &pos);
    s->cps.push_back(cp);
    s->flags.push_back(unicode::flags(cp));
  }
  s->offsets.push_back(static_cast<uint32_t>(pos));
  if (s->cps.empty()) return;

  s->pieces.assign(1, TextSpan{0, static_cast<uint32_t>(s->cps.size())});
  const Pipeline p = pipeline_of(kind);
  for (size_t i = 0; i < p.n; ++i) apply_stage(p.stages[i], s);
  for (const TextSpan& piece : s->pieces) words->push_back({s->offsets[piece.begin], s->offsets[piece.end]});
}

}  // namespace zl
