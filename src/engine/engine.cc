#include "engine/engine.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/log.h"
#include "core/memory.h"
#include "engine/span_budget.h"
#include "spec/ngram_draft.h"
#include "obs/metrics.h"  // kEnabled

namespace zl {
namespace {

// While every running sequence is paused (its client is not reading), the
// loop re-checks the channels this often instead of spinning on empty steps.
// The consumer side does not wake the engine when it drains; this bounds the
// resume latency at the cost of a few hundred cheap wake-ups a second, and
// only while something is paused.
// The loop never sleeps longer than this while anything waits in the
// scheduler (has_work() keeps it stepping otherwise), so queue deadlines are
// checked at least this often besides once per step.
constexpr std::chrono::milliseconds kPausedPoll{2};

// The completion rate behind retry_after_ms: the last kRecentDone requests
// that ended after admission, within kRecentWindow.
constexpr size_t kRecentDone = 32;
constexpr std::chrono::seconds kRecentWindow{60};
constexpr int64_t kMinRetryMs = 1000;
constexpr int64_t kMaxRetryMs = 60000;

double seconds_since(Timings::Clock::time_point t) {
  return std::chrono::duration<double>(Timings::Clock::now() - t).count();
}

// A request submitted to, or still running in, an engine that is stopping.
Status shutting_down_error() {
  return resource_exhausted("the engine is shutting down", {.reason = ErrorReason::kEngineShuttingDown});
}

Status overloaded_error(std::string message, int64_t retry_after_ms) {
  return resource_exhausted(std::move(message),
                            {.reason = ErrorReason::kOverloaded, .numbers = {.retry_after_ms = retry_after_ms}});
}

Status queue_timeout_error(int64_t timeout_ms, int64_t retry_after_ms) {
  return resource_exhausted("the request waited " + std::to_string(timeout_ms) +
                                " ms for a batch slot without getting one (--queue-timeout-ms)",
                            {.reason = ErrorReason::kQueueTimeout, .numbers = {.retry_after_ms = retry_after_ms}});
}

// A grammar whose masks keep reaching the masker's work bound
// (ConstrainedOutput::too_ambiguous), or whose cut mask allowed nothing.
Status grammar_too_ambiguous() {
  return invalid_argument(
      "the grammar is too ambiguous to follow: its token masks reached the server's work bound (a repetition of "
      "something that may be empty, such as (x?){1000} written out item by item; write x{0,1000})",
      {.reason = ErrorReason::kUnsupportedValue});
}

}  // namespace

struct Engine::Live {
  Request request;
  std::shared_ptr<RequestChannel> channel;
  SeqId seq = 0;
  Sampler sampler;
  IncrementalDetokenizer detok;
  StopMatcher stop;
  OutputGuard out_guard;
  std::optional<SpanBudgetTracker> span;  // StopParams::span
  std::optional<ConstrainedOutput> constraint;  // Request::constraint
  // Speculative decoding (see engine.h), when the request speculates: the n-gram index of its
  // tokens, the adaptive draft length, this step's draft and the tokens fed to verify it.
  std::optional<spec::NgramIndex> ngram;  // the n-gram method's index (no draft model)
  bool speculates = false;
  uint64_t tenant_salt = 0;  // BlockPool::tenant_salt(request.tenant): the draft model's slot reuse
  spec::DraftLength draft_len;
  std::vector<int32_t> draft;
  std::vector<int32_t> verify_tokens;
  std::vector<int32_t> accepted;
  std::vector<TokenLogprobs> accepted_logprobs;  // Request::logprobs: one per accepted token
  // Request::logprobs: entries waiting for their token's text. `start`: the detokenized bytes
  // before the token; an entry goes out once the stop matcher has released more bytes than that.
  struct PendingLogprobs {
    int64_t start = 0;
    TokenLogprobs entry;
  };
  std::deque<PendingLogprobs> pending_logprobs;
  // Request::prompt_logprobs: the entries so far (the first prompt token's at once), and the
  // next prompt position whose entry is missing (a recomputed prefix is not collected twice).
  std::vector<TokenLogprobs> prompt_logprobs;
  int32_t prompt_logprobs_next = 1;
  int64_t n_detok_bytes = 0;    // released by the detokenizer
  int64_t n_emitted_bytes = 0;  // released by the stop matcher
  Usage usage;
  Timings timings;
  bool admitted_once = false;
  bool queued = true;           // counted in EngineStats::n_queued until first admission or its end
  int64_t n_queued_tokens = 0;  // what it adds to n_queued_prompt_tokens meanwhile

