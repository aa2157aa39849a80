// src/rollout/: BLEU-4 against values worked out by hand (and cross-checked
// with an independent implementation of Papineni et al.'s formula), the SSE
// answer parser on both APIs' streams, user sampling, the stream flag, and
// the router's common headers (x-engine-host) on every kind of answer.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "http/router.h"
#include "rollout/bleu.h"
#include "rollout/shadow.h"
#include "rollout/stream_client.h"
#include "support/null_responder.h"

namespace zl::rollout {
namespace {

TEST(Bleu4, IdenticalAndEmptyTexts) {
  EXPECT_DOUBLE_EQ(bleu4("the cat sat on the mat", "the cat sat on the mat"), 1.0);
  EXPECT_DOUBLE_EQ(bleu4("short", "short"), 1.0);  // identical, fewer than 4 words
  EXPECT_DOUBLE_EQ(bleu4("", ""), 1.0);
  EXPECT_DOUBLE_EQ(bleu4("  \n", "\t"), 1.0);
  EXPECT_DOUBLE_EQ(bleu4("", "something"), 0.0);
  EXPECT_DOUBLE_EQ(bleu4("something", ""), 0.0);
  // Whitespace differences do not count: words are compared.
  EXPECT_DOUBLE_EQ(bleu4("a  b\nc d", "a b c d"), 1.0);
}

TEST(Bleu4, KnownValues) {
  // candidate 6 words, reference 7: p1 = 6/6, p2 = 4/5, p3 = 3/4, p4 = 2/3,
  // BP = exp(1 - 7/6); BLEU = exp(1 - 7/6) * (0.4)^(1/4) = 0.67318213824...
  EXPECT_NEAR(bleu4("the cat sat on the mat", "the cat sat on the red mat"), 0.6731821382417487, 1e-12);
  // Longer than the reference: no brevity penalty. p1 = 7/8, p2 = 6/7,
  // p3 = 5/6, p4 = 4/5: (0.5)^(1/4) = 0.84089641525...
  EXPECT_NEAR(bleu4("the cat sat on the red mat today", "the cat sat on the red mat"), 0.8408964152537145, 1e-12);
  // Papineni et al.'s first example candidate against its first reference.
  EXPECT_NEAR(bleu4("It is a guide to action which ensures that the military always obeys the commands of the party",
                    "It is a guide to action that ensures that the military will forever heed Party commands"),
              0.41180376356915777, 1e-12);
}

TEST(Bleu4, ClippingAndNoSharedNgram) {
  // "the" x7 against a reference with two: unigram precision clipped to 2/7,
  // and no bigram in common: 0 (unsmoothed).
  EXPECT_DOUBLE_EQ(bleu4("the the the the the the the", "the cat is on the mat"), 0.0);
  EXPECT_DOUBLE_EQ(bleu4("completely different words here", "nothing in common at all"), 0.0);
  // Symmetric inputs are not symmetric scores (brevity penalty is the candidate's).
  EXPECT_NE(bleu4("the cat sat on the mat", "the cat sat on the red mat"),
            bleu4("the cat sat on the red mat", "the cat sat on the mat"));
}

double feed_all(SseAnswerParser& p, const std::string& s, size_t chunk) {
  double t = 0;
  for (size_t i = 0; i < s.size(); i += chunk) p.feed(std::string_view(s).substr(i, chunk), t += 1);
  return t;
}

TEST(SseAnswerParser, AnthropicStreamSplitAnywhere) {
  const std::string s =
      "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n"
      "event: ping\ndata: {\"type\":\"ping\"}\n\n"
      "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
      "event: content_block_delta\r\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\r\n\r\n"
      "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" world\"}}\n\n"
      "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":7}}\n\n"
      "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
  for (size_t chunk : {1, 3, 17, 4096}) {
    SseAnswerParser p;
    feed_all(p, s, chunk);
    StreamOutcome o;
    p.finish(o);
    EXPECT_TRUE(p.saw_end());
    EXPECT_EQ(o.text, "Hello world") << chunk;
    EXPECT_EQ(o.total_tokens, 7);
    EXPECT_EQ(o.stop_reason, "end_turn");
    EXPECT_GT(o.first_token_ms, 0);
    if (chunk < s.size()) {  // in one read: one time
      EXPECT_GT(o.last_token_ms, o.first_token_ms) << chunk;
    }
    EXPECT_TRUE(o.error.empty());
  }
}

