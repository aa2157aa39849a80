// The API-neutral request and the events the engine sends back.
//
// The HTTP layer parses a request body once into a Request (token ids are
// already computed: exact counts happen before admission), submits it and
// receives Events through the request's RequestChannel. Events carry no API
// formatting: api/anthropic and api/openai turn them into JSON / SSE.
// Streaming and non-streaming share this path (non-streaming collects).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace zl {

namespace grammar {
class Grammar;  // grammar/grammar.h: compiled by the API layer, read by the engine's sampler
}

struct SamplingParams {
  float temperature = 1.0f;         // 0: greedy (argmax, lowest id on ties)
  int32_t top_k = 0;                // 0: off
  float top_p = 1.0f;               // 1: off
  float min_p = 0.0f;               // 0: off
  float repetition_penalty = 1.0f;  // 1: off (llama.cpp/CTRL style: divide positive logits)
  float presence_penalty = 0.0f;    // OpenAI style, over generated tokens
  float frequency_penalty = 0.0f;
  int32_t penalty_last_n = 64;      // window of recent tokens for the penalties (-1: all)
  std::optional<uint64_t> seed{};   // same seed, same tokens, whatever else is in the batch
  std::map<int32_t, float> logit_bias{};  // added to the logit; -inf bans the token
};

// A budgeted span of the output: a stretch the caller wants bounded in
// tokens, as a reasoning model's thought is (api/thinking.h builds it from
// the template's markers; the engine knows nothing of thinking or formats).
// The span opens at the first generated token (open_at_start: the prompt
// already opened it) or right after the output first contains `start_text`,
// and closes once the output contains `end_text` (matched on the
// detokenized output, so any tokenization of the marker counts). Only the
// first span is tracked. When `budget` tokens have been generated inside the
// span without its end, the engine forces `end_ids`: one per step, each in
// place of the sampled token (the step's logits are discarded), counted as
// generated, accepted into the penalty window and emitted like any other
// token (its logprobs, when asked, are those of the discarded logits); then
// sampling resumes. So a thought holds at most `budget` sampled
// tokens, then end_ids (which should decode to text containing end_text).
// EOS, stop strings, max_tokens and the window end the request as usual,
// forcing or not. Costs: O(|start_text| + |end_text|) per generated token
// while the span is undecided or open, nothing after it closes.
struct SpanBudget {
  bool open_at_start = false;
  std::string start_text;        // ignored with open_at_start
  std::string end_text;          // non-empty
  std::vector<int32_t> end_ids;  // forced at the budget; non-empty when budget > 0
  int32_t budget = 0;            // sampled tokens inside the span at most; 0: unbounded (tracked only)
};

struct StopParams {
  int32_t max_tokens = 256;                // generated tokens at most (clamped to the context)
  std::vector<int32_t> stop_token_ids;     // in addition to EOS/EOT unless ignore_eos
  std::vector<std::string> stop_strings;   // matched on detokenized text, never emitted
  bool ignore_eos = false;
  // The first min_tokens generated tokens cannot end the output: EOS/EOT (unless ignore_eos)
  // and stop_token_ids are banned from sampling until then (vLLM's min_tokens; stop strings
  // and max_tokens still end it).
  int32_t min_tokens = 0;
  // Validate mode (api/validate.h): the prompt is prefilled, then the request
  // finishes (kMaxTokens, no token sampled or emitted, n_generated_tokens 0)
  // with its usage and timings (t_prefilled set, t_first_token not).
  bool prefill_only = false;
  std::optional<SpanBudget> span;  // a budgeted span (reasoning), see SpanBudget
};

// How many mask walks of a request's outputs were cut at the masker's work
// bound (ConstrainedOutput::too_ambiguous): one count for every copy of a
// constraint, so a request's choices (n) share it. Engine thread only.
struct MaskCutCount {
  int64_t n = 0;
};

// Constrained decoding (grammar/): the output, as bytes, must follow a
// grammar; the sampler masks every token that would leave it, and EOS is
// allowed only where the grammar is complete. API-neutral: the API layer
// builds the grammars (a JSON Schema, a tool call in the model's syntax).
//   start          the output begins inside this grammar (nullable);
//   trigger        then, whenever the free output contains `trigger` (matched
//                  on token bytes, any tokenization), the bytes after it
//                  follow `after_trigger` (nullable: no trigger);
//   end_when_complete  a grammar that is complete and cannot go on allows
//                  only the end (EOS / stop ids); otherwise the output is
//                  free again after it (text, then maybe the trigger again);
//   cut_masks      the request's count of cut mask walks (MaskCutCount),
//                  shared by the copies of the constraint.
// Costs: engine/constraint.h. max_tokens and the window still end the
// output wherever it is (finish kMaxTokens: the text is a prefix only).
struct GrammarConstraint {
  std::shared_ptr<const grammar::Grammar> start;
  std::string start_prefix;  // bytes `start` has already read (an assistant prefill in the prompt)
  std::string trigger;
  std::shared_ptr<const grammar::Grammar> after_trigger;
  bool end_when_complete = false;
  // What the grammars were made from (a schema's text, the tools and the
  // syntax): equal identities, equal constraints (the response cache's key).
  std::string identity;
  std::shared_ptr<MaskCutCount> cut_masks = std::make_shared<MaskCutCount>();
};

