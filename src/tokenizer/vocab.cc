#include "tokenizer/vocab.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "format/gguf.h"
#include "tokenizer/byte_level.h"

namespace zl {
namespace {

std::string length_prefixed_key(std::string_view left, std::string_view right) {
  std::string key = std::to_string(left.size());
  key += ':';
  key += left;
  key += right;
  return key;
}

// An optional integer key that must hold a token id. Returns kNoToken when the
// key is absent or holds a "none" marker (-1, or 0xFFFFFFFF as some converters
// write it); `*present` tells whether the key held a usable value.
Result<TokenId> read_id(const GgufFile& file, std::string_view key, int32_t n_tokens, bool* present) {
  *present = false;
  const GgufValue* v = file.find(key);
  if (v == nullptr) return kNoToken;
  std::optional<int64_t> id = v->as_int();
  if (!id) return corrupt_file(std::string(key) + " is not an integer");
  if (*id == -1 || *id == 0xFFFFFFFFll) {
    *present = true;
    return kNoToken;
  }
  if (*id < 0 || *id >= n_tokens) return kNoToken;  // out of range: keep the default
  *present = true;
  return static_cast<TokenId>(*id);
}

std::optional<bool> read_bool(const GgufFile& file, std::string_view key) {
  const GgufValue* v = file.find(key);
  if (v == nullptr) return std::nullopt;
  if (auto b = v->as_bool()) return b;
  if (auto i = v->as_int()) return *i != 0;
  return std::nullopt;
}

}  // namespace

const TokenData& Vocab::token(TokenId id) const {
  CHECK(is_valid(id)) << "token id " << id << " out of range [0, " << n_tokens() << ")";
  return tokens_[id];
}

bool Vocab::is_eog(TokenId id) const { return std::binary_search(eog_.begin(), eog_.end(), id); }

int Vocab::byte_value(TokenId id) const {
  if (!is_valid(id) || tokens_[id].type != TokenType::kByte) return -1;
  const std::string& t = tokens_[id].text;
  if (t.size() != 6 || t[0] != '<' || t[1] != '0' || t[2] != 'x' || t[5] != '>') return -1;
  auto hex = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
  const int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

int32_t Vocab::find_merge_rank(std::string_view left, std::string_view right) const {
  const std::string key = length_prefixed_key(left, right);
  auto it = std::lower_bound(merges_by_text_.begin(), merges_by_text_.end(), key,
                             [](const auto& e, const std::string& k) { return e.first < k; });
  if (it != merges_by_text_.end() && it->first == key) return it->second;
  return -1;
}

Result<Vocab> Vocab::load(const std::string& path) {
  ASSIGN_OR_RETURN(auto file, GgufFile::open(path));
  auto vocab = from_gguf(*file);
  if (!vocab.ok()) return vocab.status().with_context(path);
  return vocab;
}

Result<Vocab> Vocab::from_gguf(const GgufFile& file) {
  Vocab v;
  auto model = file.get_string("tokenizer.ggml.model");
  if (!model.ok()) return model.status().with_context("vocabulary");
  v.model_ = *model;
  if (v.model_ == "llama") {
    v.kind_ = VocabKind::kSpm;
  } else if (v.model_ == "gpt2") {
    v.kind_ = VocabKind::kBpe;
  } else {
    return unsupported("tokenizer model " + gguf_quoted(v.model_) + " (supported: llama, gpt2)");
  }
  if (auto pre = file.get_string("tokenizer.ggml.pre"); pre.ok() && !pre->empty()) v.pre_ = *pre;
  if (auto name = file.get_string("general.name"); name.ok()) {
    v.name_ = *name;
    for (char& c : v.name_) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (auto tmpl = file.get_string("tokenizer.chat_template"); tmpl.ok()) v.chat_template_ = *tmpl;

  RETURN_IF_ERROR(v.load_tokens(file));
  v.build_tables();
  if (v.kind_ == VocabKind::kBpe) RETURN_IF_ERROR(v.load_merges(file));
  RETURN_IF_ERROR(v.load_special_ids(file));  // may retype control-looking tokens
  v.collect_special_tokens();
  v.load_flags(file);
  return v;
}

Status Vocab::load_tokens(const GgufFile& file) {
  const GgufArray* tokens = file.get_array("tokenizer.ggml.tokens");
  if (tokens == nullptr) return corrupt_file("tokenizer.ggml.tokens is missing or not an array");
  if (tokens->items.empty()) return corrupt_file("tokenizer.ggml.tokens is empty");
  if (tokens->items.size() > (1u << 30)) return corrupt_file("tokenizer.ggml.tokens is too large");
  const size_t n = tokens->items.size();
  const GgufArray* scores = file.get_array("tokenizer.ggml.scores");
  const GgufArray* types = file.get_array("tokenizer.ggml.token_type");
  if (scores && scores->items.size() != n) return corrupt_file("tokenizer.ggml.scores length differs from tokens");
  if (types && types->items.size() != n) return corrupt_file("tokenizer.ggml.token_type length differs from tokens");
  tokens_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string* s = tokens->items[i].as_string();
    if (s == nullptr) return corrupt_file("tokenizer.ggml.tokens[" + std::to_string(i) + "] is not a string");
    tokens_[i].text = *s;
    if (scores) {
      auto f = scores->items[i].as_float();
      if (!f) return corrupt_file("tokenizer.ggml.scores[" + std::to_string(i) + "] is not a number");
      tokens_[i].score = static_cast<float>(*f);
    }
    if (types) {
      auto t = types->items[i].as_int();
      if (!t || *t < 0 || *t > 6) {
        return corrupt_file("tokenizer.ggml.token_type[" + std::to_string(i) + "] is not a token type (0..6)");
      }
      tokens_[i].type = static_cast<TokenType>(*t);
    }
  }
  return {};
}

void Vocab::build_tables() {
  std::vector<std::string_view> keys(tokens_.size());
  for (size_t i = 0; i < tokens_.size(); ++i) keys[i] = tokens_[i].text;
  index_.build(keys);

  for (int b = 0; b < 256; ++b) {
    TokenId id = kNoToken;
    if (kind_ == VocabKind::kSpm) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
      id = find(buf);
      if (id == kNoToken && b < 0x80) id = find(std::string(1, static_cast<char>(b)));
    } else {
      id = find(byte_level::encode_byte(static_cast<uint8_t>(b)));
    }
    byte_tokens_[b] = id;
  }
}

void Vocab::collect_special_tokens() {
  special_.clear();
  for (TokenId id = 0; id < n_tokens(); ++id) {
    const TokenType t = tokens_[id].type;
    if ((t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown) &&
        !tokens_[id].text.empty()) {
      special_.push_back(id);
    }
  }
  // Longest text first: the order in which the input is partitioned.
  std::stable_sort(special_.begin(), special_.end(),
                   [&](TokenId a, TokenId b) { return tokens_[a].text.size() > tokens_[b].text.size(); });
}

Status Vocab::load_merges(const GgufFile& file) {
  const GgufArray* merges = file.get_array("tokenizer.ggml.merges");
  if (merges == nullptr) return corrupt_file("BPE vocabulary without tokenizer.ggml.merges");
  n_merges_ = merges->items.size();
  merges_by_id_.reserve(n_merges_);
  std::string joined;
  for (size_t i = 0; i < n_merges_; ++i) {
    const std::string* s = merges->items[i].as_string();
    // "left right": split at the first space after the first byte (llama.cpp
    // does the same, so a left side may itself start with a space).
    const size_t sp = s ? s->find(' ', 1) : std::string::npos;
    if (sp == std::string::npos) {
      return corrupt_file("tokenizer.ggml.merges[" + std::to_string(i) + "] is not 'left right'");
    }
    const std::string_view left(s->data(), sp);
    const std::string_view right(s->data() + sp + 1, s->size() - sp - 1);
    const TokenId l = find(left), r = find(right);
    const auto rank = static_cast<int32_t>(i);
    if (l != kNoToken && r != kNoToken) {
      joined.assign(left);
      joined += right;
      merges_by_id_.insert(l, r, Merge{rank, find(joined)});
    } else {
      merges_by_text_.emplace_back(length_prefixed_key(left, right), rank);
    }
  }
  // Stable sort + unique keeps the first (lowest-rank) duplicate.
  std::stable_sort(merges_by_text_.begin(), merges_by_text_.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  merges_by_text_.erase(std::unique(merges_by_text_.begin(), merges_by_text_.end(),
                                    [](const auto& a, const auto& b) { return a.first == b.first; }),
                        merges_by_text_.end());
  return {};
}

Status Vocab::load_special_ids(const GgufFile& file) {
  const int32_t n = n_tokens();
  auto valid_or_none = [&](TokenId id) { return id >= 0 && id < n ? id : kNoToken; };
  // Defaults of llama.cpp for each model type.
  if (kind_ == VocabKind::kSpm) {
    bos_ = valid_or_none(1);
    eos_ = valid_or_none(2);
    unk_ = valid_or_none(0);
  } else {
    bos_ = valid_or_none(11);
    eos_ = valid_or_none(11);
  }
  struct Key {
    const char* name;
    TokenId* id;
  };
  const Key keys[] = {
      {"tokenizer.ggml.bos_token_id", &bos_},     {"tokenizer.ggml.eos_token_id", &eos_},
      {"tokenizer.ggml.eot_token_id", &eot_},     {"tokenizer.ggml.eom_token_id", &eom_},
      {"tokenizer.ggml.unknown_token_id", &unk_}, {"tokenizer.ggml.padding_token_id", &pad_},
      {"tokenizer.ggml.seperator_token_id", &sep_},
  };
  for (const Key& k : keys) {
    bool present = false;
    ASSIGN_OR_RETURN(TokenId id, read_id(file, k.name, n, &present));
    if (present) *k.id = id;
  }

  // End-of-turn and end-of-generation tokens by their well-known texts, as
  // llama.cpp finds them (llama_vocab::impl::load): every token with one of
  // the end-of-generation texts ends a generation, and is a control token
  // whatever type the file gives it. Converters type a few of them
  // user-defined (Phi-3's "</s>"); llama.cpp then overrides the type
  // ("control-looking token ... its type will be overridden"), so that raw
  // text spelling them (parse_special = false) is never matched as the token.
  // Not mirrored: llama.cpp's per-model exceptions for vocabularies whose
  // architectures we do not load (gpt-oss's "<|end|>", Gemma 4's "</s>"), and
  // its promotion of FIM tokens (no vocabulary we test types one user-defined).
  static constexpr std::string_view kEotTexts[] = {
      // Preference order for eot() when the file names none.
      "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>", "<｜end▁of▁sentence｜>",
      "<|end_of_text|>", "_<EOT>", "[EOT]", "<end_of_utterance>",
  };
  static constexpr std::string_view kMoreEogTexts[] = {
      "<|eom_id|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "</s>", "[EOS]", "<eos>", "<turn|>",
      "<|tool_response>", "[e~[",
  };
  auto promote = [&](std::string_view text) {
    const TokenId id = find(text);
    if (id != kNoToken) tokens_[id].type = TokenType::kControl;
    return id;
  };
  for (std::string_view t : kEotTexts) {
    if (TokenId id = promote(t); id != kNoToken) eog_.push_back(id);
  }
  for (std::string_view t : kMoreEogTexts) {
    if (TokenId id = promote(t); id != kNoToken) eog_.push_back(id);
  }
  if (eot_ == kNoToken) {
    for (std::string_view t : kEotTexts) {
      if (const TokenId id = find(t); id != kNoToken) {
        eot_ = id;
        break;
      }
    }
  }
  if (eom_ == kNoToken) eom_ = find("<|eom_id|>");
  for (TokenId id : {eos_, eot_, eom_}) {
    if (id != kNoToken) eog_.push_back(id);
  }
  std::sort(eog_.begin(), eog_.end());
  eog_.erase(std::unique(eog_.begin(), eog_.end()), eog_.end());
  return {};
}

void Vocab::load_flags(const GgufFile& file) {
  const bool llama3_family = pre_ == "llama3" || pre_ == "llama-v3" || pre_ == "llama-bpe";
  add_bos_ = kind_ == VocabKind::kSpm || llama3_family;
  add_eos_ = false;
  add_space_prefix_ = kind_ == VocabKind::kSpm;
  ignore_merges_ = kind_ == VocabKind::kBpe && llama3_family;
  if (auto b = read_bool(file, "tokenizer.ggml.add_bos_token")) add_bos_ = *b;
  if (auto b = read_bool(file, "tokenizer.ggml.add_eos_token")) add_eos_ = *b;
  if (auto b = read_bool(file, "tokenizer.ggml.add_space_prefix")) add_space_prefix_ = *b;
  if (add_bos_ && bos_ == kNoToken) add_bos_ = false;
  if (add_eos_ && eos_ == kNoToken) add_eos_ = false;

  // Phi-3's added tokens strip the whitespace that follows them (rstrip in its
  // tokenizer.json); llama.cpp keys this on the model name, and so do we.
  if (name_.find("phi-3") != std::string::npos || name_.find("phi3") != std::string::npos) {
    for (TokenId id : special_) tokens_[id].rstrip = true;
    for (std::string_view t : {"</s>"}) {
      if (TokenId id = find(t); id != kNoToken) tokens_[id].rstrip = true;
    }
    for (std::string_view t : {"<unk>", "<s>", "<|endoftext|>"}) {
      if (TokenId id = find(t); id != kNoToken) tokens_[id].rstrip = false;
    }
  }
}

}  // namespace zl
