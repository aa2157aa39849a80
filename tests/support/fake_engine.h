// A fake engine and prompt codec: deterministic, model-free stand-ins for
// the real ones, used by unit/e2e tests and the test-only server
// (zerolayer_test_server serve --fake-engine, test_server_main.cc). Never
// linked into the product.
//
// FakeCodec: one token per byte (id = byte + 3), BOS = 1; chats render as
// "<|role|>\n<content>\n" per message (assistant tool calls as
// "<tool_call NAME>ARGS</tool_call>" after the content, tool results as role
// "tool"), then "<|tools|>\n<tools json>\n" when tools were given, then
// "<|assistant|>\n" (or the prompt ends inside the last assistant turn for a
// prefill). Its tool syntax is Hermes, as a ChatML model's, unless made with
// another (tests of the Llama 3 path): a forced call (ToolPlan::prefill)
// follows "<|assistant|>\n".
//
// FakeEngine: one engine thread; every step (step_time) each running request
// emits one token of a fixed story (kStory), then EOS. It honours
// max_tokens, the context window (n_ctx), stop strings (held back while they
// could still match, never emitted), StopParams::prefill_only (finishes at its
// first step, with no token) and cancellation at the next step. Request::logprobs: made-up
// entries (token n: id n, logprob -0.25 * (n % 4), alternatives 1 apart named "altJ"), each
// sent with the first event that carries part of its token's text.
// Markers in the prompt text change its behaviour:
//   [[fake:long]]      the story repeats forever (until max_tokens/window/cancel)
//   [[fake:slow]]      50 ms per token for this request
//   [[fake:error]]     a kError (internal) after 2 tokens
//   [[fake:overload]]  a kError (resource_exhausted) before any token
//   [[fake:prefill=MS]]  the first token (or the error above) comes MS ms
//                      after submission at the earliest: a long prefill or
//                      a wait in the queue (cancellation is still seen at once)
//   [[fake:empty]]     EOS at once: an answer without a single token of text
//   [[fake:tool=NAME:ARGS]]  instead of the story, what a ChatML model
//                      writes to call tool NAME with ARGS (JSON up to the
//                      next "]]"): "Let me check." then per marker
//                      "\n<tool_call>\n{\"name\": \"NAME\", \"arguments\": ARGS}\n</tool_call>",
//                      3 bytes a token, then EOS. Not once a tool result
//                      ("<|tool|>") follows the last marker: the agent's
//                      second round gets the story.
//   [[fake:syntax=mistral]] the calls are written as [TOOL_CALLS]NAME[ARGS]ARGS (Mistral)
//   [[fake:syntax=llama3]]  the tool markers are written as a Llama 3 model
//                      writes calls instead: the answer is
//                      {"name": "NAME", "parameters": ARGS} per marker,
//                      joined by "; " (no text before them)
// A prompt that ends inside a forced call (ToolPlan::prefill) gets that
// call's rest: after `"arguments":` " ARGS}\n</tool_call>" (ARGS of the first
// marker, {} without one); after Llama 3's `"parameters":` " ARGS}"; after
// `{"name": "` (tool_choice any) the first marker's name and arguments, in
// the form of the syntax that opened the call, or the story without a marker.
// Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "api/prompt_codec.h"
#include "engine/request.h"

namespace zl::fake {

// The story, one token per entry.
extern const std::vector<std::string> kStory;

class FakeCodec final : public api::PromptCodec {
 public:
  explicit FakeCodec(api::ToolSyntax syntax = api::ToolSyntax::kHermes) : syntax_(syntax) {}
  Result<std::vector<int32_t>> encode_chat(const api::ChatRequest& chat) const override;
  Result<std::vector<int32_t>> encode_text(std::string_view text) const override;
  // Byte ids as their bytes, other ids below kVocab as nothing; kVocab and above refused.
  Result<std::string> decode_prompt(std::span<const int32_t> ids) const override;
  static constexpr int32_t kVocab = 512;
  api::ToolSyntax tool_syntax() const override { return syntax_; }
  std::string template_name() const override { return "fake"; }
  std::string render_chat(const api::ChatRequest& chat) const;
  static std::string decode(const std::vector<int32_t>& ids);

 private:
  api::ToolSyntax syntax_;
};

struct FakeEngineConfig {
  int64_t n_ctx = 4096;
  std::chrono::microseconds step_time{2000};
  // The KV cache that stats() reports, in tokens (blocks of 16); 0: 16384
  // or one context if larger. Used blocks: each running request's prompt +
  // generated tokens, in whole blocks (nothing is refused for want of them).
  int64_t kv_tokens = 0;
  // The batch slots that stats() reports (EngineStats::max_seqs); nothing is
  // refused or held back for want of them. 0: unknown.
  int64_t max_seqs = 0;
};

class FakeEngine final : public EngineApi {
 public:
  explicit FakeEngine(FakeEngineConfig config = {});
  ~FakeEngine() override;

  std::shared_ptr<RequestChannel> submit(Request request) override;
  EngineStats stats() const override;

  int64_t n_cancelled() const { return n_cancelled_.load(); }
  // The most requests submitted and not yet ended at any one time.
  int64_t max_live() const { return max_live_.load(); }

 private:
  struct Seq;
  void loop();
  // Advances one sequence by one token; false when it has finished.
  bool step(Seq& s);

  FakeEngineConfig config_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Seq>> incoming_;
  bool stop_ = false;
  std::atomic<int64_t> n_running_{0};
  std::atomic<int64_t> n_steps_{0};
  std::atomic<int64_t> n_prompt_total_{0};
  std::atomic<int64_t> n_generated_total_{0};
  std::atomic<int64_t> n_cancelled_{0};
  std::atomic<int64_t> n_live_{0}, max_live_{0};
  std::atomic<int64_t> n_kv_blocks_used_{0};
  std::thread thread_;
};

}  // namespace zl::fake
