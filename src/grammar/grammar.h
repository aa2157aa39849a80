// A context-free grammar over bytes: what constrained decoding keeps the
// output inside (grammar/matcher.h runs it, grammar/token_trie.h turns it into
// token masks, grammar/json_schema.h builds one from a JSON Schema).
//
// Form: rules with alternatives, each alternative a sequence of symbols, a
// symbol either a set of bytes (one byte of the input) or a rule. Stored flat:
// every alternative is a run of symbols in syms() ending with a kEnd symbol,
// and a rule is the list of its alternatives' start positions. The grammar
// must not be left-recursive (a rule reachable from itself without consuming
// a byte): the builders here never make one, and the matcher bounds its
// expansion depth so a bad grammar cannot hang it.
//
// The module knows no wire format and no vocabulary.
// Thread-safety: a Grammar is immutable once built (share it freely); a
// GrammarBuilder is used by one thread.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace zl::grammar {

// A set of bytes (256 bits).
struct ByteSet {
  std::array<uint64_t, 4> bits{};

  static ByteSet of(uint8_t b) { ByteSet s; s.add(b); return s; }
  static ByteSet range(uint8_t lo, uint8_t hi) { ByteSet s; s.add_range(lo, hi); return s; }
  void add(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  void add_range(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) add(static_cast<uint8_t>(b));
  }
  void add(const ByteSet& o) {
    for (int i = 0; i < 4; ++i) bits[i] |= o.bits[i];
  }
  bool has(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  bool empty() const { return (bits[0] | bits[1] | bits[2] | bits[3]) == 0; }
  bool operator==(const ByteSet&) const = default;
};

struct Sym {
  enum Kind : uint8_t { kEnd, kBytes, kRule };
  Kind kind = kEnd;
  uint32_t value = 0;  // kBytes: index into byte_sets(); kRule: the rule
};

class Grammar {
 public:
  uint32_t root() const { return root_; }
  const Sym& sym(uint32_t pos) const { return syms_[pos]; }
  const ByteSet& byte_set(uint32_t i) const { return byte_sets_[i]; }
  // The start positions of `rule`'s alternatives.
  std::span<const uint32_t> alternatives(uint32_t rule) const {
    return std::span(alt_starts_).subspan(rule_first_[rule], rule_first_[rule + 1] - rule_first_[rule]);
  }
  size_t n_rules() const { return rule_first_.size() - 1; }
  size_t n_syms() const { return syms_.size(); }
  // Whether the matcher bounds the parses it follows (grammar/matcher.h):
  // set on grammars a client writes (GBNF), which may be ambiguous enough to
  // make them grow exponentially. The compilers of JSON Schemas, regexes and
  // choices make grammars whose parses their size bounds.
  bool bounded() const { return bounded_; }
  // Rules in GBNF-like text (for tests and debugging): one rule per line.
  std::string to_string() const;

 private:
  friend class GrammarBuilder;
  uint32_t root_ = 0;
  bool bounded_ = false;
  std::vector<Sym> syms_;
  std::vector<ByteSet> byte_sets_;
  std::vector<uint32_t> alt_starts_;
  std::vector<uint32_t> rule_first_;  // rule r's alternatives: alt_starts_[rule_first_[r] .. rule_first_[r+1])
};

// Builds a Grammar. Rules are made first (new_rule) and defined later, so
// they can refer to each other (recursion through a consumed byte only).
// Limits: kMaxSyms symbols in all; past it build() fails (a schema too large
// to compile), never an unbounded allocation.
class GrammarBuilder {
 public:
  static constexpr size_t kMaxSyms = 1 << 20;

  // One element of a sequence: a byte set or a rule.
  struct Item {
    bool is_rule = false;
    uint32_t value = 0;  // rule id, or index of the byte set
  };
  using Seq = std::vector<Item>;

  uint32_t new_rule();
  // Each rule is defined once; an empty `alts` defines a rule that matches nothing.
  void define(uint32_t rule, std::vector<Seq> alts);
  // A new rule defined as `alts`.
  uint32_t rule(std::vector<Seq> alts);

  Item bytes(const ByteSet& s);
  Item ref(uint32_t rule) const { return {.is_rule = true, .value = rule}; }
  // The bytes of `text`, one Item each, appended to `seq`.
  void append_literal(Seq& seq, std::string_view text);
  Seq literal(std::string_view text) {
    Seq s;
    append_literal(s, text);
    return s;
  }
  // Rules for common shapes of `item`.
  uint32_t optional(const Seq& seq);  // seq | ε
  uint32_t star(const Seq& seq);      // seq*  (right-recursive)
  // seq{min,max}; max < 0: unbounded. Errors past kMaxSyms are reported by build().
  uint32_t repeat(const Seq& seq, int64_t min, int64_t max);

  // Whether the grammar grew past kMaxSyms (build() will fail).
  bool too_large() const { return too_large_; }
  // The grammar built will be bounded() (a client's grammar).
  void set_bounded() { bounded_ = true; }
  // The grammar rooted at `root`; every rule made must be defined.
  Result<Grammar> build(uint32_t root);

 private:
  // Rules made as seq{0,max} (max < 0: seq*), by optional, star and
  // repeat with min 0: what repeat() folds a repetition of them into.
  struct ZeroBased {
    Seq seq;
    int64_t max;
  };
  // The ZeroBased rule that `seq` is (a single reference to it, or to rules
  // that only wrap it), else null.
  const ZeroBased* zero_based(const Seq& seq) const;

  std::unordered_map<uint32_t, ZeroBased> zero_based_;
  std::vector<std::vector<Seq>> rules_;
  std::vector<bool> defined_;
  std::vector<ByteSet> byte_sets_;
  size_t n_syms_ = 0;
  bool too_large_ = false;
  bool bounded_ = false;
};

}  // namespace zl::grammar
