#include "api/generation.h"

#include <algorithm>

#include "api/structured_output.h"
#include "core/log.h"
#include "http/sse.h"

namespace zl::api {

ApiError context_length_error(int64_t n_prompt, int64_t n_ctx) {
  return ApiError{.reason = ErrorReason::kContextLengthExceeded,
                  .message = "prompt is too long: " + std::to_string(n_prompt) + " tokens > " +
                             std::to_string(n_ctx - 1) + " maximum (context window " + std::to_string(n_ctx) +
                             " tokens)",
                  .numbers = {.n_prompt_tokens = n_prompt, .n_ctx = n_ctx, .max_tokens_fit = 0}};
}

std::string prompt_param(const ChatRequest& chat) { return chat.raw_prompt ? "prompt" : "messages"; }

std::string tenant_of(std::string_view key_id, std::string_view user) {
  std::string t(key_id);
  t += '/';
  t += user;
  return t;
}

ApiResult<Prepared> prepare_request(const ChatRequest& chat, const PromptCodec& codec, int64_t n_ctx,
                                    std::string request_id, std::string_view key_id, const ContextOptions& context) {
  Result<std::vector<int32_t>> ids = chat.prompt_ids ? Result<std::vector<int32_t>>(*chat.prompt_ids)
                                     : chat.raw_prompt ? codec.encode_text(chat.prompt)
                                                       : codec.encode_chat(chat);
  if (!ids.ok()) {
    ApiError e = from_status(ids.status());
    if (ids.status().reason() == ErrorReason::kUnspecified && e.type() == ErrorType::kInvalidRequest) {
      e.reason = ErrorReason::kInvalidPrompt;
    }
    return e;
  }
  // A truncation policy drops messages until the prompt and its reserve fit.
  ApiResult<FittedPrompt> fitted = fit_context(chat, codec, std::move(ids).value(), n_ctx, context);
  if (!fitted.ok()) return fitted.error();
  ids = std::move(fitted.value().ids);
  Prepared p;
  p.truncation = fitted.value().truncation;
  p.tools = plan_tools(chat, codec.tool_syntax());
  if (codec.tool_syntax() == ToolSyntax::kNone && !chat.raw_prompt && !chat.tools.empty() &&
      (chat.tool_choice == "any" || chat.tool_choice.starts_with("tool:"))) {
    // Tools are left out of a prompt whose template has no tool-call syntax;
    // a call the client requires cannot be honoured there, so say so.
    return ApiError{.reason = ErrorReason::kUnsupportedValue,
                    .message = "tool_choice requires a tool call, but this model's chat template has no tool-call "
                               "syntax (use --chat-template chatml or llama3, or a template with tools)",
                    .param = "tool_choice"};
  }
  if (p.tools.prefill.empty()) {  // (a forced call is the answer itself)
    ApiResult<ThinkingPlan> thinking = plan_thinking(chat, codec, &p.request.stop);
    if (!thinking.ok()) return thinking.error();
    p.thinking = thinking.value();
  }
  p.n_prompt_tokens = static_cast<int64_t>(ids->size());
  p.n_ctx = n_ctx;
  // At least one token must fit after the prompt.
  if (n_ctx > 0 && p.n_prompt_tokens >= n_ctx) {
    ApiError e = context_length_error(p.n_prompt_tokens, n_ctx);
    e.param = prompt_param(chat);
    return e;
  }

  Request& r = p.request;
  r.id = std::move(request_id);
  r.tenant = tenant_of(key_id, chat.user);
  r.prompt_ids = std::move(ids).value();
  r.sampling = chat.sampling;
  r.stop.stop_strings = chat.stop;
  r.stop.stop_token_ids = chat.stop_token_ids;
  r.stop.ignore_eos = chat.ignore_eos;
  r.stop.min_tokens = chat.min_tokens;
  r.speculative = chat.speculative;
  r.logprobs = chat.logprobs;
  r.prompt_logprobs = chat.prompt_logprobs;
  const int64_t room = n_ctx > 0 ? n_ctx - p.n_prompt_tokens : INT32_MAX;
  const int64_t wanted = chat.max_tokens.value_or(room);
  p.max_tokens_clamped = wanted > room || !chat.max_tokens;
  r.stop.max_tokens = static_cast<int32_t>(std::min<int64_t>({wanted, room, INT32_MAX}));
  if (r.stop.max_tokens == 0) {  // echo with max_tokens 0: the prompt (and its logprobs) only
    r.stop.max_tokens = 1;
    r.stop.prefill_only = true;
  }
  // Structured output: response_format, or tool calls in the model's syntax.
  ApiResult<std::optional<GrammarConstraint>> constraint = plan_constraint(chat, p.tools, p.thinking);
  if (!constraint.ok()) return constraint.error();
  r.constraint = std::move(constraint).value();
  // A grammar that completes allows only the end, which min_tokens would then ban.
  if (r.constraint && r.stop.min_tokens > 0) {
    return ApiError{.reason = ErrorReason::kUnsupportedValue,
                    .message = "min_tokens cannot be combined with structured output or a forced tool call",
                    .param = "min_tokens"};
  }
  return p;
}

// ---- GenerationSession ----

GenerationSession::GenerationSession(SessionOptions options, std::unique_ptr<EventFormatter> formatter,
                                     std::shared_ptr<http::Responder> responder)
    : options_(std::move(options)), formatter_(std::move(formatter)), responder_(std::move(responder)) {
  if (options_.t_start != Clock::time_point{}) t_start_ = options_.t_start;
  if (options_.stream && options_.shape) shaper_.emplace(*options_.shape);
  if (options_.thinking.active) thinking_parser_.emplace(options_.thinking.starts_inside);
  if (options_.tools.active()) {
    // Streams stream a call's arguments as they are written; a collected
    // answer takes calls whole (a call that fails is then simply text).
    tool_parser_.emplace(options_.tools.syntax, options_.tools.names, options_.tools.prefill,
                         ToolParserOptions{.single_call = options_.tools.single_call,
                                           .stream_arguments = options_.stream,
                                           .string_params = options_.tools.string_params});
  }
}

GenerationSession::~GenerationSession() {
  // Before responder_ goes: the engine thread's notifications stop here.
  if (waker_) waker_->disconnect();
  if (channel_ && !finished_) channel_->cancel();
}

template <typename Fn>
void GenerationSession::guarded(Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    fail_internal(e.what());  // what throws here reaches the HTTP layer's boundary
  }
}

