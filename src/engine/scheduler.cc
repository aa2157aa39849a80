#include "engine/scheduler.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>

#include "core/check.h"

namespace zl {

std::optional<SchedulePolicy> parse_schedule_policy(std::string_view name) {
  if (name == "latency") return SchedulePolicy::kLatency;
  if (name == "throughput") return SchedulePolicy::kThroughput;
  return std::nullopt;
}

const char* schedule_policy_name(SchedulePolicy policy) {
  return policy == SchedulePolicy::kLatency ? "latency" : "throughput";
}

void StepCostModel::observe(int32_t n_tokens, double seconds) {
  if (n_tokens <= 0 || !(seconds >= 0) || !std::isfinite(seconds)) return;
  const double x = n_tokens, y = seconds;
  w_ = kDecay * w_ + 1;
  sx_ = kDecay * sx_ + x;
  sy_ = kDecay * sy_ + y;
  sxx_ = kDecay * sxx_ + x * x;
  sxy_ = kDecay * sxy_ + x * y;
}

double StepCostModel::overhead_tokens(double fallback) const {
  if (w_ < 2) return fallback;
  const double mx = sx_ / w_, my = sy_ / w_;
  const double vxx = sxx_ / w_ - mx * mx, vxy = sxy_ / w_ - mx * my;
  if (vxx < 16) return fallback;  // steps of (nearly) one size: no slope to fit
  const double slope = vxy / vxx;
  if (!(slope > 0)) return fallback;
  return std::clamp((my - slope * mx) / slope, 1.0, 4096.0);
}

int32_t plan_first_batch(std::span<const int32_t> costs, int32_t n_decodes, double overhead, int32_t budget) {
  // The horizon: the first 64 candidates, at most two budgets' worth of tokens (those further
  // back, later arrivals mostly, do not change how the first ones are batched).
  constexpr size_t kMaxPlanned = 64;
  int k = 0;
  for (int64_t sum = 0; k < static_cast<int>(std::min(costs.size(), kMaxPlanned)) && (k == 0 || sum + costs[k] <= 2 * int64_t{budget});
       ++k) {
    sum += costs[k];
  }
  if (k == 0) return 0;
  budget = std::max(budget, 1);
  // f[i]: the least weighted cost of candidates [i, k) once those before i have their token;
  // a batch [i, j) weighs (candidates still waiting + all) x its cost (see the design comment).
  std::vector<double> f(k + 1, 0.0);
  std::vector<int> next(k + 1, k);
  for (int i = k - 1; i >= 0; --i) {
    f[i] = std::numeric_limits<double>::infinity();
    int64_t sum = 0;
    for (int j = i + 1; j <= k; ++j) {
      sum += std::max(costs[j - 1], 1);
      if (sum > budget && j > i + 1) break;
      const double n_steps = std::ceil(static_cast<double>(sum) / budget);  // > 1: a lone long candidate
      const double cost = n_steps * (overhead + n_decodes + i) + static_cast<double>(sum);
      const double v = static_cast<double>(2 * k - i) * cost + f[j];
      if (v < f[i]) {
        f[i] = v;
        next[i] = j;
      }
    }
  }
  return next[0];
}

Scheduler::Scheduler(SchedulerConfig config, BlockPool& pool) : config_(config), pool_(pool) {
  CHECK(config_.max_step_tokens >= 1) << "max_step_tokens " << config_.max_step_tokens;
  CHECK(config_.max_running >= 1) << "max_running " << config_.max_running;
  CHECK(config_.max_prefill_chunk >= 0) << "max_prefill_chunk " << config_.max_prefill_chunk;
}

Result<SeqId> Scheduler::submit(SequenceSpec spec) {
  const int64_t n_prompt = static_cast<int64_t>(spec.prompt.size());
  if (n_prompt == 0) return invalid_argument("empty prompt");
  if (spec.max_total_tokens < n_prompt) {
    return invalid_argument("max_total_tokens " + std::to_string(spec.max_total_tokens) +
                            " is below the prompt length " + std::to_string(n_prompt));
  }
  const int32_t n_need = pool_.n_blocks_for(spec.max_total_tokens);
  if (n_need > pool_.n_blocks()) {
    const int64_t capacity = int64_t{pool_.n_blocks()} * pool_.block_size();
    return resource_exhausted(std::to_string(spec.max_total_tokens) + " tokens need " + std::to_string(n_need) +
                                  " KV blocks, the cache has " + std::to_string(pool_.n_blocks()),
                              {.reason = ErrorReason::kKvCacheOverflow,
                               .numbers = {.n_prompt_tokens = n_prompt,
                                           .max_tokens_fit = std::max<int64_t>(0, capacity - n_prompt),
                                           .max_tokens = spec.max_total_tokens - n_prompt}});
  }
  auto seq = std::make_unique<Sequence>();
  seq->id = next_id_++;
  seq->priority = spec.priority;
  seq->arrival = next_arrival_++;
  seq->tag = work_clock_ + config_.fairness * static_cast<double>(n_prompt);
  seq->round = stats_.n_steps;
  seq->n_prompt = static_cast<int32_t>(n_prompt);
  seq->tokens = std::move(spec.prompt);
  seq->max_total_tokens = spec.max_total_tokens;
  seq->reuse_prefix = spec.reuse_prefix;
  seq->max_chunk = spec.max_chunk;
  seq->blocks = SequenceBlocks(pool_, spec.tenant);
  waiting_.insert(seq.get());
  const SeqId id = seq->id;
  seqs_.emplace(id, std::move(seq));
  return id;
}

void Scheduler::cancel(SeqId id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end() || it->second->cancel_requested) return;
  it->second->cancel_requested = true;
  cancel_requests_.push_back(id);
}

