// POST /tokenize and /detokenize (api/tokenize_api.h): the request shapes of
// llama-server (content, add_special, parse_special, with_pieces) and vLLM
// (prompt, add_special_tokens, return_token_strs; messages,
// add_generation_prompt, continue_final_message), their defaults, the 400s,
// and the answer carrying both shapes' keys. Then the tokenizer-backed codec
// calls they run, on real vocabularies of ../shared (skipped without it).
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <fstream>
#include <string>
#include <vector>

#include "api/tokenize_api.h"
#include "api/tokenizer_codec.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace zl::api {
namespace {

namespace json = boost::json;

TEST(TokenizeApi, LlamaServerContentAndItsDefaults) {
  auto q = parse_tokenize_request(R"({"content":"hello <s>"})");
  ASSERT_TRUE(q.ok()) << q.error().message;
  EXPECT_EQ(q.value().form, TokenizeQuery::Form::kContent);
  EXPECT_EQ(q.value().text, "hello <s>");
  EXPECT_FALSE(q.value().add_special);   // llama-server: add_special false,
  EXPECT_TRUE(q.value().parse_special);  // parse_special true
  EXPECT_FALSE(q.value().with_pieces);
  auto r = parse_tokenize_request(R"({"content":"x","add_special":true,"parse_special":false,"with_pieces":true})");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.value().add_special);
  EXPECT_FALSE(r.value().parse_special);
  EXPECT_TRUE(r.value().with_pieces);
}

TEST(TokenizeApi, VllmPromptTokenizesAsACompletionPrompt) {
  auto q = parse_tokenize_request(R"({"model":"m","prompt":"hello","return_token_strs":true})");
  ASSERT_TRUE(q.ok()) << q.error().message;
  EXPECT_EQ(q.value().form, TokenizeQuery::Form::kPrompt);
  EXPECT_TRUE(q.value().add_special);     // add_special_tokens defaults to true
  EXPECT_FALSE(q.value().parse_special);  // as /v1/completions: special-token text stays text
  EXPECT_TRUE(q.value().token_strs);
  auto r = parse_tokenize_request(R"({"prompt":"x","add_special_tokens":false})");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r.value().add_special);
}

TEST(TokenizeApi, VllmChatIsParsedAsAChatCompletion) {
  auto q = parse_tokenize_request(
      R"({"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],
          "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]})");
  ASSERT_TRUE(q.ok()) << q.error().message;  // model is optional here
  ASSERT_TRUE(q.value().chat.has_value());
  EXPECT_EQ(q.value().form, TokenizeQuery::Form::kChat);
  EXPECT_EQ(q.value().chat->messages.size(), 2u);
  EXPECT_EQ(q.value().chat->tools.size(), 1u);
  EXPECT_TRUE(q.value().chat->add_generation_prompt);
  EXPECT_FALSE(q.value().chat->continue_final_message);
  auto closed = parse_tokenize_request(
      R"({"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Yo"}],"add_generation_prompt":false,
          "continue_final_message":false})");
  ASSERT_TRUE(closed.ok()) << closed.error().message;
  EXPECT_FALSE(closed.value().chat->add_generation_prompt);
  EXPECT_FALSE(closed.value().chat->continue_final_message);  // explicit: the assistant turn is closed
  auto cont = parse_tokenize_request(R"({"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Yo"}]})");
  ASSERT_TRUE(cont.ok());
  EXPECT_TRUE(cont.value().chat->continue_final_message);  // as a chat completion: a prefill is continued
}

TEST(TokenizeApi, BadBodiesAre400sNamingTheField) {
  const struct {
    const char* body;
    const char* param;
    ErrorReason reason;
  } cases[] = {
      {"[1]", "", ErrorReason::kInvalidJson},
      {"{}", "content", ErrorReason::kMissingField},
      {R"({"content":5})", "content", ErrorReason::kInvalidType},
      {R"({"prompt":["a"]})", "prompt", ErrorReason::kInvalidType},
      {R"({"content":"x","with_pieces":"yes"})", "with_pieces", ErrorReason::kInvalidType},
      {R"({"messages":[]})", "messages", ErrorReason::kEmptyMessages},
      {R"({"messages":[{"role":"wizard","content":"x"}]})", "messages[0].role", ErrorReason::kInvalidRole},
      {R"({"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"y"}],"add_generation_prompt":false})",
       "add_generation_prompt", ErrorReason::kInvalidValue},
  };
  for (const auto& c : cases) {
    auto q = parse_tokenize_request(c.body);
    ASSERT_FALSE(q.ok()) << c.body;
    EXPECT_EQ(q.error().param, c.param) << c.body << ": " << q.error().message;
    EXPECT_EQ(q.error().reason, c.reason) << c.body << ": " << q.error().message;
  }
  for (const char* body : {"{}", R"({"tokens":"1"})", R"({"tokens":[1,-1]})", R"({"tokens":[1.5]})", R"({"tokens":[1e12]})"}) {
    auto ids = parse_detokenize_request(body);
    EXPECT_FALSE(ids.ok()) << body;
  }
  auto ids = parse_detokenize_request(R"({"tokens":[0,7,2.0]})");
  ASSERT_TRUE(ids.ok()) << ids.error().message;
  EXPECT_EQ(ids.value(), (std::vector<int32_t>{0, 7, 2}));
}