void GenerationSession::fail_internal(std::string_view what) {
  log::error("generation failed on an exception", {{"request_id", responder_->request_id()}, {"what", what}});
  if (channel_) channel_->cancel();
  // (finished_ may be set already: finish() sets it before formatting the answer.)
  if (responder_->done()) return;
  finish_reason_ = FinishReason::kError;
  fail(ApiError{.reason = ErrorReason::kInternalServerError, .message = "internal server error"});
}

void GenerationSession::start(EngineApi& engine, Request request, SessionOptions options,
                              std::unique_ptr<EventFormatter> formatter, std::shared_ptr<http::Responder> responder) {
  auto s = std::make_shared<GenerationSession>(std::move(options), std::move(formatter), responder);
  responder->hold(s);
  std::weak_ptr<GenerationSession> weak = s;
  responder->on_client_gone([weak] {
    if (auto s = weak.lock()) {
      if (s->channel_) s->channel_->cancel();
      s->finished_ = true;
      s->done(499);  // nginx's "client closed request", for metrics and logs only
    }
  });
  s->waker_ = std::make_shared<http::Waker>();
  s->waker_->connect(responder.get(), [weak] {
    if (auto s = weak.lock()) s->guarded([&] { s->pump(); });
  });
  s->t_submit_ = Clock::now();
  s->channel_ = engine.submit(std::move(request));
  // The engine thread holds only the waker: it never owns the session.
  s->channel_->set_notifier([waker = s->waker_] { waker->notify(); });
  // Events pushed before the notifier was set are picked up here.
  s->waker_->notify();
  if (s->options_.stream && s->options_.ping_interval.count() > 0) s->arm_ping(s->options_.ping_interval);
}