void Scheduler::set_draft(SeqId id, int32_t n_draft) { get(id).n_draft_wanted = std::max(n_draft, 0); }

void Scheduler::set_paused(SeqId id, bool paused, std::chrono::steady_clock::time_point now) {
  Sequence& s = get(id);
  if (paused && !s.paused) s.paused_since = now;
  s.paused = paused;
}

StepPlan Scheduler::schedule(std::chrono::steady_clock::time_point now) {
  CHECK(pending_.empty()) << pending_.size() << " items of the last step were not reported";
  StepPlan plan;
  remove_cancelled(plan);
  preempt_paused(plan, now);
  int32_t budget = config_.max_step_tokens;
  if (config_.policy == SchedulePolicy::kLatency) {
    schedule_decodes(plan, budget);
    schedule_latency_prefills(plan, budget);
  } else {
    schedule_running(plan, budget);
    if (plan.preempted.empty()) admit_waiting(plan, budget);
  }
  schedule_drafts(plan, budget);
  plan.n_tokens = config_.max_step_tokens - budget;
  if (!plan.empty()) work_clock_ += plan.n_tokens + config_.step_overhead_tokens;
  for (const ScheduledSeq& item : plan.items) pending_.emplace(item.id, item);
  ++stats_.n_steps;
  return plan;
}

void Scheduler::remove_cancelled(StepPlan& plan) {
  for (SeqId id : cancel_requests_) {
    auto it = seqs_.find(id);
    if (it == seqs_.end()) continue;  // finished meanwhile
    plan.cancelled.push_back(id);
    erase(*it->second);
  }
  cancel_requests_.clear();
}

void Scheduler::preempt_paused(StepPlan& plan, std::chrono::steady_clock::time_point now) {
  if (config_.max_pause <= std::chrono::steady_clock::duration::zero()) return;
  for (size_t i = 0; i < running_.size();) {
    Sequence& s = *running_[i];
    if (!s.paused || now - s.paused_since < config_.max_pause) {
      ++i;
      continue;
    }
    back_to_waiting(s);  // erases running_[i]
    ++s.n_pause_preemptions;
    ++stats_.n_pause_preemptions;
    plan.pause_preempted.push_back(s.id);
  }
}

int32_t Scheduler::chunk_limit(int32_t budget) const {
  return config_.max_prefill_chunk > 0 ? std::min(budget, config_.max_prefill_chunk) : budget;
}

int32_t Scheduler::chunk_limit(int32_t budget, const Sequence& s) const {
  const int32_t limit = chunk_limit(budget);
  return s.max_chunk > 0 ? std::min(limit, s.max_chunk) : limit;
}

void Scheduler::schedule_running(StepPlan& plan, int32_t& budget) {
  // Decodes first, then unfinished prefills; each group in admission order.
  schedule_decodes(plan, budget);
  for (Sequence* s : std::vector<Sequence*>(running_)) {
    if (budget == 0) break;
    if (s->n_uncomputed() == 1 || s->state != SeqState::kRunning || s->paused) continue;
    grant_running(*s, std::min(s->n_uncomputed(), chunk_limit(budget, *s)), plan, budget);
  }
}

void Scheduler::schedule_decodes(StepPlan& plan, int32_t& budget) {
  std::vector<Sequence*> decodes;
  for (Sequence* s : running_) {
    if (s->n_uncomputed() == 1) decodes.push_back(s);
  }
  for (Sequence* s : decodes) {
    if (budget == 0) break;
    if (s->state != SeqState::kRunning || s->paused) continue;  // preempted in this loop
    grant_running(*s, 1, plan, budget);
  }
}

