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
// Thread-safety: submit(), stats() and stop() may be called from any thread.
// Nothing else touches engine state: the I/O side sees only RequestChannels.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
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
  int32_t max_seqs = 0;          // sequences in one batch at most; 0: 16
  int64_t n_kv_tokens = 0;       // KV cache capacity in tokens; 0: n_ctx × max_seqs, capped by memory
  int32_t block_size = 16;       // tokens per KV block
  int32_t max_step_tokens = 512; // token budget of one step
  KvType kv_type = KvType::kF16;
  int n_threads = 0;             // compute threads; 0: all cores
  bool prefix_caching = true;
  size_t max_pending_events = 256;  // a sequence whose client lags this far behind is paused
  // Where the engine reports queue, prefill, decode-step and inter-token
  // times, batch sizes and preemptions (engine thread; not owned; must
  // outlive the engine). Null: nothing is reported.
  obs::EngineSink* obs_sink = nullptr;
  // The guard (guard/guard.h; immutable, shared with the API layer): its
  // output rules apply to every sequence (engine/output_guard.h). Mask rules
  // are compiled over the vocabulary once, at create(). Null: no guard.
  std::shared_ptr<const guard::Guard> guard;
};

// Resolves the zero defaults of `config` for `model` (and free memory).
EngineConfig resolve_engine_config(const ModelConfig& model, EngineConfig config);

// What an engine with a resolved config allocates, saturating at UINT64_MAX
// (absurd settings cannot overflow): the KV cache with its block index, and
// the scratch of its largest step (max_step_tokens tokens, max_seqs logits rows).
struct EngineMemory {
  uint64_t kv_bytes = 0;
  uint64_t step_bytes = 0;
};
EngineMemory engine_memory(const ModelConfig& model, const EngineConfig& resolved);

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
         std::shared_ptr<const PackedWeights> weights);
  void loop();
  // Returns false when the plan was empty: every running sequence is paused
  // (backpressure) and nothing could be admitted.
  bool step();
  void take_inbox();
  void admit(Request request, std::shared_ptr<RequestChannel> channel);
  void apply_cancellations_and_backpressure();
  void handle_token(Live& live, int32_t token);
  // Ends a sequence: flushes held text, pushes the last event (with the ids of
  // a final EOS/stop token that produced no text), frees its blocks.
  void finish(Live& live, FinishReason reason, Status error = Status(), std::optional<int32_t> final_token = std::nullopt);
  void emit(Live& live, std::string text, std::vector<int32_t> ids);
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
  std::unordered_map<SeqId, std::unique_ptr<Live>> live_;
  std::vector<float> logits_;
  std::vector<BatchSequence> batch_;
  int64_t n_prompt_total_ = 0;     // engine thread; published by publish_stats()
  int64_t n_cached_total_ = 0;
  int64_t n_generated_total_ = 0;

  mutable std::mutex mu_;  // guards inbox_, stop_, stats_
  std::condition_variable cv_;
  std::vector<std::pair<Request, std::shared_ptr<RequestChannel>>> inbox_;
  bool stop_ = false;
  EngineStats stats_;
  std::mutex join_mu_;  // guards thread_ after construction (stop())
  std::thread thread_;
};

}  // namespace zl