  Live(Request r, std::shared_ptr<RequestChannel> ch, const Tokenizer& tok,
       std::shared_ptr<const guard::Guard> g, const guard::TokenMaskTable* mask)
      : request(std::move(r)),
        channel(std::move(ch)),
        sampler(request.sampling, request.prompt_ids),
        detok(tok),
        stop(request.stop.stop_strings),
        out_guard(std::move(g), mask) {
    out_guard.start_after(request.prompt_ids);
    if (request.stop.span) span.emplace(*request.stop.span);
  }
};

AutoSeqs auto_max_seqs(int64_t kv_tokens, int64_t n_ctx) {
  AutoSeqs a;
  a.per_seq = std::max<int64_t>(1, std::min(kTypicalSeqTokens, n_ctx));
  a.quotient = kv_tokens / a.per_seq;
  a.max_seqs = static_cast<int32_t>(std::clamp<int64_t>(a.quotient, kMinAutoSeqs, kMaxAutoSeqs));
  return a;
}

EngineConfig resolve_engine_config(const ModelConfig& model, EngineConfig c) {
  if (c.n_ctx <= 0) c.n_ctx = std::min<int64_t>(model.n_ctx_train, 4096);
  const bool auto_seqs = c.max_seqs <= 0;
  if (c.block_size <= 0) c.block_size = 16;
  if (c.max_step_tokens <= 0) c.max_step_tokens = 512;
  if (c.n_kv_tokens <= 0) {
    // Sized for max_seqs full contexts; without max_seqs, for kDefaultKvContexts
    // (and max_seqs then follows from the cache, below).
    constexpr int64_t kDefaultKvContexts = 16;
    const int64_t n_seqs = auto_seqs ? kDefaultKvContexts : c.max_seqs;
    // Saturated: an absurd n_ctx must reach Engine::create's checks, not overflow.
    c.n_kv_tokens = c.n_ctx > INT64_MAX / 4 / n_seqs ? INT64_MAX / 4 : c.n_ctx * n_seqs;
    // Never take more than half of the memory available now, but always one full context.
    if (const uint64_t available = available_memory_bytes(); available != UINT64_MAX) {
      const double budget = 0.5 * static_cast<double>(available);
      const int64_t fit = static_cast<int64_t>(budget / KvStorage::bytes_per_token(model, c.kv_type));
      c.n_kv_tokens = std::min(c.n_kv_tokens, std::max<int64_t>(fit, c.n_ctx));
    }
  }
  // Whole blocks, at least kMinKvBlocks. An explicit size may hold less than
  // one context (as a llama.cpp slot may): a sequence that could not fit the
  // whole cache is then refused with kv_cache_overflow (Scheduler::submit).
  c.n_kv_tokens = std::min(std::max(c.n_kv_tokens, int64_t{kMinKvBlocks} * c.block_size), INT64_MAX / 4);
  c.n_kv_tokens = (c.n_kv_tokens + c.block_size - 1) / c.block_size * c.block_size;
  if (auto_seqs) c.max_seqs = default_max_seqs(c.n_kv_tokens, c.n_ctx);
  if (c.draft_model) {
    // More slots than sequences would hold contexts no sequence uses.
    c.draft_slots = c.draft_slots <= 0 ? static_cast<int32_t>(std::clamp<int64_t>(
                                             c.n_kv_tokens / std::max<int64_t>(c.n_ctx, 1), 1, std::max(c.max_seqs, 1)))
                                       : std::min(c.draft_slots, std::max(c.max_seqs, 1));
  }
  return c;
}

int32_t max_step_drafts(const EngineConfig& c) { return std::clamp(c.max_step_tokens, 0, kMaxStepDrafts); }

EngineMemory engine_memory(const ModelConfig& model, const EngineConfig& c) {
  const int64_t n_blocks = c.block_size > 0 ? c.n_kv_tokens / c.block_size : 0;
  // The block pool keeps a token id per slot and a few words per block.
  const uint64_t index = saturating_add(saturating_mul(static_cast<uint64_t>(std::max<int64_t>(c.n_kv_tokens, 0)), 4),
                                        saturating_mul(static_cast<uint64_t>(std::max<int64_t>(n_blocks, 0)), 64));
  const uint64_t kv = KvStorage::bytes_for(model, n_blocks, c.block_size, c.kv_type);
  EngineMemory m{.kv_bytes = saturating_add(kv, index),
                 .step_bytes = ModelRunner::step_bytes(model, c.max_step_tokens,
                                                       int64_t{c.max_seqs} + max_step_drafts(c))};
  if (c.draft_model) {
    m.draft_kv_bytes = DraftModel::kv_bytes(c.draft_model->config, draft_model_config(c));
    // Its passes: a step's tokens, or one per drafting sequence.
    m.step_bytes = std::max(m.step_bytes, ModelRunner::step_bytes(c.draft_model->config, c.max_step_tokens, c.draft_slots));
  }
  return m;
}

DraftModel::Config draft_model_config(const EngineConfig& c) {
  return {.n_ctx = c.n_ctx,
          .n_slots = std::max(c.draft_slots, 1),
          .block_size = c.block_size,
          .kv_type = c.kv_type,
          .max_step_tokens = c.max_step_tokens,
          .p_min = c.draft_p_min};
}

Result<std::unique_ptr<Engine>> Engine::create(const Model& model, const Tokenizer& tokenizer, EngineConfig config,
                                               std::shared_ptr<const PackedWeights> weights) {
  if (!weights) {
    ASSIGN_OR_RETURN(weights, PackedWeights::create(model, {.name = model.config.name.empty() ? "the model"
                                                                                               : model.config.name}));
  }
  config = resolve_engine_config(model.config, config);
  if (config.n_ctx < 2) return invalid_argument("context size must be at least 2 tokens");
  if (config.spec_draft_max < 1 || config.spec_draft_max > kMaxSpecDraft) {
    return invalid_argument("the speculative draft length must be in [1, " + std::to_string(kMaxSpecDraft) + "]");
  }
  if (config.spec_ngram_min < 1 || config.spec_ngram_min > config.spec_ngram_max ||
      config.spec_ngram_max > spec::kMaxNgram) {
    return invalid_argument("speculative n-gram sizes must satisfy 1 <= min <= max <= " +
                            std::to_string(spec::kMaxNgram));
  }
  if (config.n_kv_tokens / config.block_size > INT32_MAX / 2) return invalid_argument("KV cache too large");
  // The step scratch grows on the engine thread, where a failure could not
  // be reported: it must fit beside the KV cache before anything starts.
  const EngineMemory need = engine_memory(model.config, config);
  const uint64_t available = available_memory_bytes();
  RETURN_IF_ERROR(check_memory_budget(need.step_bytes, "the buffers of one engine step (" +
                                          std::to_string(config.max_step_tokens) + " tokens)", available));
  // The KV cache alone is checked (and named) by KvStorage::create.
  if (need.kv_bytes <= available) {
    RETURN_IF_ERROR(check_memory_budget(saturating_add(need.kv_bytes, need.step_bytes),
                                        "the KV cache (" + format_bytes(need.kv_bytes) +
                                            ") with the buffers of one engine step (" +
                                            format_bytes(need.step_bytes) + ")",
                                        available));
  }
  ASSIGN_OR_RETURN(KvStorage kv, KvStorage::create(model.config, config.n_kv_tokens / config.block_size,
                                                   config.block_size, config.kv_type));
  std::optional<DraftModel::Parts> draft;
  if (config.draft_model) {
    if (!(config.draft_p_min >= 0.0f && config.draft_p_min <= 1.0f)) {
      return invalid_argument("the draft model's minimum probability (draft_p_min) must be in [0, 1]");
    }
    if (!config.draft_tokenizer) return invalid_argument("a draft model needs its tokenizer");
    RETURN_IF_ERROR(check_draft_vocabulary(tokenizer.vocab(), model.config.n_vocab, config.draft_tokenizer->vocab(),
                                           config.draft_model->config.n_vocab));
    RETURN_IF_ERROR(ModelRunner::check_kernels(*config.draft_model));
    ASSIGN_OR_RETURN(draft, DraftModel::prepare(*config.draft_model, std::move(config.draft_weights),
                                                draft_model_config(config)));
  }
  config.draft_weights.reset();  // held by the draft model's runner
  return std::unique_ptr<Engine>(
      new Engine(model, tokenizer, config, std::move(kv), std::move(weights), std::move(draft)));
}

Engine::Engine(const Model& model, const Tokenizer& tokenizer, EngineConfig config, KvStorage kv,
               std::shared_ptr<const PackedWeights> weights, std::optional<DraftModel::Parts> draft)
    : model_(model),
      tokenizer_(tokenizer),
      config_(config),
      pool_(config.n_threads),
      runner_(model, &pool_, std::move(weights), config.n_ctx),
      kv_(std::move(kv)),
      blocks_(BlockPoolConfig{.block_size = config.block_size,
                              .n_blocks = static_cast<int32_t>(config.n_kv_tokens / config.block_size),
                              .prefix_caching = config.prefix_caching}),
      scheduler_(SchedulerConfig{.policy = config.schedule,
                                 .max_step_tokens = config.max_step_tokens,
                                 .max_running = config.max_seqs,
                                 .max_pause = std::chrono::milliseconds(std::max<int64_t>(config.max_pause_ms, 0)),
                                 .max_step_drafts = max_step_drafts(config)},
                 blocks_) {
  if (draft) draft_ = std::make_unique<DraftModel>(*config_.draft_model, std::move(*draft), &pool_, draft_model_config(config_));
  stats_.n_ctx = config_.n_ctx;
  stats_.max_seqs = config_.max_seqs;
  stats_.kv_block_size = config_.block_size;
  stats_.n_kv_blocks_total = blocks_.n_blocks();
  for (int32_t id = 0; id < model.config.n_vocab; ++id) {
    if (tokenizer_.vocab().is_valid(id) && tokenizer_.vocab().is_eog(id)) eog_ids_.push_back(id);
  }
  if (config_.guard) {
    std::vector<std::string> pieces(static_cast<size_t>(model.config.n_vocab));
    for (size_t id = 0; id < pieces.size(); ++id) pieces[id] = tokenizer.token_to_piece(static_cast<int32_t>(id));
    mask_ = guard::build_token_mask(*config_.guard, pieces);
  }
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() { stop(); }

std::vector<int32_t> Engine::end_ids(const StopParams& stop) const {
  std::vector<int32_t> ids = stop.stop_token_ids;
  if (!stop.ignore_eos) ids.insert(ids.end(), eog_ids_.begin(), eog_ids_.end());
  return ids;
}

const grammar::TokenTrie& Engine::grammar_trie() {
  if (!grammar_trie_) {
    // Built on first use (engine thread): a server that never constrains pays nothing.
    const auto t0 = Timings::Clock::now();
    const int32_t n_vocab = model_.config.n_vocab;
    std::vector<std::string> pieces(static_cast<size_t>(n_vocab));
    for (int32_t id = 0; id < n_vocab; ++id) {
      if (!tokenizer_.vocab().is_valid(id)) continue;
      pieces[id] = tokenizer_.token_to_piece(id);
    }
    grammar_trie_ = std::make_unique<grammar::TokenTrie>(pieces);
    grammar_mask_ = TokenMask(n_vocab);
    log::info("token trie for constrained decoding built",
              {{"n_tokens", std::to_string(n_vocab)}, {"n_nodes", std::to_string(grammar_trie_->n_nodes())},
               {"ms", std::to_string(seconds_since(t0) * 1000)}});
  }
  return *grammar_trie_;
}

void Engine::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  // thread_ is read and joined under join_mu_ only: concurrent stop() calls
  // (a signal-handling thread and the destructor) neither race on it nor
  // join twice; the second waits for the first's join to end.
  std::lock_guard<std::mutex> lock(join_mu_);
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<RequestChannel> Engine::submit(Request request) {
  auto channel = std::make_shared<RequestChannel>(request.id);
  const auto now = Timings::Clock::now();
  const int64_t n_prompt = static_cast<int64_t>(request.prompt_ids.size());
  Status refused;
  {
    std::lock_guard<std::mutex> lock(mu_);
    refused = stop_ ? shutting_down_error() : check_queue_bounds_locked(n_prompt);
    if (refused.ok()) {
      inbox_.push_back(Submitted{.request = std::move(request), .channel = channel, .t_submit = now});
      ++stats_.n_waiting;
      ++stats_.n_queued;
      stats_.n_queued_prompt_tokens += n_prompt;
    }
  }
  if (refused.ok()) {
    // After the unlock: the woken engine thread does not then block on mu_
    // still held here (a second sleep and wake-up per submit).
    cv_.notify_all();
    return channel;
  }
  // Refused before it reached the engine thread: nothing running notices.
  Event e{.kind = EventKind::kError, .finish = FinishReason::kError};
  e.error = std::move(refused);
  channel->push(std::move(e));
  return channel;
}

Status Engine::check_queue_bounds_locked(int64_t n_prompt) const {
  // Requests beyond the free batch slots wait; this one included.
  const int64_t free_slots = std::max<int64_t>(0, config_.max_seqs - stats_.n_running);
  const int64_t n_wait = stats_.n_queued + 1 - free_slots;
  if (n_wait <= 0) return Status();
  if (config_.max_queue >= 0 && n_wait > config_.max_queue) {
    return overloaded_error("overloaded: the queue is full (" + std::to_string(n_wait - 1) + " waiting, --max-queue " +
                                std::to_string(config_.max_queue) + ")",
                            retry_after_ms_locked());
  }
  if (config_.max_queue_tokens > 0 && stats_.n_queued_prompt_tokens + n_prompt > config_.max_queue_tokens) {
    return overloaded_error("overloaded: the queue is full (" + std::to_string(stats_.n_queued_prompt_tokens) +
                                " prompt tokens waiting, " + std::to_string(n_prompt) + " in this request, " +
                                "--max-queue-tokens " + std::to_string(config_.max_queue_tokens) + ")",
                            retry_after_ms_locked());
  }
  return Status();
}

int64_t Engine::retry_after_ms_locked() const { return retry_after_estimate_ms(stats_.n_queued, done_per_s_); }

int64_t retry_after_estimate_ms(int64_t n_queued, double done_per_s) {
  // A completion frees a slot for one waiting request: by the time half of
  // the queue (and one more) has been admitted at the recent completion
  // rate, a retry finds room without every refused client retrying at once.
  if (!(done_per_s > 0)) return kMinRetryMs;
  const double seconds = (static_cast<double>(std::max<int64_t>(n_queued, 0)) / 2 + 1) / done_per_s;
  if (!(seconds * 1000 < static_cast<double>(kMaxRetryMs))) return kMaxRetryMs;
  return std::max(kMinRetryMs, static_cast<int64_t>(std::llround(seconds * 1000)));
}

double completion_rate(std::span<const Timings::Clock::time_point> done, Timings::Clock::time_point now) {
  size_t n = 0;
  auto first = now;
  for (Timings::Clock::time_point t : done) {
    if (now - t > kRecentWindow) continue;
    ++n;
    first = std::min(first, t);
  }
  const double span_s = std::max(1.0, std::chrono::duration<double>(now - first).count());
  return static_cast<double>(n) / span_s;
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void Engine::loop() {
  for (;;) {
    {
      // Blocks only when nothing is queued or running: a queued request is
      // scheduler work, so its queue deadline (expire_queued) is checked every
      // step or kPausedPoll, whichever comes first.
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !inbox_.empty() || scheduler_.has_work(); });
      if (stop_) break;
    }
    take_inbox();
    const bool stepped = step();
    publish_stats();
    if (!stepped) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, kPausedPoll, [&] { return stop_ || !inbox_.empty(); });
    }
  }
  // Shutting down: everything still known ends with an error event.
  take_inbox();
  std::vector<SeqId> ids;
  for (const auto& [id, live] : live_) ids.push_back(id);
  for (SeqId id : ids) {
    Live& live = *live_.at(id);
    finish(live, FinishReason::kError, shutting_down_error());
  }
  publish_stats();
}

