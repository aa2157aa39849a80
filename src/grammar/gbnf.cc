#include "grammar/gbnf.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/utf8.h"
#include "grammar/regex.h"  // kMaxRepeat

namespace zl::grammar {
namespace {

using Seq = GrammarBuilder::Seq;

// ---- Code point classes as UTF-8 bytes ----

// Code point intervals [first, second].
using CodeRanges = std::vector<std::pair<uint32_t, uint32_t>>;
constexpr uint32_t kSurrogateFirst = 0xD800, kSurrogateLast = 0xDFFF;

// `r` sorted and merged, complemented over all code points when `negated`,
// without the surrogates (UTF-8 has no encoding for them).
CodeRanges normalize(CodeRanges r, bool negated) {
  std::sort(r.begin(), r.end());
  CodeRanges merged;
  for (const auto& [lo, hi] : r) {
    if (!merged.empty() && lo <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, hi);
    } else {
      merged.push_back({lo, hi});
    }
  }
  if (negated) {
    CodeRanges complement;
    uint32_t next = 0;
    for (const auto& [lo, hi] : merged) {
      if (lo > next) complement.push_back({next, lo - 1});
      next = hi + 1;
    }
    if (next <= utf8::kMaxCodePoint) complement.push_back({next, utf8::kMaxCodePoint});
    merged = std::move(complement);
  }
  CodeRanges out;
  for (const auto& [lo, hi] : merged) {
    if (hi < kSurrogateFirst || lo > kSurrogateLast) {
      out.push_back({lo, hi});
      continue;
    }
    if (lo < kSurrogateFirst) out.push_back({lo, kSurrogateFirst - 1});
    if (hi > kSurrogateLast) out.push_back({kSurrogateLast + 1, hi});
  }
  return out;
}

// One byte set per byte of an encoding.
using ByteRun = std::vector<ByteSet>;

// The UTF-8 encodings of lo..hi as runs of byte ranges: split where the
// encoded length changes, then where a continuation byte would not cover
// its whole range (the way RE2 and Rust's regex-syntax do it), so that each
// run is exactly the encodings of the code points between its ends. The
// recursion is a few levels deep (three lengths, three continuation bytes).
void utf8_runs(uint32_t lo, uint32_t hi, std::vector<ByteRun>& out) {
  for (uint32_t max : {0x7Fu, 0x7FFu, 0xFFFFu}) {
    if (lo <= max && max < hi) {
      utf8_runs(lo, max, out);
      utf8_runs(max + 1, hi, out);
      return;
    }
  }
  for (int i = 1; i < 4; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) == (hi & ~m)) continue;
    if ((lo & m) != 0) {
      utf8_runs(lo, lo | m, out);
      utf8_runs((lo | m) + 1, hi, out);
      return;
    }
    if ((hi & m) != m) {
      utf8_runs(lo, (hi & ~m) - 1, out);
      utf8_runs(hi & ~m, hi, out);
      return;
    }
  }
  const std::string a = utf8::encode(lo), b = utf8::encode(hi);
  ByteRun run;
  for (size_t k = 0; k < a.size(); ++k) {
    run.push_back(ByteSet::range(static_cast<uint8_t>(a[k]), static_cast<uint8_t>(b[k])));
  }
  out.push_back(std::move(run));
}

// `runs` as alternatives from byte `depth` on, as a trie: runs with the same
// byte set there share it, and runs that end there merge into one set, so
// the matcher follows one path per character. (The sets of two runs at one
// depth are equal or disjoint: they come from disjoint code point ranges.)
std::vector<Seq> run_alternatives(GrammarBuilder& b, std::vector<ByteRun> runs, size_t depth) {
  ByteSet last;
  std::vector<std::pair<ByteSet, std::vector<ByteRun>>> groups;
  for (ByteRun& r : runs) {
    if (r.size() == depth + 1) {
      last.add(r[depth]);
      continue;
    }
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == r[depth]; });
    if (it == groups.end()) it = groups.insert(groups.end(), {r[depth], {}});
    it->second.push_back(std::move(r));
  }
  std::vector<Seq> alts;
  if (!last.empty()) alts.push_back({b.bytes(last)});
  for (auto& [first, rest] : groups) {
    Seq s{b.bytes(first)};
    std::vector<Seq> tails = run_alternatives(b, std::move(rest), depth + 1);
    if (tails.size() == 1) {
      s.insert(s.end(), tails[0].begin(), tails[0].end());
    } else {
      s.push_back(b.ref(b.rule(std::move(tails))));
    }
    alts.push_back(std::move(s));
  }
  return alts;
}