void GenerationSession::prepare_start() {
  if (!options_.stream || stream_started_ || start_prepared_) return;
  start_prepared_ = true;
  // Committed before the engine's first event (keep-alive): the prompt's
  // count as prepare_request() measured it; the final usage is the engine's.
  const Usage usage = engine_usage_ ? usage_ : Usage{.n_prompt_tokens = options_.n_prompt_tokens};
  formatter_->stream_start(usage, start_bytes_);
}

bool GenerationSession::begin_stream_once(std::string_view more) {
  if (stream_started_) return false;
  prepare_start();  // (streams only: nothing else commits a stream)
  stream_started_ = true;
  http::HttpResponse head = http::sse_head();
  add_timing_header(head, /*with_decode=*/false);
  const bool has_body = !start_bytes_.empty();
  head.body = std::move(start_bytes_);
  head.body.append(more);
  t_last_write_ = Clock::now();
  responder_->begin_stream(std::move(head));
  return has_body;
}

void GenerationSession::send_out(std::string& out) {
  if (start_prepared_ && !stream_started_) {
    begin_stream_once(out);
  } else {
    write(out);
  }
  out.clear();
}

void GenerationSession::write(std::string_view bytes) {
  if (bytes.empty()) return;
  t_last_write_ = Clock::now();
  responder_->write(bytes);
}

void GenerationSession::arm_ping(Clock::duration delay) {
  if (ping_pending_) return;
  ping_pending_ = true;
  const auto ms = std::max(std::chrono::ceil<std::chrono::milliseconds>(delay), std::chrono::milliseconds(1));
  responder_->post_after(ms, [weak = weak_from_this()] {
    if (auto s = weak.lock()) {
      s->ping_pending_ = false;
      s->guarded([&] { s->on_ping_timer(); });
    }
  });
}

void GenerationSession::on_ping_timer() {
  if (finished_ || responder_->done()) return;  // the timer chain ends with the session
  const auto interval = options_.ping_interval;
  const Clock::duration silent = Clock::now() - t_last_write_;
  if (silent < interval) {
    // Something was written meanwhile: wait until the stream has been
    // silent for a whole interval.
    arm_ping(interval - silent);
    return;
  }
  // A socket that has not taken what it has needs no keep-alive.
  if (!socket_backed_up()) {
    const bool committed = stream_started_;
    const bool start_had_body = begin_stream_once();
    // A fresh commit is the keep-alive itself when its stream start says
    // something (Anthropic's ends with a ping); else a keep-alive frame.
    if (committed || !start_had_body) {
      std::string out;
      formatter_->stream_ping(out);
      write(out);
    }
  }
  arm_ping(interval);
}

bool GenerationSession::socket_backed_up() {
  if (!options_.stream || !stream_started_ || responder_->buffered_bytes() < kMaxBufferedBytes) return false;
  if (!drain_hook_set_) {
    drain_hook_set_ = true;
    responder_->on_drained([weak = weak_from_this()] {
      if (auto s = weak.lock()) s->guarded([&] { s->pump(); });
    });
  }
  return true;
}