void Engine::take_inbox() {
  std::vector<Submitted> inbox;
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox.swap(inbox_);
  }
  for (Submitted& s : inbox) admit(std::move(s.request), std::move(s.channel), s.t_submit);
}

void Engine::admit(Request request, std::shared_ptr<RequestChannel> channel, Timings::Clock::time_point t_submit) {
  auto fail = [&](Status error) {
    {
      std::lock_guard<std::mutex> lock(mu_);  // it was counted as queued by submit()
      --stats_.n_queued;
      stats_.n_queued_prompt_tokens -= static_cast<int64_t>(request.prompt_ids.size());
    }
    Event e{.kind = EventKind::kError, .finish = FinishReason::kError};
    e.usage.n_prompt_tokens = static_cast<int64_t>(request.prompt_ids.size());
    e.error = std::move(error);
    channel->push(std::move(e));
  };
  const int64_t n_prompt = static_cast<int64_t>(request.prompt_ids.size());
  if (n_prompt == 0) return fail(invalid_argument("the prompt has no tokens"));
  for (int32_t id : request.prompt_ids) {
    if (id < 0 || id >= model_.config.n_vocab) return fail(invalid_argument("prompt token id " + std::to_string(id) + " is outside the vocabulary"));
  }
  // logit_bias ids past the vocabulary would be ignored silently: refused, as OpenAI does.
  if (!request.sampling.logit_bias.empty() && request.sampling.logit_bias.rbegin()->first >= model_.config.n_vocab) {
    return fail(invalid_argument("logit_bias token id " + std::to_string(request.sampling.logit_bias.rbegin()->first) +
                                     " is outside the vocabulary (" + std::to_string(model_.config.n_vocab) + " tokens)",
                                 {.reason = ErrorReason::kInvalidValue, .labels = {.field = "logit_bias"}}));
  }
  for (int32_t id : request.stop.stop_token_ids) {
    if (id < 0 || id >= model_.config.n_vocab) {
      return fail(invalid_argument("stop token id " + std::to_string(id) + " is outside the vocabulary (" +
                                       std::to_string(model_.config.n_vocab) + " tokens)",
                                   {.reason = ErrorReason::kInvalidValue, .labels = {.field = "stop_token_ids"}}));
    }
  }
  if (n_prompt >= config_.n_ctx) {
    return fail(out_of_range("the prompt has " + std::to_string(n_prompt) + " tokens; the context window is " +
                                 std::to_string(config_.n_ctx),
                             {.reason = ErrorReason::kContextLengthExceeded,
                              .numbers = {.n_prompt_tokens = n_prompt, .n_ctx = config_.n_ctx, .max_tokens_fit = 0}}));
  }
  if (request.stop.max_tokens < 1) return fail(invalid_argument("max_tokens must be at least 1"));
  if (const auto& sp = request.stop.span) {
    if (sp->end_text.empty() || (sp->budget > 0 && sp->end_ids.empty()) || sp->budget < 0) {
      return fail(invalid_argument("span: an end text is required, and end ids with a budget"));
    }
    for (int32_t id : sp->end_ids) {
      if (id < 0 || id >= model_.config.n_vocab) return fail(invalid_argument("span end id outside the vocabulary"));
    }
  }
  const int64_t max_total = std::min<int64_t>(config_.n_ctx, n_prompt + request.stop.max_tokens);
  const bool prompt_logprobs = request.prompt_logprobs >= 0;
  SequenceSpec spec{.tenant = request.tenant,
                    .prompt = request.prompt_ids,
                    .max_total_tokens = static_cast<int32_t>(max_total),
                    .priority = request.priority,
                    .reuse_prefix = !prompt_logprobs,
                    .max_chunk = prompt_logprobs ? static_cast<int32_t>(std::clamp<int64_t>(
                                                       kPromptLogitsBytes / (int64_t{4} * model_.config.n_vocab), 1, INT32_MAX))
                                                 : 0};
  auto seq = scheduler_.submit(std::move(spec));
  if (!seq.ok()) return fail(seq.status());
  auto live = std::make_unique<Live>(std::move(request), std::move(channel), tokenizer_, config_.guard, mask_.get());
  if (live->request.stop.min_tokens > 0) live->sampler.hold_end(end_ids(live->request.stop), live->request.stop.min_tokens);
  if (live->request.constraint) live->constraint.emplace(*live->request.constraint, grammar_trie(), end_ids(live->request.stop));
  if (const SpeculativeParams sp = live->request.speculative.value_or(SpeculativeParams{.enabled = config_.speculative});
      sp.enabled && !live->span && !live->request.stop.prefill_only) {
    live->speculates = true;
    live->tenant_salt = BlockPool::tenant_salt(live->request.tenant);
    if (!draft_) live->ngram.emplace(spec::NgramConfig{.n_min = config_.spec_ngram_min,
                                          .n_max = config_.spec_ngram_max,
                                          .max_tokens = static_cast<int32_t>(std::min<int64_t>(config_.n_ctx, INT32_MAX))});
    // A request may ask for shorter drafts than the server's, not longer: the server's bounds
    // what a verify pass (and a draft model's passes) may cost.
    live->draft_len = spec::DraftLength(sp.draft_max > 0 ? std::min(sp.draft_max, config_.spec_draft_max) : config_.spec_draft_max);
  }
  if (prompt_logprobs) {  // the first token's entry: nothing comes before it
    TokenLogprobs first;
    first.chosen = {.id = live->request.prompt_ids[0], .logprob = std::numeric_limits<float>::quiet_NaN(),
                    .piece = tokenizer_.token_to_piece(live->request.prompt_ids[0], /*render_special=*/true)};
    live->prompt_logprobs.push_back(std::move(first));
  }
  live->seq = *seq;
  live->usage.n_prompt_tokens = n_prompt;
  live->n_queued_tokens = n_prompt;
  live->timings.t_submit = t_submit;
  ++n_queued_live_;
  live_.emplace(*seq, std::move(live));
}

