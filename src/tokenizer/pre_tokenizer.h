// Pre-tokenizers of the byte-level BPE families: split text into the words
// that BPE merges within.
//
// Each family is defined upstream by a list of regular expressions applied in
// sequence (every regex splits each piece left by the previous one into its
// matches and the gaps between them). We implement each regex by hand, as
// llama.cpp does for the GPT-2 and Llama 3 ones, because (a) the reference ids
// come from llama.cpp's exact semantics (its \s is the White_Space set, and in
// the std::wregex-based ones non-ASCII whitespace never matches a literal
// class), (b) it is linear in the input by construction, with no backtracking
// cliffs (\s+(?!\S) on a 100k-space run is one pass), and (c) it is several
// times faster than a general engine. The regex each function implements is
// written above it in pre_tokenizer.cc.
//
// Thread-safe (no shared mutable state).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace zl {

enum class PreTokenizerKind {
  kDefault,        // llama.cpp's fallback for BPE vocabularies ("default")
  kLlama3,         // llama-bpe, llama3, llama-v3, dbrx, smaug-bpe
  kQwen2,          // qwen2, stablelm2, hunyuan
  kGpt2,           // gpt-2, mpt, olmo, jais, trillion
  kFalcon,         // falcon
  kStarcoder,      // starcoder, refact, command-r, smollm, codeshell, exaone, minerva-7b
  kDeepseekLlm,    // deepseek-llm
  kDeepseekCoder,  // deepseek-coder
};

// Maps tokenizer.ggml.pre to a kind; Unsupported for unknown names.
Result<PreTokenizerKind> pre_tokenizer_from_name(std::string_view name);
const char* pre_tokenizer_name(PreTokenizerKind kind);

// A byte range [begin, end) of the input.
struct TextSpan {
  uint32_t begin;
  uint32_t end;
};

// Reusable buffers, so that repeated calls do not allocate.
struct PreTokenizerScratch {
  std::vector<uint32_t> cps;       // code points
  std::vector<uint8_t> flags;      // unicode::flags of each code point
  std::vector<uint32_t> offsets;   // byte offset of each code point, plus the end
  std::vector<TextSpan> pieces;    // in code point indices
  std::vector<TextSpan> next;
};

// Splits `text` (valid UTF-8, < 4 GiB) into words and appends their byte spans,
// in order and covering the whole text, to *words. O(|text|).
void pre_tokenize(PreTokenizerKind kind, std::string_view text, std::vector<TextSpan>* words,
                  PreTokenizerScratch* scratch);

// The first position p >= from (or text.size()) where `text` may be cut into
// two independently pre-tokenized parts without changing the words, for every
// kind above: text[p-2] is printable ASCII, text[p-1] is '\n' and text[p] an
// ASCII letter. (The lone newline ends a word in all the regexes, and neither
// neighbour can join it: no lookahead such as \s+(?!\S) sees past it.)
size_t safe_split_point(std::string_view text, size_t from);

}  // namespace zl
