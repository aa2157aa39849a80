// Streaming detokenization: token ids in, valid UTF-8 text deltas out.
//
// A multi-byte character split across tokens (byte tokens <0xE4><0xBD><0xA0>,
// or a BPE token ending mid-character) is held back until it is complete, so
// every delta is valid UTF-8 on its own and deltas can be sent to a client as
// they come. Invalid bytes become U+FFFD as soon as they are known to be
// invalid, with the same per-byte policy as Tokenizer::decode (core/utf8.h), so
// the concatenation of all deltas plus flush() equals
// Tokenizer::decode(all ids) exactly. Each push costs O(bytes of the new
// piece); at most 3 bytes are ever held. Not thread-safe: one per stream.
#pragma once

#include <string>
#include <string_view>

#include "tokenizer/tokenizer.h"

namespace zl {

// Byte stream -> valid UTF-8 deltas, holding back an incomplete trailing sequence.
class Utf8Holdback {
 public:
  // Returns the longest decidable prefix of (held bytes + `bytes`), with
  // invalid bytes replaced by U+FFFD; keeps an incomplete tail for later.
  std::string push(std::string_view bytes);
  // Emits the held tail as one U+FFFD per byte and resets.
  std::string flush();
  size_t n_held() const { return held_.size(); }

 private:
  std::string held_;
};

class IncrementalDetokenizer {
 public:
  // `tokenizer` must outlive this object.
  explicit IncrementalDetokenizer(const Tokenizer& tokenizer, DecodeOptions opts = {})
      : tokenizer_(&tokenizer), opts_(opts) {}

  // The text delta for one more token (possibly empty).
  std::string push(TokenId id);
  // Text still held back at the end of the stream (U+FFFD per dangling byte).
  std::string flush() { return holdback_.flush(); }
  size_t n_held_bytes() const { return holdback_.n_held(); }

 private:
  const Tokenizer* tokenizer_;
  DecodeOptions opts_;
  Utf8Holdback holdback_;
  std::string piece_;
  bool seen_text_ = false;  // for strip_leading_space
};

}  // namespace zl
