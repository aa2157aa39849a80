// libFuzzer target fuzz_tokenizer: tokenize -> detokenize on arbitrary bytes
// (-DZL_FUZZ=ON; scripts/fuzz.sh). The vocabulary: the demo model's, or
// ZL_FUZZ_VOCAB (e.g. ../shared/vocab/ggml-vocab-llama-bpe.gguf).
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
#include "fuzz/fuzz_support.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace {

bool lossless_specials(const zl::Tokenizer& t) {
  for (zl::TokenId id : t.vocab().special_tokens()) {
    if (t.vocab().token(id).rstrip || t.vocab().token(id).lstrip) return false;
  }
  return true;
}

}  // namespace

ZL_FUZZ_TARGET(fuzz_tokenizer) {
  if (size == 0) return 0;
  const zl::Tokenizer& t = zl::fuzz::fuzz_tokenizer();
  const bool parse_special = data[0] & 1;
  const bool add_special = data[0] & 2;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  const auto ids = t.encode(text, {.add_special = add_special, .parse_special = parse_special});
  for (zl::TokenId id : ids) {
    FUZZ_CHECK(t.vocab().is_valid(id));
  }

  const zl::DecodeOptions opts{.render_special = true};
  const std::string decoded = t.decode(ids, opts);
  FUZZ_CHECK(zl::utf8::is_valid(decoded));
  zl::IncrementalDetokenizer detok(t, opts);
  std::string streamed;
  for (zl::TokenId id : ids) {
    const std::string delta = detok.push(id);
    FUZZ_CHECK(zl::utf8::is_valid(delta));
    streamed += delta;
  }
  streamed += detok.flush();
  FUZZ_CHECK(streamed == decoded);

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
  FUZZ_CHECK(decoded == expected);
  return 0;
}