void Engine::leave_queue(Live& live, int64_t n_running) {
  if (!live.queued) return;
  live.queued = false;
  --n_queued_live_;
  std::lock_guard<std::mutex> lock(mu_);
  --stats_.n_queued;
  stats_.n_queued_prompt_tokens -= live.n_queued_tokens;
  if (n_running >= 0) stats_.n_running = n_running;
}

void Engine::expire_queued(Timings::Clock::time_point now) {
  oldest_queued_ = {};
  if (n_queued_live_ == 0) return;
  const auto timeout = std::chrono::milliseconds(config_.queue_timeout_ms);
  std::vector<SeqId> expired;
  for (const auto& [id, live] : live_) {
    if (!live->queued) continue;
    if (config_.queue_timeout_ms > 0 && now - live->timings.t_submit >= timeout && !live->channel->cancelled()) {
      expired.push_back(id);
    } else if (oldest_queued_ == Timings::Clock::time_point{} || live->timings.t_submit < oldest_queued_) {
      oldest_queued_ = live->timings.t_submit;
    }
  }
  if (expired.empty()) return;
  int64_t retry_ms = kMinRetryMs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    retry_ms = retry_after_ms_locked();
  }
  for (SeqId id : expired) {
    finish(*live_.at(id), FinishReason::kError, queue_timeout_error(config_.queue_timeout_ms, retry_ms));
  }
}

