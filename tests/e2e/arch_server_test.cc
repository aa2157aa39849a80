// `zerolayer serve` on the tiny gemma3 and phi3 models of ../shared/models
// (random weights, stories260K's vocabulary): a chat through both APIs runs,
// greedy generation is deterministic, streaming equals non-streaming, and a
// prompt longer than gemma3's 32-token sliding window served again from the
// prefix cache gives the same tokens. Skipped when ../shared is absent.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "support/http_client.h"
#include "support/json_object.h"
#include "support/json_path.h"
#include "support/openai_stream.h"
#include "support/process.h"
#include "support/real_model.h"

namespace zl::test {
namespace {

namespace json = boost::json;

// About 60 tokens: past the sliding window of tiny-gemma3 (32).
constexpr const char* kStory =
    "One day, a little girl named Mia found a red ball in the garden. She was very happy and ran to show her "
    "mom. Look, Mom! I found a ball! she said.";

struct Chat {
  int status = 0;
  std::string text;
  int64_t prompt_tokens = -1, cached_tokens = -1, completion_tokens = -1;
};

// A greedy OpenAI chat of 24 tokens (EOS banned, so the length is fixed).
Chat chat(int port, const std::string& user, const std::string& content, bool stream) {
  const std::string body = R"({"model":"m","temperature":0,"max_tokens":24,"logit_bias":{"2":-100},"user":")" + user +
                           R"(","messages":[{"role":"user","content":)" + jquote(content) + "}]" +
                           (stream ? R"(,"stream":true,"stream_options":{"include_usage":true})" : "") + "}";
  HttpReply r = fetch(port, "POST", "/v1/chat/completions", body, {}, 60000);
  Chat c{.status = r.status};
  EXPECT_TRUE(r.complete);
  if (r.status != 200) {
    ADD_FAILURE() << r.body;
    return c;
  }
  if (stream) {
    const ChatStream s = read_chat_stream(parse_sse(r.body));
    for (const std::string& piece : s.pieces) c.text += piece;
    c.prompt_tokens = s.prompt_tokens;
    c.completion_tokens = s.completion_tokens;
    return c;
  }
  json::object o = parse_obj(r.body);
  c.text = str(at(o["choices"].as_array()[0].as_object(), {"message", "content"}));
  c.prompt_tokens = num(at(o, {"usage", "prompt_tokens"}));
  c.completion_tokens = num(at(o, {"usage", "completion_tokens"}));
  c.cached_tokens = num(at(o, {"usage", "prompt_tokens_details", "cached_tokens"}));
  return c;
}

class ArchServerTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ArchServerTest, GreedyChatIsDeterministicAndPrefixCacheKeepsIt) {
  const std::string model = shared_dir() + "/models/" + GetParam() + ".gguf";
  if (!file_exists(model)) GTEST_SKIP() << "SKIPPED: " << model << " is absent (needs ../shared)";
  ServerProcess s({"--model", model, "--threads", "1", "--request-log", "false", "--parallel", "4"});
  ASSERT_TRUE(s.ok()) << s.startup_line();
  EXPECT_NE(s.startup_line().find(GetParam()), std::string::npos) << s.startup_line();

  const Chat first = chat(s.port(), "a", kStory, false);
  ASSERT_EQ(first.status, 200);
  EXPECT_EQ(first.completion_tokens, 24);
  EXPECT_GT(first.prompt_tokens, 40);
  EXPECT_FALSE(first.text.empty());
  // The same prompt again: its full blocks come from the prefix cache (K/V
  // written under the sliding window), the tokens stay the same.
  const Chat again = chat(s.port(), "a", kStory, false);
  ASSERT_EQ(again.status, 200);
  EXPECT_GT(again.cached_tokens, 32);
  EXPECT_EQ(again.text, first.text);
  // Streaming, another tenant (nothing cached): the same text.
  const Chat streamed = chat(s.port(), "b", kStory, true);
  ASSERT_EQ(streamed.status, 200);
  EXPECT_EQ(streamed.text, first.text);
  EXPECT_EQ(streamed.completion_tokens, 24);
  // Anthropic API, a short prompt: answers.
  HttpReply r = fetch(s.port(), "POST", "/v1/messages",
                      R"({"model":"m","max_tokens":8,"temperature":0,"messages":[{"role":"user","content":"Hi"}]})",
                      {}, 60000);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(str(at(parse_obj(r.body), {"type"})), "message");
}

INSTANTIATE_TEST_SUITE_P(Models, ArchServerTest, ::testing::Values("tiny-gemma3-F32", "tiny-phi3-F32"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n) {
                             if (ch == '-') ch = '_';
                           }
                           return n;
                         });

// `--mmap false` (llama-server's --no-mmap): the served model, and its
// draft model, no longer depend on their files. Overwriting them in place
// (shorter, then another model of the same size) changes no answer and
// stops nothing; with the default mapping a truncated file is a SIGBUS.
TEST(ArchServerTest, MmapFalseServesThroughAnInPlaceOverwriteOfTheFiles) {
  const std::string q4k = shared_dir() + "/models/tiny-llama-Q4_K_M.gguf";
  const std::string other = shared_dir() + "/models/tiny-llama-F16.gguf";
  if (!file_exists(q4k) || !file_exists(other)) GTEST_SKIP() << "SKIPPED: ../shared/models is absent";
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("zl_mmap_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string model = (dir / "m.gguf").string(), draft = (dir / "d.gguf").string();
  fs::copy_file(q4k, model, fs::copy_options::overwrite_existing);
  fs::copy_file(q4k, draft, fs::copy_options::overwrite_existing);
  {
    ServerProcess s({"--model", model, "--draft-model", draft, "--threads", "1", "--request-log", "false", "--mmap",
                     "false"});
    ASSERT_TRUE(s.ok()) << s.startup_line();
    const Chat before = chat(s.port(), "a", kStory, false);
    ASSERT_EQ(before.status, 200);
    ASSERT_FALSE(before.text.empty());
    for (const std::string& path : {model, draft}) fs::resize_file(path, 0);
    const Chat truncated = chat(s.port(), "b", kStory, false);
    ASSERT_EQ(truncated.status, 200);
    EXPECT_EQ(truncated.text, before.text);
    for (const std::string& path : {model, draft}) fs::copy_file(other, path, fs::copy_options::overwrite_existing);
    const Chat rewritten = chat(s.port(), "c", kStory, true);
    ASSERT_EQ(rewritten.status, 200);
    EXPECT_EQ(rewritten.text, before.text);
    EXPECT_EQ(::kill(s.pid(), 0), 0);  // still running
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace zl::test
