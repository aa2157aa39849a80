// The engine: one thread that owns the model runner, the paged KV cache and
// the scheduler, and turns submitted Requests into Events.
//
// Every step: take new requests from the inbox, note cancellations, ask the
// scheduler for a plan, run ONE forward pass over the ragged batch of all
// scheduled sequences (prefill chunks and decode tokens together), then for
// each sequence that reached the end of its tokens: sample (per-request
// Sampler), detokenize incrementally (valid UTF-8 deltas), match stop strings
// (held back, never emitted), push events, and finish the sequence when it
// ends (EOS/EOT, stop token, stop string, max_tokens, context window).
// Idle, the thread sleeps on a condition variable.
//
// Admission control (bounded queue). submit() counts the requests that were
// never admitted to the batch (inbox + scheduler waiting, first admission
// pending) and their prompt tokens, exactly, under mu_; a request that would
// have to wait (no free batch slot for it) is refused at once with a kError
// event, reason kOverloaded and retry_after_ms, when the waiting requests
// would then exceed max_queue or their prompt tokens max_queue_tokens. The
// counts drop at first admission, at a cancel or error while waiting, and at
// a queue timeout: a request not admitted within queue_timeout_ms ends with
// kQueueTimeout. Neither touches what already runs. A sequence paused by
// backpressure for max_pause_ms is pause-preempted by the scheduler and
// readmitted when its client catches up (scheduler.h); the client's stream
// goes on where it stopped.
//
// Speculative decoding (lossless; spec/ngram_draft.h, scheduler.h). A request that speculates
// (Request::speculative, else EngineConfig::speculative) keeps an n-gram index of its tokens;
// each step, a sequence about to decode proposes the up-to-k tokens that followed the latest
// earlier occurrence of its last n tokens (k from spec::DraftLength, adaptive), the scheduler
// extends its decode grant to the k + 1 positions [last token, drafts] from the budget that
// the step leaves, and the pass yields k + 1 logits rows. Row by row the sampler draws the
// token exactly as plain decoding would (Sampler::verify); while it equals the next draft
// token the next row counts too. The tokens so obtained (matched drafts, then the first
// token that differs or follows the last draft) each go through the normal per-token path
// (usage, stop ids, EOS, stop strings, max_tokens, events), which stops at the first that ends
// the request. Greedy output is token-for-token that of plain decoding, sampled output has
// its distribution (with a seed, the same tokens). A grammar constraint drafts only while its
// output is unmasked (a tool call's grammar waiting for its marker; a token that starts the
// grammar ends the pass's accepted tokens); guard masks, budgeted spans and validate mode do
// not speculate. Logprobs (Request::logprobs) keep speculation on: each accepted token's come
// from its own row of the verify pass, the logits plain decoding would have had there.
//
// Thread-safety: submit(), stats() and stop() may be called from any thread.
// Nothing else touches engine state: the I/O side sees only RequestChannels.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "engine/constraint.h"
#include "engine/draft_model.h"
#include "engine/kv_cache.h"
#include "engine/output_guard.h"
#include "engine/request.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/stop_matcher.h"
#include "model/model.h"
#include "obs/engine_sink.h"
#include "model/runner.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace zl {

