#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <atomic>
#include <unordered_map>

#include "core/utf8.h"
#include "format/gguf.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/unicode.h"

namespace zl {

// A piece of the working text: raw text [begin, end) or a matched special token.
struct Tokenizer::Fragment {
  uint32_t begin;
  uint32_t end;
  TokenId token;  // kNoToken for raw text
};

namespace {

struct Symbol {
  uint32_t start;  // byte offset in the working string
  uint32_t len;    // 0 once merged into its left neighbour
  int32_t prev;
  int32_t next;
  TokenId id;  // BPE only: token of the symbol's text, or kNoToken
};

struct SpmBigram {
  float score;
  int32_t left;
  int32_t right;
  uint32_t size;
};
// Max-heap on score; on equal scores the leftmost pair comes first.
struct SpmLess {
  bool operator()(const SpmBigram& a, const SpmBigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

struct BpeBigram {
  int32_t rank;
  int32_t left;
  int32_t right;
  uint32_t left_len;
  uint32_t right_len;
  TokenId merged;
};
// Min-heap on rank; on equal ranks the leftmost pair comes first.
struct BpeGreater {
  bool operator()(const BpeBigram& a, const BpeBigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // '▁'

bool is_c_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

// Splits `text` into symbols of one UTF-8 character each (a malformed lead
// byte, impossible after sanitising, is a symbol of its own).
void split_chars(std::string_view text, std::vector<Symbol>* syms) {
  syms->clear();
  size_t pos = 0;
  while (pos < text.size()) {
    size_t len = utf8::valid_sequence_length(text, pos);
    if (len == 0) len = 1;
    const auto i = static_cast<int32_t>(syms->size());
    syms->push_back({static_cast<uint32_t>(pos), static_cast<uint32_t>(len), i - 1,
                     pos + len == text.size() ? -1 : i + 1, kNoToken});
    pos += len;
  }
}

std::atomic<uint64_t> g_next_instance{1};

// Per-thread cache of BPE results by word (text words repeat a lot, and a
// merge costs several hash probes in a multi-megabyte table). Lock-free:
// each thread has its own caches, one per tokenizer instance for the last few
// instances it used; each is bounded and simply cleared when full.
class WordCache {
 public:
  static constexpr size_t kMaxWordBytes = 48;
  static constexpr size_t kMaxEntries = 1 << 15;

  static WordCache& for_instance(uint64_t instance) {
    thread_local std::vector<std::pair<uint64_t, std::unique_ptr<WordCache>>> caches;
    for (auto& [id, cache] : caches) {
      if (id == instance) return *cache;
    }
    if (caches.size() >= 4) caches.erase(caches.begin());
    caches.emplace_back(instance, std::make_unique<WordCache>());
    return *caches.back().second;
  }
  // Appends the cached ids of `word` to *out; false if not cached.
  bool lookup(std::string_view word, std::vector<TokenId>* out) const {
    auto it = map_.find(word);
    if (it == map_.end()) return false;
    out->insert(out->end(), ids_.begin() + it->second.first, ids_.begin() + it->second.first + it->second.second);
    return true;
  }
  void insert(std::string_view word, const TokenId* ids, size_t n) {
    if (map_.size() >= kMaxEntries) {
      map_.clear();
      ids_.clear();
    }
    const auto off = static_cast<uint32_t>(ids_.size());
    ids_.insert(ids_.end(), ids, ids + n);
    map_.emplace(std::string(word), std::make_pair(off, static_cast<uint32_t>(n)));
  }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return tok_internal::hash_bytes(s); }
  };
  std::unordered_map<std::string, std::pair<uint32_t, uint32_t>, Hash, std::equal_to<>> map_;
  std::vector<TokenId> ids_;
};

}  // namespace

struct Tokenizer::Scratch {
  std::string work;  // SPM: escaped text; BPE: byte-level encoded word
  std::vector<Symbol> syms;
  std::vector<SpmBigram> spm_heap;
  std::vector<BpeBigram> bpe_heap;
  std::vector<TextSpan> words;
  PreTokenizerScratch pre;
};

Result<std::unique_ptr<Tokenizer>> Tokenizer::create(Vocab vocab) {
  std::unique_ptr<Tokenizer> t(new Tokenizer(std::move(vocab)));
  t->instance_ = g_next_instance.fetch_add(1);
  if (t->vocab_.kind() == VocabKind::kBpe) {
    ASSIGN_OR_RETURN(t->pre_, pre_tokenizer_from_name(t->vocab_.pre()));
  }
  if (t->vocab_.kind() == VocabKind::kSpm) {
    t->spm_split_words_ = true;
    for (TokenId id = 0; id < t->vocab_.n_tokens() && t->spm_split_words_; ++id) {
      const std::string_view text = t->vocab_.text(id);
      for (size_t i = text.find(kSpmSpace, 1); i != std::string_view::npos; i = text.find(kSpmSpace, i + 1)) {
        if (i < 3 || text.compare(i - 3, 3, kSpmSpace) != 0) {
          t->spm_split_words_ = false;
          break;
        }
      }
    }
  }
  t->trie_.emplace_back();
  for (TokenId id : t->vocab_.special_tokens()) {
    const std::string& text = t->vocab_.text(id);
    int32_t node = 0;
    for (char ch : text) {
      const auto b = static_cast<uint8_t>(ch);
      auto& kids = t->trie_[node].children;
      auto it = std::lower_bound(kids.begin(), kids.end(), b, [](const auto& kv, uint8_t v) { return kv.first < v; });
      if (it != kids.end() && it->first == b) {
        node = it->second;
      } else {
        const auto next = static_cast<int32_t>(t->trie_.size());
        kids.insert(it, {b, next});
        t->trie_.emplace_back();  // invalidates `kids`; not used afterwards
        node = next;
      }
    }
    // special_tokens() is longest-first then by id; keep the lowest id for a text.
    if (t->trie_[node].token == kNoToken) t->trie_[node].token = id;
    if (t->vocab_.type(id) == TokenType::kUserDefined) t->has_user_defined_ = true;
  }
  return t;
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf(const GgufFile& file) {
  ASSIGN_OR_RETURN(Vocab vocab, Vocab::from_gguf(file));
  return create(std::move(vocab));
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::load(const std::string& gguf_path) {
  ASSIGN_OR_RETURN(Vocab vocab, Vocab::load(gguf_path));
  return create(std::move(vocab));
}

std::vector<TokenId> Tokenizer::encode(std::string_view text, const EncodeOptions& opts) const {
  const TextSegment seg{text, opts.parse_special};
  return encode(std::span<const TextSegment>(&seg, 1), opts.add_special);
}

std::vector<TokenId> Tokenizer::encode(std::span<const TextSegment> segments, bool add_special) const {
  std::string text;
  std::vector<std::pair<size_t, bool>> seg_ends;  // (end offset, parse_special)
  for (const TextSegment& seg : segments) {
    if (utf8::is_valid(seg.text)) {
      text.append(seg.text);
    } else {
      text += utf8::sanitize(seg.text);
    }
    seg_ends.emplace_back(text.size(), seg.parse_special);
  }
  CHECK(text.size() < 0xFFFFFFFFu) << "input too large to tokenize";
  std::vector<Fragment> fragments;
  partition(text, seg_ends, &fragments);
  std::vector<TokenId> out;
  out.reserve(text.size() / 3 + 2);
  encode_fragments(text, fragments, add_special, &out);
  return out;
}

int32_t Tokenizer::trie_child(int32_t node, uint8_t byte) const {
  const auto& kids = trie_[node].children;
  auto it = std::lower_bound(kids.begin(), kids.end(), byte, [](const auto& kv, uint8_t v) { return kv.first < v; });
  return it == kids.end() || it->first != byte ? -1 : it->second;
}

std::vector<std::pair<size_t, size_t>> Tokenizer::control_token_spans(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  if (trie_.size() <= 1) return out;
  for (size_t i = 0; i < text.size();) {
    int32_t node = 0;
    size_t longest = 0;
    for (size_t j = i; j < text.size(); ++j) {
      node = trie_child(node, static_cast<uint8_t>(text[j]));
      if (node < 0) break;
      const TokenId id = trie_[node].token;
      if (id != kNoToken && vocab_.type(id) != TokenType::kUserDefined) longest = j + 1 - i;
    }
    if (longest > 0) {
      out.emplace_back(i, longest);
      i += longest;
    } else {
      ++i;
    }
  }
  return out;
}

void Tokenizer::partition(std::string_view text, std::span<const std::pair<size_t, bool>> seg_ends,
                          std::vector<Fragment>* out) const {
  const size_t n = text.size();
  bool any_parse_special = false;
  for (const auto& s : seg_ends) any_parse_special |= s.second;
  if (n == 0) return;
  if (trie_.size() <= 1 || (!any_parse_special && !has_user_defined_)) {
    out->push_back({0, static_cast<uint32_t>(n), kNoToken});
    return;
  }

  // 1. Every occurrence of every allowed special token (a trie walk per byte).
  struct Candidate {
    uint32_t pos;
    uint32_t len;
    TokenId id;
  };
  std::vector<Candidate> cands;
  size_t seg = 0;
  for (size_t i = 0; i < n; ++i) {
    while (seg_ends[seg].first <= i) ++seg;
    int32_t node = 0;
    for (size_t j = i; j < n; ++j) {
      node = trie_child(node, static_cast<uint8_t>(text[j]));
      if (node < 0) break;
      const TokenId id = trie_[node].token;
      if (id == kNoToken) continue;
      const bool user_defined = vocab_.type(id) == TokenType::kUserDefined;
      if (user_defined || (seg_ends[seg].second && j + 1 <= seg_ends[seg].first)) {
        cands.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(j + 1 - i), id});
      }
    }
  }
  if (cands.empty()) {
    out->push_back({0, static_cast<uint32_t>(n), kNoToken});
    return;
  }

  // 2. Claim them as llama.cpp does: longest token first (ties by id), each
  // token's occurrences left to right, skipping any that overlap a claim.
  std::sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) {
    if (a.len != b.len) return a.len > b.len;
    if (a.id != b.id) return a.id < b.id;
    return a.pos < b.pos;
  });
  enum : uint8_t { kFree = 0, kClaimed = 1, kDropped = 2 };
  std::vector<uint8_t> state(n, kFree);
  std::vector<Candidate> accepted;
  for (const Candidate& c : cands) {
    bool free = true;
    for (uint32_t k = c.pos; k < c.pos + c.len && free; ++k) free = state[k] == kFree;
    if (!free) continue;
    std::fill(state.begin() + c.pos, state.begin() + c.pos + c.len, kClaimed);
    accepted.push_back(c);
    const TokenData& td = vocab_.token(c.id);
    if (td.lstrip) {
      for (size_t k = c.pos; k > 0 && state[k - 1] == kFree && is_c_space(text[k - 1]); --k) state[k - 1] = kDropped;
    }
    if (td.rstrip) {
      for (size_t k = c.pos + c.len; k < n && state[k] == kFree && is_c_space(text[k]); ++k) state[k] = kDropped;
    }
  }
  std::sort(accepted.begin(), accepted.end(), [](const Candidate& a, const Candidate& b) { return a.pos < b.pos; });