void Engine::note_done(Timings::Clock::time_point now) {
  if (recent_done_.size() < kRecentDone) {
    recent_done_.push_back(now);
    return;
  }
  recent_done_[recent_done_next_] = now;
  recent_done_next_ = (recent_done_next_ + 1) % kRecentDone;
}

void Engine::apply_cancellations_and_backpressure() {
  const auto now = Timings::Clock::now();
  for (auto& [id, live] : live_) {
    if (live->channel->cancelled()) {
      scheduler_.cancel(id);
    } else {
      scheduler_.set_paused(id, live->channel->pending() > config_.max_pending_events, now);
    }
  }
}

void Engine::settle_plan(const StepPlan& plan) {
  for (SeqId id : plan.cancelled) {
    auto it = live_.find(id);
    if (it == live_.end()) continue;
    Event e{.kind = EventKind::kFinish, .finish = FinishReason::kCancelled};
    e.usage = it->second->usage;
    e.timings = it->second->timings;
    leave_queue(*it->second);
    if (it->second->admitted_once) note_done(Timings::Clock::now());
    // The scheduler has dropped it: the stats show its slot and blocks free
    // before its last event (with admissions in this plan, their update
    // below publishes the batch's size: the batch never counts a request
    // that the queue still counts).
    if (plan.admitted.empty()) publish_stats();
    it->second->channel->push(std::move(e));
    live_.erase(it);
  }
  const auto now = Timings::Clock::now();
  // The first admissions leave the queue with the batch's new size in one
  // update: submit() never sees the queue shrink before the slots fill.
  const int64_t n_running = plan.admitted.empty() ? -1 : static_cast<int64_t>(scheduler_.stats().n_running);
  for (SeqId id : plan.admitted) {
    Live& live = *live_.at(id);
    if (!live.admitted_once) {
      live.admitted_once = true;
      live.timings.t_scheduled = now;
      live.usage.n_cached_tokens = scheduler_.sequence(id).n_cached_prompt;
      n_prompt_total_ += live.usage.n_prompt_tokens;
      n_cached_total_ += live.usage.n_cached_tokens;
      leave_queue(live, n_running);
    }
  }
  if constexpr (obs::kEnabled) {
    if (config_.obs_sink && !plan.pause_preempted.empty()) {
      config_.obs_sink->on_pause_preemptions(static_cast<int>(plan.pause_preempted.size()));
    }
  }
}

