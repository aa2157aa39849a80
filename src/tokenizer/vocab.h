// Tokenizer vocabulary read from GGUF metadata (`tokenizer.ggml.*`).
//
// Holds the token texts, scores and types, the BPE merges, the special token
// ids and the tokenizer flags, plus the lookup tables the tokenizers need
// (text -> id, merge pair -> rank). Every id read from the file is
// bounds-checked: an out-of-range special id falls back to the model type's
// default (llama.cpp does the same), and the default itself is dropped when
// it does not exist in this vocabulary.
//
// Immutable after loading; all const methods are thread-safe. Movable, not
// copyable (the lookup tables point into the token storage).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "tokenizer/flat_map.h"

namespace zl {

class GgufFile;

using TokenId = int32_t;
constexpr TokenId kNoToken = -1;

// tokenizer.ggml.model: "llama" (SentencePiece-style) or "gpt2" (byte-level BPE).
enum class VocabKind { kSpm, kBpe };

// tokenizer.ggml.token_type values.
enum class TokenType : uint8_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct TokenData {
  std::string text;  // as stored in the file (SPM: '▁' for space; BPE: byte-level chars)
  float score = 0.0f;
  TokenType type = TokenType::kNormal;
  bool lstrip = false;  // when matched as a special token, eat ASCII spaces to its left
  bool rstrip = false;  // ... and to its right (Phi-3 sets this, as llama.cpp does)
};

class Vocab {
 public:
  // Reads the tokenizer.ggml.* keys. Unsupported for tokenizer models other
  // than "llama" and "gpt2"; CorruptFile for missing/mistyped arrays, arrays
  // of mismatched lengths, bad token types or malformed merges.
  static Result<Vocab> from_gguf(const GgufFile& file);
  // Opens `path` (GGUF) and reads its vocabulary.
  static Result<Vocab> load(const std::string& path);

  Vocab(Vocab&&) = default;
  Vocab& operator=(Vocab&&) = default;
  Vocab(const Vocab&) = delete;
  Vocab& operator=(const Vocab&) = delete;

  VocabKind kind() const { return kind_; }
  const std::string& model_name() const { return model_; }  // "llama" / "gpt2"
  const std::string& pre() const { return pre_; }           // tokenizer.ggml.pre, "default" if absent
  int32_t n_tokens() const { return static_cast<int32_t>(tokens_.size()); }
  bool is_valid(TokenId id) const { return id >= 0 && id < n_tokens(); }
  // note: call only with a valid id (CHECKed).
  const TokenData& token(TokenId id) const;
  const std::string& text(TokenId id) const { return token(id).text; }
  TokenType type(TokenId id) const { return token(id).type; }
  bool is_control(TokenId id) const { return token(id).type == TokenType::kControl; }

  // Id of the token whose text is exactly `text`, or kNoToken. O(|text|).
  TokenId find(std::string_view text) const { return index_.find(text); }

  // Special ids (kNoToken when the vocabulary has none).
  TokenId bos() const { return bos_; }
  TokenId eos() const { return eos_; }
  TokenId eot() const { return eot_; }  // end of turn (<|eot_id|>, <|im_end|>, <|end|>, ...)
  TokenId eom() const { return eom_; }
  TokenId unk() const { return unk_; }
  TokenId pad() const { return pad_; }
  TokenId sep() const { return sep_; }
  // End-of-generation: eos, eot, eom and control tokens with well-known
  // end-of-turn texts. Sorted ascending.
  const std::vector<TokenId>& eog_ids() const { return eog_; }
  bool is_eog(TokenId id) const;

  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  bool add_space_prefix() const { return add_space_prefix_; }  // SPM only
  bool ignore_merges() const { return ignore_merges_; }        // BPE: whole-word lookup first (Llama 3)

  // tokenizer.chat_template, empty if absent.
  const std::string& chat_template() const { return chat_template_; }

  // Token for raw byte `b`: SPM "<0xNN>" (falling back to the 1-char text),
  // BPE the byte-level character. kNoToken if the vocabulary lacks it.
  TokenId byte_token(uint8_t b) const { return byte_tokens_[b]; }
  // The byte an SPM byte token (<0xNN>) stands for, or -1.
  int byte_value(TokenId id) const;

  // Tokens that may be matched verbatim in the input before tokenization:
  // control, user-defined and unknown tokens with non-empty text. A token
  // with a well-known end-of-generation text ("</s>", "<|im_end|>", ...) is
  // a control token whatever its type in the file (as in llama.cpp).
  const std::vector<TokenId>& special_tokens() const { return special_; }

  // BPE merges. The fast path looks a pair up by token ids; `merged` is the id
  // of the concatenation (kNoToken if it is not a token).
  struct Merge {
    int32_t rank = -1;
    TokenId merged = kNoToken;
  };
  const Merge* find_merge(TokenId left, TokenId right) const { return merges_by_id_.find(left, right); }
  // Slow path for merge sides that are not tokens themselves; -1 if absent.
  int32_t find_merge_rank(std::string_view left, std::string_view right) const;
  size_t n_merges() const { return n_merges_; }

 private:
  Vocab() = default;
  Status load_tokens(const GgufFile& file);
  Status load_merges(const GgufFile& file);
  Status load_special_ids(const GgufFile& file);
  void load_flags(const GgufFile& file);
  void build_tables();
  void collect_special_tokens();

  VocabKind kind_ = VocabKind::kSpm;
  std::string model_;
  std::string pre_ = "default";
  std::string name_;  // general.name, lowercased
  std::vector<TokenData> tokens_;
  tok_internal::StringIndex index_;
  TokenId bos_ = kNoToken, eos_ = kNoToken, eot_ = kNoToken, eom_ = kNoToken;
  TokenId unk_ = kNoToken, pad_ = kNoToken, sep_ = kNoToken;
  std::vector<TokenId> eog_;
  bool add_bos_ = false, add_eos_ = false, add_space_prefix_ = false, ignore_merges_ = false;
  std::string chat_template_;
  std::array<TokenId, 256> byte_tokens_{};
  std::vector<TokenId> special_;
  tok_internal::PairMap<Merge> merges_by_id_;
  std::vector<std::pair<std::string, int32_t>> merges_by_text_;  // sorted; sides that are not tokens
  size_t n_merges_ = 0;
};

}  // namespace zl