// One code point of `ranges` (non-empty, normalized), as well-formed UTF-8.
Seq code_point_class(GrammarBuilder& b, const CodeRanges& ranges) {
  std::vector<ByteRun> runs;
  for (const auto& [lo, hi] : ranges) utf8_runs(lo, hi, runs);
  std::vector<Seq> alts = run_alternatives(b, std::move(runs), 0);
  if (alts.size() == 1) return alts[0];
  return {b.ref(b.rule(std::move(alts)))};
}

// ---- Checks on the built grammar ----

// The rules that can match the empty text (bytes_ok false), or some finite
// text (bytes_ok true): the least fixpoint, by a worklist of the
// alternatives that wait on each rule. O(symbols).
std::vector<bool> rules_that_finish(const Grammar& g, bool bytes_ok) {
  const size_t n = g.n_rules();
  std::vector<bool> yes(n, false);
  std::vector<uint32_t> owner, pending, queue;
  std::vector<std::vector<uint32_t>> waiting(n);  // rule -> alternatives that contain it, once per occurrence
  for (uint32_t r = 0; r < n; ++r) {
    for (uint32_t start : g.alternatives(r)) {
      uint32_t count = 0;
      bool possible = true;
      for (uint32_t p = start; g.sym(p).kind != Sym::kEnd && possible; ++p) {
        if (g.sym(p).kind == Sym::kRule) ++count;
        else possible = bytes_ok;
      }
      if (!possible) continue;
      const auto a = static_cast<uint32_t>(owner.size());
      owner.push_back(r);
      pending.push_back(count);
      for (uint32_t p = start; g.sym(p).kind != Sym::kEnd; ++p) {
        if (g.sym(p).kind == Sym::kRule) waiting[g.sym(p).value].push_back(a);
      }
      if (count == 0 && !yes[r]) {
        yes[r] = true;
        queue.push_back(r);
      }
    }
  }
  while (!queue.empty()) {
    const uint32_t s = queue.back();
    queue.pop_back();
    for (uint32_t a : waiting[s]) {
      if (--pending[a] == 0 && !yes[owner[a]]) {
        yes[owner[a]] = true;
        queue.push_back(owner[a]);
      }
    }
  }
  return yes;
}

