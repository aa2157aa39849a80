#include "engine/scheduler.h"

#include <algorithm>
#include <climits>

#include "core/check.h"

namespace zl {

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
  seq->n_prompt = static_cast<int32_t>(n_prompt);
  seq->tokens = std::move(spec.prompt);
  seq->max_total_tokens = spec.max_total_tokens;
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
  schedule_running(plan, budget);
  if (plan.preempted.empty()) admit_waiting(plan, budget);
  plan.n_tokens = config_.max_step_tokens - budget;
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

void Scheduler::schedule_running(StepPlan& plan, int32_t& budget) {
  // Decodes first, then unfinished prefills; each group in admission order.
  std::vector<Sequence*> order;
  order.reserve(running_.size());
  for (Sequence* s : running_) {
    if (s->n_uncomputed() == 1) order.push_back(s);
  }
  for (Sequence* s : running_) {
    if (s->n_uncomputed() != 1) order.push_back(s);
  }
  for (Sequence* s : order) {
    if (budget == 0) break;
    if (s->state != SeqState::kRunning || s->paused) continue;  // preempted in this loop
    CHECK(s->n_uncomputed() >= 1) << "running sequence " << s->id << " has nothing to compute";
    const int32_t grant = std::min(s->n_uncomputed(), chunk_limit(budget));
    if (!reserve_or_preempt(*s, s->n_computed + grant, plan, budget)) continue;
    plan.items.push_back({.id = s->id,
                          .pos = s->n_computed,
                          .n_tokens = grant,
                          .samples = s->n_computed + grant == s->n_tokens()});
    budget -= grant;
  }
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
    if (s->paused) {
      ++it;
      continue;
    }
    const int32_t cap = chunk_limit(budget);
    std::optional<int32_t> n_cached = s->blocks.allocate_prompt(s->tokens, cap);
    if (!n_cached) break;  // head of line: wait for blocks rather than let others pass
    s->n_computed = *n_cached;
    if (s->admission < 0) {
      s->n_cached_prompt = std::min(*n_cached, s->n_prompt);
      stats_.n_cached_prompt_tokens += s->n_cached_prompt;
    }
    s->admission = next_admission_++;
    s->state = SeqState::kRunning;
    ++stats_.n_admissions;
    it = waiting_.erase(it);
    running_.push_back(s);
    const int32_t grant = std::min(s->n_uncomputed(), cap);
    plan.items.push_back({.id = s->id, .pos = s->n_computed, .n_tokens = grant,
                          .samples = s->n_computed + grant == s->n_tokens()});
    plan.admitted.push_back(s->id);
    budget -= grant;
  }
}

void Scheduler::on_step_done(SeqId id, std::optional<int32_t> new_token) {
  auto it = pending_.find(id);
  CHECK(it != pending_.end()) << "sequence " << id << " was not in the last plan or was reported";
  const ScheduledSeq item = it->second;
  pending_.erase(it);
  Sequence& s = get(id);
  CHECK(s.state == SeqState::kRunning && s.n_computed == item.pos)
      << "sequence " << id << " changed since it was scheduled";
  CHECK(new_token.has_value() == item.samples)
      << "sequence " << id << (item.samples ? ": a sampling item needs its token"
                                            : ": a token for an item that does not sample");
  s.n_computed += item.n_tokens;
  s.blocks.commit(s.tokens, s.n_computed);
  if (new_token) {
    CHECK(s.n_tokens() < s.max_total_tokens)
        << "sequence " << id << " would exceed max_total_tokens " << s.max_total_tokens;
    s.tokens.push_back(*new_token);
  }
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
