// One HTTP answer made of several generations: OpenAI's `n` choices, and a
// /v1/completions request with several prompts (n choices each). Every
// choice is an ordinary GenerationSession with its own engine request and
// formatter (which writes its choice index); FanOut gives each one a
// responder of its own (choice()) and joins them on the real one:
//   - whole answers: held until every choice is done, then merged into one
//     body (FanOutFormat::merge: the choices in index order, the usage
//     summed); the first error instead, when a choice failed (the others
//     are then cancelled);
//   - streams: the first choice to start commits the real stream (200 and
//     its head), every choice's chunks are written as they come
//     (interleaved), and after the last choice's end the stream's tail
//     (FanOutFormat::stream_tail: the usage chunk, [DONE]) ends it. A choice
//     that fails before its stream started sends its error as an event of
//     the stream (or, when no choice ever started, as the answer).
// Usage: prompt tokens count once per prompt (choice k * n_per_prompt of
// each), generated tokens are summed. The SessionOptions duties of the whole
// answer (on_done, head_headers: metrics, logs, quotas) run once, on the
// joined answer, with that usage. A client that goes away cancels every
// choice. Choices start through defer(): each once it is released
// (start_deferred: the service releases a prompt's first choice at once,
// its others once that one has prefilled, so that they take the prompt
// from the prefix cache instead of computing it again) and, with
// max_running, only while fewer than that many choices are running (the
// engine's batch slots, a key's max_concurrent): the next released one, in
// index order, as a running one ends.
// Everything runs on the connection's I/O thread.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/generation.h"
#include "http/message.h"

namespace zl::api {

struct FanOutFormat {
  // The whole answers of every choice (each a 200 body, in index order) as one body.
  std::function<std::string(const std::vector<std::string>& bodies, const Usage& usage)> merge;
  // What ends the stream after every choice's last chunk.
  std::function<std::string(const Usage& usage)> stream_tail;
};

class FanOut : public std::enable_shared_from_this<FanOut> {
 public:
  // n_choices = prompts x n_per_prompt; choice i answers prompt i / n_per_prompt.
  // on_done and head_headers: the whole answer's (SessionOptions).
  // max_running: choices running at once at most (0: no bound).
  static std::shared_ptr<FanOut> create(std::shared_ptr<http::Responder> real, int n_choices, int n_per_prompt,
                                        bool stream, FanOutFormat format,
                                        std::function<void(const SessionResult&)> on_done,
                                        std::vector<SessionOptions::HeadHeaders> head_headers, int max_running = 0);

  // The responder of choice i, for its GenerationSession.
  std::shared_ptr<http::Responder> choice(int i);
  // Choice i's SessionOptions::on_done.
  std::function<void(const SessionResult&)> choice_done(int i);
  // How choice i starts: `start` starts its session, once start_deferred has
  // released it and a running slot is free. A choice cancelled before (a
  // failed answer, the client gone) never starts and ends as gone.
  void defer(int i, std::function<void()> start);
  // Releases the choices in [first, last), and starts what may start (I/O thread).
  void start_deferred(int first, int last);

  // The joined usage of the choices' results (exposed for tests).
  static Usage join_usage(const std::vector<Usage>& usages, int n_per_prompt);

  FanOut(std::shared_ptr<http::Responder> real, int n_choices, int n_per_prompt, bool stream, FanOutFormat format,
         std::function<void(const SessionResult&)> on_done, std::vector<SessionOptions::HeadHeaders> head_headers,
         int max_running);

 private:
  class Choice;
  friend class Choice;

  void on_send(int i, http::HttpResponse response);
  void on_begin(http::HttpResponse head);
  void on_write(std::string_view bytes);
  void on_done(int i, const SessionResult& r);
  void start_real_stream(http::HttpResponse head);
  void cancel_others(int except);
  // Starts released choices, in index order, while a running slot is free.
  void start_released();
  void finish();
  void add_head_headers(http::HttpResponse& response, const Usage& usage) const;

  std::shared_ptr<http::Responder> real_;
  int n_choices_, n_per_prompt_;
  bool stream_;
  FanOutFormat format_;
  std::function<void(const SessionResult&)> on_done_;
  std::vector<SessionOptions::HeadHeaders> head_headers_;
  std::vector<std::optional<http::HttpResponse>> responses_;  // whole answers and early errors
  std::vector<std::optional<SessionResult>> results_;
  std::vector<bool> answered_;  // the choice sent its answer or ended its stream
  std::vector<std::function<void()>> gone_, drained_;
  std::vector<std::function<void()>> deferred_;  // starts not run yet
  std::vector<bool> released_;  // start_deferred reached it
  std::vector<bool> started_;
  int max_running_;   // 0: no bound
  int n_running_ = 0;  // started, not done
  bool stopped_ = false;  // cancel_others ran: nothing more starts
  int n_done_ = 0;
  bool real_started_ = false;  // the real stream is committed
  bool finished_ = false;
};

}  // namespace zl::api