int32_t Scheduler::fair_share(const std::vector<Sequence*>& cands, int32_t budget) {
  // Water-filling: the largest level c with sum(min(remaining, c)) <= budget, at least
  // kMinPrefillGrant; everything when all fit.
  std::vector<int64_t> rem;
  for (const Sequence* s : cands) rem.push_back(s->n_uncomputed());
  std::sort(rem.begin(), rem.end());
  int64_t left = budget;
  for (size_t i = 0; i < rem.size(); ++i) {
    const int64_t n_rest = static_cast<int64_t>(rem.size() - i);
    if (rem[i] * n_rest > left) return static_cast<int32_t>(std::max<int64_t>(kMinPrefillGrant, left / n_rest));
    left -= rem[i];
  }
  return budget;
}

bool Scheduler::grant_running(Sequence& s, int32_t grant, StepPlan& plan, int32_t& budget) {
  CHECK(s.n_uncomputed() >= 1) << "running sequence " << s.id << " has nothing to compute";
  if (!reserve_or_preempt(s, s.n_computed + grant, plan, budget)) return false;
  plan.items.push_back({.id = s.id, .pos = s.n_computed, .n_tokens = grant,
                        .samples = s.n_computed + grant == s.n_tokens()});
  budget -= grant;
  return true;
}

void Scheduler::schedule_latency_prefills(StepPlan& plan, int32_t& budget) {
  if (budget == 0) return;
  const int32_t n_decodes = config_.max_step_tokens - budget;
  // Every sequence short of its next sample by more than one token, running or waiting.
  std::vector<Sequence*> all;
  for (Sequence* s : running_) {
    if (!s->paused && s->n_uncomputed() > 1) all.push_back(s);
  }
  for (Sequence* s : waiting_) {
    if (!s->paused) all.push_back(s);
  }
  std::sort(all.begin(), all.end(), [this](const Sequence* a, const Sequence* b) {
    if (a->priority != b->priority) return a->priority > b->priority;
    const bool a_due = is_overdue(*a), b_due = is_overdue(*b);
    if (a_due != b_due) return a_due;
    if (!a_due && a->tag != b->tag) return a->tag < b->tag;
    return a->arrival < b->arrival;
  });
  // Those that can be granted now: running ones, and waiting ones up to the free slots (none
  // after a preemption, as in admit_waiting).
  int32_t n_slots = plan.preempted.empty() ? config_.max_running - static_cast<int32_t>(running_.size()) : 0;
  std::vector<Sequence*> cands;
  for (Sequence* s : all) {
    if (s->state == SeqState::kRunning || n_slots-- > 0) cands.push_back(s);
  }
  if (cands.empty()) return;
  // The first may take the whole budget; the others share it (fair_share).
  const int32_t cap = std::min(fair_share(cands, budget), chunk_limit(budget));
  std::vector<int32_t> costs;
  for (const Sequence* s : cands) {
    costs.push_back(std::min({s->n_uncomputed(), chunk_limit(budget, *s), costs.empty() ? budget : cap}));
  }
  const int32_t n_batch = plan_first_batch(costs, n_decodes, config_.step_overhead_tokens, budget);
  // The fairness bound's hard part: what candidates of earlier rounds have left of their
  // allowance caps what later arrivals get, this step's decodes included.
  std::vector<Sequence*> guarded;
  for (Sequence* s : all) {
    if (!is_overdue(*s)) guarded.push_back(s);
  }
  auto passes = [](const Sequence* g, const Sequence& s) { return g->round < s.round && g->priority >= s.priority; };
  for (const ScheduledSeq& item : plan.items) {
    for (Sequence* g : guarded) {
      if (passes(g, *seqs_.at(item.id))) g->n_bypassed += item.n_tokens;
    }
  }
  std::vector<Sequence*> blockers;
  bool admitting = true, granted = false;
  for (int32_t i = 0; i < n_batch && budget > 0; ++i) {
    Sequence& s = *cands[i];
    const int32_t grant = std::min(costs[i], budget);
    // Not made at all when an earlier candidate's allowance cannot cover it: cut short, it
    // would delay that one and give no token.
    bool covered = true;
    for (Sequence* g : guarded) {
      if (passes(g, s) && allowance(*g) - g->n_bypassed < grant) {
        covered = false;
        blockers.push_back(g);
      }
    }
    if (!covered) continue;
    int32_t got = 0;
    if (s.state == SeqState::kRunning) {
      got = grant_running(s, grant, plan, budget) ? grant : 0;
    } else if (admitting && plan.preempted.empty()) {  // a candidate preempted above is waiting now
      got = admit_one(s, grant, plan);
      admitting = got > 0;  // no skipping on blocks
      budget -= got;
    }
    granted = granted || got > 0;
    for (Sequence* g : guarded) {
      if (passes(g, s)) g->n_bypassed += got;
    }
  }
  // Nothing granted, only blocked: the blockers are overdue from now on (first, guarding
  // nothing) and the step is planned again (this recurses once at most).
  if (!granted && !blockers.empty()) {
    for (Sequence* g : blockers) g->n_bypassed = std::max(g->n_bypassed, allowance(*g));
    schedule_latency_prefills(plan, budget);
  }
}