  // 3. Fragments: tokens, and maximal runs of free bytes between them.
  size_t k = 0;
  for (size_t i = 0; i < n;) {
    if (state[i] == kClaimed) {
      CHECK(k < accepted.size() && accepted[k].pos == i);
      out->push_back({accepted[k].pos, accepted[k].pos + accepted[k].len, accepted[k].id});
      i += accepted[k].len;
      ++k;
    } else if (state[i] == kDropped) {
      ++i;
    } else {
      size_t j = i;
      while (j < n && state[j] == kFree) ++j;
      out->push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(j), kNoToken});
      i = j;
    }
  }
}

void Tokenizer::encode_fragments(std::string_view text, const std::vector<Fragment>& fragments, bool add_special,
                                 std::vector<TokenId>* out) const {
  if (add_special && vocab_.add_bos()) out->push_back(vocab_.bos());
  Scratch scratch;
  bool prev_special = true;  // the text start counts as "after a special token"
  for (const Fragment& f : fragments) {
    if (f.token != kNoToken) {
      out->push_back(f.token);
      prev_special = true;
      continue;
    }
    const std::string_view raw = text.substr(f.begin, f.end - f.begin);
    if (vocab_.kind() == VocabKind::kSpm) {
      encode_spm(raw, vocab_.add_space_prefix() && prev_special, &scratch, out);
    } else {
      encode_bpe(raw, &scratch, out);
    }
    prev_special = false;
  }
  if (add_special && vocab_.add_eos()) out->push_back(vocab_.eos());
}

