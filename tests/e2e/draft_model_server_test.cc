// `--draft-model` through the real binary (skipped when ../shared is absent): tiny-llama-F32
// served with its own weights quantized to Q2_K as the draft model (the same vocabulary, drafts
// often accepted). Greedy answers equal those without a draft model, the metrics count accepted
// drafts, --speculative off|ngram|draft with and without a draft model, refusals at startup,
// and `generate --draft-model`.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cstdlib>
#include <string>
#include <thread>
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

std::string target_path() { return shared_dir() + "/models/tiny-llama-F32.gguf"; }
std::string draft_path() { return shared_dir() + "/models/tiny-llama-Q8_0.gguf"; }
// This random-weight draft is never sure of a token (the default --draft-p-min 0.8 would draft
// nothing): the drafting servers and runs draft regardless.
const std::string kAlways = " --draft-p-min 0";

#define REQUIRE_TINY_LLAMA()                                                                          \
  do {                                                                                                \
    if (!file_exists(target_path()) || !file_exists(draft_path()))                                    \
      GTEST_SKIP() << "SKIPPED: " << target_path() << " or " << draft_path() << " is absent (needs ../shared)"; \
  } while (0)

ServerProcess& server(const std::string& name, const std::vector<std::string>& extra) {
  static LazyServers servers;
  return servers.get(name, [&] {
    std::vector<std::string> args = {"--model", target_path(), "--threads", "1", "--request-log", "false",
                                     "--ctx",   "256"};
    args.insert(args.end(), extra.begin(), extra.end());
    return std::make_unique<ServerProcess>(args);
  });
}
int plain_port() { return server("plain", {}).port(); }
int draft_port() { return server("draft", {"--draft-model", draft_path(), "--draft-p-min", "0"}).port(); }
int draft_off_port() {
  return server("draft-off", {"--draft-model", draft_path(), "--speculative", "off", "--draft-p-min", "0"}).port();
}

// /v1/completions, greedy, 60 tokens; `extra`: more members of the body.
std::string completion(int port, const std::string& extra = "") {
  const bool own_prompt = extra.find(R"("prompt":)") != std::string::npos;
  const std::string body = std::string(R"({"model":"m",)") +
                           (own_prompt ? "" : R"("prompt":"Once upon a time",)") +
                           R"("temperature":0,"max_tokens":60)" + (extra.empty() ? "" : "," + extra) + "}";
  HttpReply r = fetch(port, "POST", "/v1/completions", body, {}, 60000);
  EXPECT_EQ(r.status, 200) << r.body;
  if (r.status != 200) return "";
  const json::object o = parse_obj(r.body);
  return std::string(o.at("choices").as_array().at(0).as_object().at("text").as_string());
}

TEST(DraftModelServer, GreedyTextIsThatOfPlainDecodingAndDraftsAreAccepted) {
  REQUIRE_TINY_LLAMA();
  const int plain = plain_port(), draft = draft_port();
  ASSERT_GT(plain, 0);
  ASSERT_GT(draft, 0);
  const std::string want = completion(plain);
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(scrape_metric(plain, "engine_spec_verify_passes_total"), 0);
  EXPECT_EQ(completion(draft), want);  // --draft-model alone: every request speculates
  EXPECT_GT(scrape_metric(draft, "engine_spec_verify_passes_total"), 0);
  const double accepted = scrape_metric(draft, "engine_spec_accepted_tokens_total");
  EXPECT_GT(accepted, 0);
  EXPECT_GE(scrape_metric(draft, "engine_spec_draft_tokens_total"), accepted);
  // Streamed, and with a request's own draft length: the same text.
  HttpReply r = fetch(draft, "POST", "/v1/completions",
                      R"({"model":"m","prompt":"Once upon a time","temperature":0,"max_tokens":60,)"
                      R"("stream":true,"speculative":{"draft_max":3}})",
                      {}, 60000);
  ASSERT_EQ(r.status, 200) << r.body;
  std::string streamed;
  for (const SseEvent& e : parse_sse(r.body)) {
    if (e.data == "[DONE]") continue;
    const json::object o = parse_obj(e.data);
    streamed += std::string(o.at("choices").as_array().at(0).as_object().at("text").as_string());
  }
  EXPECT_EQ(streamed, want);
  // A request that says false does not draft.
  const double passes = scrape_metric(draft, "engine_spec_verify_passes_total");
  EXPECT_EQ(completion(draft, R"("speculative":false)"), want);
  EXPECT_EQ(scrape_metric(draft, "engine_spec_verify_passes_total"), passes);
}