int64_t Scheduler::allowance(const Sequence& s) const {
  return std::max<int64_t>(1, std::llround(config_.fairness * s.n_tokens()));
}

bool Scheduler::reserve_or_preempt(Sequence& seq, int32_t n_tokens, StepPlan& plan,
                                   int32_t& budget) {
  while (!seq.blocks.reserve(n_tokens)) {
    Sequence* victim = pick_victim();
    CHECK(victim != nullptr);
    // Alone, a sequence always fits: submit() checked max_total_tokens against the pool.
    CHECK(victim != &seq || running_.size() > 1)
        << "sequence " << seq.id << " cannot fit the KV cache alone";
    preempt(*victim, plan, budget);
    if (victim == &seq) return false;
  }
  return true;
}

Sequence* Scheduler::pick_victim() const {
  Sequence* victim = nullptr;
  for (Sequence* s : running_) {  // admission order: a later one of equal priority is younger
    if (!victim || s->priority <= victim->priority) victim = s;
  }
  return victim;
}

void Scheduler::preempt(Sequence& seq, StepPlan& plan, int32_t& budget) {
  // If it was already granted tokens in this step, take the grant back.
  auto item = std::find_if(plan.items.begin(), plan.items.end(),
                           [&](const ScheduledSeq& i) { return i.id == seq.id; });
  if (item != plan.items.end()) {
    budget += item->n_tokens;
    plan.items.erase(item);
  }
  back_to_waiting(seq);
  ++seq.n_preemptions;
  ++stats_.n_preemptions;
  plan.preempted.push_back(seq.id);
}

void Scheduler::back_to_waiting(Sequence& seq) {
  seq.blocks.release();
  seq.n_computed = 0;
  seq.state = SeqState::kWaiting;
  running_.erase(std::find(running_.begin(), running_.end(), &seq));
  waiting_.insert(&seq);
}

void Scheduler::admit_waiting(StepPlan& plan, int32_t& budget) {
  auto it = waiting_.begin();
  while (it != waiting_.end() && budget > 0 &&
         static_cast<int32_t>(running_.size()) < config_.max_running) {
    Sequence* s = *it;
    ++it;  // admit_one() erases s from waiting_
    if (s->paused) continue;
    const int32_t grant = admit_one(*s, chunk_limit(budget, *s), plan);
    if (grant == 0) break;  // head of line: wait for blocks rather than let others pass
    budget -= grant;
  }
}

int32_t Scheduler::admit_one(Sequence& s, int32_t cap, StepPlan& plan) {
  std::optional<int32_t> n_cached = s.blocks.allocate_prompt(s.tokens, cap, s.reuse_prefix);
  if (!n_cached) return 0;
  s.n_computed = *n_cached;
  if (s.admission < 0) {
    s.n_cached_prompt = std::min(*n_cached, s.n_prompt);
    stats_.n_cached_prompt_tokens += s.n_cached_prompt;
  }
  s.admission = next_admission_++;
  s.state = SeqState::kRunning;
  ++stats_.n_admissions;
  waiting_.erase(&s);
  running_.push_back(&s);
  const int32_t grant = std::min(s.n_uncomputed(), cap);
  plan.items.push_back({.id = s.id, .pos = s.n_computed, .n_tokens = grant,
                        .samples = s.n_computed + grant == s.n_tokens()});
  plan.admitted.push_back(s.id);
  return grant;
}