struct EngineConfig {
  int64_t n_ctx = 0;             // per-sequence context window; 0: min(training context, 4096)
  // Sequences in one batch at most; 0: derived from the KV budget (default_max_seqs()).
  int32_t max_seqs = 0;
  int64_t n_kv_tokens = 0;       // KV cache capacity in tokens; 0: n_ctx × max_seqs, capped by memory (>= n_ctx)
  int32_t block_size = 16;       // tokens per KV block
  int32_t max_step_tokens = 512; // token budget of one step
  KvType kv_type = KvType::kF16;
  // How a step's prefill budget is shared (scheduler.h): kLatency puts the first token of new
  // requests first (shortest prompt first within a fairness bound), kThroughput fills each step
  // in arrival order.
  SchedulePolicy schedule = SchedulePolicy::kLatency;
  int n_threads = 0;             // compute threads; 0: all cores
  bool prefix_caching = true;
  size_t max_pending_events = 256;  // a sequence whose client lags this far behind is paused
  // Bounded queue (see the top comment). max_queue: never-admitted requests
  // waiting beyond the free batch slots, at most; -1: unlimited (zerolayer
  // serve's default is 4 × max_seqs). max_queue_tokens: their prompt tokens
  // at most (a request that gets a slot at once is never refused for it);
  // 0: unlimited. queue_timeout_ms: longest wait from submit() to first
  // admission; 0: unlimited. max_pause_ms: a sequence paused this long by
  // backpressure is preempted until its client catches up; 0: never.
  int64_t max_queue = -1;
  int64_t max_queue_tokens = 0;
  int64_t queue_timeout_ms = 0;
  int64_t max_pause_ms = 0;
  // Speculative decoding (see the top comment): whether requests speculate when they do not
  // say (Request::speculative), the draft tokens a sequence verifies per step at most (a
  // request's own draft_max may ask up to kMaxSpecDraft), and the n-gram sizes matched.
  bool speculative = false;
  int32_t spec_draft_max = 8;
  int32_t spec_ngram_min = 2;
  int32_t spec_ngram_max = 4;
  // A draft model (engine/draft_model.h): when set, requests that speculate take their drafts
  // from it, not from the n-gram index. Not owned; it and its tokenizer must outlive the
  // engine; its vocabulary must be the model's (check_draft_vocabulary, at create()).
  // draft_weights: its prepared weights (null: prepared at create()). draft_slots: sequences
  // that draft at once, each with a whole context of the draft's KV cache; 0: max_seqs,
  // capped by the contexts the model's own KV cache holds (n_kv_tokens / n_ctx); never more
  // than max_seqs.
  const Model* draft_model = nullptr;
  const Tokenizer* draft_tokenizer = nullptr;
  std::shared_ptr<const PackedWeights> draft_weights;
  int32_t draft_slots = 0;
  // Drafting stops at the first token the draft model gives a probability below this
  // (DraftModel::Config::p_min), in [0, 1].
  float draft_p_min = 0.8f;
  // Where the engine reports queue, prefill, decode-step and inter-token
  // times, batch sizes and preemptions (engine thread; not owned; must
  // outlive the engine). Null: nothing is reported.
  obs::EngineSink* obs_sink = nullptr;
  // The guard (guard/guard.h; immutable, shared with the API layer): its
  // output rules apply to every sequence (engine/output_guard.h). Mask rules
  // are compiled over the vocabulary once, at create(). Null: no guard.
  std::shared_ptr<const guard::Guard> guard;
};

// The smallest KV cache, in blocks, whatever the settings ask.
inline constexpr int32_t kMinKvBlocks = 4;

// max_seqs when none is given: as many sequences as the KV budget holds at
// kTypicalSeqTokens each (or a whole context, if smaller), within
// [kMinAutoSeqs, kMaxAutoSeqs]. `kv_tokens`: the KV cache's tokens (given, or
// the memory budget's). Pure.
inline constexpr int64_t kTypicalSeqTokens = 512;
inline constexpr int32_t kMinAutoSeqs = 4, kMaxAutoSeqs = 64;
// The division behind default_max_seqs (the sizing log explains it): tokens
// per sequence, the quotient, and the result after the clamp.
struct AutoSeqs {
  int64_t per_seq = 0, quotient = 0;
  int32_t max_seqs = 0;
};
AutoSeqs auto_max_seqs(int64_t kv_tokens, int64_t n_ctx);
inline int32_t default_max_seqs(int64_t kv_tokens, int64_t n_ctx) { return auto_max_seqs(kv_tokens, n_ctx).max_seqs; }

// Resolves the zero defaults of `config` for `model` (and free memory).
// The default KV size (n_kv_tokens 0) holds at least one full context; an
// explicit one is kept as given (rounded up to whole blocks, at least
// kMinKvBlocks), even below n_ctx. Idempotent.
EngineConfig resolve_engine_config(const ModelConfig& model, EngineConfig config);

// Draft tokens one step verifies at most, over all sequences: what the step's logits rows
// hold beyond one per sequence (engine_memory). Pure.
inline constexpr int32_t kMaxStepDrafts = 64;
int32_t max_step_drafts(const EngineConfig& resolved);

// What an engine with a resolved config allocates, saturating at UINT64_MAX
// (absurd settings cannot overflow): the KV cache with its block index, and
// the scratch of its largest step (max_step_tokens tokens, max_seqs + max_step_drafts logits rows).
struct EngineMemory {
  uint64_t kv_bytes = 0;
  uint64_t step_bytes = 0;
  uint64_t draft_kv_bytes = 0;  // the draft model's KV cache (EngineConfig::draft_model), else 0
};
// The draft model's slot settings of a resolved config (EngineConfig::draft_slots). Pure.
DraftModel::Config draft_model_config(const EngineConfig& resolved);
EngineMemory engine_memory(const ModelConfig& model, const EngineConfig& resolved);