// Speculative decoding of one request (engine.cc, spec/ngram_draft.h): drafts taken from its
// own tokens, verified in one forward pass, lossless (greedy: the same tokens; sampled: the same
// distribution, and with a seed the same tokens).
struct SpeculativeParams {
  bool enabled = true;
  int32_t draft_max = 0;  // draft tokens per step at most, <= kMaxSpecDraft; 0: the server's
};
inline constexpr int32_t kMaxSpecDraft = 32;

// Token log-probabilities (Request::logprobs): log-softmax of the model's raw logits at the
// token's step, before logit bias, penalties, masks, temperature and truncation (what the model
// thinks, not what the sampler drew from). A logit of -inf gives a logprob of -inf.
struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0;
  std::string piece;  // the token's bytes (Tokenizer::token_to_piece, special tokens rendered)
};
struct TokenLogprobs {
  TokenLogprob chosen;            // the generated token, whether or not it is among `top`
  std::vector<TokenLogprob> top;  // the most likely ids (finite only), most likely first, ties: lower id
};

// Request::prompt_logprobs: the logits of one prefill step of such a request stay below this.
inline constexpr int64_t kPromptLogitsBytes = int64_t{64} << 20;

struct Request {
  std::string id;                  // request id (also the log/trace id)
  std::string tenant;              // API key identity, then user id (api::tenant_of): salts the prefix cache
  std::vector<int32_t> prompt_ids; // the full prompt, BOS included when the model wants it
  SamplingParams sampling;
  StopParams stop;
  int32_t priority = 0;            // higher first; FCFS within a priority
  bool return_token_ids = false;   // include token ids in text events
  // -1: none; else each emitted token's log-probability and this many alternatives (up to
  // the vocabulary) in text events (Event::logprobs). Costs O(vocab) per token, only then.
  int32_t logprobs = -1;
  // -1: none; else every prompt token's log-probability given the tokens before it, with this
  // many alternatives, in Event::prompt_logprobs (the same values as Request::logprobs). The
  // prefill then computes every position's logits: its prompt is never taken from the prefix
  // cache, and its chunks are kept small enough that their logits stay within kPromptLogitsBytes.
  int32_t prompt_logprobs = -1;
  std::optional<GrammarConstraint> constraint;  // constrained decoding (structured output)
  std::optional<SpeculativeParams> speculative;  // nullopt: the server's setting (EngineConfig)
};

enum class FinishReason {
  kNone,
  kEndOfSequence,  // EOS/EOT or a stop token id   (Anthropic end_turn, OpenAI stop)
  kMaxTokens,      // max_tokens reached           (max_tokens / length)
  kStopSequence,   // a stop string matched        (stop_sequence / stop)
  kContextWindow,  // the context window is full   (model_context_window_exceeded / length)
  kSafety,         // a guard rule stopped it      (refusal / content_filter)
  kCancelled,      // the client went away
  kError,          // see Event::error
};
std::string_view finish_reason_name(FinishReason r);

struct Usage {
  int64_t n_prompt_tokens = 0;
  int64_t n_cached_tokens = 0;     // prompt tokens served from the prefix cache
  int64_t n_generated_tokens = 0;
};

struct Timings {
  using Clock = std::chrono::steady_clock;
  Clock::time_point t_submit{};
  Clock::time_point t_scheduled{};    // first admitted to the batch
  Clock::time_point t_first_token{};
  Clock::time_point t_last_token{};
  Clock::time_point t_prefilled{};    // the prompt's last chunk was computed (first time)
  double t_queued_ms() const;       // submit -> scheduled; 0 before scheduling
  // scheduled -> first token (prefill_only: -> t_prefilled); 0 when neither happened.
  double t_prefill_ms() const;
  double t_decode_ms() const;       // first token -> last token; 0 without tokens
};

enum class EventKind {
  kText,      // text delta (valid UTF-8, possibly empty when only ids advance); timings so far
  kFinish,    // the last event: finish reason, final usage and timings
  kError,     // the last event: a failure after acceptance
};