bool Engine::step() {
  expire_queued(Timings::Clock::now());
  apply_cancellations_and_backpressure();
  plan_drafts();
  StepPlan plan = scheduler_.schedule();
  settle_plan(plan);
  if (plan.empty()) return !plan.cancelled.empty() || !plan.pause_preempted.empty();
  if (draft_) draft_prompts();

  batch_.clear();
  for (const ScheduledSeq& it : plan.items) {
    const Sequence& s = scheduler_.sequence(it.id);
    std::span<const int32_t> tokens = std::span(s.tokens).subspan(it.pos, it.n_draft > 0 ? 1 : it.n_tokens);
    if (it.n_draft > 0) {
      // [last token, drafts]: the drafts are not the sequence's tokens until accepted.
      Live& live = *live_.at(it.id);
      live.verify_tokens.assign(tokens.begin(), tokens.end());
      live.verify_tokens.insert(live.verify_tokens.end(), live.draft.begin(), live.draft.begin() + it.n_draft);
      tokens = live.verify_tokens;
    }
    // Request::prompt_logprobs: every position's logits until the prompt's entries are complete
    // (an item past the prompt, e.g. a decode, needs none: no lookup).
    bool prompt_rows = false;
    if (it.pos + 1 < s.n_prompt) {
      const Live& live = *live_.at(it.id);
      prompt_rows = live.request.prompt_logprobs >= 0 && live.prompt_logprobs_next < s.n_prompt;
    }
    batch_.push_back(BatchSequence{.tokens = tokens,
                                   .n_past = it.pos,
                                   .block_table = s.blocks.table(),
                                   .all_logits = it.n_draft > 0 || prompt_rows,
                                   .want_logits = it.samples || prompt_rows});
  }
  if constexpr (obs::kEnabled) {
    if (config_.obs_sink && !plan.preempted.empty()) {
      config_.obs_sink->on_preemptions(static_cast<int>(plan.preempted.size()));
    }
  }
  const auto t_step = Timings::Clock::now();
  logits_.clear();
  Status st = runner_.forward(batch_, kv_, logits_);
  if (st.ok() && config_.schedule == SchedulePolicy::kLatency) {
    // The latency policy sizes steps by their fixed cost, measured here.
    step_cost_.observe(plan.n_tokens, seconds_since(t_step));
    scheduler_.set_step_overhead_tokens(step_cost_.overhead_tokens(scheduler_.config().step_overhead_tokens));
  }
  if (!st.ok()) {
    scheduler_.abandon_step();
    for (const ScheduledSeq& it : plan.items) finish(*live_.at(it.id), FinishReason::kError, st);
    return true;
  }
  const int64_t n_vocab = model_.config.n_vocab;
  int64_t row = 0;
  for (const ScheduledSeq& it : plan.items) {
    Live& live = *live_.at(it.id);
    if (live.request.prompt_logprobs >= 0 && live.prompt_logprobs_next <= scheduler_.sequence(it.id).n_prompt) {
      const bool rows = batch_[&it - plan.items.data()].all_logits && it.n_draft == 0;
      collect_prompt_logprobs(live, it, rows ? row : -1);
      if (rows) row += it.n_tokens - (it.samples ? 1 : 0);  // the last row, when it samples, is sampled below
    }
    if (!it.samples) {
      scheduler_.on_step_done(it.id, std::nullopt);
      continue;
    }
    if (live.timings.t_prefilled == Timings::Clock::time_point{}) live.timings.t_prefilled = Timings::Clock::now();
    if (it.n_draft > 0) {
      row += accept_draft(live, it, row);
      continue;
    }
    if (live.request.stop.prefill_only) {
      // Validate mode: the prefill (logits included, as a real first token
      // costs) is all it wanted. The placeholder token is never emitted.
      ++row;
      scheduler_.on_step_done(it.id, 0);
      finish(live, FinishReason::kMaxTokens);
      continue;
    }
    // A budgeted span whose budget is spent: its end is forced, not sampled
    // (nor vetoed by the guard's mask, which still sees it through accept()).
    const std::optional<int32_t> forced = live.span ? live.span->forced_next() : std::nullopt;
    if (forced) live.sampler.accept(*forced);
    // A grammar that keeps reaching the mask's work bound (in this output or
    // the request's others) ends before it holds the engine thread, and
    // every co-batched sequence, at each of its tokens: no more walks once
    // the request's count is reached.
    const bool ambiguous = !forced && live.constraint && live.constraint->too_ambiguous();
    const TokenMask* grammar_mask =
        !forced && !ambiguous && live.constraint ? live.constraint->mask(grammar_mask_) : nullptr;
    if (ambiguous || (grammar_mask != nullptr && live.constraint->too_ambiguous())) {
      ++row;
      scheduler_.on_step_done(it.id, 0);
      finish(live, FinishReason::kError, grammar_too_ambiguous());
      continue;
    }
    const std::span<float> logits(logits_.data() + row * n_vocab, n_vocab);
    // The sampler transforms the logits in place; a forced token leaves them as they are.
    const bool wants_logprobs = live.request.logprobs >= 0;
    if (wants_logprobs && !forced) keep_raw_logits(logits);
    auto token = forced ? Result<int32_t>(*forced) : live.sampler.sample(logits, grammar_mask, live.out_guard.veto());
    ++row;
    const std::optional<GuardAction> masked = live.out_guard.take_refusal();
    if (masked) report_guard(live, *masked);
    if (!token.ok() && masked) {
      // Every allowed token would complete a banned phrase: a safety stop.
      scheduler_.on_step_done(it.id, 0);
      finish(live, FinishReason::kSafety);
      continue;
    }
    if (!token.ok()) {
      // Every id banned: the step must still be reported with a token before
      // the sequence can end; the placeholder is never emitted. A NaN left
      // after the request's bias and masks (which only add finite values or
      // write -inf) came from the model: a server fault, not the client's.
      scheduler_.on_step_done(it.id, 0);
      const bool model_fault = std::any_of(logits.begin(), logits.end(), [](float l) { return std::isnan(l); });
      // A grammar whose mask was cut at the masker's work bound before any
      // token was found: the client's grammar, named as the cause.
      const bool grammar_bound = grammar_mask != nullptr && live.constraint->mask_truncated();
      finish(live, FinishReason::kError,
             model_fault     ? internal_error("the model produced non-finite logits (NaN): no token can be sampled")
             : grammar_bound ? grammar_too_ambiguous()
                             : token.status());
      continue;
    }
    live.out_guard.accept(*token);
    if (live.constraint) live.constraint->accept(*token, tokenizer_.token_to_piece(*token));
    scheduler_.on_step_done(it.id, *token);
    if (!wants_logprobs) {
      handle_token(live, *token);
      continue;
    }
    TokenLogprobs entry = token_logprobs(forced ? std::span<const float>(logits) : logprob_row_, *token, live.request.logprobs);
    handle_token(live, *token, 0, &entry);
  }
  if constexpr (obs::kEnabled) {
    if (config_.obs_sink && row > 0) {
      config_.obs_sink->on_decode_step(seconds_since(t_step), static_cast<int>(plan.items.size()));
    }
  }
  return true;
}

void Engine::plan_drafts() {
  draft_wants_.clear();
  for (auto& [id, live] : live_) {
    if (!live->speculates || live->out_guard.veto()) continue;
    // A constrained output drafts only while unmasked (a tool call's grammar
    // waiting for its marker, a thinking part before the answer's grammar).
    if (live->constraint && live->constraint->masks()) continue;
    const Sequence* s = scheduler_.find(id);
    if (!s || s->state != SeqState::kRunning || s->paused) continue;
    // Every accepted token counts against max_tokens, and one more always comes after them.
    const int64_t room = int64_t{live->request.stop.max_tokens} - live->usage.n_generated_tokens - 1;
    if (room <= 0) continue;
    if (s->n_uncomputed() != 1) continue;
    const int32_t k = live->draft_len.next();
    if (k <= 0) continue;
    const auto k_now = static_cast<int32_t>(std::min<int64_t>(k, room));
    if (!live->ngram) {
      draft_wants_.push_back({.id = id, .tenant = live->tenant_salt, .tokens = s->tokens, .k = k_now, .out = &live->draft});
      continue;
    }
    live->ngram->draft(s->tokens, k_now, &live->draft);
    if (!live->draft.empty()) scheduler_.set_draft(id, static_cast<int32_t>(live->draft.size()));
  }
  if (draft_) draft_from_model();
}

void Engine::draft_prompts() {
  // After schedule(): a sequence admitted this step catches up from this step on.
  draft_wants_.clear();
  for (auto& [id, live] : live_) {
    if (!live->speculates || live->ngram) continue;
    const Sequence* s = scheduler_.find(id);
    if (!s || s->state != SeqState::kRunning || s->paused || s->n_uncomputed() <= 1) continue;
    if (live->request.stop.max_tokens - live->usage.n_generated_tokens <= 1) continue;  // it will never draft
    draft_wants_.push_back({.id = id, .tenant = live->tenant_salt, .tokens = s->tokens, .k = 0, .out = &live->draft});
  }
  if (!draft_wants_.empty()) draft_->draft(draft_wants_);
}