// When a client refused for overload should retry (retry_after_ms), in ms:
// the time for half of the n_queued waiting requests, and one more, to be
// admitted at done_per_s completions a second; within [1000, 60000], 1000
// without a known rate. Pure.
int64_t retry_after_estimate_ms(int64_t n_queued, double done_per_s);
// Completions a second from the time points of recent ones: those within the
// last 60 s over the time since the oldest of them, at least 1 s (a burst of
// a few is not a high rate). Pure; O(done.size()).
double completion_rate(std::span<const Timings::Clock::time_point> done, Timings::Clock::time_point now);

class Engine final : public EngineApi {
 public:
  // The model and tokenizer must outlive the engine. Starts the engine thread.
  // ResourceExhausted, naming the bytes, when the KV cache or the step
  // scratch (engine_memory) does not fit in the memory available now.
  // `weights`: the model's prepared weights (cli/model_loading.h); null
  // prepares them here (PackedWeights::create: ResourceExhausted when they
  // do not fit).
  static Result<std::unique_ptr<Engine>> create(const Model& model, const Tokenizer& tokenizer, EngineConfig config,
                                                std::shared_ptr<const PackedWeights> weights = nullptr);
  ~Engine() override;  // stop()

  std::shared_ptr<RequestChannel> submit(Request request) override;
  EngineStats stats() const override;
  const EngineConfig& config() const { return config_; }
  // Cancels everything still queued or running and joins the engine thread.
  // Idempotent; thread-safe, concurrent calls included (not from the engine
  // thread itself, e.g. a channel notifier).
  void stop();

 private:
  struct Live;  // per-request state on the engine thread
  Engine(const Model& model, const Tokenizer& tokenizer, EngineConfig config, KvStorage kv,
         std::shared_ptr<const PackedWeights> weights, std::optional<DraftModel::Parts> draft);
  void loop();
  // Returns false when the plan was empty: every running sequence is paused
  // (backpressure) and nothing could be admitted.
  bool step();
  void take_inbox();
  void admit(Request request, std::shared_ptr<RequestChannel> channel, Timings::Clock::time_point t_submit);
  void apply_cancellations_and_backpressure();
  // Before the forward pass: cancelled sequences get their last event, first
  // admissions leave the queue (timings, usage), pause preemptions are reported.
  void settle_plan(const StepPlan& plan);
  // Under mu_: why a request of n_prompt tokens cannot queue now (an error
  // Status with kOverloaded), or OK.
  Status check_queue_bounds_locked(int64_t n_prompt) const;
  // Under mu_: when a refused client should retry, from the recent
  // completion rate (done_per_s_) and the queue length; >= 1000 ms.
  int64_t retry_after_ms_locked() const;
  // A never-admitted request stops counting as queued (first admission,
  // cancel, error, timeout). Idempotent per request.
  // n_running >= 0: also publishes the batch's size in the same update.
  void leave_queue(Live& live, int64_t n_running = -1);
  // Ends queued requests past queue_timeout_ms (kQueueTimeout) and notes the
  // oldest submit time of those left (stats: t_oldest_queued_ms).
  void expire_queued(Timings::Clock::time_point now);
  // A request ended after admission: feeds the completion rate behind retry_after_ms.
  void note_done(Timings::Clock::time_point now);
  // One generated token through the per-token path; `n_later`: tokens of the same step
  // already appended after it (a speculative pass), not yet handled. `logprobs`: its entry
  // when the request asked (Request::logprobs), else null.
  void handle_token(Live& live, int32_t token, int32_t n_later = 0, TokenLogprobs* logprobs = nullptr);
  // Request::logprobs: the raw logits of a row kept before the sampler transforms them in place
  // (logprob_row_), and the entry of the token chosen from them (n_top alternatives, pieces
  // filled).
  void keep_raw_logits(std::span<const float> logits);
  TokenLogprobs token_logprobs(std::span<const float> raw, int32_t token, int32_t n_top) const;
  // Request::prompt_logprobs: the entries of the prompt tokens whose preceding position is in
  // the item's rows (logits at `row` on, one per position; row -1: none), the whole list sent
  // once complete (a one-token prompt's at its first step).
  void collect_prompt_logprobs(Live& live, const ScheduledSeq& item, int64_t row);
  // Asks the scheduler for the drafts of the sequences about to decode (speculation).
  void plan_drafts();
  // The rows of a speculative item from `row` on: the accepted tokens reported and handled.
  // Returns the rows it had (1 + n_draft).
  int64_t accept_draft(Live& live, const ScheduledSeq& item, int64_t row);
  // A draft model's drafts for the sequences plan_drafts collected; frees the draft model's
  // slots of sequences no longer running.
  void draft_from_model();
  // A draft model computes the prompts of the speculating sequences that prefill this step
  // (at most max_step_tokens tokens), so that they draft from their first decode step on.
  void draft_prompts();