TEST(TokenizeApi, TheAnswerCarriesBothShapes) {
  TokenizeQuery q;
  const std::vector<int32_t> ids = {5, 6};
  json::object a = json::parse(tokenize_response(q, ids, {}, {}, 4096)).as_object();
  EXPECT_EQ(json::serialize(a["tokens"]), "[5,6]");
  EXPECT_EQ(a["count"].as_int64(), 2);
  EXPECT_EQ(a["max_model_len"].as_int64(), 4096);
  EXPECT_TRUE(a["token_strs"].is_null());
  // with_pieces: text pieces as strings, a piece that is not whole UTF-8 as its bytes.
  q.with_pieces = true;
  q.token_strs = true;
  const std::vector<std::string> pieces = {" h\xc3\xa9", "\xe2\x82"};
  const std::vector<std::string> strs = {"\xc4\xa0h\xc3\xa9", "<0xE2>"};
  a = json::parse(tokenize_response(q, ids, pieces, strs, 8)).as_object();
  EXPECT_EQ(json::serialize(a["tokens"]), "[{\"id\":5,\"piece\":\" h\xc3\xa9\"},{\"id\":6,\"piece\":[226,130]}]");
  EXPECT_EQ(a["token_strs"].as_array().size(), 2u);
  EXPECT_EQ(a["token_strs"].as_array()[1].as_string(), "<0xE2>");
  // A vocabulary string that is not UTF-8 (a malformed file) still makes valid JSON.
  const std::vector<std::string> bad_strs = {"ok", "\xff"};
  a = json::parse(tokenize_response(q, ids, pieces, bad_strs, 8)).as_object();
  EXPECT_EQ(a["token_strs"].as_array()[1].as_string(), "\xEF\xBF\xBD");
  json::object d = json::parse(detokenize_response("once")).as_object();
  EXPECT_EQ(d["content"].as_string(), "once");  // llama-server
  EXPECT_EQ(d["prompt"].as_string(), "once");   // vLLM
}

std::unique_ptr<Tokenizer> load_vocab(const std::string& path) {
  if (!std::ifstream(path).good()) return nullptr;
  auto tok = Tokenizer::load(path);
  EXPECT_TRUE(tok.ok()) << tok.status().to_string();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

// The codec calls /tokenize runs, on the Qwen2 vocabulary: the flags choose
// BOS/EOS and special-token text, pieces render specials and round-trip the
// text, and add_generation_prompt: false ends the prompt after the last
// message.
TEST(TokenizeApi, CodecCallsOnARealVocabulary) {
  auto tok = load_vocab(std::string(ZL_SHARED_DIR) + "/vocab/ggml-vocab-qwen2.gguf");
  if (!tok) GTEST_SKIP() << "SKIPPED: ../shared/vocab/ggml-vocab-qwen2.gguf not found";
  auto tmpl = ChatTemplate::for_vocab(tok->vocab());
  ASSERT_TRUE(tmpl.ok());
  TokenizerCodec codec(tok.get(), std::move(tmpl).value());
  const std::string text = "Hi <|im_end|> caf\xc3\xa9";
  auto literal = codec.encode_with(text, false, false);
  auto special = codec.encode_with(text, false, true);
  ASSERT_TRUE(literal.ok() && special.ok());
  EXPECT_LT(special->size(), literal->size());  // <|im_end|> is one token only when parsed
  auto pieces = codec.token_pieces(*special);
  ASSERT_TRUE(pieces.ok());
  std::string joined;
  for (const std::string& p : *pieces) joined += p;
  EXPECT_EQ(joined, text);
  auto strs = codec.token_strings(*special);
  ASSERT_TRUE(strs.ok());
  EXPECT_EQ(strs->size(), special->size());
  auto bad = codec.token_pieces(std::vector<int32_t>{1, static_cast<int32_t>(tok->vocab().n_tokens())});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("[1]"), std::string::npos) << bad.status().message();

  ChatRequest chat;
  chat.messages = {{.role = "user", .content = "Hi"}};
  auto open = codec.render_text(chat);
  chat.add_generation_prompt = false;
  auto closed = codec.render_text(chat);
  ASSERT_TRUE(open.ok() && closed.ok());
  EXPECT_EQ(*closed, "<|im_start|>user\nHi<|im_end|>\n");
  EXPECT_EQ(*open, *closed + "<|im_start|>assistant\n");
}

}  // namespace
}  // namespace zl::api