void Engine::draft_from_model() {
  // Slots of sequences that ended or stopped running go back first, for the sequences below.
  for (SeqId id : draft_->holders()) {
    const Sequence* s = scheduler_.find(id);
    if (!live_.contains(id) || !s || s->state != SeqState::kRunning) draft_->release(id);
  }
  if (draft_wants_.empty()) return;
  draft_->draft(draft_wants_);
  for (const DraftModel::Want& w : draft_wants_) {
    if (!w.out->empty()) scheduler_.set_draft(w.id, static_cast<int32_t>(w.out->size()));
    // Unsure of its first token: a missed draft, so that a draft model that rarely knows
    // backs off (spec::DraftLength) instead of costing a pass every step.
    if (w.declined) live_.at(w.id)->draft_len.on_verified(w.k, 0);
  }
}

int64_t Engine::accept_draft(Live& live, const ScheduledSeq& it, int64_t row) {
  const int64_t n_vocab = model_.config.n_vocab;
  live.accepted.clear();
  live.accepted_logprobs.clear();
  const bool wants_logprobs = live.request.logprobs >= 0;
  Status error;
  int32_t n_matched = 0;
  for (int32_t i = 0; i <= it.n_draft; ++i) {
    std::span<float> logits(logits_.data() + (row + i) * n_vocab, n_vocab);
    // Each row's logits are its position's, as a plain step's are: the same logprobs.
    if (wants_logprobs) keep_raw_logits(logits);
    // The row after the last draft token has no draft to judge: -1 is never a token.
    Result<Sampler::Verdict> v = live.sampler.verify(logits, i < it.n_draft ? live.draft[i] : -1);
    if (!v.ok()) {
      error = v.status();
      break;
    }
    live.accepted.push_back(v->token);
    if (wants_logprobs) live.accepted_logprobs.push_back(token_logprobs(logprob_row_, v->token, live.request.logprobs));
    if (v->accepted) ++n_matched;
    if (live.constraint) {
      // Drafts are planned unmasked (plan_drafts); a token that starts the
      // grammar (a tool call's marker) masks the next one, which a plain
      // step then samples: the rows after it are dropped.
      live.constraint->accept(v->token, tokenizer_.token_to_piece(v->token));
      if (live.constraint->masks()) break;
    }
    if (!v->accepted) break;
  }
  const SeqId id = live.seq;
  if (live.accepted.empty()) {
    // Every id banned at the first row: as a plain step (the placeholder is never emitted).
    scheduler_.on_step_done(id, 0);
    finish(live, FinishReason::kError, error);
    return 1 + it.n_draft;
  }
  // After a row that failed or a token that starts a grammar, the last accepted token is
  // computed again next step, as a plain decode.
  const auto n_accepted = static_cast<int32_t>(live.accepted.size());
  scheduler_.on_step_done(id, std::span<const int32_t>(live.accepted));
  live.draft_len.on_verified(it.n_draft, n_matched);
  n_spec_draft_total_ += it.n_draft;
  n_spec_accepted_total_ += n_matched;
  ++n_spec_passes_total_;
  if constexpr (obs::kEnabled) {
    if (config_.obs_sink) config_.obs_sink->on_spec_verify(it.n_draft, n_matched);
  }
  const std::vector<int32_t> accepted = live.accepted;  // live may end in the loop
  std::vector<TokenLogprobs> accepted_logprobs = std::move(live.accepted_logprobs);
  for (int32_t j = 0; j < n_accepted; ++j) {
    live.out_guard.accept(accepted[j]);
    handle_token(live, accepted[j], n_accepted - 1 - j, wants_logprobs ? &accepted_logprobs[j] : nullptr);
    if (!live_.contains(id)) break;  // it ended: the rest is dropped
  }
  return 1 + it.n_draft;
}

void Engine::keep_raw_logits(std::span<const float> logits) { logprob_row_.assign(logits.begin(), logits.end()); }

void Engine::collect_prompt_logprobs(Live& live, const ScheduledSeq& item, int64_t row) {
  const std::vector<int32_t>& prompt = live.request.prompt_ids;
  const auto n_prompt = static_cast<int32_t>(prompt.size());
  const int64_t n_vocab = model_.config.n_vocab;
  for (int32_t j = 0; row >= 0 && j < item.n_tokens; ++j) {
    const int32_t next = item.pos + j + 1;  // the prompt token these logits predict
    if (next != live.prompt_logprobs_next || next >= n_prompt) continue;
    const std::span<const float> logits(logits_.data() + (row + j) * n_vocab, n_vocab);
    live.prompt_logprobs.push_back(token_logprobs(logits, prompt[next], live.request.prompt_logprobs));
    ++live.prompt_logprobs_next;
  }
  if (live.prompt_logprobs_next == n_prompt) {  // complete: out before any generated token
    live.prompt_logprobs_next = n_prompt + 1;
    Event e{.kind = EventKind::kText, .prompt_logprobs = std::move(live.prompt_logprobs)};
    e.usage = live.usage;
    e.timings = live.timings;
    live.channel->push(std::move(e));
  }
}

TokenLogprobs Engine::token_logprobs(std::span<const float> raw, int32_t token, int32_t n_top) const {
  TokenLogprobs entry;
  sampling::logprobs(raw, token, n_top, &entry);
  entry.chosen.piece = tokenizer_.token_to_piece(token, /*render_special=*/true);
  for (TokenLogprob& t : entry.top) t.piece = tokenizer_.token_to_piece(t.id, /*render_special=*/true);
  return entry;
}

std::vector<TokenLogprobs> Engine::release_logprobs(Live& live, bool all) {
  std::vector<TokenLogprobs> out;
  while (!live.pending_logprobs.empty() && (all || live.pending_logprobs.front().start < live.n_emitted_bytes)) {
    out.push_back(std::move(live.pending_logprobs.front().entry));
    live.pending_logprobs.pop_front();
  }
  return out;
}