// The rules of one left-recursive cycle (empty: none). Edge r -> s when s can
// come first in an alternative of r, after rules that may match nothing. A
// repetition's own loop (an unnamed rule that ends an alternative with
// itself: `x*` where x may match nothing) is not one: the matcher's
// expansion visits such a loop once. Nodes that start or end no cycle are
// peeled off from both sides; from any node left, following edges among the
// rest must come back to a node already seen. O(symbols).
std::vector<uint32_t> left_recursive_cycle(const Grammar& g, const std::vector<bool>& nullable,
                                           const std::vector<bool>& named) {
  const size_t n = g.n_rules();
  std::vector<std::vector<uint32_t>> succ(n), pred(n);
  for (uint32_t r = 0; r < n; ++r) {
    for (uint32_t start : g.alternatives(r)) {
      for (uint32_t p = start; g.sym(p).kind == Sym::kRule; ++p) {
        const uint32_t s = g.sym(p).value;
        const bool own_loop = s == r && !named[r] && g.sym(p + 1).kind == Sym::kEnd;
        if (!own_loop) {
          succ[r].push_back(s);
          pred[s].push_back(r);
        }
        if (!nullable[s]) break;
      }
    }
  }
  std::vector<bool> gone(n, false);
  const auto peel = [&](const std::vector<std::vector<uint32_t>>& in, const std::vector<std::vector<uint32_t>>& out) {
    std::vector<uint32_t> degree(n, 0), queue;
    for (uint32_t r = 0; r < n; ++r) {
      for (uint32_t s : in[r]) degree[r] += !gone[s];
      if (!gone[r] && degree[r] == 0) queue.push_back(r);
    }
    while (!queue.empty()) {
      const uint32_t r = queue.back();
      queue.pop_back();
      gone[r] = true;
      for (uint32_t s : out[r]) {
        if (!gone[s] && --degree[s] == 0) queue.push_back(s);
      }
    }
  };
  peel(pred, succ);  // no edge in: starts no cycle
  peel(succ, pred);  // no edge out: ends no cycle
  const auto left = std::find(gone.begin(), gone.end(), false);
  if (left == gone.end()) return {};
  std::vector<int64_t> seen_at(n, -1);
  std::vector<uint32_t> path;
  auto r = static_cast<uint32_t>(left - gone.begin());
  while (seen_at[r] < 0) {
    seen_at[r] = static_cast<int64_t>(path.size());
    path.push_back(r);
    r = *std::find_if(succ[r].begin(), succ[r].end(), [&](uint32_t s) { return !gone[s]; });
  }
  return {path.begin() + seen_at[r], path.end()};
}

// ---- The parser ----