// ---------------------------------------------------------------------------
// SentencePiece-style BPE (llama.cpp's llm_tokenizer_spm)

void Tokenizer::encode_spm(std::string_view raw, bool space_prefix, Scratch* s, std::vector<TokenId>* out) const {
  std::string& t = s->work;
  t.clear();
  if (space_prefix) t += kSpmSpace;
  for (char c : raw) {
    if (c == ' ') {
      t += kSpmSpace;
    } else {
      t += c;
    }
  }
  if (!spm_split_words_) {
    encode_spm_chunk(t, s, out);
    return;
  }
  // No token has a '▁' after another character, so no merge can cross the
  // start of a "▁word": merging each word alone gives the same tokens as
  // merging the whole text, with small heaps.
  const std::string_view tv(t);
  size_t begin = 0;
  for (size_t i = 1; i + 3 <= tv.size(); ++i) {
    if (tv.compare(i, 3, kSpmSpace) == 0 && !(i >= 3 && tv.compare(i - 3, 3, kSpmSpace) == 0)) {
      encode_spm_chunk(tv.substr(begin, i - begin), s, out);
      begin = i;
    }
  }
  encode_spm_chunk(tv.substr(begin), s, out);
}

void Tokenizer::encode_spm_chunk(std::string_view t, Scratch* s, std::vector<TokenId>* out) const {
  std::vector<Symbol>& syms = s->syms;
  split_chars(t, &syms);
  auto& heap = s->spm_heap;
  heap.clear();
  auto try_add = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const uint32_t size = syms[l].len + syms[r].len;
    const TokenId id = vocab_.find(t.substr(syms[l].start, size));
    if (id == kNoToken) return;
    heap.push_back({vocab_.token(id).score, l, r, size});
    std::push_heap(heap.begin(), heap.end(), SpmLess());
  };
  for (int32_t i = 1; i < static_cast<int32_t>(syms.size()); ++i) try_add(i - 1, i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), SpmLess());
    const SpmBigram bg = heap.back();
    heap.pop_back();
    Symbol& l = syms[bg.left];
    Symbol& r = syms[bg.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != bg.size) continue;  // stale
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = bg.left;
    try_add(l.prev, bg.left);
    try_add(bg.left, l.next);
  }
  for (int32_t i = syms.empty() ? -1 : 0; i != -1; i = syms[i].next) {
    const std::string_view piece = t.substr(syms[i].start, syms[i].len);
    if (const TokenId id = vocab_.find(piece); id != kNoToken) {
      out->push_back(id);
      continue;
    }
    for (char c : piece) {  // byte fallback
      TokenId b = vocab_.byte_token(static_cast<uint8_t>(c));
      if (b == kNoToken) b = vocab_.unk();
      if (b != kNoToken) out->push_back(b);
    }
  }
}

