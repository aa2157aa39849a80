// The bounded regex engine (guard/regex.h): a recursive-descent parser to a
// small AST, sizes computed on the AST, then a Thompson NFA built back to
// front (bounded repetition unrolled), simulated Pike-style without captures.
#include "guard/regex.h"

#include <unicode/uchar.h>

#include <algorithm>
#include <type_traits>

#include "core/utf8.h"
#include "guard/normalize.h"

namespace zl::guard {

namespace {

struct Node {
  enum Type { kSet, kCat, kAlt, kRepeat } type;
  int set = -1;            // kSet
  std::vector<int> kids;   // kCat, kAlt; kRepeat: one
  int min = 1, max = 1;    // kRepeat
};

size_t utf8_len(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

}  // namespace

bool BoundedRegex::Set::contains(uint32_t cp) const {
  bool in = false;
  for (const auto& [lo, hi] : ranges) {
    if (cp >= lo && cp <= hi) {
      in = true;
      break;
    }
  }
  return in != negated;
}

// Parses and compiles one pattern into a BoundedRegex.
class RegexCompiler {
 public:
  RegexCompiler(std::string_view p, BoundedRegex* re) : p_(p), re_(re) {}

  Status run() {
    int root = -1;
    RETURN_IF_ERROR(parse_alt(&root));
    if (pos_ < p_.size()) return error("unbalanced ')'");
    if (min_len(root) == 0) return invalid_argument("pattern can match the empty string");
    const size_t max = max_len(root);
    if (max > kMaxRegexBytes) {
      return invalid_argument("pattern can match " + std::to_string(max) + " bytes; at most " +
                              std::to_string(kMaxRegexBytes));
    }
    re_->max_len_ = max;
    const int32_t match = add_state({.op = BoundedRegex::State::kMatch});
    re_->start_ = emit(root, match);
    if (re_->states_.size() > kMaxRegexStates) {
      return invalid_argument("pattern expands to more than " + std::to_string(kMaxRegexStates) + " states");
    }
    return Status::ok_status();
  }

 private:
  Status error(std::string what) const {
    return invalid_argument(what + " at offset " + std::to_string(pos_));
  }
  bool eat(char c) {
    if (pos_ < p_.size() && p_[pos_] == c) return ++pos_, true;
    return false;
  }
  int add_node(Node n) {
    nodes_.push_back(std::move(n));
    return static_cast<int>(nodes_.size()) - 1;
  }

  Status parse_alt(int* out) {
    std::vector<int> alts;
    while (true) {
      int cat = -1;
      RETURN_IF_ERROR(parse_cat(&cat));
      alts.push_back(cat);
      if (!eat('|')) break;
    }
    *out = alts.size() == 1 ? alts[0] : add_node({.type = Node::kAlt, .kids = alts});
    return Status::ok_status();
  }

  Status parse_cat(int* out) {
    std::vector<int> items;
    while (pos_ < p_.size() && p_[pos_] != '|' && p_[pos_] != ')') {
      int atom = -1;
      RETURN_IF_ERROR(parse_atom(&atom));
      RETURN_IF_ERROR(parse_quantifier(&atom));
      items.push_back(atom);
    }
    *out = add_node({.type = Node::kCat, .kids = items});
    return Status::ok_status();
  }

  Status parse_quantifier(int* atom) {
    if (pos_ >= p_.size()) return Status::ok_status();
    const char c = p_[pos_];
    if (c == '*' || c == '+') {
      return error(std::string("unbounded quantifier '") + c + "' (use {n,m})");
    }
    int min = 1, max = 1;
    if (c == '?') {
      ++pos_;
      min = 0;
    } else if (c == '{') {
      ++pos_;
      RETURN_IF_ERROR(parse_number(&min));
      max = min;
      if (eat(',')) {
        if (pos_ < p_.size() && p_[pos_] == '}') return error("unbounded quantifier '{n,}' (use {n,m})");
        RETURN_IF_ERROR(parse_number(&max));
      }
      if (!eat('}')) return error("expected '}'");
      if (max < min) return error("quantifier {n,m} with m < n");
    } else {
      return Status::ok_status();
    }
    eat('?');  // lazy: matches are longest anyway
    if (pos_ < p_.size() && (p_[pos_] == '*' || p_[pos_] == '+' || p_[pos_] == '{' || p_[pos_] == '?')) {
      return error("quantifier after a quantifier");
    }
    *atom = add_node({.type = Node::kRepeat, .kids = {*atom}, .min = min, .max = max});
    return Status::ok_status();
  }

