#include "grammar/grammar.h"

#include <algorithm>
#include <cstdio>

#include "core/check.h"

namespace zl::grammar {
namespace {

void append_byte_set(const ByteSet& s, std::string& out) {
  auto show = [&](int b) {
    if (b >= 0x21 && b < 0x7f && b != '\\' && b != ']' && b != '-' && b != '^') {
      out += static_cast<char>(b);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", b);
      out += buf;
    }
  };
  out += '[';
  for (int b = 0; b < 256;) {
    if (!s.has(static_cast<uint8_t>(b))) {
      ++b;
      continue;
    }
    int e = b;
    while (e + 1 < 256 && s.has(static_cast<uint8_t>(e + 1))) ++e;
    show(b);
    if (e > b) {
      out += '-';
      show(e);
    }
    b = e + 1;
  }
  out += ']';
}

}  // namespace

std::string Grammar::to_string() const {
  std::string out;
  for (uint32_t r = 0; r < n_rules(); ++r) {
    out += 'r';  // (appended piecewise: GCC 12 misreports "r" + std::string as overlapping, -Wrestrict)
    out += std::to_string(r);
    out += r == root_ ? " (root) ::=" : " ::=";
    bool first = true;
    for (uint32_t pos : alternatives(r)) {
      out += first ? " " : " | ";
      first = false;
      if (syms_[pos].kind == Sym::kEnd) out += "\"\"";
      for (; syms_[pos].kind != Sym::kEnd; ++pos) {
        if (pos != 0 && syms_[pos - 1].kind != Sym::kEnd && out.back() != ' ' && out.back() != '|') out += ' ';
        if (syms_[pos].kind == Sym::kRule) {
          out += 'r';
          out += std::to_string(syms_[pos].value);
        } else {
          append_byte_set(byte_sets_[syms_[pos].value], out);
        }
      }
    }
    out += '\n';
  }
  return out;
}

uint32_t GrammarBuilder::new_rule() {
  rules_.emplace_back();
  defined_.push_back(false);
  return static_cast<uint32_t>(rules_.size() - 1);
}

void GrammarBuilder::define(uint32_t rule, std::vector<Seq> alts) {
  CHECK(rule < rules_.size() && !defined_[rule]) << "rule " << rule;
  for (const Seq& s : alts) n_syms_ += s.size() + 1;
  if (n_syms_ > kMaxSyms) {
    too_large_ = true;
    alts.clear();  // the build fails anyway: keep memory bounded
  }
  rules_[rule] = std::move(alts);
  defined_[rule] = true;
}

uint32_t GrammarBuilder::rule(std::vector<Seq> alts) {
  const uint32_t r = new_rule();
  define(r, std::move(alts));
  return r;
}

GrammarBuilder::Item GrammarBuilder::bytes(const ByteSet& s) {
  // Few distinct sets in practice (a schema's classes): a linear search from the newest is fine.
  for (size_t i = byte_sets_.size(); i-- > 0;) {
    if (byte_sets_[i] == s) return {.is_rule = false, .value = static_cast<uint32_t>(i)};
    if (byte_sets_.size() - i > 64) break;
  }
  byte_sets_.push_back(s);
  return {.is_rule = false, .value = static_cast<uint32_t>(byte_sets_.size() - 1)};
}

void GrammarBuilder::append_literal(Seq& seq, std::string_view text) {
  for (char c : text) seq.push_back(bytes(ByteSet::of(static_cast<uint8_t>(c))));
}

uint32_t GrammarBuilder::optional(const Seq& seq) {
  const uint32_t r = rule({seq, {}});
  zero_based_[r] = {seq, 1};
  return r;
}

uint32_t GrammarBuilder::star(const Seq& seq) {
  const uint32_t r = new_rule();
  Seq more = seq;
  more.push_back(ref(r));
  define(r, {std::move(more), {}});
  zero_based_[r] = {seq, -1};
  return r;
}

const GrammarBuilder::ZeroBased* GrammarBuilder::zero_based(const Seq& seq) const {
  if (seq.size() != 1 || !seq[0].is_rule) return nullptr;
  uint32_t r = seq[0].value;
  // Through rules that only wrap another (a group around the repetition).
  for (int hops = 0; hops < 64; ++hops) {
    if (auto it = zero_based_.find(r); it != zero_based_.end()) return &it->second;
    if (r >= rules_.size() || !defined_[r] || rules_[r].size() != 1 || rules_[r][0].size() != 1 ||
        !rules_[r][0][0].is_rule) {
      return nullptr;
    }
    r = rules_[r][0][0].value;
  }
  return nullptr;
}

uint32_t GrammarBuilder::repeat(const Seq& seq, int64_t min, int64_t max) {
  const int64_t limit = static_cast<int64_t>(kMaxSyms);
  // A repetition of a repetition that may be empty, (X{0,k}){min,max} (X?
  // and X* too), is X{0,k*max}: the same texts. Written as it stands, it
  // is ambiguous — a run of X's splits between the copies in many ways, and
  // the matcher would carry a parse stack per way ((x?){1000} after some
  // x's: ~1000 stacks, each with ~1000 successors a byte) — while
  // X{0,k*max} is one nested optional per count. Kept as written when the
  // product would be too large to unroll.
  if (const ZeroBased* z = zero_based(seq); z != nullptr && min >= 0 && max != 0) {
    const ZeroBased inner = *z;  // zero_based_ may grow below
    const int64_t w = static_cast<int64_t>(inner.seq.size()) + 1;
    if (inner.max == 0) return repeat(inner.seq, 0, 0);  // copies of the empty text
    if (inner.max < 0 || max < 0) return repeat(inner.seq, 0, -1);
    if (max <= limit / 4 / w / inner.max) return repeat(inner.seq, 0, inner.max * max);
  }
  // seq{min,max} = seq^min then (max - min) nested optionals: o_k ::= seq o_{k-1} | ε.
  Seq out;
  const int64_t width = static_cast<int64_t>(seq.size()) + 1;
  if (min > limit / width || (max >= 0 && max - min > limit / width)) {
    too_large_ = true;
    return rule({});
  }
  if (max < 0) {
    for (int64_t i = 0; i < min && !too_large_; ++i) out.insert(out.end(), seq.begin(), seq.end());
    out.push_back(ref(star(seq)));
    const uint32_t r = rule({std::move(out)});
    if (min == 0) zero_based_[r] = {seq, -1};
    return r;
  }
  uint32_t tail = rule({{}});  // ε
  for (int64_t i = 0; i < max - min && !too_large_; ++i) {
    Seq more = seq;
    more.push_back(ref(tail));
    tail = rule({std::move(more), {}});
  }
  for (int64_t i = 0; i < min && !too_large_; ++i) {
    out.insert(out.end(), seq.begin(), seq.end());
  }
  out.push_back(ref(tail));
  const uint32_t r = rule({std::move(out)});
  if (min == 0) zero_based_[r] = {seq, max};
  return r;
}

Result<Grammar> GrammarBuilder::build(uint32_t root) {
  if (too_large_) {
    return invalid_argument("the grammar is too large (more than " + std::to_string(kMaxSyms) + " symbols)");
  }
  CHECK(root < rules_.size());
  Grammar g;
  g.root_ = root;
  g.bounded_ = bounded_;
  g.byte_sets_ = byte_sets_;
  g.rule_first_.reserve(rules_.size() + 1);
  g.syms_.reserve(n_syms_);
  for (size_t r = 0; r < rules_.size(); ++r) {
    CHECK(defined_[r]) << "rule " << r << " is not defined";
    g.rule_first_.push_back(static_cast<uint32_t>(g.alt_starts_.size()));
    for (const Seq& alt : rules_[r]) {
      g.alt_starts_.push_back(static_cast<uint32_t>(g.syms_.size()));
      for (const Item& it : alt) {
        g.syms_.push_back({.kind = it.is_rule ? Sym::kRule : Sym::kBytes, .value = it.value});
      }
      g.syms_.push_back({.kind = Sym::kEnd});
    }
  }
  g.rule_first_.push_back(static_cast<uint32_t>(g.alt_starts_.size()));
  return g;
}

}  // namespace zl::grammar