// ---------------------------------------------------------------------------
// Byte-level BPE (llama.cpp's llm_tokenizer_bpe)

void Tokenizer::encode_bpe(std::string_view raw, Scratch* s, std::vector<TokenId>* out) const {
  // Long text is pre-tokenized in blocks of ~16 KiB so that the scratch
  // arrays stay in cache; blocks end only where every pre-tokenizer has a
  // word boundary (safe_split_point), so the words are unchanged.
  constexpr size_t kBlock = 16 << 10;
  size_t begin = 0;
  while (begin < raw.size()) {
    const size_t end = raw.size() - begin > 2 * kBlock ? safe_split_point(raw, begin + kBlock) : raw.size();
    encode_bpe_block(raw.substr(begin, end - begin), s, out);
    begin = end;
  }
}

void Tokenizer::encode_bpe_block(std::string_view raw, Scratch* s, std::vector<TokenId>* out) const {
  s->words.clear();
  pre_tokenize(pre_, raw, &s->words, &s->pre);
  WordCache& cache = WordCache::for_instance(instance_);
  for (const TextSpan& w : s->words) {
    const std::string_view word = raw.substr(w.begin, w.end - w.begin);
    if (word.size() > WordCache::kMaxWordBytes) {
      encode_bpe_word(word, s, out);
    } else if (!cache.lookup(word, out)) {
      const size_t before = out->size();
      encode_bpe_word(word, s, out);
      cache.insert(word, out->data() + before, out->size() - before);
    }
  }
}