TEST(DraftModelServer, OffLoadsTheDraftModelForRequestsThatAsk) {
  REQUIRE_TINY_LLAMA();
  const int port = draft_off_port();
  ASSERT_GT(port, 0);
  const std::string want = completion(plain_port());
  EXPECT_EQ(completion(port), want);
  EXPECT_EQ(scrape_metric(port, "engine_spec_verify_passes_total"), 0);
  EXPECT_EQ(completion(port, R"("speculative":true)"), want);
  EXPECT_GT(scrape_metric(port, "engine_spec_verify_passes_total"), 0);
  EXPECT_GT(scrape_metric(port, "engine_spec_accepted_tokens_total"), 0);
}

// Sequences at once with fewer draft slots than sequences: those without a slot decode plainly,
// and every answer is still that of plain decoding.
TEST(DraftModelServer, ConcurrentRequestsWithFewerSlots) {
  REQUIRE_TINY_LLAMA();
  const int port =
      server("draft-2-slots", {"--draft-model", draft_path(), "--draft-slots", "2", "--parallel", "4", "--draft-p-min", "0"})
          .port();
  ASSERT_GT(port, 0);
  const std::vector<std::string> prompts = {"Once upon a time", "The cat sat on the mat.", "Lily", "A big dog"};
  std::vector<std::string> want, got(prompts.size());
  for (const std::string& p : prompts) want.push_back(completion(plain_port(), R"("prompt":)" + jquote(p)));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < prompts.size(); ++i) {
    threads.emplace_back([&, i] { got[i] = completion(port, R"("prompt":)" + jquote(prompts[i])); });
  }
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(got[i], want[i]) << prompts[i];
  EXPECT_GT(scrape_metric(port, "engine_spec_verify_passes_total"), 0);
}

// `zerolayer serve ... 2>&1`: its exit status and output, stdin closed.
CommandResult serve(const std::string& flags) {
  return run_command(zerolayer_bin() + " serve --port 0 --threads 1 --model " + target_path() + " " + flags +
                     " </dev/null 2>&1");
}

TEST(DraftModelServer, StartupRefusals) {
  REQUIRE_TINY_LLAMA();
  CommandResult r = serve("--speculative draft");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("--speculative draft"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("draft-model"), std::string::npos) << r.out;
  r = serve("--speculative ngram --draft-model " + draft_path());
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("conflicts with --draft-model"), std::string::npos) << r.out;
  r = run_command("ZEROLAYER_DRAFT_MODEL=" + draft_path() + " " + zerolayer_bin() + " serve --port 0 --model " +
                  target_path() + " --speculative ngram </dev/null 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("ZEROLAYER_DRAFT_MODEL="), std::string::npos) << r.out;
  r = serve("--draft-model /nonexistent/draft.gguf");
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("--draft-model /nonexistent/draft.gguf"), std::string::npos) << r.out;
  r = serve("--draft-model " + draft_path() + " --draft-p-min 1.5");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("draft-p-min must be a fraction in [0, 1]"), std::string::npos) << r.out;
  r = serve("--draft-model " + draft_path() + " --draft-slots -1");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("--draft-slots"), std::string::npos) << r.out;
  // A draft model of another vocabulary: stories260K's tokens, padded to 520 (make-model).
  const std::string dir = ::testing::TempDir() + "draft_model_server_test";
  const std::string other = dir + "/other-vocab.gguf";
  ASSERT_EQ(run_command("mkdir -p " + dir + " && " + zerolayer_bin() +
                        " make-model --shape tiny --type f32 --vocab " + shared_dir() +
                        "/models/stories260K.gguf --n-vocab 520 --n-embd 64 --n-layer 1 --n-ff 64 --threads 1 --out " +
                        other + " 2>&1")
                .exit_code,
            0);
  r = serve("--draft-model " + other);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("vocabulary differs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("520 tokens"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("serving"), std::string::npos) << r.out;
  CommandResult help = run_command(zerolayer_bin() + " serve --help 2>&1");
  EXPECT_NE(help.out.find("--draft-model"), std::string::npos);
  EXPECT_NE(help.out.find("--draft-slots"), std::string::npos);
  std::remove(other.c_str());
}