  Status parse_number(int* out) {
    const size_t start = pos_;
    int v = 0;
    while (pos_ < p_.size() && p_[pos_] >= '0' && p_[pos_] <= '9') {
      v = v * 10 + (p_[pos_++] - '0');
      if (v > 1000) return error("repeat count over 1000");
    }
    if (pos_ == start) return error("expected a number");
    *out = v;
    return Status::ok_status();
  }

  Status parse_atom(int* out) {
    const char c = p_[pos_];
    if (c == '(') {
      ++pos_;
      if (eat('?')) {
        if (!eat(':')) return error("unsupported group '(?' (only '(?:' is)");
      }
      if (++depth_ > kMaxDepth) return error("groups nested deeper than " + std::to_string(kMaxDepth));
      RETURN_IF_ERROR(parse_alt(out));
      --depth_;
      if (!eat(')')) return error("missing ')'");
      return Status::ok_status();
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') return error(std::string("nothing to repeat before '") + c + "'");
    if (c == '^' || c == '$') return error(std::string("anchor '") + c + "' is not supported");
    BoundedRegex::Set set;
    if (c == '[') {
      ++pos_;
      RETURN_IF_ERROR(parse_class(&set));
    } else if (c == '.') {
      ++pos_;
      set = {.ranges = {{'\n', '\n'}}, .negated = true};
    } else if (c == '\\') {
      RETURN_IF_ERROR(parse_escape(&set, /*in_class=*/false));
    } else {
      const uint32_t cp = utf8::decode_one(p_, &pos_);
      set.ranges.push_back({cp, cp});
    }
    *out = add_set(std::move(set));
    return Status::ok_status();
  }

  // After '\\'. In a class, \d etc. add ranges (negated forms are refused there).
  Status parse_escape(BoundedRegex::Set* set, bool in_class) {
    ++pos_;
    if (pos_ >= p_.size()) return error("trailing '\\'");
    const char e = p_[pos_++];
    auto add = [&](std::initializer_list<std::pair<uint32_t, uint32_t>> r, bool neg) -> Status {
      if (neg && in_class) return error(std::string("\\") + e + " inside [...] is not supported");
      set->ranges.insert(set->ranges.end(), r);
      set->negated = set->negated || neg;
      return Status::ok_status();
    };
    switch (e) {
      case 'd': return add({{'0', '9'}}, false);
      case 'D': return add({{'0', '9'}}, true);
      case 'w': return add({{'0', '9'}, {'a', 'z'}, {'A', 'Z'}, {'_', '_'}}, false);
      case 'W': return add({{'0', '9'}, {'a', 'z'}, {'A', 'Z'}, {'_', '_'}}, true);
      case 's': return add({{' ', ' '}, {'\t', '\r'}}, false);
      case 'S': return add({{' ', ' '}, {'\t', '\r'}}, true);
      case 'n': return add({{'\n', '\n'}}, false);
      case 't': return add({{'\t', '\t'}}, false);
      case 'r': return add({{'\r', '\r'}}, false);
      default: break;
    }
    const auto u = static_cast<unsigned char>(e);
    if ((u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || u >= 0x80) {
      return error(std::string("unsupported escape '\\") + e + "'");
    }
    set->ranges.push_back({u, u});
    return Status::ok_status();
  }

  Status parse_class(BoundedRegex::Set* set) {
    const bool negated = eat('^');
    bool first = true;
    while (true) {
      if (pos_ >= p_.size()) return error("missing ']'");
      if (p_[pos_] == ']' && !first) break;
      first = false;
      uint32_t lo = 0;
      if (p_[pos_] == '\\') {
        const size_t before = set->ranges.size();
        RETURN_IF_ERROR(parse_escape(set, /*in_class=*/true));
        if (set->ranges.size() != before + 1 || set->ranges.back().first != set->ranges.back().second) continue;
        lo = set->ranges.back().first;
        set->ranges.pop_back();
      } else {
        lo = utf8::decode_one(p_, &pos_);
      }
      uint32_t hi = lo;
      if (pos_ + 1 < p_.size() && p_[pos_] == '-' && p_[pos_ + 1] != ']') {
        ++pos_;
        if (p_[pos_] == '\\') return error("escape as a range end is not supported");
        hi = utf8::decode_one(p_, &pos_);
        if (hi < lo) return error("range out of order");
      }
      set->ranges.push_back({lo, hi});
    }
    ++pos_;  // ']'
    set->negated = negated;
    return Status::ok_status();
  }

  // Adds the case-folded (and homoglyph-folded) forms of every code point
  // in small ranges, since the view is folded.
  int add_set(BoundedRegex::Set set) {
    const size_t n = set.ranges.size();
    for (size_t i = 0; i < n; ++i) {
      const auto [lo, hi] = set.ranges[i];
      if (hi - lo > 4096) continue;
      for (uint32_t cp = lo; cp <= hi; ++cp) {
        const auto c = static_cast<UChar32>(cp);
        const uint32_t f = fold_code_point(static_cast<uint32_t>(u_foldCase(c, U_FOLD_CASE_DEFAULT)), u_isUUppercase(c));
        if (f != cp) set.ranges.push_back({f, f});
      }
    }
    re_->sets_.push_back(std::move(set));
    return add_node({.type = Node::kSet, .set = static_cast<int>(re_->sets_.size()) - 1});
  }

  size_t min_len(int n) const {
    const Node& node = nodes_[n];
    size_t r = 0;
    switch (node.type) {
      case Node::kSet: return 1;
      case Node::kCat: for (int k : node.kids) r += min_len(k); return r;
      case Node::kAlt:
        r = SIZE_MAX;
        for (int k : node.kids) r = std::min(r, min_len(k));
        return r;
      case Node::kRepeat: return node.min * min_len(node.kids[0]);
    }
    return 0;
  }

  size_t max_len(int n) const {
    const Node& node = nodes_[n];
    size_t r = 0;
    switch (node.type) {
      case Node::kSet: {
        const BoundedRegex::Set& s = re_->sets_[node.set];
        if (s.negated) return 4;
        for (const auto& range : s.ranges) r = std::max(r, utf8_len(range.second));
        return r;
      }
      case Node::kCat: for (int k : node.kids) r = std::min(r + max_len(k), kMaxRegexBytes + 1); return r;
      case Node::kAlt: for (int k : node.kids) r = std::max(r, max_len(k)); return r;
      case Node::kRepeat: return std::min(node.max * max_len(node.kids[0]), kMaxRegexBytes + 1);
    }
    return 0;
  }

  int32_t add_state(BoundedRegex::State s) {
    re_->states_.push_back(s);
    return static_cast<int32_t>(re_->states_.size()) - 1;
  }
  int32_t split(int32_t a, int32_t b) { return add_state({.op = BoundedRegex::State::kSplit, .out = a, .out2 = b}); }

  // The NFA for node n followed by `next`; returns its entry state. Stops
  // growing once over the state limit (run() reports it).
  int32_t emit(int n, int32_t next) {
    if (re_->states_.size() > kMaxRegexStates) return next;
    const Node& node = nodes_[n];
    switch (node.type) {
      case Node::kSet: return add_state({.op = BoundedRegex::State::kSet, .out = next, .set = node.set});
      case Node::kCat:
        for (size_t i = node.kids.size(); i-- > 0;) next = emit(node.kids[i], next);
        return next;
      case Node::kAlt: {
        int32_t s = emit(node.kids.back(), next);
        for (size_t i = node.kids.size() - 1; i-- > 0;) s = split(emit(node.kids[i], next), s);
        return s;
      }
      case Node::kRepeat: {
        int32_t cur = next;
        for (int i = node.min; i < node.max; ++i) cur = split(emit(node.kids[0], cur), next);
        for (int i = 0; i < node.min; ++i) cur = emit(node.kids[0], cur);
        return cur;
      }
    }
    return next;
  }

  static constexpr int kMaxDepth = 32;  // the parser recurses per group
  std::string_view p_;
  size_t pos_ = 0;
  int depth_ = 0;
  BoundedRegex* re_;
  std::vector<Node> nodes_;
};

Result<BoundedRegex> BoundedRegex::compile(std::string_view pattern) {
  if (pattern.empty()) return invalid_argument("empty pattern");
  if (!utf8::is_valid(pattern)) return invalid_argument("pattern is not valid UTF-8");
  BoundedRegex re;
  RegexCompiler c(pattern, &re);
  RETURN_IF_ERROR(c.run());
  return re;
}

namespace {

// Pike-VM scratch: two state lists and a generation-stamped "on list" mark.
struct Scratch {
  std::vector<int32_t> cur, next, stack;
  std::vector<uint32_t> mark;
  uint32_t gen = 0;
};

// Follows the split (epsilon) edges from `st`, marking each state visited in
// this generation of `t`, and calls on_state(x) for every other state reached
// (a set or the match), first branch first: the threads' priority order.
template <typename StateVec, typename OnState>
void epsilon_closure(const StateVec& states, Scratch& t, int32_t st, OnState&& on_state) {
  t.stack.clear();
  t.stack.push_back(st);
  while (!t.stack.empty()) {
    const int32_t x = t.stack.back();
    t.stack.pop_back();
    if (t.mark[x] == t.gen) continue;
    t.mark[x] = t.gen;
    const auto& state = states[x];
    if (state.op == std::decay_t<decltype(state)>::kSplit) {
      t.stack.push_back(state.out2);
      t.stack.push_back(state.out);
    } else {
      on_state(x);
    }
  }
}

}  // namespace

std::pair<size_t, bool> BoundedRegex::run(std::string_view v, size_t s) const {
  thread_local Scratch t;
  if (t.mark.size() < states_.size()) t.mark.assign(states_.size(), 0);
  size_t best = 0;
  bool matched_here = false;
  // Adds the epsilon closure of `st` to `list`.
  auto add = [&](std::vector<int32_t>* list, int32_t st) {
    epsilon_closure(states_, t, st, [&](int32_t x) {
      if (states_[x].op == State::kMatch) {
        matched_here = true;
      } else {
        list->push_back(x);
      }
    });
  };
  if (++t.gen == 0) t.mark.assign(states_.size(), 0), t.gen = 1;
  t.cur.clear();
  add(&t.cur, start_);
  size_t p = s;
  while (!t.cur.empty() && p < v.size()) {
    size_t q = p;
    const uint32_t cp = utf8::decode_one(v, &q);
    if (++t.gen == 0) t.mark.assign(states_.size(), 0), t.gen = 1;
    t.next.clear();
    matched_here = false;
    for (int32_t x : t.cur) {
      if (sets_[states_[x].set].contains(cp)) add(&t.next, states_[x].out);
    }
    if (matched_here) best = q - s;
    t.cur.swap(t.next);
    p = q;
  }
  return {best, !t.cur.empty() && p >= v.size()};
}

size_t BoundedRegex::earliest_live(std::string_view v, size_t from, const std::vector<char>& starts) const {
  // Threads are kept in order of their start (older first; a new thread is
  // added after the stepped ones), so when two reach one state the earlier
  // start wins and the first live thread at the end has the smallest start.
  thread_local Scratch t;
  thread_local std::vector<size_t> cur_start, next_start;
  if (t.mark.size() < states_.size()) t.mark.assign(states_.size(), 0);
  auto add = [&](std::vector<int32_t>* list, std::vector<size_t>* list_start, int32_t st, size_t start) {
    epsilon_closure(states_, t, st, [&](int32_t x) {
      if (states_[x].op == State::kSet) {
        list->push_back(x);
        list_start->push_back(start);
      }
    });
  };
  t.cur.clear();
  cur_start.clear();
  size_t p = from;
  while (p < v.size()) {
    if (++t.gen == 0) t.mark.assign(states_.size(), 0), t.gen = 1;
    for (int32_t x : t.cur) t.mark[x] = t.gen;  // the stepped list owns its states this round
    if (starts[p - from]) add(&t.cur, &cur_start, start_, p);
    size_t q = p;
    const uint32_t cp = utf8::decode_one(v, &q);
    if (++t.gen == 0) t.mark.assign(states_.size(), 0), t.gen = 1;
    t.next.clear();
    next_start.clear();
    for (size_t i = 0; i < t.cur.size(); ++i) {
      const int32_t x = t.cur[i];
      if (sets_[states_[x].set].contains(cp)) add(&t.next, &next_start, states_[x].out, cur_start[i]);
    }
    t.cur.swap(t.next);
    cur_start.swap(next_start);
    p = q;
  }
  return t.cur.empty() ? v.size() : cur_start.front();
}

size_t BoundedRegex::match(std::string_view v, size_t s) const { return run(v, s).first; }
bool BoundedRegex::live_at_end(std::string_view v, size_t s) const { return run(v, s).second; }

}  // namespace zl::guard