void GenerationSession::pump() {
  if (finished_) return;
  // Backpressure: while the socket has not taken what was already written,
  // leave the events in the channel. Its pending() grows and the engine
  // pauses the sequence (EngineConfig::max_pending_events); on_drained
  // pumps again once the socket has taken everything.
  if (socket_backed_up()) return;
  std::string out;
  // Once the final event is known (the shaper still draining, or a single
  // call that ended the answer) nothing more is taken from the channel.
  for (Event& e : final_event_ ? std::vector<Event>() : channel_->drain()) {
    usage_ = e.usage;
    if (e.timings.t_submit != Clock::time_point{}) timings_ = e.timings;
    engine_usage_ = true;
    if (e.kind == EventKind::kText) {
      if (options_.on_event) options_.on_event(e);
      if (t_first_ms_ < 0) t_first_ms_ = std::chrono::duration<double, std::milli>(Clock::now() - t_start_).count();
      // The stream starts with the first text: its head, its start and what
      // this pump writes go out together (one socket write for the first token).
      // The prompt's entries (echo) before the start: a stream's first chunk carries them.
      if (!e.prompt_logprobs.empty()) formatter_->take_logprobs(e.prompt_logprobs);
      prepare_start();
      if (!e.logprobs.empty()) formatter_->take_logprobs(e.logprobs);
      take_output(e.text, out);
      if (call_abort_) {
        send_out(out);
        return abort_call(out);
      }
      if (tool_parser_ && tool_parser_->done()) {
        // A single call (parallel tool use disabled) is complete: the answer
        // ends with it, as if the model had ended its turn there. The rest
        // of the generation is cancelled and never shown; usage counts the
        // tokens up to the one that completed the call (those the engine
        // makes before it sees the cancellation are dropped unbilled).
        channel_->cancel();
        final_event_ = Event{.kind = EventKind::kFinish, .finish = FinishReason::kEndOfSequence, .usage = e.usage,
                             .timings = e.timings};
        break;
      }
      continue;
    }
    if (e.kind == EventKind::kError || e.finish == FinishReason::kError) {
      timings_ = e.timings;
      finish_reason_ = FinishReason::kError;
      send_out(out);
      fail(from_status(e.error.ok() ? internal_error("generation failed") : e.error));
      return;
    }
    final_event_ = std::move(e);
    if (thinking_parser_) {
      std::vector<ThoughtPiece> rest;
      thinking_parser_->finish(&rest);
      if (!rest.empty()) prepare_start();
      take_thoughts(rest, out);
      end_thought(out);  // an unterminated thought ends with the output
    }
    if (tool_parser_) {
      // The output is complete: what the parser still holds is decided now
      // (a call, or the text of one that failed; a forced call's seed is
      // never text, so a model that wrote nothing gives nothing here).
      std::vector<AnswerPart> rest;
      tool_parser_->finish(&rest);
      if (!rest.empty()) prepare_start();
      for (AnswerPart& part : rest) deliver(std::move(part), out);
      if (call_abort_) {
        send_out(out);
        return abort_call(out);
      }
    }
    break;
  }
  if (shaper_) {
    for (const std::string& piece : shaper_->take_ready(Clock::now())) stream_piece(piece, out);
  }
  send_out(out);
  if (shaper_ && shaper_->has_pending()) {
    schedule_shaper();
    return;
  }
  if (final_event_) finish(*final_event_);
}

void GenerationSession::take_output(std::string_view text, std::string& out) {
  if (!thinking_parser_) return take_text(text, out);
  std::vector<ThoughtPiece> pieces;
  thinking_parser_->push(text, &pieces);
  take_thoughts(pieces, out);
}

void GenerationSession::take_thoughts(std::vector<ThoughtPiece>& pieces, std::string& out) {
  for (ThoughtPiece& p : pieces) {
    if (p.thought) {
      deliver_thought(p.text, out);
    } else {
      end_thought(out);
      take_text(p.text, out);
    }
  }
}

void GenerationSession::deliver_thought(std::string_view text, std::string& out) {
  if (text.empty()) return;
  if (!options_.stream) {
    if (answer_.empty() || answer_.back().kind != AnswerPart::Kind::kThinking) {
      answer_.push_back(AnswerPart{.kind = AnswerPart::Kind::kThinking});
    }
    answer_.back().text.append(text);
    return;
  }
  in_thought_ = true;
  if (shaper_) return shaper_->push(text);  // paced and split like text
  formatter_->stream_thinking(text, out);
}

void GenerationSession::end_thought(std::string& out) {
  if (!in_thought_) return;
  flush_shaper(out);  // the thought's last pieces, before its end
  formatter_->stream_thinking_end(out);
  in_thought_ = false;
}

