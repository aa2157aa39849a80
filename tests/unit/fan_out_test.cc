// api/fan_out.h: several choices joined on one responder. The choices'
// bodies come from the OpenAI formatter itself (one ChoiceSlot each), the
// join is openai::fan_out_format's; the sessions are played by hand.
#include <gtest/gtest.h>
#include <boost/json.hpp>

#include <memory>
#include <string>
#include <vector>

#include "api/fan_out.h"
#include "api/openai/chat_completions.h"
#include "support/null_responder.h"

namespace zl::api {
namespace {

namespace json = boost::json;

class Recorder final : public test::NullResponder {
 public:
  void send(http::HttpResponse r) override {
    sent.push_back(std::move(r));
    done_ = true;
  }
  void begin_stream(http::HttpResponse head) override {
    ++n_begin;
    bytes += head.body;
    head_headers = head.headers;
  }
  void write(std::string_view b) override { bytes += b; }
  void end_stream() override {
    ++n_end;
    done_ = true;
  }
  bool done() const override { return done_; }
  bool client_gone() const override { return gone; }
  void on_client_gone(std::function<void()> fn) override { gone_fn = std::move(fn); }

  std::vector<http::HttpResponse> sent;
  std::vector<http::Header> head_headers;
  std::string bytes;
  int n_begin = 0, n_end = 0;
  bool gone = false;
  std::function<void()> gone_fn;

