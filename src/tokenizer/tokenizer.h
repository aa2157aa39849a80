// Text <-> token ids for the SPM ("llama") and byte-level BPE ("gpt2")
// vocabularies, matching llama.cpp's llama_tokenize / llama_token_to_piece.
//
// Encoding, in order:
//   1. Invalid UTF-8 is replaced by U+FFFD (policy in core/utf8.h).
//   2. Special-token partition: user-defined tokens are always matched
//      verbatim in the input (they are "added tokens"); control and unknown
//      tokens only inside text marked parse_special. Matching follows
//      llama.cpp: longest token text first, leftmost occurrences first, no
//      overlaps; Phi-3's rstrip tokens swallow the ASCII whitespace after them.
//      Raw user text must be encoded with parse_special = false so that it
//      cannot inject <|eot_id|> and friends.
//   3. Each remaining raw fragment is tokenized on its own:
//      SPM: ' ' -> '▁'; a '▁' is prepended to a fragment that starts the text
//      or follows a special token when the vocabulary's add_space_prefix is
//      set (true by default for SPM: "Hello" -> "▁Hello", " " -> "▁▁"); then
//      score-driven bigram merging over UTF-8 characters (max-heap, ties to
//      the leftmost pair), and characters that are no token fall back to
//      byte tokens <0xNN>.
//      BPE: the vocabulary's pre-tokenizer (tokenizer/pre_tokenizer.h) splits
//      the fragment into words; each word is byte-level encoded and merged by
//      rank (min-heap, ties to the leftmost pair); Llama 3 first looks the
//      whole word up (ignore_merges).
//   4. BOS / EOS are added per the vocabulary's add_bos / add_eos when
//      add_special is set.
// Cost: O(n log n) in the input length for both tokenizers (each merge is a
// heap operation); the partition is O(n * longest special token).
//
// Decoding: token_to_piece gives a token's raw bytes (SPM: '▁' -> ' ', byte
// tokens -> the byte; BPE: the byte-level mapping reversed; control tokens
// are empty unless render_special). decode() concatenates the pieces and
// then applies the invalid-UTF-8 policy, so it always returns valid UTF-8.
// SPM leading space: the first piece keeps its leading space unless
// strip_leading_space is set (llama.cpp keeps it too unless asked; the golden
// generated_text of stories260K keeps it). No clean-up of spaces before
// punctuation is ever done, so decode(encode(x)) == x for valid UTF-8 x,
// modulo the one leading space an SPM vocabulary with add_space_prefix adds.
//
// A Tokenizer is immutable after loading; every method is const and
// thread-safe (scratch buffers are per call; the BPE word cache is per thread).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/vocab.h"

namespace zl {

class GgufFile;

struct EncodeOptions {
  bool add_special = true;     // add BOS/EOS as the vocabulary asks (add_bos/add_eos)
  bool parse_special = false;  // match control-token text (<|eot_id|>) in the input
};

// A piece of prompt text and whether special-token text in it is honoured.
// Chat templates produce these: template markup with parse_special = true,
// message content with false. Adjacent raw text of consecutive segments is
// tokenized as one fragment, exactly as if the strings were concatenated.
struct TextSegment {
  std::string_view text;
  bool parse_special = false;
};

struct DecodeOptions {
  bool render_special = false;       // control tokens as their text instead of ""
  bool strip_leading_space = false;  // drop one leading ' ' of the first non-empty piece
};

class Tokenizer {
 public:
  // Builds the tokenizer for a vocabulary. Unsupported for an unknown BPE
  // pre-tokenizer name.
  static Result<std::unique_ptr<Tokenizer>> create(Vocab vocab);
  static Result<std::unique_ptr<Tokenizer>> from_gguf(const GgufFile& file);
  static Result<std::unique_ptr<Tokenizer>> load(const std::string& gguf_path);

  const Vocab& vocab() const { return vocab_; }
  VocabKind kind() const { return vocab_.kind(); }
  PreTokenizerKind pre_tokenizer() const { return pre_; }

  std::vector<TokenId> encode(std::string_view text, const EncodeOptions& opts = {}) const;
  std::vector<TokenId> encode(std::span<const TextSegment> segments, bool add_special) const;
  // Where `text` holds the text of a control token (what parse_special
  // would turn into that token): [pos, len) spans, leftmost-longest, not
  // overlapping. User-defined tokens are matched in any text, so not listed.
  std::vector<std::pair<size_t, size_t>> control_token_spans(std::string_view text) const;

  // Raw bytes of one token (may be a partial UTF-8 sequence). Empty for
  // invalid ids, unused tokens, and control tokens unless render_special.
  std::string token_to_piece(TokenId id, bool render_special = false) const;
  void append_piece(TokenId id, bool render_special, std::string* out) const;

  // Concatenated pieces, made valid UTF-8 (invalid bytes -> U+FFFD).
  std::string decode(std::span<const TokenId> ids, const DecodeOptions& opts = {}) const;
  // Concatenated pieces as raw bytes.
  std::string decode_bytes(std::span<const TokenId> ids, const DecodeOptions& opts = {}) const;

 private:
  explicit Tokenizer(Vocab vocab) : vocab_(std::move(vocab)) {}
  struct Fragment;
  struct Scratch;
  // The special-token trie's child of `node` by `byte`; -1 when there is none.
  int32_t trie_child(int32_t node, uint8_t byte) const;
  void partition(std::string_view text, std::span<const std::pair<size_t, bool>> special_ok,
                 std::vector<Fragment>* out) const;
  void encode_fragments(std::string_view text, const std::vector<Fragment>& fragments, bool add_special,
                        std::vector<TokenId>* out) const;
  void encode_spm(std::string_view text, bool space_prefix, Scratch* s, std::vector<TokenId>* out) const;
  void encode_spm_chunk(std::string_view escaped, Scratch* s, std::vector<TokenId>* out) const;
  void encode_bpe(std::string_view text, Scratch* s, std::vector<TokenId>* out) const;
  void encode_bpe_block(std::string_view text, Scratch* s, std::vector<TokenId>* out) const;
  void encode_bpe_word(std::string_view word, Scratch* s, std::vector<TokenId>* out) const;

  Vocab vocab_;
  PreTokenizerKind pre_ = PreTokenizerKind::kDefault;
  // Trie over special token texts for the partition: nodes_[0] is the root.
  struct TrieNode {
    TokenId token = kNoToken;
    std::vector<std::pair<uint8_t, int32_t>> children;  // sorted by byte
  };
  std::vector<TrieNode> trie_;
  bool has_user_defined_ = false;
  // SPM: no token has a '▁' after another character, so words merge alone.
  bool spm_split_words_ = false;
  uint64_t instance_ = 0;  // keys the per-thread BPE word caches
};

}  // namespace zl