void GenerationSession::take_text(std::string_view text, std::string& out) {
  if (!tool_parser_) return deliver_text(text, out);
  std::vector<AnswerPart> parts;
  tool_parser_->push(text, &parts);
  for (AnswerPart& part : parts) deliver(std::move(part), out);
}

void GenerationSession::deliver(AnswerPart part, std::string& out) {
  using Kind = AnswerPart::Kind;
  switch (part.kind) {
    case Kind::kText:
      return deliver_text(part.text, out);
    case Kind::kToolCall:
      if (!options_.stream) {
        ++n_tool_calls_;
        answer_.push_back(std::move(part));
        return;
      }
      // A call that could not stream (its arguments came first, or as a
      // string) streams whole: the same frames as a streamed one.
      deliver(AnswerPart{.kind = Kind::kToolCallStart, .call = ToolCall{.name = part.call.name}}, out);
      deliver(AnswerPart{.kind = Kind::kToolCallDelta, .text = std::move(part.call.arguments_json)}, out);
      return deliver(AnswerPart{.kind = Kind::kToolCallEnd}, out);
    case Kind::kToolCallStart:
      flush_shaper(out);  // the text before the call goes out before it, whatever the pacing
      formatter_->stream_tool_call_start(part.call.name, out);
      in_call_ = true;
      call_name_ = std::move(part.call.name);
      return;
    case Kind::kToolCallDelta:
      // Argument pieces are content like text: the shaper paces and splits them.
      if (shaper_) return shaper_->push(part.text);
      return formatter_->stream_tool_call_delta(part.text, out);
    case Kind::kToolCallEnd:
      flush_shaper(out);  // the arguments' last pieces, before the block ends
      formatter_->stream_tool_call_end(out);
      in_call_ = false;
      ++n_tool_calls_;
      return;
    case Kind::kToolCallAbort:
      call_abort_ = part.abort_reason;
      return;
    case Kind::kThinking:
      return deliver_thought(part.text, out);
  }
}

void GenerationSession::flush_shaper(std::string& out) {
  if (!shaper_) return;
  for (const std::string& piece : shaper_->take_all(Clock::now())) stream_piece(piece, out);
}

void GenerationSession::stream_piece(std::string_view piece, std::string& out) {
  if (in_call_) {
    formatter_->stream_tool_call_delta(piece, out);
  } else if (in_thought_) {
    formatter_->stream_thinking(piece, out);
  } else {
    formatter_->stream_text(piece, out);
  }
}

namespace {

// Why a streamed call cannot be completed, for the client.
std::string aborted_call_message(const std::string& name, ToolFallback why) {
  std::string m = "the model's call to tool '" + name + "' failed after its arguments had started streaming: ";
  switch (why) {
    case ToolFallback::kInvalidJson: return m + "its JSON became invalid";
    case ToolFallback::kInvalidCall: return m + "its final form is not what was streamed (a repeated name or arguments member)";
    case ToolFallback::kUnknownTool: return m + "its tool is not one of the offered tools";
    case ToolFallback::kTooLarge:
      return m + "it grew past " + std::to_string(ToolCallParser::kMaxCallBytes) + " bytes";
    case ToolFallback::kIncomplete:
      return m + "the output ended inside it (max_tokens, a stop sequence or the context window)";
  }
  return m;
}

}  // namespace

void GenerationSession::abort_call(std::string& out) {
  // A streamed call broke off: its start and part of its arguments have
  // gone out and cannot be taken back, and ending the block would hand the
  // client a call that does not parse (OpenAI clients accumulate the
  // arguments as a string and JSON.parse it) or, closed by us, one the
  // model never wrote. An error event makes both SDKs throw, so no client
  // acts on it; a non-streaming request with the same output gets the
  // failed call as text instead (nothing had been sent).
  write(out);
  channel_->cancel();
  finish_reason_ = FinishReason::kError;
  fail(ApiError{.reason = ErrorReason::kInvalidToolCall, .message = aborted_call_message(call_name_, *call_abort_)});
}