 private:
  bool done_ = false;
};

constexpr const char* kId = "chatcmpl-fan";

std::unique_ptr<EventFormatter> choice_formatter(int i, bool include_usage = false) {
  return openai::make_formatter(openai::Kind::kChat, "m", include_usage, false, std::nullopt,
                                openai::ChoiceSlot{.index = i, .id = kId, .created = 7});
}

http::HttpResponse whole_answer(int i, const std::string& text, const Usage& u) {
  return choice_formatter(i)->complete({AnswerPart{.kind = AnswerPart::Kind::kText, .text = text}},
                                       Completion{.finish = FinishReason::kMaxTokens, .usage = u});
}

struct Joined {
  int n_calls = 0;
  SessionResult last;
};

std::shared_ptr<FanOut> make_fan(std::shared_ptr<Recorder> rec, int n_choices, int n_per_prompt, bool stream,
                                 Joined* joined, bool include_usage = false, int max_running = 0) {
  std::vector<SessionOptions::HeadHeaders> head;
  head.push_back([](const Usage& u, std::vector<http::Header>& h) {
    h.emplace_back("x-generated", std::to_string(u.n_generated_tokens));
  });
  return FanOut::create(rec, n_choices, n_per_prompt, stream,
                        openai::fan_out_format(openai::Kind::kChat, "m", include_usage, kId, 7),
                        [joined](const SessionResult& r) {
                          ++joined->n_calls;
                          joined->last = r;
                        },
                        std::move(head), max_running);
}

// Choices `ids` answer a cancellation as their session does: done with `result`; *n counts them.
void on_cancel(const std::shared_ptr<FanOut>& fan, std::initializer_list<int> ids, int* n, SessionResult result) {
  for (int i : ids) {
    fan->choice(i)->on_client_gone([f = fan.get(), i, n, result] {
      ++*n;
      f->choice_done(i)(result);
    });
  }
}

// Two prompts x n = 2, answered out of order: one body, the choices in index order, the
// prompt tokens of each prompt once, the generated ones summed; the whole answer's duties once.
TEST(FanOut, WholeAnswersJoinInIndexOrder) {
  auto rec = std::make_shared<Recorder>();
  Joined joined;
  auto fan = make_fan(rec, 4, 2, /*stream=*/false, &joined);
  const Usage usage[] = {{.n_prompt_tokens = 10, .n_cached_tokens = 0, .n_generated_tokens = 3},
                         {.n_prompt_tokens = 10, .n_cached_tokens = 9, .n_generated_tokens = 4},
                         {.n_prompt_tokens = 20, .n_cached_tokens = 0, .n_generated_tokens = 5},
                         {.n_prompt_tokens = 20, .n_cached_tokens = 19, .n_generated_tokens = 6}};
  for (int i : {3, 1, 0, 2}) {
    fan->choice(i)->send(whole_answer(i, "text \"" + std::to_string(i) + "\"", usage[i]));
    EXPECT_TRUE(rec->sent.empty() || i == 2);
    fan->choice_done(i)(SessionResult{.status = 200, .usage = usage[i]});
  }
  ASSERT_EQ(rec->sent.size(), 1u);
  const json::value v = json::parse(rec->sent[0].body);
  EXPECT_EQ(v.at("id").as_string(), kId);
  EXPECT_EQ(v.at("object").as_string(), "chat.completion");
  const auto& choices = v.at("choices").as_array();
  ASSERT_EQ(choices.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(choices[i].at("index").as_int64(), i);
    EXPECT_EQ(choices[i].at("message").at("content").as_string(), "text \"" + std::to_string(i) + "\"");
    EXPECT_EQ(choices[i].at("finish_reason").as_string(), "length");
  }
  EXPECT_EQ(v.at("usage").at("prompt_tokens").as_int64(), 30);
  EXPECT_EQ(v.at("usage").at("completion_tokens").as_int64(), 18);
  EXPECT_EQ(v.at("usage").at("total_tokens").as_int64(), 48);
  EXPECT_EQ(joined.n_calls, 1);
  EXPECT_EQ(joined.last.status, 200);
  EXPECT_EQ(joined.last.usage.n_generated_tokens, 18);
  bool header = false;
  for (const auto& [name, value] : rec->sent[0].headers) header = header || (name == "x-generated" && value == "18");
  EXPECT_TRUE(header);
}

// Streams: the first choice to start commits the stream, the others' chunks follow as they
// come, and one tail (usage chunk, [DONE]) after the last choice's end.
TEST(FanOut, StreamsInterleaveThenOneTail) {
  auto rec = std::make_shared<Recorder>();
  Joined joined;
  auto fan = make_fan(rec, 2, 2, /*stream=*/true, &joined, /*include_usage=*/true);
  std::string out0, out1;
  auto f0 = choice_formatter(0, true), f1 = choice_formatter(1, true);
  f1->stream_start(Usage{}, out1);
  fan->choice(1)->begin_stream(http::HttpResponse{.body = std::exchange(out1, "")});
  f0->stream_start(Usage{}, out0);
  fan->choice(0)->begin_stream(http::HttpResponse{.body = std::exchange(out0, "")});
  f0->stream_text("zero", out0);
  fan->choice(0)->write(std::exchange(out0, ""));
  f1->stream_text("one", out1);
  fan->choice(1)->write(std::exchange(out1, ""));
  const Usage u0{.n_prompt_tokens = 5, .n_generated_tokens = 2}, u1{.n_prompt_tokens = 5, .n_generated_tokens = 3};
  f1->stream_finish(Completion{.finish = FinishReason::kEndOfSequence, .usage = u1}, out1);
  fan->choice(1)->write(std::exchange(out1, ""));
  fan->choice(1)->end_stream();
  fan->choice_done(1)(SessionResult{.status = 200, .usage = u1});
  EXPECT_EQ(rec->n_end, 0);
  EXPECT_EQ(rec->bytes.find("[DONE]"), std::string::npos);
  f0->stream_finish(Completion{.finish = FinishReason::kMaxTokens, .usage = u0}, out0);
  fan->choice(0)->write(std::exchange(out0, ""));
  fan->choice(0)->end_stream();
  fan->choice_done(0)(SessionResult{.status = 200, .usage = u0});
  EXPECT_EQ(rec->n_begin, 1);
  EXPECT_EQ(rec->n_end, 1);
  // Each data frame is a chunk of the one answer; the texts reach their own index.
  std::vector<std::string> texts(2), finish(2);
  int n_usage = 0, n_done = 0;
  for (size_t at = 0; (at = rec->bytes.find("data: ", at)) != std::string::npos;) {
    const size_t end = rec->bytes.find("\n\n", at);
    const std::string data = rec->bytes.substr(at + 6, end - at - 6);
    at = end;
    if (data == "[DONE]") {
      ++n_done;
      continue;
    }
    const json::value c = json::parse(data);
    EXPECT_EQ(c.at("id").as_string(), kId);
    for (const auto& ch : c.at("choices").as_array()) {
      const auto i = ch.at("index").as_int64();
      if (const auto* t = ch.at("delta").as_object().if_contains("content")) texts[i] += t->as_string().c_str();
      if (!ch.at("finish_reason").is_null()) finish[i] = ch.at("finish_reason").as_string().c_str();
    }
    if (!c.at("usage").is_null()) {
      ++n_usage;
      EXPECT_EQ(c.at("usage").at("prompt_tokens").as_int64(), 5);
      EXPECT_EQ(c.at("usage").at("completion_tokens").as_int64(), 5);
    }
  }
  EXPECT_EQ(texts, (std::vector<std::string>{"zero", "one"}));
  EXPECT_EQ(finish, (std::vector<std::string>{"length", "stop"}));
  EXPECT_EQ(n_usage, 1);
  EXPECT_EQ(n_done, 1);
  EXPECT_EQ(joined.n_calls, 1);
  EXPECT_EQ(joined.last.usage.n_generated_tokens, 5);
}

// A whole answer whose choice fails: the others are cancelled (their work would be lost),
// and the error is the answer, with its reason.
TEST(FanOut, AFailedChoiceIsTheAnswer) {
  auto rec = std::make_shared<Recorder>();
  Joined joined;
  auto fan = make_fan(rec, 3, 3, /*stream=*/false, &joined);
  int n_cancelled = 0;
  on_cancel(fan, {0, 2}, &n_cancelled, SessionResult{.status = 499, .error_reason = ErrorReason::kClientGone});
  ApiError e{.reason = ErrorReason::kOverloaded, .message = "busy"};
  fan->choice(1)->send(choice_formatter(1)->error(e));
  EXPECT_EQ(n_cancelled, 2);
  fan->choice_done(1)(SessionResult{.status = 529, .error_reason = ErrorReason::kOverloaded});
  ASSERT_EQ(rec->sent.size(), 1u);
  EXPECT_NE(rec->sent[0].status, 200);
  EXPECT_NE(rec->sent[0].body.find("busy"), std::string::npos);
  EXPECT_EQ(joined.n_calls, 1);
  EXPECT_EQ(joined.last.error_reason, ErrorReason::kOverloaded);
}

// A client that goes away cancels every choice; the joined result is a 499.
TEST(FanOut, AClientGoneCancelsEveryChoice) {
  auto rec = std::make_shared<Recorder>();
  Joined joined;
  auto fan = make_fan(rec, 2, 2, /*stream=*/true, &joined);
  int n_cancelled = 0;
  on_cancel(fan, {0, 1}, &n_cancelled, SessionResult{.status = 499});
  rec->gone = true;
  ASSERT_TRUE(rec->gone_fn);
  rec->gone_fn();
  EXPECT_EQ(n_cancelled, 2);
  EXPECT_EQ(joined.n_calls, 1);
  EXPECT_EQ(joined.last.status, 499);
  EXPECT_EQ(joined.last.error_reason, ErrorReason::kClientGone);
  EXPECT_TRUE(rec->sent.empty());
}

// A deferred choice starts once, when its prompt's first choice lets it; cancelled before
// that, it never starts and ends as gone.
TEST(FanOut, DeferredChoicesStartOnceOrEndAsGone) {
  auto rec = std::make_shared<Recorder>();
  Joined joined;
  auto fan = make_fan(rec, 3, 3, /*stream=*/true, &joined);
  int n_started = 0;
  fan->defer(1, [&] { ++n_started; });
  fan->defer(2, [&] { ++n_started; });
  fan->start_deferred(1, 2);
  fan->start_deferred(1, 2);
  EXPECT_EQ(n_started, 1);
  int n_cancelled = 0;
  on_cancel(fan, {0, 1}, &n_cancelled, SessionResult{.status = 499});
  rec->gone = true;
  rec->gone_fn();
  EXPECT_EQ(n_cancelled, 2);
  fan->start_deferred(0, 3);
  EXPECT_EQ(n_started, 1);  // choice 2 never started
  EXPECT_EQ(joined.n_calls, 1);
  EXPECT_EQ(joined.last.status, 499);
}

// With max_running, a released choice starts only while fewer than that many run: the next
// released one (in index order) as a running one ends. Once the answer is cancelled, nothing
// more starts and the choices left end as gone.
TEST(FanOut, AtMostMaxRunningChoicesRunAtOnce) {
  auto rec = std::make_shared<Recorder>();
  Joined joined;
  auto fan = make_fan(rec, 4, 2, /*stream=*/false, &joined, false, /*max_running=*/2);
  std::vector<int> started;
  for (int i = 0; i < 4; ++i) fan->defer(i, [&started, i] { started.push_back(i); });
  fan->start_deferred(0, 1);
  fan->start_deferred(2, 3);
  EXPECT_EQ(started, (std::vector<int>{0, 2}));
  fan->start_deferred(1, 2);  // released, but both slots are taken
  EXPECT_EQ(started, (std::vector<int>{0, 2}));
  auto end = [&](int i) {
    const Usage u{.n_prompt_tokens = 3, .n_generated_tokens = 1};
    fan->choice(i)->send(whole_answer(i, "t" + std::to_string(i), u));
    fan->choice_done(i)(SessionResult{.status = 200, .usage = u});
  };
  end(0);
  EXPECT_EQ(started, (std::vector<int>{0, 2, 1}));
  end(2);  // 3 is not released yet
  EXPECT_EQ(started, (std::vector<int>{0, 2, 1}));
  fan->start_deferred(3, 4);
  EXPECT_EQ(started, (std::vector<int>{0, 2, 1, 3}));
  end(1);
  end(3);
  ASSERT_EQ(rec->sent.size(), 1u);
  EXPECT_EQ(json::parse(rec->sent[0].body).at("choices").as_array().size(), 4u);
  EXPECT_EQ(joined.n_calls, 1);

  auto rec2 = std::make_shared<Recorder>();
  Joined gone;
  auto fan2 = make_fan(rec2, 3, 3, /*stream=*/true, &gone, false, /*max_running=*/1);
  started.clear();
  for (int i = 0; i < 3; ++i) fan2->defer(i, [&started, i] { started.push_back(i); });
  fan2->start_deferred(0, 3);
  EXPECT_EQ(started, (std::vector<int>{0}));
  int n_cancelled = 0;
  on_cancel(fan2, {0}, &n_cancelled, SessionResult{.status = 499});
  rec2->gone = true;
  rec2->gone_fn();
  EXPECT_EQ(n_cancelled, 1);
  EXPECT_EQ(started, (std::vector<int>{0}));  // the slot choice 0 freed started nothing
  EXPECT_EQ(gone.n_calls, 1);
  EXPECT_EQ(gone.last.status, 499);
}

TEST(FanOut, JoinUsageCountsEachPromptOnce) {
  const std::vector<Usage> u = {{.n_prompt_tokens = 4, .n_cached_tokens = 1, .n_generated_tokens = 2},
                                {.n_prompt_tokens = 0, .n_cached_tokens = 0, .n_generated_tokens = 0},  // cancelled early
                                {.n_prompt_tokens = 7, .n_cached_tokens = 0, .n_generated_tokens = 1},
                                {.n_prompt_tokens = 7, .n_cached_tokens = 6, .n_generated_tokens = 3}};
  const Usage j = FanOut::join_usage(u, 2);
  EXPECT_EQ(j.n_prompt_tokens, 11);
  EXPECT_EQ(j.n_cached_tokens, 1);
  EXPECT_EQ(j.n_generated_tokens, 6);
}

}  // namespace
}  // namespace zl::api
