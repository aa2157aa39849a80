// Speculative decoding through `zerolayer serve` on stories260K (skipped when ../shared is
// absent): the per-request `speculative` field on both APIs, the same answers with and without
// it, its invalid values as typed 400s, the metrics, the flags and `generate --speculative`.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <string>
#include <vector>

#include "support/http_client.h"
#include "support/json_object.h"
#include "support/json_path.h"
#include "support/metric_scrape.h"
#include "support/openai_stream.h"
#include "support/process.h"
#include "support/prom_text.h"
#include "support/real_model.h"

namespace zl::test {
namespace {

namespace json = boost::json;

ServerProcess& server(const std::string& name, const std::vector<std::string>& extra) {
  static LazyServers servers;
  return servers.real(name, extra);
}
int off_port() { return server("off", {"--ctx", "512"}).port(); }
int ngram_port() { return server("ngram", {"--ctx", "512", "--speculative", "ngram", "--spec-draft-max", "6"}).port(); }

const std::string kStory = "Once upon a time, there was a little girl named Lily. She loved to play outside.";

std::string anthropic_body(const std::string& extra) {
  return R"({"model":"m","temperature":0,"max_tokens":150,"messages":[{"role":"user","content":)" + jquote(kStory) +
         "}]" + (extra.empty() ? "" : "," + extra) + "}";
}
std::string openai_body(const std::string& extra) {
  return R"({"model":"m","temperature":0,"max_tokens":150,"messages":[{"role":"user","content":)" + jquote(kStory) +
         "}]" + (extra.empty() ? "" : "," + extra) + "}";
}

std::string anthropic_text(int port, const std::string& extra) {
  HttpReply r = fetch(port, "POST", "/v1/messages", anthropic_body(extra), {}, 60000);
  EXPECT_EQ(r.status, 200) << r.body;
  if (r.status != 200) return "";
  const json::object o = parse_obj(r.body);
  return std::string(o.at("content").as_array().at(0).as_object().at("text").as_string());
}
std::string openai_text(int port, const std::string& extra) {
  HttpReply r = fetch(port, "POST", "/v1/chat/completions", openai_body(extra), {}, 60000);
  EXPECT_EQ(r.status, 200) << r.body;
  if (r.status != 200) return "";
  const json::object o = parse_obj(r.body);
  return std::string(
      o.at("choices").as_array().at(0).as_object().at("message").as_object().at("content").as_string());
}

TEST(SpeculativeServer, PerRequestSwitchGivesTheSameAnswersAndCounts) {
  REQUIRE_MODEL();
  const int port = off_port();
  ASSERT_GT(port, 0);
  const std::string plain = anthropic_text(port, "");
  ASSERT_FALSE(plain.empty());
  EXPECT_EQ(scrape_metric(port, "engine_spec_verify_passes_total"), 0);  // off by default
  EXPECT_EQ(anthropic_text(port, R"("speculative":true)"), plain);
  const double passes = scrape_metric(port, "engine_spec_verify_passes_total");
  EXPECT_GT(passes, 0);
  EXPECT_GT(scrape_metric(port, "engine_spec_accepted_tokens_total"), 0);
  EXPECT_GE(scrape_metric(port, "engine_spec_draft_tokens_total"), scrape_metric(port, "engine_spec_accepted_tokens_total"));
  HttpReply m = fetch(port, "GET", "/metrics");
  EXPECT_EQ(parse_prom_text(m.body).value("engine_spec_accepted_tokens_per_pass", "engine_spec_accepted_tokens_per_pass_count", {}),
            passes);
  EXPECT_EQ(anthropic_text(port, R"("speculative":{"draft_max":3})"), plain);
  const std::string oa = openai_text(port, "");
  EXPECT_EQ(openai_text(port, R"("speculative":{"enabled":true,"draft_max":2})"), oa);
}

TEST(SpeculativeServer, TheServerFlagAndARequestThatSaysFalse) {
  REQUIRE_MODEL();
  const int port = ngram_port();
  ASSERT_GT(port, 0);
  const std::string with = anthropic_text(port, "");
  const double passes = scrape_metric(port, "engine_spec_verify_passes_total");
  EXPECT_GT(passes, 0);
  EXPECT_EQ(anthropic_text(port, R"("speculative":false)"), with);
  EXPECT_EQ(scrape_metric(port, "engine_spec_verify_passes_total"), passes);  // nothing drafted for it
  EXPECT_EQ(anthropic_text(off_port(), ""), with);
  // Streams: the same text, in deltas.
  HttpReply r = fetch(port, "POST", "/v1/chat/completions", openai_body(R"("stream":true)"), {}, 60000);
  EXPECT_EQ(r.status, 200);
  const ChatStream cs = read_chat_stream(parse_sse(r.body));
  std::string streamed;
  for (const std::string& piece : cs.pieces) streamed += piece;
  EXPECT_EQ(streamed, openai_text(off_port(), ""));
}

TEST(SpeculativeServer, InvalidValuesAreTyped400s) {
  REQUIRE_MODEL();
  const int port = off_port();
  for (const char* bad : {R"("speculative":"yes")", R"("speculative":1)", R"("speculative":[true])",
                          R"("speculative":{"draft_max":0})", R"("speculative":{"draft_max":33})",
                          R"("speculative":{"draft_max":2.5})", R"("speculative":{"enabled":"on"})",
                          R"("speculative":{"draft":4})"}) {
    HttpReply r = fetch(port, "POST", "/v1/messages", anthropic_body(bad));
    ASSERT_EQ(r.status, 400) << bad << ": " << r.body;
    json::object o = parse_obj(r.body);
    EXPECT_EQ(str(at(o, {"error", "type"})), "invalid_request_error") << bad;
    EXPECT_NE(str(at(o, {"error", "message"})).find("speculative"), std::string::npos) << r.body;
    r = fetch(port, "POST", "/v1/chat/completions", openai_body(bad));
    ASSERT_EQ(r.status, 400) << bad << ": " << r.body;
    o = parse_obj(r.body);
    EXPECT_EQ(str(at(o, {"error", "type"})), "invalid_request_error") << bad;
    EXPECT_EQ(str(at(o, {"error", "param"})).rfind("speculative", 0), 0u) << r.body;
  }
  // null means "not given".
  EXPECT_EQ(fetch(port, "POST", "/v1/messages", anthropic_body(R"("speculative":null)"), {}, 60000).status, 200);
}

// {} and null members are "not set" (the server's setting), as "speculative": null is; a
// draft_max alone (enabled null or absent) means on.
TEST(SpeculativeServer, EmptyObjectAndNullMembersAreNotSet) {
  REQUIRE_MODEL();
  const int off = off_port();
  ASSERT_GT(off, 0);
  const std::string plain = anthropic_text(off, "");
  double passes = scrape_metric(off, "engine_spec_verify_passes_total");
  for (const char* unset : {R"("speculative":{})", R"("speculative":{"draft_max":null})",
                            R"("speculative":{"enabled":null})", R"("speculative":{"enabled":null,"draft_max":null})"}) {
    EXPECT_EQ(anthropic_text(off, unset), plain) << unset;
    EXPECT_FALSE(openai_text(off, unset).empty()) << unset;
    EXPECT_EQ(scrape_metric(off, "engine_spec_verify_passes_total"), passes) << unset << ": the server's off";
  }
  EXPECT_EQ(anthropic_text(off, R"("speculative":{"enabled":null,"draft_max":3})"), plain);
  EXPECT_GT(scrape_metric(off, "engine_spec_verify_passes_total"), passes) << "draft_max alone means on";
  const int on = ngram_port();
  ASSERT_GT(on, 0);
  passes = scrape_metric(on, "engine_spec_verify_passes_total");
  EXPECT_EQ(anthropic_text(on, R"("speculative":{})"), plain);
  EXPECT_GT(scrape_metric(on, "engine_spec_verify_passes_total"), passes) << "{} on an ngram server: the server's ngram";
  passes = scrape_metric(on, "engine_spec_verify_passes_total");
  EXPECT_EQ(anthropic_text(on, R"("speculative":{"enabled":false,"draft_max":null})"), plain);
  EXPECT_EQ(scrape_metric(on, "engine_spec_verify_passes_total"), passes);
}

TEST(SpeculativeServer, FlagsAndGenerate) {
  REQUIRE_MODEL();
  for (const char* flags : {"--speculative eagle", "--spec-draft-max 0", "--spec-draft-max 33", "--spec-ngram-min 0"}) {
    CommandResult r = run_command(zerolayer_bin() + " serve --port 0 --model " + model_path() + " " + flags +
                                  " </dev/null 2>&1");
    EXPECT_EQ(r.exit_code, 2) << flags << ": " << r.out;
  }
  CommandResult help = run_command(zerolayer_bin() + " serve --help 2>&1");
  EXPECT_NE(help.out.find("--speculative"), std::string::npos);
  EXPECT_NE(help.out.find("--spec-draft-max"), std::string::npos);
  // generate: the same ids with and without, and the counts in --json.
  const std::string base = zerolayer_bin() + " generate --model " + model_path() +
                           " --prompt 'Once upon a time' -n 120 --temperature 0 --ignore-eos --threads 1 --json";
  CommandResult a = run_command(base + " 2>/dev/null");
  CommandResult b = run_command(base + " --speculative ngram 2>/dev/null");
  ASSERT_EQ(a.exit_code, 0) << a.out;
  ASSERT_EQ(b.exit_code, 0) << b.out;
  json::object ja = parse_obj(a.out), jb = parse_obj(b.out);
  EXPECT_EQ(json::serialize(ja.at("generated_ids")), json::serialize(jb.at("generated_ids")));
  EXPECT_EQ(num(at(ja, {"spec_passes"})), 0);
  EXPECT_GT(num(at(jb, {"spec_passes"})), 0);
  EXPECT_GT(num(at(jb, {"spec_accepted_tokens"})), 0);
  EXPECT_LE(num(at(jb, {"spec_accepted_tokens"})), num(at(jb, {"spec_draft_tokens"})));
  EXPECT_EQ(run_command(zerolayer_bin() + " generate --model " + model_path() +
                        " --prompt x --speculative yes 2>&1").exit_code, 2);
}

}  // namespace
}  // namespace zl::test