struct GbnfError {
  Status status;
};

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : t_(text) {}

  Result<std::shared_ptr<const Grammar>> run() {
    try {
      skip_space(/*newlines=*/true);
      while (i_ < t_.size()) definition();
      return finish();
    } catch (const GbnfError& e) {
      return e.status;
    }
  }

 private:
  static constexpr size_t kNone = SIZE_MAX;
  struct Named {
    std::string name;
    uint32_t rule;
    size_t first_use = kNone;   // offset of the first reference
    size_t defined_at = kNone;  // offset of the definition
  };

  bool at(char c) const { return i_ < t_.size() && t_[i_] == c; }
  static bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
  }

  // "line 3, column 7" (columns in characters).
  std::string where(size_t offset) const {
    size_t line = 1, column = 1;
    for (size_t k = 0; k < offset && k < t_.size(); ++k) {
      if (t_[k] == '\n') {
        ++line, column = 1;
      } else if (!utf8::is_continuation(t_[k])) {
        ++column;
      }
    }
    return "line " + std::to_string(line) + ", column " + std::to_string(column);
  }
  // What stands at `offset`, for a message.
  std::string describe(size_t offset) const {
    if (offset >= t_.size()) return "the end of the grammar";
    const char c = t_[offset];
    if (c == '\n' || c == '\r') return "the end of the line";
    if (c > 0x20 && c < 0x7f) return std::string("'") + c + "'";
    size_t pos = offset;
    char buf[16];
    std::snprintf(buf, sizeof buf, "U+%04X", utf8::decode_one(t_, &pos));
    return buf;
  }
  [[noreturn]] void fail(const std::string& what, size_t offset, ErrorReason reason = ErrorReason::kInvalidValue) const {
    throw GbnfError{invalid_argument(where(offset) + ": " + what, {.reason = reason})};
  }

  // Spaces, tabs and comments; line ends too when `newlines`.
  void skip_space(bool newlines) {
    while (i_ < t_.size()) {
      const char c = t_[i_];
      if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++i_;
      } else if (c == '#') {
        while (i_ < t_.size() && t_[i_] != '\n' && t_[i_] != '\r') ++i_;
      } else {
        break;
      }
    }
  }

  std::string rule_name() {
    const size_t start = i_;
    while (i_ < t_.size() && name_char(t_[i_])) ++i_;
    if (i_ == start) fail("expected a rule name, found " + describe(i_), i_);
    return std::string(t_.substr(start, i_ - start));
  }

  size_t named(const std::string& name) {
    auto [it, inserted] = by_name_.try_emplace(name, named_.size());
    if (inserted) named_.push_back({.name = name, .rule = b_.new_rule()});
    return it->second;
  }

  // name ::= alternatives, to the end of the line.
  void definition() {
    const size_t start = i_;
    const size_t k = named(rule_name());
    if (named_[k].defined_at != kNone) {
      fail("rule '" + named_[k].name + "' is defined twice (first at " + where(named_[k].defined_at) + ")", start);
    }
    named_[k].defined_at = start;
    skip_space(false);
    if (t_.substr(i_, 3) != "::=") fail("expected '::=' after '" + named_[k].name + "', found " + describe(i_), i_);
    i_ += 3;
    skip_space(true);
    std::vector<Seq> alts = alternatives(0, /*nested=*/false);
    bool line_end = false;
    for (char c : {'\r', '\n'}) {
      if (at(c)) ++i_, line_end = true;
    }
    if (!line_end && i_ < t_.size()) fail("expected an item, '|' or the end of the line, found " + describe(i_), i_);
    b_.define(named_[k].rule, std::move(alts));
    if (b_.too_large()) too_large();
    skip_space(true);
  }

  std::vector<Seq> alternatives(int depth, bool nested) {
    std::vector<Seq> alts{sequence(depth, nested)};
    while (at('|')) {
      ++i_;
      skip_space(true);
      alts.push_back(sequence(depth, nested));
    }
    return alts;
  }

  // Items up to `|`, `)` or (outside a group) the end of the line.
  Seq sequence(int depth, bool nested) {
    Seq out;
    size_t last = kNone;  // where the last item starts in `out` (what a repetition repeats)
    for (;;) {
      const size_t start = i_;
      if (i_ >= t_.size()) break;
      const char c = t_[i_];
      if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (last == kNone) fail(std::string("'") + c + "' has nothing to repeat", start);
        const Seq item(out.begin() + static_cast<ptrdiff_t>(last), out.end());
        out.resize(last);
        const Seq repeated = repetition(item, nested);
        out.insert(out.end(), repeated.begin(), repeated.end());
      } else if (c == '<' || c == '!') {
        fail("token references (<[id]>, <text>, !<…>) are not supported: this grammar is over text", start,
             ErrorReason::kUnsupportedValue);
      } else {
        last = out.size();
        if (c == '"') {
          literal(out);
        } else if (c == '[') {
          const Seq cls = char_class();
          out.insert(out.end(), cls.begin(), cls.end());
        } else if (c == '.') {
          ++i_;
          if (any_.empty()) any_ = code_point_class(b_, normalize({{0, utf8::kMaxCodePoint}}, false));
          out.insert(out.end(), any_.begin(), any_.end());
        } else if (c == '(') {
          group(out, depth);
        } else if (name_char(c)) {
          const size_t k = named(rule_name());
          if (named_[k].first_use == kNone) named_[k].first_use = start;
          out.push_back(b_.ref(named_[k].rule));
        } else {
          break;
        }
      }
      skip_space(nested);
    }
    return out;
  }

  // ( alternatives ), appended to `out`: inline when it is one sequence.
  void group(Seq& out, int depth) {
    const size_t open = i_++;
    if (depth + 1 > kMaxGbnfDepth) {
      fail("groups nested deeper than " + std::to_string(kMaxGbnfDepth), open, ErrorReason::kUnsupportedValue);
    }
    skip_space(true);
    std::vector<Seq> alts = alternatives(depth + 1, /*nested=*/true);
    if (!at(')')) fail("expected ')' to close the group opened at " + where(open) + ", found " + describe(i_), i_);
    ++i_;
    if (alts.size() == 1) {
      out.insert(out.end(), alts[0].begin(), alts[0].end());
    } else {
      out.push_back(b_.ref(b_.rule(std::move(alts))));
    }
  }

  // * + ? {m} {m,} {m,n} {,n} at i_, applied to `item`.
  Seq repetition(const Seq& item, bool nested) {
    const size_t start = i_;
    int64_t min = 0, max = -1;
    const char c = t_[i_++];
    if (c == '+') {
      min = 1;
    } else if (c == '?') {
      max = 1;
    } else if (c == '{') {
      skip_space(nested);
      min = std::max<int64_t>(count(), 0);
      skip_space(nested);
      max = min;
      if (at(',')) {
        ++i_;
        skip_space(nested);
        max = count();
        skip_space(nested);
      }
      if (!at('}')) fail("expected '}' to close the repetition, found " + describe(i_), i_);
      ++i_;
      if (min > kMaxRepeat || max > kMaxRepeat) {
        fail("a repetition count above " + std::to_string(kMaxRepeat), start, ErrorReason::kUnsupportedValue);
      }
      if (max >= 0 && min > max) fail("a repetition {m,n} with m > n", start);
    }
    if (min == 1 && max == 1) return item;
    if (min == 0 && max == 1) return {b_.ref(b_.optional(item))};
    if (min == 0 && max < 0) return {b_.ref(b_.star(item))};
    return {b_.ref(b_.repeat(item, min, max))};
  }

  // Decimal digits at i_ (saturated past kMaxRepeat); -1 when there are none.
  int64_t count() {
    if (i_ >= t_.size() || t_[i_] < '0' || t_[i_] > '9') return -1;
    int64_t v = 0;
    for (; i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9'; ++i_) v = std::min<int64_t>(v * 10 + (t_[i_] - '0'), kMaxRepeat + 1);
    return v;
  }

  // "…": its bytes, appended to `out`.
  void literal(Seq& out) {
    const size_t open = i_++;
    std::string bytes;
    while (!at('"')) {
      if (i_ >= t_.size()) fail("unterminated string (opened at " + where(open) + ")", open);
      utf8::append(code_point(), &bytes);
    }
    ++i_;
    b_.append_literal(out, bytes);
  }

  // […] or [^…]: one code point of the class.
  Seq char_class() {
    const size_t open = i_++;
    const bool negated = at('^');
    if (negated) ++i_;
    CodeRanges ranges;
    while (!at(']')) {
      if (i_ >= t_.size()) fail("unterminated character class (opened at " + where(open) + ")", open);
      const size_t from = i_;
      const uint32_t lo = code_point();
      uint32_t hi = lo;
      if (at('-') && i_ + 1 < t_.size() && t_[i_ + 1] != ']') {
        ++i_;
        hi = code_point();
        if (hi < lo) fail("a range out of order", from);
      }
      ranges.push_back({lo, hi});
    }
    ++i_;
    const CodeRanges set = normalize(std::move(ranges), negated);
    if (set.empty()) fail("a character class that matches no character", open);
    return code_point_class(b_, set);
  }

  // One character of a literal or class at i_: itself (UTF-8) or an escape.
  uint32_t code_point() {
    const size_t start = i_;
    if (t_[i_] != '\\') {
      if (utf8::valid_sequence_length(t_, i_) == 0) fail("invalid UTF-8", start);
      return utf8::decode_one(t_, &i_);
    }
    if (i_ + 1 >= t_.size()) fail("a backslash at the end of the grammar", start);
    const char e = t_[i_ + 1];
    i_ += 2;
    switch (e) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case '\\': case '"': case '[': case ']': case '-': return static_cast<uint32_t>(e);
      case 'x': return hex(2, start);
      case 'u': return hex(4, start);
      case 'U': return hex(8, start);
      default: break;
    }
    fail("unknown escape: a backslash before " + describe(start + 1) +
             " (known: \\n \\r \\t \\\\ \\\" \\[ \\] \\- \\xHH \\uHHHH \\UHHHHHHHH)",
         start);
  }

  uint32_t hex(int digits, size_t start) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k, ++i_) {
      const char h = i_ < t_.size() ? t_[i_] : '\0';
      const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
      if (d < 0) fail("expected " + std::to_string(digits) + " hex digits after " + describe(start + 1), start);
      v = v * 16 + static_cast<uint32_t>(d);
    }
    if (v > utf8::kMaxCodePoint) fail("a code point above U+10FFFF", start);
    if (v >= kSurrogateFirst && v <= kSurrogateLast) fail("a surrogate code point (UTF-8 cannot encode it)", start);
    return v;
  }

  [[noreturn]] void too_large() const {
    throw GbnfError{invalid_argument("the grammar is too large: more than " + std::to_string(GrammarBuilder::kMaxSyms) +
                                         " symbols once its repetitions are written out",
                                     {.reason = ErrorReason::kUnsupportedValue})};
  }

  // Every rule defined, a root, then the checks on the built grammar.
  Result<std::shared_ptr<const Grammar>> finish() {
    for (const Named& n : named_) {
      if (n.defined_at == kNone) fail("undefined rule '" + n.name + "'", n.first_use);
    }
    const auto root = by_name_.find("root");
    if (root == by_name_.end()) {
      return invalid_argument("no rule 'root' (the rule the whole output must match)", {.reason = ErrorReason::kInvalidValue});
    }
    if (b_.too_large()) too_large();
    b_.set_bounded();
    ASSIGN_OR_RETURN(Grammar g, b_.build(named_[root->second].rule));
    std::vector<int64_t> name_of(g.n_rules(), -1);
    std::vector<bool> is_named(g.n_rules(), false);
    for (size_t k = 0; k < named_.size(); ++k) {
      name_of[named_[k].rule] = static_cast<int64_t>(k);
      is_named[named_[k].rule] = true;
    }
    // Left recursion: named after the rule of the cycle defined first.
    const std::vector<uint32_t> cycle = left_recursive_cycle(g, rules_that_finish(g, /*bytes_ok=*/false), is_named);
    if (!cycle.empty()) {
      int64_t k = -1;
      for (uint32_t r : cycle) {
        if (name_of[r] >= 0 && (k < 0 || named_[name_of[r]].defined_at < named_[k].defined_at)) k = name_of[r];
      }
      if (k < 0) k = root->second;  // not reached: unnamed rules loop only on themselves
      fail("rule '" + named_[k].name +
               "' is left-recursive: it can reach itself before matching any character (write the "
               "repetition with * or + instead)",
           named_[k].defined_at);
    }
    // Rules the root can reach that never finish (each alternative needs one of them again).
    const std::vector<bool> finishes = rules_that_finish(g, /*bytes_ok=*/true);
    std::vector<bool> reached(g.n_rules(), false);
    std::vector<uint32_t> stack{g.root()};
    reached[g.root()] = true;
    while (!stack.empty()) {
      const uint32_t r = stack.back();
      stack.pop_back();
      for (uint32_t start : g.alternatives(r)) {
        for (uint32_t p = start; g.sym(p).kind != Sym::kEnd; ++p) {
          if (g.sym(p).kind == Sym::kRule && !reached[g.sym(p).value]) {
            reached[g.sym(p).value] = true;
            stack.push_back(g.sym(p).value);
          }
        }
      }
    }
    std::string endless;
    size_t first = kNone;
    for (const Named& n : named_) {
      if (!reached[n.rule] || finishes[n.rule]) continue;
      endless += (endless.empty() ? "'" : ", '") + n.name + "'";
      first = std::min(first, n.defined_at);
    }
    if (first != kNone) {
      fail("rules that can never finish matching (each of their alternatives needs one of them again): " + endless, first);
    }
    return std::make_shared<const Grammar>(std::move(g));
  }

  std::string_view t_;
  size_t i_ = 0;
  GrammarBuilder b_;
  std::vector<Named> named_;
  std::unordered_map<std::string, size_t> by_name_;
  Seq any_;  // `.`, made on first use
};

}  // namespace

Result<std::shared_ptr<const Grammar>> compile_gbnf(std::string_view text) {
  if (text.size() > kMaxGbnfBytes) {
    return invalid_argument("grammar longer than " + std::to_string(kMaxGbnfBytes) + " bytes",
                            {.reason = ErrorReason::kUnsupportedValue});
  }
  return GbnfParser(text).run();
}

}  // namespace zl::grammar