TEST(DraftModelServer, GenerateWithADraftModel) {
  REQUIRE_TINY_LLAMA();
  const std::string base = zerolayer_bin() + " generate --model " + target_path() +
                           " --prompt 'Once upon a time' -n 60 --temperature 0 --ignore-eos --threads 1 --json";
  const std::string log = ::testing::TempDir() + "draft_model_generate.log";
  CommandResult a = run_command(base + " 2>/dev/null");
  CommandResult b = run_command(base + " --draft-model " + draft_path() + kAlways + " 2>" + log);
  CommandResult c = run_command(base + " --speculative draft --draft-model " + draft_path() + kAlways + " 2>/dev/null");
  ASSERT_EQ(a.exit_code, 0) << a.out;
  ASSERT_EQ(b.exit_code, 0) << b.out;
  ASSERT_EQ(c.exit_code, 0) << c.out;
  json::object ja = parse_obj(a.out), jb = parse_obj(b.out), jc = parse_obj(c.out);
  EXPECT_EQ(json::serialize(ja.at("generated_ids")), json::serialize(jb.at("generated_ids")));
  EXPECT_EQ(json::serialize(ja.at("generated_ids")), json::serialize(jc.at("generated_ids")));
  EXPECT_EQ(num(at(ja, {"spec_passes"})), 0);
  EXPECT_GT(num(at(jb, {"spec_passes"})), 0);
  EXPECT_GT(num(at(jb, {"spec_accepted_tokens"})), 0);
  EXPECT_LE(num(at(jb, {"spec_accepted_tokens"})), num(at(jb, {"spec_draft_tokens"})));
  // The sizing log names the method and what the draft model costs.
  const std::string err = read_file(log);
  EXPECT_NE(err.find(R"("speculative":"draft")"), std::string::npos) << err;
  EXPECT_NE(err.find(R"("msg":"draft model sizing")"), std::string::npos) << err;
  EXPECT_NE(err.find(R"("draft_kv_bytes":)"), std::string::npos) << err;
  // Sampled with a seed: the very same tokens with the draft model.
  const std::string sampled = zerolayer_bin() + " generate --model " + target_path() +
                              " --prompt 'Once upon a time' -n 60 --temperature 0.8 --seed 7 --ignore-eos "
                              "--threads 1 --json 2>/dev/null";
  CommandResult sa = run_command(sampled);
  CommandResult sb = run_command(sampled + " --draft-model " + draft_path() + kAlways);
  ASSERT_EQ(sa.exit_code, 0) << sa.out;
  ASSERT_EQ(sb.exit_code, 0) << sb.out;
  EXPECT_EQ(json::serialize(parse_obj(sa.out).at("generated_ids")), json::serialize(parse_obj(sb.out).at("generated_ids")));
  EXPECT_GT(num(at(parse_obj(sb.out), {"spec_passes"})), 0);
  // Off with a draft model: nothing drafted (generate's one request does not ask).
  CommandResult off = run_command(base + " --speculative off --draft-model " + draft_path() + " 2>/dev/null");
  ASSERT_EQ(off.exit_code, 0) << off.out;
  EXPECT_EQ(num(at(parse_obj(off.out), {"spec_passes"})), 0);
  EXPECT_EQ(run_command(base + " --speculative draft 2>&1").exit_code, 2);
  EXPECT_EQ(run_command(base + " --speculative ngram --draft-model " + draft_path() + " 2>&1").exit_code, 2);
  // The default minimum probability: this draft is never sure, so nothing is verified, the ids
  // are the same, and the sizing log says the setting.
  CommandResult unsure = run_command(base + " --draft-model " + draft_path() + " 2>" + log);
  ASSERT_EQ(unsure.exit_code, 0) << unsure.out;
  EXPECT_EQ(json::serialize(ja.at("generated_ids")), json::serialize(parse_obj(unsure.out).at("generated_ids")));
  EXPECT_EQ(num(at(parse_obj(unsure.out), {"spec_passes"})), 0);
  EXPECT_NE(read_file(log).find(R"("draft_p_min":0.8)"), std::string::npos) << read_file(log);
  EXPECT_EQ(run_command(base + " --draft-model " + draft_path() + " --draft-p-min 1.5 2>&1").exit_code, 2);
}

}  // namespace
}  // namespace zl::test