void Tokenizer::encode_bpe_word(std::string_view word, Scratch* s, std::vector<TokenId>* out) const {
  std::string& enc = s->work;
  enc.clear();
  byte_level::encode(word, &enc);
  if (vocab_.ignore_merges()) {
    if (const TokenId id = vocab_.find(enc); id != kNoToken) {
      out->push_back(id);
      return;
    }
  }
  std::vector<Symbol>& syms = s->syms;
  syms.clear();
  uint32_t off = 0;
  for (size_t i = 0; i < word.size(); ++i) {
    const auto b = static_cast<uint8_t>(word[i]);
    const auto len = static_cast<uint32_t>(byte_level::encode_byte(b).size());
    const auto idx = static_cast<int32_t>(i);
    syms.push_back({off, len, idx - 1, i + 1 == word.size() ? -1 : idx + 1, vocab_.byte_token(b)});
    off += len;
  }
  auto& heap = s->bpe_heap;
  heap.clear();
  auto try_add = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const Symbol& a = syms[l];
    const Symbol& b = syms[r];
    int32_t rank;
    TokenId merged;
    if (a.id != kNoToken && b.id != kNoToken) {
      const Vocab::Merge* m = vocab_.find_merge(a.id, b.id);
      if (m == nullptr) return;
      rank = m->rank;
      merged = m->merged;
    } else {
      const std::string_view sv(enc);
      rank = vocab_.find_merge_rank(sv.substr(a.start, a.len), sv.substr(b.start, b.len));
      if (rank < 0) return;
      merged = vocab_.find(sv.substr(a.start, a.len + b.len));
    }
    heap.push_back({rank, l, r, a.len, b.len, merged});
    std::push_heap(heap.begin(), heap.end(), BpeGreater());
  };
  for (int32_t i = 1; i < static_cast<int32_t>(syms.size()); ++i) try_add(i - 1, i);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), BpeGreater());
    const BpeBigram bg = heap.back();
    heap.pop_back();
    Symbol& l = syms[bg.left];
    Symbol& r = syms[bg.right];
    // Stale unless both sides are unchanged (then they are still adjacent:
    // a symbol only grows by absorbing its right neighbour).
    if (l.len != bg.left_len || r.len != bg.right_len) continue;
    l.len += r.len;
    l.id = bg.merged;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = bg.left;
    try_add(l.prev, bg.left);
    try_add(bg.left, l.next);
  }
  for (int32_t i = syms.empty() ? -1 : 0; i != -1; i = syms[i].next) {
    if (syms[i].id != kNoToken) {
      out->push_back(syms[i].id);
      continue;
    }
    // Not a token (a vocabulary whose merges produce non-tokens): llama.cpp
    // emits the single-byte-text tokens it can find.
    const std::string_view piece = std::string_view(enc).substr(syms[i].start, syms[i].len);
    for (char c : piece) {
      if (const TokenId id = vocab_.find(std::string_view(&c, 1)); id != kNoToken) out->push_back(id);
    }
  }
}

// ---------------------------------------------------------------------------
// Decoding

void Tokenizer::append_piece(TokenId id, bool render_special, std::string* out) const {
  if (!vocab_.is_valid(id)) return;
  const TokenData& td = vocab_.token(id);
  switch (td.type) {
    case TokenType::kControl:
    case TokenType::kUnknown:
      if (render_special) out->append(td.text);
      return;
    case TokenType::kUserDefined:
      out->append(td.text);
      return;
    case TokenType::kByte:
      if (vocab_.kind() == VocabKind::kSpm) {
        if (const int b = vocab_.byte_value(id); b >= 0) out->push_back(static_cast<char>(b));
        return;
      }
      [[fallthrough]];
    case TokenType::kNormal:
      break;
    case TokenType::kUndefined:
    case TokenType::kUnused:
      return;
  }
  const std::string& text = td.text;
  if (vocab_.kind() == VocabKind::kSpm) {
    // '▁' (E2 96 81) -> ' '
    for (size_t i = 0; i < text.size();) {
      if (text.compare(i, 3, "\xE2\x96\x81") == 0) {
        out->push_back(' ');
        i += 3;
      } else {
        out->push_back(text[i++]);
      }
    }
    return;
  }
  for (size_t i = 0; i < text.size();) {
    const size_t start = i;
    const uint32_t cp = utf8::decode_one(text, &i);
    const int b = byte_level::decode_code_point(cp);
    if (b >= 0) {
      out->push_back(static_cast<char>(b));
    } else {
      out->append(text, start, i - start);  // not a byte-level character: keep it
    }
  }
}

std::string Tokenizer::token_to_piece(TokenId id, bool render_special) const {
  std::string s;
  append_piece(id, render_special, &s);
  return s;
}

std::string Tokenizer::decode_bytes(std::span<const TokenId> ids, const DecodeOptions& opts) const {
  std::string out;
  bool first = true;
  for (TokenId id : ids) {
    const size_t before = out.size();
    append_piece(id, opts.render_special, &out);
    if (first && out.size() > before) {
      first = false;
      if (opts.strip_leading_space && out[before] == ' ') out.erase(before, 1);
    }
  }
  return out;
}

std::string Tokenizer::decode(std::span<const TokenId> ids, const DecodeOptions& opts) const {
  std::string bytes = decode_bytes(ids, opts);
  if (utf8::is_valid(bytes)) return bytes;
  return utf8::sanitize(bytes);
}

}  // namespace zl