TEST(SseAnswerParser, AnthropicErrorEvent) {
  SseAnswerParser p;
  p.feed("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"busy\"}}\n\n", 1);
  StreamOutcome o;
  p.finish(o);
  EXPECT_EQ(o.error, "busy");
  EXPECT_EQ(o.error_type, "overloaded_error");
  EXPECT_FALSE(p.saw_end());
}

TEST(SseAnswerParser, OpenAiChunksUsageAndDone) {
  SseAnswerParser p;
  p.feed("data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n", 1);
  p.feed(": ping\n\n", 2);
  p.feed("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n", 3);
  p.feed("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" there\"},\"finish_reason\":null}]}\n\n", 4);
  p.feed("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}]}\n\n", 5);
  p.feed("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n", 6);
  StreamOutcome o;
  p.finish(o);
  EXPECT_TRUE(p.saw_end());
  EXPECT_EQ(o.text, "Hi there");
  EXPECT_EQ(o.first_token_ms, 3);
  EXPECT_EQ(o.last_token_ms, 4);
  EXPECT_EQ(o.stop_reason, "length");
  EXPECT_EQ(o.total_tokens, 2);
}

TEST(SseAnswerParser, TextIsCapped) {
  SseAnswerParser p(/*max_text_bytes=*/4);
  p.feed("data: {\"choices\":[{\"delta\":{\"content\":\"abcdefgh\"}}]}\n\n", 1);
  StreamOutcome o;
  p.finish(o);
  EXPECT_EQ(o.text, "abcd");
}

TEST(StreamFlag, SetOnBothApis) {
  EXPECT_EQ(with_stream_true(R"({"model":"m","stream":false})", false).value(), R"({"model":"m","stream":true})");
  const std::string o = with_stream_true(R"({"model":"m"})", true).value();
  EXPECT_NE(o.find(R"("stream":true)"), std::string::npos);
  EXPECT_NE(o.find(R"("stream_options":{"include_usage":true})"), std::string::npos);
  EXPECT_FALSE(with_stream_true("[1,2]", false).ok());
  EXPECT_FALSE(with_stream_true("{nope", false).ok());
}

TEST(UserSampling, StableAndProportional) {
  int n_in = 0;
  for (int i = 0; i < 10000; ++i) {
    const std::string user = "user-" + std::to_string(i);
    const bool in = user_in_fraction(user, 0.1);
    EXPECT_EQ(in, user_in_fraction(user, 0.1));          // stable
    if (in) {  // nested: raising the fraction keeps users in
      EXPECT_TRUE(user_in_fraction(user, 0.5));
    }
    n_in += in;
  }
  EXPECT_GT(n_in, 800);
  EXPECT_LT(n_in, 1200);
  EXPECT_FALSE(user_in_fraction("anyone", 0.0));
  EXPECT_TRUE(user_in_fraction("anyone", 1.0));
}

// A Responder that records the heads it was given.
class RecordingResponder : public test::NullResponder {
 public:
  void send(http::HttpResponse r) override { sent = std::move(r); }
  void begin_stream(http::HttpResponse head) override { streamed = std::move(head); }
  http::HttpResponse sent, streamed;
};

bool has_host(const http::HttpResponse& r) {
  for (const auto& [k, v] : r.headers) {
    if (k == "x-engine-host" && v == "replica-7") return true;
  }
  return false;
}

TEST(RouterCommonHeaders, EveryAnswerCarriesThem) {
  http::Router router;
  router.set_common_headers({{"x-engine-host", "replica-7"}});
  router.add("GET", "/plain", [](http::HttpRequest&, std::shared_ptr<http::Responder> res) {
    res->send(http::HttpResponse{.status = 200, .body = "x"});
  });
  router.add("GET", "/stream", [](http::HttpRequest&, std::shared_ptr<http::Responder> res) {
    res->begin_stream(http::HttpResponse{.status = 200});
  });
  for (const char* path : {"/plain", "/stream", "/missing"}) {
    auto rec = std::make_shared<RecordingResponder>();
    http::HttpRequest req{.method = "GET", .target = path, .path = path};
    router.dispatch(req, rec);
    EXPECT_TRUE(has_host(std::string(path) == "/stream" ? rec->streamed : rec->sent)) << path;
  }
  http::HttpRequest bad{.method = "GET", .target = "/", .path = "/"};
  EXPECT_TRUE(has_host(router.error_response(http::HttpError::kBadRequest, bad)));
}

}  // namespace
}  // namespace zl::rollout
