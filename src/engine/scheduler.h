// The scheduler: which sequences run in the next forward pass, and how many tokens each.
//
// Design (vLLM v1 style)
// ----------------------
// There is no prefill phase and no decode phase. A sequence is a token list (prompt, then the
// tokens generated so far) and n_computed, the number of leading tokens whose KV is in the
// cache. Each step grants a sequence some tokens to compute, positions
// [n_computed, n_computed + grant); a prompt is just a sequence far behind, so chunked
// prefill is simply a grant smaller than what is left, and decode is a grant of 1. When a
// grant reaches the end of the token list, the forward pass yields logits for the last
// position and the caller samples the next token (ScheduledSeq::samples).
//
// Each schedule():
//   1. removes sequences cancelled since the last step (frees their blocks);
//   2. grants running sequences, decodes first (one token left to compute), then unfinished
//      prefills, each group oldest admission first, so a long prefill never starves decodes.
//      Grants are bounded by the step token budget and max_prefill_chunk. Room for the grant is
//      reserved in the sequence's block table; when the pool is short, the lowest-priority,
//      most recently admitted running sequence is preempted (blocks freed, n_computed reset,
//      back to the waiting queue to recompute later, its generated tokens now part of what it
//      recomputes) until the grant fits or the requester itself was the one preempted;
//   3. if nothing was preempted, admits waiting sequences in order (priority high first, FCFS
//      within a priority; a preempted sequence keeps its arrival order and so goes back to the
//      front of its priority) while a running slot, budget and blocks remain. Admission reuses
//      the longest cached prefix (BlockPool prefix caching) and reserves blocks for the first
//      chunk only; the first waiting sequence that does not fit stops admission (no skipping,
//      so a large request is not starved by small ones).
// The latency policy (SchedulePolicy::kLatency, the engine's default) replaces 2.'s prefill part
// and 3. (decodes are granted first exactly as above, so a running sequence gets one token every
// step whatever arrives: decode is never starved). Every sequence that still has to compute more
// than one token before its next sample (a prompt not yet prefilled, a preempted sequence
// recomputing; running or waiting) is a prefill candidate, ordered by priority (higher first),
// then by its tag, then arrival:
//   tag = work clock at submit + fairness (default 0.5) x prompt tokens,
// where the work clock counts every token computed since the start plus each step's fixed cost
// (step_overhead_tokens). Among requests that arrived together this is shortest prompt first;
// a later arrival goes before an earlier one only while the work done since the earlier one
// arrived is less than `fairness` times their difference in size (age against size). And a
// hard cap (the fairness bound): "later" being submitted in a later round (after a schedule()
// that the earlier one was already waiting for; those submitted between the same two steps
// arrived together), the tokens granted to later arrivals while a candidate waits for its next
// token (Sequence::n_bypassed, their decodes included) never exceed `fairness` x its own token
// count: a grant that would is not made, and a candidate that has reached it (or blocked a whole
// step) is overdue: it goes first, oldest first among overdue ones. So later arrivals delay a
// request's first token by at most about half its own prefill time, plus the step overheads and
// decodes they add meanwhile, and a long prompt is never starved by a stream of short ones.
// The first candidate may take the whole budget (the fairest one is never slowed by the others);
// the others get at most the water-filling share (the largest c with sum(min(remaining, c)) <=
// budget, at least kMinPrefillGrant): everyone's whole prompt when they all fit, a smaller grant
// per request when many wait. The step's prefill is the first batch of a plan over the ordered
// candidates that minimises
//   sum over batches of (candidates still without a token + all candidates) x batch cost,
// batch cost = step_overhead_tokens + decodes + candidates already done + the batch's tokens
// (plan_first_batch(): the sum of times to first token, plus the time until the last one, in
// tokens of compute; the overhead is measured by the engine, StepCostModel). So a burst of short
// prompts is split over a few steps, the shortest first: most requests get their first token
// after part of the burst's prefill instead of all of it, while the step overhead and the
// decodes that the early ones add to later steps keep the split coarse. A waiting candidate is
// admitted when a running slot is free and blocks for its grant can be had; the first one that
// does not get blocks stops admission in this step (no skipping on blocks), running candidates
// still get their grants. The throughput policy is 2. and 3. as written: one step takes all the
// prefill the budget holds, FCFS.
//
// Speculative drafts (engine.cc, spec/ngram_draft.h). After 2. and 3., a decode item (one token
// left to compute) whose sequence asked for a draft (set_draft()) is extended to verify it: its
// grant grows to 1 + k positions [pos, pos + k] (the last token, then the k draft tokens, which
// are not in the token list: the caller feeds them), k bounded by what it asked, what the step
// budget leaves after every decode, prefill and admission (so drafts never delay anyone's
// grant), max_step_drafts (the logits rows a step may need), and max_total_tokens (the tokens
// it may still get: n_tokens() + 1 + k <= max_total_tokens). Room for the draft is reserved
// only from free blocks (a draft never preempts; without blocks it is cut to the table's room).
// The caller reports the tokens it accepted (on_step_done with a span: the matched draft tokens
// and the one sampled after them); n_computed advances by their count, so the KV written for
// rejected draft positions lies beyond n_computed (rolled back: overwritten later), only
// accepted tokens enter the token list and so the prefix-cache hashes (blocks are committed
// when full and computed), and blocks reserved past the token list are returned at once.
//
// Before 2., a running sequence paused (set_paused: its client stopped reading) for at least
// SchedulerConfig::max_pause is pause-preempted: blocks released (its full blocks were committed
// as they filled, so they stay in the prefix cache until evicted), n_computed reset, back to the
// waiting queue at its arrival position, still paused, so it is not readmitted while its client
// is behind. Once unpaused it is admitted like any preempted sequence: the prefix match restores
// what the cache kept, the rest (at least the last partial block) is recomputed. Its slot and
// blocks are free for others in the same step (these preemptions do not stop admission).
// The oldest running sequence is never preempted while another one runs, and submit() refuses
// a sequence that could not fit the whole pool alone, so every sequence eventually finishes.
// The scheduler sees the KV cache only through BlockPool / SequenceBlocks and never runs a
// model: the caller reports each step back (on_step_done) and decides when a sequence ends.
//
// Driving it (the engine loop, one step):
//   for each live request whose channel is cancelled:   sched.cancel(id);
//   for each decoding sequence with a speculative draft: sched.set_draft(id, k);
//   StepPlan plan = sched.schedule();
//   for (SeqId id : plan.cancelled)   -> push a kCancelled event, drop per-request state;
//   for (auto& it : plan.items) { const Sequence& s = sched.sequence(it.id);
//       feed tokens s.tokens[it.pos, it.pos + it.n_tokens) at positions it.pos.. ; KV of
//       position p is written to / read from block s.blocks.table()[p / block_size], slot
//       p % block_size; logits are needed only for the last token of items with samples; }
//   forward(batch);
//   for (auto& it : plan.items) {
//       std::optional<int32_t> tok;  if (it.samples) tok = sampler[it.id].sample(logits row);
//       sched.on_step_done(it.id, tok);          // every item, exactly once (with a draft
//                                                // (it.n_draft > 0): the accepted tokens)
//       if (tok && the request is done: EOS, stop string, max_tokens, n_ctx) sched.finish(it.id);
//   }
// A forward pass that fails: sched.abandon_step(), then finish() the affected sequences.
//
// Costs: schedule() is O(running + admitted + cancelled) plus the block work of its grants
// (prefix matching is O(prompt) per admission). Thread-safety: none; owned by the engine
// thread. The BlockPool must outlive the scheduler.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "engine/kv_cache.h"  // BlockPool, SequenceBlocks