void Scheduler::schedule_drafts(StepPlan& plan, int32_t& budget) {
  int32_t left = std::min(budget, config_.max_step_drafts);
  for (ScheduledSeq& item : plan.items) {
    Sequence& s = get(item.id);
    const int32_t wanted = s.n_draft_wanted;
    s.n_draft_wanted = 0;
    if (wanted <= 0 || left <= 0 || item.n_tokens != 1 || !item.samples) continue;
    int32_t k = std::min({wanted, left, s.max_total_tokens - s.n_tokens() - 1});
    if (k <= 0) continue;
    // Free blocks only (a draft never preempts); short of them, what the table holds already.
    if (!s.blocks.reserve(item.pos + 1 + k)) k = std::min(k, s.blocks.capacity() - item.pos - 1);
    if (k <= 0) continue;
    item.n_tokens += k;
    item.n_draft = k;
    left -= k;
    budget -= k;
    plan.n_draft_tokens += k;
  }
  for (Sequence* s : running_) s->n_draft_wanted = 0;  // not granted (paused, prefilling): dropped
}

ScheduledSeq Scheduler::take_pending(SeqId id) {
  auto it = pending_.find(id);
  CHECK(it != pending_.end()) << "sequence " << id << " was not in the last plan or was reported";
  const ScheduledSeq item = it->second;
  pending_.erase(it);
  return item;
}

void Scheduler::on_step_done(SeqId id, std::span<const int32_t> accepted) {
  const ScheduledSeq item = take_pending(id);
  Sequence& s = get(id);
  CHECK(s.state == SeqState::kRunning && s.n_computed == item.pos)
      << "sequence " << id << " changed since it was scheduled";
  CHECK(item.samples) << "sequence " << id << ": a token for an item that does not sample";
  const auto n_accepted = static_cast<int32_t>(accepted.size());
  CHECK(n_accepted >= 1 && n_accepted <= 1 + item.n_draft)
      << "sequence " << id << ": " << n_accepted << " tokens accepted of a draft of " << item.n_draft;
  CHECK(s.n_tokens() + n_accepted <= s.max_total_tokens)
      << "sequence " << id << " would exceed max_total_tokens " << s.max_total_tokens;
  // The positions of the last token and the matched draft tokens hold valid KV; the rejected
  // ones lie past n_computed and are overwritten when computed again.
  s.n_computed += item.n_tokens - item.n_draft + (n_accepted - 1);
  s.tokens.insert(s.tokens.end(), accepted.begin(), accepted.end());
  s.blocks.commit(s.tokens, s.n_computed);
  if (item.n_draft > 0) s.blocks.shrink(s.n_tokens());
  s.n_bypassed = 0;
}

void Scheduler::on_step_done(SeqId id, std::optional<int32_t> new_token) {
  if (new_token) {
    const int32_t token = *new_token;
    return on_step_done(id, std::span<const int32_t>(&token, 1));
  }
  const ScheduledSeq item = take_pending(id);
  Sequence& s = get(id);
  CHECK(s.state == SeqState::kRunning && s.n_computed == item.pos)
      << "sequence " << id << " changed since it was scheduled";
  CHECK(!item.samples) << "sequence " << id << ": a sampling item needs its token";
  s.n_computed += item.n_tokens;
  s.blocks.commit(s.tokens, s.n_computed);
}

void Scheduler::set_step_overhead_tokens(double tokens) {
  if (std::isfinite(tokens)) config_.step_overhead_tokens = std::clamp(tokens, 1.0, 4096.0);
}

void Scheduler::abandon_step() { pending_.clear(); }

void Scheduler::finish(SeqId id) {
  CHECK(!pending_.contains(id)) << "finish() of sequence " << id << " before on_step_done()";
  erase(get(id));
}

void Scheduler::erase(Sequence& seq) {
  if (seq.state == SeqState::kRunning) {
    running_.erase(std::find(running_.begin(), running_.end(), &seq));
  } else {
    waiting_.erase(&seq);
  }
  pending_.erase(seq.id);
  seqs_.erase(seq.id);  // ~SequenceBlocks returns the blocks
}

Sequence& Scheduler::get(SeqId id) {
  auto it = seqs_.find(id);
  CHECK(it != seqs_.end()) << "unknown sequence " << id;
  return *it->second;
}

const Sequence& Scheduler::sequence(SeqId id) const {
  const Sequence* s = find(id);
  CHECK(s != nullptr) << "unknown sequence " << id;
  return *s;
}

const Sequence* Scheduler::find(SeqId id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : it->second.get();
}

std::vector<const Sequence*> Scheduler::running() const {
  return {running_.begin(), running_.end()};
}

std::vector<const Sequence*> Scheduler::waiting() const {
  return {waiting_.begin(), waiting_.end()};
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s = stats_;
  s.n_running = static_cast<int32_t>(running_.size());
  s.n_waiting = static_cast<int32_t>(waiting_.size());
  for (const Sequence* q : running_) s.n_paused += q->paused ? 1 : 0;
  return s;
}

}  // namespace zl