void GenerationSession::deliver_text(std::string_view text, std::string& out) {
  if (text.empty()) return;
  if (!options_.stream) {
    if (!answer_.empty() && answer_.back().kind == AnswerPart::Kind::kText) {
      answer_.back().text.append(text);
    } else {
      answer_.push_back(AnswerPart{.kind = AnswerPart::Kind::kText, .text = std::string(text)});
    }
  } else if (shaper_) {
    shaper_->push(text);
  } else {
    formatter_->stream_text(text, out);
  }
}

void GenerationSession::schedule_shaper() {
  if (timer_pending_) return;
  auto due = shaper_->next_due();
  if (!due) return;
  auto delay = std::chrono::duration_cast<std::chrono::milliseconds>(*due - Clock::now());
  timer_pending_ = true;
  responder_->post_after(std::max(delay, std::chrono::milliseconds(0)), [weak = weak_from_this()] {
    if (auto s = weak.lock()) {
      s->timer_pending_ = false;
      s->guarded([&] { s->pump(); });
    }
  });
}

void GenerationSession::finish(const Event& e) {
  if (options_.on_event) options_.on_event(e);
  timings_ = e.timings;
  finish_reason_ = e.finish;
  if (e.finish == FinishReason::kCancelled) {
    // Cancelled while the client is still here: the engine dropped it (shutdown).
    fail(ApiError{.reason = ErrorReason::kCancelled, .message = "the request was cancelled by the server"});
    return;
  }
  Completion c{.finish = e.finish,
               .stop_sequence = e.stop_sequence,
               .usage = e.usage,
               .max_tokens_clamped = options_.max_tokens_clamped,
               .n_tool_calls = n_tool_calls_,
               .timings = e.timings};
  finished_ = true;
  if (options_.stream) {
    begin_stream_once();
    std::string out;
    formatter_->stream_finish(c, out);
    write(out);
    responder_->end_stream();
  } else {
    http::HttpResponse response = formatter_->complete(answer_, c);
    add_timing_header(response, /*with_decode=*/true);
    responder_->send(std::move(response));
  }
  done(200);
}

void GenerationSession::add_timing_header(http::HttpResponse& response, bool with_decode) const {
  ServerTiming timing = options_.timing;
  timing.add_engine(timings_, with_decode);
  std::string value = timing.header_value();
  if (!value.empty()) response.headers.emplace_back("Server-Timing", std::move(value));
  for (const SessionOptions::HeadHeaders& add : options_.head_headers) add(usage_, response.headers);
}

void GenerationSession::fail(const ApiError& e) {
  finished_ = true;
  error_reason_ = e.reason;
  if (options_.stream && stream_started_) {
    std::string out;
    formatter_->stream_error(e, out);
    write(out);
    responder_->end_stream();
    done(200);
  } else {
    http::HttpResponse response = formatter_->error(e);
    add_timing_header(response, /*with_decode=*/true);
    const int status = response.status;  // the API's (OpenAI routes: 503 for 529)
    responder_->send(std::move(response));
    done(status);
  }
}

void GenerationSession::done(int status) {
  if (!options_.on_done) return;
  auto fn = std::move(options_.on_done);
  options_.on_done = nullptr;
  SessionResult r{.status = status,
                  .usage = usage_,
                  .t_first_ms = t_first_ms_,
                  .t_total_ms = std::chrono::duration<double, std::milli>(Clock::now() - t_start_).count(),
                  .timings = timings_,
                  .t_submit = t_submit_,
                  .finish = finish_reason_,
                  .error_reason = error_reason_,
                  // Streamed calls reached the client as they went; a
                  // collected answer only when it was sent.
                  .n_tool_calls = options_.stream || status == 200 ? n_tool_calls_ : 0};
  if (tool_parser_) r.n_tool_fallbacks = tool_parser_->n_fallbacks();
  if (status == 499 && !r.error_reason) r.error_reason = ErrorReason::kClientGone;
  fn(r);
}

}  // namespace zl::api
