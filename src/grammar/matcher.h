// Runs a Grammar over bytes: a pushdown automaton whose state is the set of
// parse stacks still alive (several when the grammar is ambiguous at this
// point, e.g. an optional property that may come or not).
//
// Stacks are interned: a stack node is (position in the grammar, the node
// below it), and equal stacks share one id, so a state is a sorted vector of
// node ids, compared and hashed cheaply, and the transition of one node by
// one byte is computed once and memoized. A state's canonical nodes always
// have a byte set on top; kAccept stands for the empty stack (the input so
// far is a complete sentence).
//
// Costs: advance() is O(stacks in the state) memo lookups after the first
// time a (node, byte) pair is seen; the first time, an expansion: each
// (position, stack) pair once, at most kMaxExpandSteps of them (iterative:
// a long chain of rules costs no native stack). Memory grows with the
// distinct stacks seen (bounded by the input: one output's worth), and is
// freed with the matcher.
// A client's grammar (Grammar::bounded, GBNF) can be ambiguous enough for
// the stacks alive to grow exponentially with the input (`x ::= "a" x "b" |
// "a" x "c" | ""` after n a's: 2^n). For such a grammar a state keeps at
// most kMaxStacks stacks, the oldest (lowest ids): every text accepted still
// follows the grammar, though some of its texts may no longer be reachable;
// and once the matcher holds kMaxNodes nodes, a byte that needs a new
// expansion is refused (memory stays bounded, the output stops there).
// Thread-safety: one matcher per sequence, used by one thread at a time; the
// Grammar is shared and immutable.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "grammar/grammar.h"

namespace zl::grammar {

class Matcher {
 public:
  using State = std::vector<uint32_t>;  // sorted, unique node ids
  static constexpr uint32_t kAccept = 0;
  // An expansion that visits more (position, stack) pairs than this without
  // consuming a byte is cut short (only a left-recursive grammar, whose
  // stacks grow without end, gets there).
  static constexpr size_t kMaxExpandSteps = 1 << 20;
  // Bounded grammars only (see above).
  static constexpr size_t kMaxStacks = 1024;
  static constexpr size_t kMaxNodes = 1 << 18;

  explicit Matcher(std::shared_ptr<const Grammar> grammar);

  const Grammar& grammar() const { return *grammar_; }
  const State& state() const { return state_; }
  // The bytes so far form a complete sentence.
  bool accepting() const { return !state_.empty() && state_.front() == kAccept; }
  // Some byte may still follow.
  bool can_continue() const { return state_.size() > (accepting() ? 1u : 0u); }
  bool dead() const { return state_.empty(); }

  // Consumes one byte; false (state unchanged) when the grammar refuses it.
  bool advance(uint8_t byte);
  // Consumes all of `bytes`, or none of them (false).
  bool advance(std::string_view bytes);
  // Back to the grammar's start.
  void reset();

  // The state reached from `from` by `byte`, into `to` (cleared first;
  // empty: refused). `from` must come from this matcher.
  void step(const State& from, uint8_t byte, State& to);
  // Whether some stack of `from` has `byte` in its top set (cheaper than step).
  bool may_take(const State& from, uint8_t byte) const;

  // The bytes that lead from `s` back to `s` (a loop such as a string's
  // content): a run of them anywhere keeps the state. Memoized per state.
  const ByteSet& self_loops(const State& s);

  size_t n_nodes() const { return nodes_.size(); }

  // A work bound for a stretch of calls (a token mask's trie walk). The
  // units are stacks scanned (step, may_take, self_loops' lookup), successor
  // entries merged by step(), and (position, stack) pairs visited by
  // expansions, kExpandWork each (hash-set and intern lookups): roughly what
  // each costs, and deterministic for a given grammar and input. Once
  // `units` are spent, step() refuses every byte until end_budget() (as at
  // the node bound: what was accepted still follows the grammar, some texts
  // are no longer reachable). A grammar ambiguous enough that a byte merges
  // thousands of stacks' successors (1000 optional letters written out one
  // by one: ~10^6 entries a byte over most of a 151k vocabulary's trie)
  // would otherwise hold the engine thread for minutes.
  static constexpr uint64_t kExpandWork = 32;
  void start_budget(uint64_t units) { work_ = 0, work_limit_ = units; }
  void end_budget() { work_limit_ = UINT64_MAX; }
  // Whether the current budget ran out (read it before end_budget()).
  bool budget_spent() const { return work_ >= work_limit_; }
  uint64_t work() const { return work_; }

  struct StateHash {
    size_t operator()(const State& s) const;
  };

 private:
  static constexpr uint32_t kNoParent = UINT32_MAX;
  struct Node {
    uint32_t pos;     // next symbol to match (kBytes), or a continuation (kBytes/kRule)
    uint32_t parent;  // the node below, kNoParent at the bottom
  };
  uint32_t intern(uint32_t pos, uint32_t parent);
  // The canonical nodes for "match from pos, then continue with parent".
  // One expansion visits each (pos, parent) once (expanded_): a repetition
  // of something that matches the empty string in several ways (the
  // pattern `(|)*`) would otherwise branch exponentially without consuming
  // a byte. expand_from() starts an expansion; expand() runs the pairs in
  // todo_ and those they lead to.
  void expand_from(uint32_t pos, uint32_t parent, State& out);
  void expand(State& out);
  // The memoized successors of canonical node `node` by `byte` (sorted).
  std::pair<uint32_t, uint32_t> successors(uint32_t node, uint8_t byte);

  std::shared_ptr<const Grammar> grammar_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, uint32_t> index_;       // (pos, parent) -> node
  std::unordered_map<uint64_t, std::pair<uint32_t, uint32_t>> memo_;  // (node, byte) -> [begin, end) in results_
  std::vector<uint32_t> results_;
  std::unordered_map<State, ByteSet, StateHash> loops_;
  ByteSet cut_loops_;  // self_loops() of a call cut by the budget
  State start_;
  State state_;
  State scratch_;
  mutable uint64_t work_ = 0;  // units since start_budget()
  uint64_t work_limit_ = UINT64_MAX;
  std::vector<uint32_t> mark_;  // per node: the step() that last added it (epoch_)
  uint32_t epoch_ = 0;
  std::unordered_set<uint64_t> expanded_;  // (pos, parent) pairs of the current expansion
  std::vector<std::pair<uint32_t, uint32_t>> todo_;  // (pos, parent) pairs still to expand
};

}  // namespace zl::grammar