struct Event {
  EventKind kind = EventKind::kText;
  std::string text;                 // kText: the delta
  std::vector<int32_t> token_ids;   // kText: ids behind the delta (when asked)
  // kText (Request::logprobs): the generated tokens whose text begins in this delta, in order.
  // Unlike token_ids (sent as each token is generated), an entry waits for its text: a token
  // held back by a stop string comes with the text that follows, and one that never shows
  // (inside a matched stop string, or its end-of-sequence token) has none.
  std::vector<TokenLogprobs> logprobs;
  // kText (Request::prompt_logprobs): one entry per prompt token, in order, all in one event
  // before the first generated token's; the first token's has no value (logprob NaN, no
  // alternatives: nothing comes before it).
  std::vector<TokenLogprobs> prompt_logprobs;
  FinishReason finish = FinishReason::kNone;
  std::string stop_sequence;        // kFinish with kStopSequence: the string that matched
  Usage usage;                      // cumulative at every event
  Timings timings;
  Status error;                     // kError
};

// One request's event stream from the engine thread to one consumer.
// Thread-safe. push() never blocks (the engine thread must not wait on a slow
// client; backpressure is applied by the engine pausing the sequence when
// pending() grows, see DESIGN.md). cancel() may be called from any thread and
// takes effect at the engine's next step.
class RequestChannel {
 public:
  explicit RequestChannel(std::string request_id) : request_id_(std::move(request_id)) {}

  const std::string& request_id() const { return request_id_; }

  // Engine side.
  void push(Event e);
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }

  // Consumer side.
  void cancel() { cancelled_.store(true, std::memory_order_release); }
  // Pops all pending events (possibly none) without blocking.
  std::vector<Event> drain();
  // Waits until an event is pending or `timeout` passes; then drains.
  std::vector<Event> wait_and_drain(std::chrono::milliseconds timeout);
  // fn is called after each push, on the pushing thread (the engine's, or
  // the submitting thread for an error at submit()), outside the lock; a
  // consumer on an I/O thread posts a wake-up to its event loop there.
  // Set it after submit() (which makes the channel), from any thread: events
  // pushed before it is set notify nobody, so the consumer drains once after
  // setting it. A push already under way may still call the previous fn.
  // fn's captures are destroyed on whichever thread drops the channel last
  // (often the engine's): capture nothing whose destructor belongs to
  // another thread (api/generation.cc captures an http::Waker).
  void set_notifier(std::function<void()> fn);
  size_t pending() const;
  bool finished() const;  // a kFinish or kError event has been pushed

 private:
  std::string request_id_;
  std::atomic<bool> cancelled_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> events_;
  std::function<void()> notifier_;
  bool finished_ = false;
};

// Snapshot of engine state for /metrics, /ready and admission decisions.
struct EngineStats {
  int64_t n_running = 0;
  int64_t n_waiting = 0;
  int64_t n_paused = 0;             // running but paused: the client lags behind (backpressure)
  int64_t n_kv_blocks_total = 0;
  int64_t n_kv_blocks_used = 0;
  int64_t n_kv_blocks_cached = 0;   // unreferenced blocks kept for prefix reuse
  int64_t kv_block_size = 0;
  int64_t n_ctx = 0;                // per-sequence context window
  int64_t max_seqs = 0;             // batch slots: sequences decoded at once (0: unknown)
  int64_t n_steps = 0;
  int64_t n_preemptions = 0;
  int64_t n_prompt_tokens_total = 0;
  int64_t n_cached_tokens_total = 0;
  int64_t n_generated_tokens_total = 0;
  // Admission control (engine.h). Requests submitted and never admitted to
  // the batch (what --max-queue bounds) and their prompt tokens: exact at
  // every stats() call. t_oldest_queued_ms: how long the oldest of them has
  // waited, as of the last step (0: none).
  int64_t n_queued = 0;
  int64_t n_queued_prompt_tokens = 0;
  double t_oldest_queued_ms = 0;
  int64_t n_pause_preemptions = 0;  // sequences paused past --max-pause-ms, preempted
  // Speculative decoding since the start: draft tokens verified, of which accepted, and the
  // verify passes (decode items that carried a draft).
  int64_t n_spec_draft_tokens = 0;
  int64_t n_spec_accepted_tokens = 0;
  int64_t n_spec_passes = 0;
};

// What the HTTP layer sees of the engine. The real Engine implements it;
// tests implement test doubles.
class EngineApi {
 public:
  virtual ~EngineApi() = default;
  // Queues a request. Thread-safe. Never blocks on compute. An error
  // (e.g. the prompt cannot fit the context) arrives as a kError event.
  virtual std::shared_ptr<RequestChannel> submit(Request request) = 0;
  virtual EngineStats stats() const = 0;
};

}  // namespace zl