namespace zl {

using SeqId = int64_t;

// kLatency: time to first token first (see the design comment); kThroughput: FCFS, each step as
// full as the budget allows.
enum class SchedulePolicy { kLatency, kThroughput };

// "latency" / "throughput"; nullopt for anything else.
std::optional<SchedulePolicy> parse_schedule_policy(std::string_view name);
const char* schedule_policy_name(SchedulePolicy policy);

// The cost of one forward pass as a + b x n_tokens, fitted to the observed steps (exponentially
// weighted least squares, recent steps count most). The scheduler needs only the ratio a / b,
// the fixed cost of a step in tokens of compute. Not thread-safe; O(1) per call.
class StepCostModel {
 public:
  // A measured step: n_tokens computed in `seconds`.
  void observe(int32_t n_tokens, double seconds);
  // a / b within [1, 4096], or `fallback` until steps of different sizes were seen.
  double overhead_tokens(double fallback) const;

 private:
  static constexpr double kDecay = 0.98;  // weight of the past per observation
  double w_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0;
};

struct SchedulerConfig {
  SchedulePolicy policy = SchedulePolicy::kThroughput;
  int32_t max_step_tokens = 512;   // token budget of one step (prefill chunks + decodes)
  int32_t max_running = 64;        // sequences in the batch at most
  int32_t max_prefill_chunk = 0;   // largest grant to one sequence in one step; 0: the budget
  // A running sequence paused at least this long is pause-preempted (see the design comment);
  // 0: never.
  std::chrono::steady_clock::duration max_pause{0};
  // kLatency: a step's fixed cost in tokens of compute until set_step_overhead_tokens() updates it.
  double step_overhead_tokens = 16;
  // kLatency: the weight of a prompt's size against its age in the candidates' order (the
  // fairness bound; see the design comment). 0: first come, first served.
  double fairness = 0.5;
  // Speculative draft tokens granted in one step at most, over all sequences (see the design
  // comment); 0: drafts are never granted.
  int32_t max_step_drafts = 0;
};

// What submit() needs to know about a request.
struct SequenceSpec {
  std::string tenant;              // salts the prefix cache (Request::tenant)
  std::vector<int32_t> prompt;     // at least one token
  int32_t max_total_tokens = 0;    // prompt + generated at most (max_tokens clamped to n_ctx)
  int32_t priority = 0;            // higher first
  // false: the prompt is computed whole, never taken from the prefix cache (a request that
  // needs every prompt position's logits: Request::prompt_logprobs).
  bool reuse_prefix = true;
  int32_t max_chunk = 0;           // > 0: its grants in one step at most (bounds its logits rows)
};

enum class SeqState { kWaiting, kRunning };

// A sequence as the scheduler tracks it. The caller reads it through sequence(id).
struct Sequence {
  SeqId id = 0;
  int32_t priority = 0;
  int64_t arrival = 0;             // submit order
  int64_t admission = -1;          // order of the latest (re)admission; -1 before the first
  std::vector<int32_t> tokens;     // prompt, then generated tokens
  int32_t n_prompt = 0;
  int32_t max_total_tokens = 0;
  bool reuse_prefix = true;        // SequenceSpec::reuse_prefix
  int32_t max_chunk = 0;           // SequenceSpec::max_chunk
  int32_t n_computed = 0;          // tokens[0, n_computed) have KV in the blocks
  int32_t n_cached_prompt = 0;     // prompt tokens reused from the prefix cache at first admission
  int32_t n_preemptions = 0;
  SeqState state = SeqState::kWaiting;
  bool cancel_requested = false;
  bool paused = false;
  std::chrono::steady_clock::time_point paused_since{};  // when `paused` last became true
  int32_t n_pause_preemptions = 0;
  double tag = 0;                  // kLatency: the order among prefill candidates (design comment)
  int64_t round = 0;               // steps planned before its submit: a later round arrived later
  // kLatency: tokens granted to later rounds while it waited for its next token (reset when it
  // samples); overdue at fairness x n_tokens().
  int64_t n_bypassed = 0;
  int32_t n_draft_wanted = 0;      // set_draft(): draft tokens to verify in the next step
  SequenceBlocks blocks;           // the block table; empty while waiting