void Engine::handle_token(Live& live, int32_t token, int32_t n_later, TokenLogprobs* logprobs) {
  const auto now = Timings::Clock::now();
  if constexpr (obs::kEnabled) {
    if (config_.obs_sink) report_token(live.timings, live.usage.n_generated_tokens == 0, now);
  }
  if (live.usage.n_generated_tokens == 0) live.timings.t_first_token = now;
  live.timings.t_last_token = now;
  ++live.usage.n_generated_tokens;
  ++n_generated_total_;
  const StopParams& sp = live.request.stop;
  const bool stop_id = std::find(sp.stop_token_ids.begin(), sp.stop_token_ids.end(), token) != sp.stop_token_ids.end();
  if (stop_id || (!sp.ignore_eos && tokenizer_.vocab().is_eog(token))) {
    return finish(live, FinishReason::kEndOfSequence, Status(), token);
  }
  std::string piece = live.detok.push(token);
  if (live.span) live.span->observe(piece);
  // With redaction, ids and logprobs (their pieces) would reveal what the text holds back:
  // none are sent.
  const bool redacts = live.out_guard.redacts();
  if (logprobs && !redacts) live.pending_logprobs.push_back({.start = live.n_detok_bytes, .entry = std::move(*logprobs)});
  live.n_detok_bytes += static_cast<int64_t>(piece.size());
  StopFeed fed = live.stop.feed(piece);
  live.n_emitted_bytes += static_cast<int64_t>(fed.text.size());
  bool guard_stop = false;
  std::string text = guard_text(live, std::move(fed.text), /*end=*/false, &guard_stop);
  std::vector<int32_t> ids;
  if (live.request.return_token_ids && !redacts) ids.push_back(token);
  emit(live, std::move(text), std::move(ids), release_logprobs(live, /*all=*/false));
  if (guard_stop) return finish(live, FinishReason::kSafety);
  if (fed.stop) return finish(live, FinishReason::kStopSequence);
  const Sequence& s = scheduler_.sequence(live.seq);
  if (live.usage.n_generated_tokens >= sp.max_tokens) {
    // A grammar that completed with end_when_complete allows only the end
    // next: the output is whole (a forced call, a JSON answer), not cut.
    const bool whole = live.constraint && live.constraint->phase() == ConstrainedOutput::Phase::kEnded;
    return finish(live, whole ? FinishReason::kEndOfSequence : FinishReason::kMaxTokens);
  }
  if (s.n_tokens() - n_later >= s.max_total_tokens) return finish(live, FinishReason::kContextWindow);
}

void Engine::emit(Live& live, std::string text, std::vector<int32_t> ids, std::vector<TokenLogprobs> logprobs) {
  if (text.empty() && ids.empty() && logprobs.empty()) return;
  Event e{.kind = EventKind::kText, .text = std::move(text), .token_ids = std::move(ids), .logprobs = std::move(logprobs)};
  e.usage = live.usage;
  e.timings = live.timings;
  live.channel->push(std::move(e));
}

void Engine::finish(Live& live, FinishReason reason, Status error, std::optional<int32_t> final_token) {
  if (reason != FinishReason::kError && !live.out_guard.stopped()) {
    // Release what the detokenizer and the stop matcher still hold (after a
    // stop string: nothing), then what the guard holds (after a guard stop:
    // nothing; a mask that left no token releases the text before it).
    std::string tail;
    if (reason != FinishReason::kStopSequence) {
      StopFeed fed = live.stop.feed(live.detok.flush());
      tail = std::move(fed.text);
      if (fed.stop) {
        reason = FinishReason::kStopSequence;
      } else {
        tail += live.stop.flush();
      }
    }
    live.n_emitted_bytes += static_cast<int64_t>(tail.size());
    bool guard_stop = false;
    tail = guard_text(live, std::move(tail), /*end=*/true, &guard_stop);
    if (guard_stop) reason = FinishReason::kSafety;
    // Whatever is still waiting showed no text: after a stop string it never will.
    emit(live, std::move(tail), {}, release_logprobs(live, /*all=*/reason != FinishReason::kStopSequence));
  }
  Event e{.kind = error.ok() ? EventKind::kFinish : EventKind::kError, .finish = reason};
  if (final_token && live.request.return_token_ids) e.token_ids.push_back(*final_token);
  if (reason == FinishReason::kStopSequence) e.stop_sequence = live.stop.matched();
  e.usage = live.usage;
  e.timings = live.timings;
  e.error = std::move(error);
  // The slot, its blocks and the place in the queue are free, and the stats
  // say so, before the last event: a client that submits the moment it reads
  // that event is not refused (--max-queue 0) for a batch that is full only
  // until the end of this step.
  const SeqId id = live.seq;
  scheduler_.finish(id);
  leave_queue(live);
  if (live.admitted_once) note_done(Timings::Clock::now());
  publish_stats();
  live.channel->push(std::move(e));
  live_.erase(id);
}

std::string Engine::guard_text(Live& live, std::string text, bool end, bool* stop) {
  if (!live.out_guard.redacts()) return text;
  GuardedText g = end ? live.out_guard.finish(text) : live.out_guard.feed(text);
  for (const GuardAction& a : g.actions) report_guard(live, a);
  *stop = g.stop;
  return std::move(g.text);
}

void Engine::report_guard(const Live& live, const GuardAction& a) {
  const std::string& rule = live.out_guard.guard()->policy().rules[a.rule].name;
  if constexpr (obs::kEnabled) {
    if (config_.obs_sink) config_.obs_sink->on_guard_action(rule, "output", a.action);
  }
  // Never the matched text: the rule, the kind and what was done.
  log::info("guard action", {{"request_id", live.request.id}, {"rule", rule}, {"direction", "output"},
                             {"action", a.action}, {"kind", a.kind}});
}

void Engine::report_token(const Timings& t, bool first, Timings::Clock::time_point now) {
  using Seconds = std::chrono::duration<double>;
  if (first) {
    config_.obs_sink->on_first_token(Seconds(t.t_scheduled - t.t_submit).count(),
                                     Seconds(now - t.t_scheduled).count());
  } else {
    config_.obs_sink->on_inter_token(Seconds(now - t.t_last_token).count());
  }
}

void Engine::publish_stats() {
  const SchedulerStats ss = scheduler_.stats();
  const BlockPoolStats bs = blocks_.stats();
  const auto now = Timings::Clock::now();
  const double done_per_s = completion_rate(recent_done_, now);
  const double oldest_ms = oldest_queued_ == Timings::Clock::time_point{}
                               ? 0.0
                               : std::chrono::duration<double, std::milli>(now - oldest_queued_).count();
  std::lock_guard<std::mutex> lock(mu_);
  done_per_s_ = done_per_s;
  stats_.t_oldest_queued_ms = oldest_ms;
  stats_.n_pause_preemptions = ss.n_pause_preemptions;
  stats_.n_running = ss.n_running;
  stats_.n_paused = ss.n_paused;
  stats_.n_waiting = ss.n_waiting + static_cast<int64_t>(inbox_.size());
  stats_.n_kv_blocks_used = bs.n_used;
  stats_.n_kv_blocks_cached = bs.n_cached;
  stats_.n_steps = ss.n_steps;
  stats_.n_preemptions = ss.n_preemptions;
  stats_.n_prompt_tokens_total = n_prompt_total_;
  stats_.n_cached_tokens_total = n_cached_total_;
  stats_.n_generated_tokens_total = n_generated_total_;
  stats_.n_spec_draft_tokens = n_spec_draft_total_;
  stats_.n_spec_accepted_tokens = n_spec_accepted_total_;
  stats_.n_spec_passes = n_spec_passes_total_;
}

}  // namespace zl