  // Ends a sequence: flushes held text, pushes the last event (with the ids of
  // a final EOS/stop token that produced no text), frees its blocks.
  void finish(Live& live, FinishReason reason, Status error = Status(), std::optional<int32_t> final_token = std::nullopt);
  void emit(Live& live, std::string text, std::vector<int32_t> ids, std::vector<TokenLogprobs> logprobs = {});
  // Request::logprobs: the waiting entries whose text has begun to be emitted; all of them at
  // a normal end (`all`).
  std::vector<TokenLogprobs> release_logprobs(Live& live, bool all);
  // The guard's output rules on text about to be emitted (finish: the end of
  // the text); counts and logs their actions. Sets *stop on a stop rule.
  std::string guard_text(Live& live, std::string text, bool end, bool* stop);
  // Counts (obs sink) and logs one guard action of a sequence.
  void report_guard(const Live& live, const GuardAction& action);
  void publish_stats();
  // obs_sink: queue and prefill times at a first token, else the inter-token gap.
  void report_token(const Timings& t, bool first, Timings::Clock::time_point now);

  const Model& model_;
  const Tokenizer& tokenizer_;
  EngineConfig config_;
  ThreadPool pool_;
  ModelRunner runner_;
  KvStorage kv_;
  BlockPool blocks_;
  Scheduler scheduler_;
  std::shared_ptr<const guard::TokenMaskTable> mask_;  // config_.guard's mask rules over the vocabulary
  // The ids that end a request's output: its stop ids, and the vocabulary's
  // end-of-generation ids (eog_ids_) unless it ignores EOS.
  std::vector<int32_t> end_ids(const StopParams& stop) const;
  std::vector<int32_t> eog_ids_;
  // Constrained decoding (engine/constraint.h): the vocabulary's trie, made
  // on first use by grammar_trie(); the step's mask.
  const grammar::TokenTrie& grammar_trie();
  std::unique_ptr<grammar::TokenTrie> grammar_trie_;
  TokenMask grammar_mask_{0};
  std::unordered_map<SeqId, std::unique_ptr<Live>> live_;
  std::vector<float> logits_;
  std::vector<float> logprob_row_;  // keep_raw_logits()
  std::vector<BatchSequence> batch_;
  std::unique_ptr<DraftModel> draft_;      // config_.draft_model's, or null
  std::vector<DraftModel::Want> draft_wants_;
  StepCostModel step_cost_;        // forward-pass times, for the latency policy's step sizing
  int64_t n_prompt_total_ = 0;     // engine thread; published by publish_stats()
  int64_t n_cached_total_ = 0;
  int64_t n_generated_total_ = 0;
  int64_t n_spec_draft_total_ = 0;     // engine thread; EngineStats::n_spec_*
  int64_t n_spec_accepted_total_ = 0;
  int64_t n_spec_passes_total_ = 0;
  int64_t n_queued_live_ = 0;      // engine thread: Live entries never admitted yet
  Timings::Clock::time_point oldest_queued_{};  // engine thread: their earliest submit; {} when none
  std::vector<Timings::Clock::time_point> recent_done_;  // engine thread: ring of the last completions
  size_t recent_done_next_ = 0;

  struct Submitted {
    Request request;
    std::shared_ptr<RequestChannel> channel;
    Timings::Clock::time_point t_submit;
  };
  mutable std::mutex mu_;  // guards inbox_, stop_, stats_, done_per_s_
  std::condition_variable cv_;
  std::vector<Submitted> inbox_;
  double done_per_s_ = 0;  // requests ended after admission per second, recently
  bool stop_ = false;
  EngineStats stats_;
  std::mutex join_mu_;  // guards thread_ after construction (stop())
  std::thread thread_;
};

}  // namespace zl
