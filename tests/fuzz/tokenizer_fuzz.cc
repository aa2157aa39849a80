// libFuzzer target: tokenize -> detokenize on arbitrary bytes. Not part of the
// CMake build:
//   clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -Isrc tests/fuzz/tokenizer_fuzz.cc \
//     src/tokenizer/*.cc src/format/gguf.cc src/format/ggml_type.cc src/core/status.cc -o /tmp/tokenizer_fuzz
//   ZL_FUZZ_VOCAB=../shared/vocab/ggml-vocab-llama-bpe.gguf /tmp/tokenizer_fuzz -max_total_time=60 -max_len=4096
// The first input byte picks the options (bit 0 parse_special, bit 1
// add_special), the rest is the text. Checks: no crash, every id valid,
// decode(encode(x)) == x after the U+FFFD policy (modulo the SPM space prefix
// and bytes the vocabulary cannot represent), and the incremental
// detokenizer's deltas are valid UTF-8 and concatenate to the one-shot text.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "core/utf8.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace {

const zl::Tokenizer& tokenizer() {
  static std::unique_ptr<zl::Tokenizer> t = [] {
    const char* path = std::getenv("ZL_FUZZ_VOCAB");
    auto r = zl::Tokenizer::load(path ? path : "../shared/vocab/ggml-vocab-llama-bpe.gguf");
    if (!r.ok()) {
      std::fprintf(stderr, "tokenizer_fuzz: %s (set ZL_FUZZ_VOCAB)\n", r.status().to_string().c_str());
      std::abort();
    }
    return std::move(r).value();
  }();
  return *t;
}

bool lossless_specials(const zl::Tokenizer& t) {
  for (zl::TokenId id : t.vocab().special_tokens()) {
    if (t.vocab().token(id).rstrip || t.vocab().token(id).lstrip) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const zl::Tokenizer& t = tokenizer();
  const bool parse_special = data[0] & 1;
  const bool add_special = data[0] & 2;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  const auto ids = t.encode(text, {.add_special = add_special, .parse_special = parse_special});
  for (zl::TokenId id : ids) {
    if (!t.vocab().is_valid(id)) std::abort();
  }

  const zl::DecodeOptions opts{.render_special = true};
  const std::string decoded = t.decode(ids, opts);
  if (!zl::utf8::is_valid(decoded)) std::abort();
  zl::IncrementalDetokenizer detok(t, opts);
  std::string streamed;
  for (zl::TokenId id : ids) {
    const std::string delta = detok.push(id);
    if (!zl::utf8::is_valid(delta)) std::abort();
    streamed += delta;
  }
  streamed += detok.flush();
  if (streamed != decoded) std::abort();

  // Round trip, where the vocabulary makes it possible.
  std::string expected = zl::utf8::sanitize(text);
  for (char c : expected) {
    if (t.vocab().byte_token(static_cast<uint8_t>(c)) == zl::kNoToken) return 0;
  }
  if (!lossless_specials(t)) return 0;
  if (t.kind() == zl::VocabKind::kSpm && t.vocab().add_space_prefix()) return 0;  // prefix after each special
  if (add_special) {
    std::string prefix;
    if (t.vocab().add_bos()) prefix = t.token_to_piece(t.vocab().bos(), true);
    expected = prefix + expected;
    if (t.vocab().add_eos()) expected += t.token_to_piece(t.vocab().eos(), true);
  }
  if (decoded != expected) std::abort();
  return 0;
}
