// The engine tests' common scaffolding on real models (tests/unit/engine*,
// thinking_test): loading a model and its tokenizer from shared_dir(),
// collecting a request's events, and the greedy request they submit.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "model/model.h"
#include "support/process.h"
#include "support/wait.h"
#include "tokenizer/tokenizer.h"

namespace zl::test {

struct LoadedModel {
  std::unique_ptr<Model> model;  // null when the file is absent
  std::unique_ptr<Tokenizer> tokenizer;
};

// shared_dir()/models/<name>.gguf with its tokenizer; empty (no model) when
// the file is absent, a test failure when it does not load.
inline LoadedModel load_shared_model(const std::string& name) {
  LoadedModel l;
  const std::string path = shared_dir() + "/models/" + name + ".gguf";
  if (!file_exists(path)) return l;
  auto m = load_model(path);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  l.model = std::move(m).value();
  auto t = Tokenizer::from_gguf(*l.model->file);
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  l.tokenizer = std::move(t).value();
  return l;
}

// What a request produced: every token id and text piece, and its last event.
struct Outcome {
  std::vector<int32_t> ids;
  std::string text;
  std::vector<TokenLogprobs> logprobs;  // Request::logprobs
  std::vector<TokenLogprobs> prompt_logprobs;  // Request::prompt_logprobs
  int n_prompt_logprob_events = 0;             // events that carried them
  int first_ids_event = -1;                    // the index of the first event with ids
  int prompt_logprobs_event = -1;              // the index of the event with the prompt's entries
  Event last;
};

// Collects a channel's events until the last one. A last event that does not
// come within `timeout` is a test failure (o.last.finish stays kNone).
// Waits until the engine runs and queues nothing (a test failure after kDefaultWait).
inline void wait_idle(const Engine& e) {
  EXPECT_TRUE(wait_until([&] {
    const EngineStats s = e.stats();
    return s.n_running == 0 && s.n_waiting == 0;
  }));
}

inline Outcome collect(RequestChannel& ch, std::chrono::milliseconds timeout = kDefaultWait) {
  Outcome o;
  int n_events = 0;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    for (Event& e : ch.wait_and_drain(std::chrono::milliseconds(100))) {
      if (!e.token_ids.empty() && o.first_ids_event < 0) o.first_ids_event = n_events;
      if (!e.prompt_logprobs.empty()) {
        ++o.n_prompt_logprob_events;
        o.prompt_logprobs_event = n_events;
        for (TokenLogprobs& lp : e.prompt_logprobs) o.prompt_logprobs.push_back(std::move(lp));
      }
      ++n_events;
      o.ids.insert(o.ids.end(), e.token_ids.begin(), e.token_ids.end());
      o.text += e.text;
      for (TokenLogprobs& lp : e.logprobs) o.logprobs.push_back(std::move(lp));
      if (e.kind != EventKind::kText) {
        o.last = std::move(e);
        return o;
      }
    }
  }
  ADD_FAILURE() << "request " << ch.request_id() << ": no last event within " << timeout.count()
                << " ms (" << o.ids.size() << " ids so far)";
  return o;
}

// A greedy request for exactly `max_tokens` tokens (EOS ignored) that
// returns its token ids.
inline Request greedy_request(std::vector<int32_t> prompt, int max_tokens, std::string id = "r",
                              std::string tenant = "t") {
  Request r{.id = std::move(id), .tenant = std::move(tenant), .prompt_ids = std::move(prompt)};
  r.sampling.temperature = 0;
  r.stop.max_tokens = max_tokens;
  r.stop.ignore_eos = true;
  r.return_token_ids = true;
  return r;
}

}  // namespace zl::test