  int32_t n_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t n_generated() const { return n_tokens() - n_prompt; }
  int32_t n_uncomputed() const { return n_tokens() - n_computed; }
};

// One sequence's share of a step.
struct ScheduledSeq {
  SeqId id = 0;
  int32_t pos = 0;                 // first position to compute (n_computed before the step)
  int32_t n_tokens = 0;            // compute positions [pos, pos + n_tokens)
  bool samples = false;            // pos + n_tokens == token count: sample one token after
  // Speculative draft tokens verified after the last token: positions [pos + 1, pos + n_tokens)
  // take the caller's draft (n_tokens == 1 + n_draft; needs logits for every position).
  int32_t n_draft = 0;
};

struct StepPlan {
  std::vector<ScheduledSeq> items;  // the batch: decodes, prefill chunks, then admissions
  std::vector<SeqId> admitted;      // (re)admitted this step
  std::vector<SeqId> preempted;     // back to waiting, blocks freed, will recompute
  std::vector<SeqId> pause_preempted;  // the same, for being paused past max_pause (not in preempted)
  std::vector<SeqId> cancelled;     // removed for good, blocks freed
  int32_t n_tokens = 0;             // sum of items' n_tokens (<= max_step_tokens), drafts included
  int32_t n_draft_tokens = 0;       // sum of items' n_draft (<= max_step_drafts)
  bool empty() const { return items.empty(); }
};

struct SchedulerStats {
  int32_t n_running = 0;
  int32_t n_waiting = 0;
  int32_t n_paused = 0;                 // running but paused (backpressure)
  int64_t n_steps = 0;
  int64_t n_preemptions = 0;           // to make room for others (KV blocks short)
  int64_t n_pause_preemptions = 0;     // paused past max_pause
  int64_t n_admissions = 0;
  int64_t n_cached_prompt_tokens = 0;   // over first admissions
};

// kLatency: no candidate's grant is cut below this by the water-filling share of the budget.
inline constexpr int32_t kMinPrefillGrant = 64;

// kLatency: how many of the ordered prefill candidates the step takes (the first batch of the
// plan in the design comment). `costs`: each candidate's tokens to its next sample this step
// (the plan's horizon: the first 64, at most 2 x budget tokens; at least one); `n_decodes`: decode tokens in the step; `overhead`: a step's fixed
// cost in tokens; `budget`: the step's tokens left for prefill (a batch holds at most that,
// except a lone candidate, which then takes several steps). 0 iff costs is empty. Pure,
// O(min(n, 64)^2).
int32_t plan_first_batch(std::span<const int32_t> costs, int32_t n_decodes, double overhead, int32_t budget);

class Scheduler {
 public:
  // CHECKs max_step_tokens >= 1, max_running >= 1, max_prefill_chunk >= 0.
  Scheduler(SchedulerConfig config, BlockPool& pool);
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a sequence. Errors: invalid_argument (empty prompt, max_total_tokens below the
  // prompt length), resource_exhausted "kv_cache_overflow" (max_total_tokens could not fit the
  // whole pool; numbers n_prompt_tokens, max_tokens = max_total_tokens - prompt, max_tokens_fit =
  // pool tokens - prompt, at least 0: limits/kv_admission.h does the same check first). O(log waiting).
  Result<SeqId> submit(SequenceSpec spec);

  // Marks a sequence cancelled; the next schedule() removes it (and reports it in
  // StepPlan::cancelled). Any time, even between schedule() and on_step_done(). Unknown ids
  // (already finished) are ignored. O(1).
  void cancel(SeqId id);

  // A paused sequence keeps its blocks but gets no grants and is not admitted (backpressure:
  // its client is not reading). It can still be preempted, and is pause-preempted once paused
  // for max_pause (measured from the `now` of the call that paused it). CHECKs the sequence
  // exists. O(1).
  void set_paused(SeqId id, bool paused,
                  std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());

  // Asks for a speculative draft of n_draft tokens (>= 0) to be verified in the next step, if
  // the sequence decodes then (see the design comment); schedule() grants at most that and
  // resets the wish. CHECKs the sequence exists. O(1).
  void set_draft(SeqId id, int32_t n_draft);

  // Plans the next step (see the design comment); `now` is compared with paused_since.
  // CHECKs that every item of the previous plan was reported.
  // O(running + admitted + cancelled) + block work.
  StepPlan schedule(std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());

  // Reports one item of the last plan as computed: n_computed advances by its grant, newly full
  // blocks are committed to the prefix cache, and `new_token` (required iff the item samples)
  // is appended to the sequence. CHECKs the id was in the plan and not yet reported, and that
  // the token keeps the sequence within max_total_tokens (finish() it once it reaches them).
  // On an item with a draft, a token is one accepted token (the draft rejected at once).
  void on_step_done(SeqId id, std::optional<int32_t> new_token);
  // Reports a sampling item with its accepted tokens: the leading draft tokens that matched,
  // then the token sampled after them (1 <= size <= 1 + n_draft). n_computed advances by the
  // grant less the rejected draft tokens, the tokens are appended, newly full blocks committed,
  // and blocks past the token list released. CHECKs as the other overload.
  void on_step_done(SeqId id, std::span<const int32_t> accepted);

  // Forgets the unreported items of the last plan: their n_computed does not advance (what the
  // forward pass wrote is recomputed later). For a failed forward pass.
  void abandon_step();

  // Removes a sequence for good and frees its blocks (committed full blocks stay cached).
  // CHECKs the sequence exists and has no unreported item. O(blocks + log waiting).
  void finish(SeqId id);

  // CHECKs the sequence exists. The reference is valid until the sequence is removed.
  const Sequence& sequence(SeqId id) const;
  const Sequence* find(SeqId id) const;  // nullptr when unknown
  bool has_work() const { return !running_.empty() || !waiting_.empty(); }

  // In admission order (oldest first) / in admission priority order.
  std::vector<const Sequence*> running() const;
  std::vector<const Sequence*> waiting() const;
  SchedulerStats stats() const;
  const SchedulerConfig& config() const { return config_; }
  // kLatency: the fixed cost of a step in tokens of compute (StepCostModel), clamped to [1, 4096].
  void set_step_overhead_tokens(double tokens);
  const BlockPool& pool() const { return pool_; }

 private:
  struct WaitingOrder {
    bool operator()(const Sequence* a, const Sequence* b) const {
      if (a->priority != b->priority) return a->priority > b->priority;
      return a->arrival < b->arrival;
    }
  };

  Sequence& get(SeqId id);
  void remove_cancelled(StepPlan& plan);
  void preempt_paused(StepPlan& plan, std::chrono::steady_clock::time_point now);
  // Running -> waiting: blocks released (committed ones stay cached), n_computed reset.
  void back_to_waiting(Sequence& seq);
  int32_t chunk_limit(int32_t budget) const;
  int32_t chunk_limit(int32_t budget, const Sequence& s) const;  // and s.max_chunk
  void schedule_running(StepPlan& plan, int32_t& budget);
  // Grows `seq` to hold `n_tokens`, preempting others as needed. False if `seq` itself was
  // preempted.
  bool reserve_or_preempt(Sequence& seq, int32_t n_tokens, StepPlan& plan, int32_t& budget);
  Sequence* pick_victim() const;
  void preempt(Sequence& seq, StepPlan& plan, int32_t& budget);
  void admit_waiting(StepPlan& plan, int32_t& budget);
  // Extends decode items with the drafts their sequences asked for (see the design comment).
  void schedule_drafts(StepPlan& plan, int32_t& budget);
  // The unreported item of `id` in the last plan, removed from pending_ (CHECKs there is one).
  ScheduledSeq take_pending(SeqId id);
  // kLatency (see the design comment): decodes, then prefill candidates by priority, overdue, tag.
  void schedule_decodes(StepPlan& plan, int32_t& budget);
  void schedule_latency_prefills(StepPlan& plan, int32_t& budget);
  // kLatency: tokens that later arrivals may take ahead of `s` before it is overdue.
  int64_t allowance(const Sequence& s) const;
  bool is_overdue(const Sequence& s) const { return s.n_bypassed >= allowance(s); }
  // kLatency: the most one candidate may be granted when `cands` share `budget`.
  static int32_t fair_share(const std::vector<Sequence*>& cands, int32_t budget);
  // Grants `grant` tokens to a running `s` (reserving blocks, maybe preempting): false if not.
  bool grant_running(Sequence& s, int32_t grant, StepPlan& plan, int32_t& budget);
  // Admits waiting `s` with at most `cap` tokens: its grant, 0 when blocks are short.
  int32_t admit_one(Sequence& s, int32_t cap, StepPlan& plan);
  void erase(Sequence& seq);

  SchedulerConfig config_;
  BlockPool& pool_;
  std::unordered_map<SeqId, std::unique_ptr<Sequence>> seqs_;
  std::vector<Sequence*> running_;                 // admission order
  std::set<Sequence*, WaitingOrder> waiting_;
  std::vector<SeqId> cancel_requests_;
  std::unordered_map<SeqId, ScheduledSeq> pending_;  // items of the last plan not yet reported
  SeqId next_id_ = 1;
  int64_t next_arrival_ = 0;
  int64_t next_admission_ = 0;
  double work_clock_ = 0;  // kLatency: tokens computed + step overheads since the start
  SchedulerStats stats_;
};

}  // namespace zl
