// What the engine reports about itself, without knowing how it is exported.
//
// The engine (engine/engine.cc) gets an EngineSink* at construction
// (EngineConfig::obs_sink; null: nothing is reported) and calls it on its own
// thread where each thing happens, timed with steady_clock. Implementations
// must be cheap (a few relaxed atomic adds: obs::EngineMetrics) and must not
// block: these calls sit on the decode path. With ZL_OBS=OFF the engine
// compiles the calls (and the clock reads behind them) away.
#pragma once

#include <string_view>

namespace zl::obs {

class EngineSink {
 public:
  virtual ~EngineSink() = default;
  // A step that sampled at least one token (a decode step of the batch; a
  // step of prefill chunks only is not one): forward pass plus sampling,
  // seconds, and the sequences in its batch.
  virtual void on_decode_step(double t_step_s, int n_batch) = 0;
  // A request's first token: submit -> first admission (queue) and first
  // admission -> first token (prefill), seconds.
  virtual void on_first_token(double t_queue_s, double t_prefill_s) = 0;
  // The gap between two consecutive tokens of one sequence, seconds.
  virtual void on_inter_token(double t_s) = 0;
  // Sequences preempted (blocks freed, to recompute) in one step.
  virtual void on_preemptions(int n) = 0;
  // Sequences preempted in one step because their client stopped reading
  // for --max-pause-ms (EngineConfig::max_pause_ms); not in on_preemptions.
  virtual void on_pause_preemptions(int n) { (void)n; }
  // A speculative verify pass of one sequence (engine.cc): n_draft draft tokens checked in one
  // forward pass, n_accepted of them matched (the pass yields n_accepted + 1 tokens).
  virtual void on_spec_verify(int n_draft, int n_accepted) {
    (void)n_draft;
    (void)n_accepted;
  }
  // A guard action (guard/guard.h): the rule's name, "input" or "output",
  // and what was done ("block", "redact", "mask", "stop"). Rare (not per
  // token in normal traffic): may take a lock. Also called by the API layer
  // for input actions (any thread).
  virtual void on_guard_action(std::string_view /*rule*/, std::string_view /*direction*/,
                               std::string_view /*action*/) {}
};

}  // namespace zl::obs
