// Unit tests of the server's API layer: JSON parsing (every field, every
// error path), error envelopes, the golden SSE grammar, stop reasons, the
// context check, the stream shaper, the router and the serve settings; the
// HTTP server's graceful drain and the SSE keep-alive pings, in process,
// with the fake engine behind the real API routes.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <tuple>

#include "api/anthropic/messages.h"
#include "api/errors.h"
#include "api/generation.h"
#include "api/json_util.h"
#include "api/openai/chat_completions.h"
#include "api/request_log.h"
#include "api/service.h"
#include "api/structured_output.h"
#include "api/tokenizer_codec.h"
#include "cli/serve_config.h"
#include "grammar/matcher.h"
#include "support/null_responder.h"
#include "support/fake_engine.h"
#include "http/router.h"
#include "http/server.h"
#include "http/stream_shaper.h"
#include "limits/bucket_store.h"
#include "limits/keys.h"
#include "limits/quota.h"
#include "support/fake_api_server.h"
#include "support/http_client.h"  // RawClient, parse_sse
#include "support/json_object.h"  // parse_obj

namespace zl::api {
namespace {

namespace json = boost::json;

ChatRequest parse_ok(std::string_view body) {
  auto r = anthropic::parse_messages_request(body);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? r.value() : ChatRequest{};
}

ApiError parse_err(std::string_view body) {
  auto r = anthropic::parse_messages_request(body);
  EXPECT_FALSE(r.ok()) << body;
  return r.ok() ? ApiError{} : r.error();
}

TEST(AnthropicParse, EveryField) {
  ChatRequest r = parse_ok(R"({
    "model":"claude-x","max_tokens":4096,"temperature":0.25,"top_p":0.5,"top_k":7,
    "stop_sequences":["\n\nHuman:","END"],"metadata":{"user_id":"u-1"},"stream":true,
    "stream_options":{"max_buffer_size":16,"min_delay_ms":20,"network_rtt_ms":80},
    "system":[{"type":"text","text":"sys A","cache_control":{"type":"ephemeral"}},{"type":"text","text":"sys B"}],
    "messages":[
      {"role":"user","content":"hello"},
      {"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"s"},{"type":"text","text":"calling"},
                                      {"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},
      {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"sunny"}]},
                                {"type":"text","text":"thanks"}]},
      {"role":"system","content":"late system"},
      {"role":"assistant","content":"Sure,"}],
    "tools":[{"name":"get_weather","description":"d","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],
    "tool_choice":{"type":"tool","name":"get_weather","disable_parallel_tool_use":true},
    "thinking":{"type":"enabled","budget_tokens":2048},"context_management":{"edits":[]},"output_config":{"effort":"high"},
    "service_tier":"auto","unknown_future_field":{"a":[1,2,3]}})");
  EXPECT_EQ(r.model, "claude-x");
  EXPECT_EQ(r.max_tokens, 4096);  // (more than thinking.budget_tokens, as Anthropic requires)
  EXPECT_EQ(r.thinking.budget_tokens, 2048);
  EXPECT_FLOAT_EQ(r.sampling.temperature, 0.25f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.5f);
  EXPECT_EQ(r.sampling.top_k, 7);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"\n\nHuman:", "END"}));
  EXPECT_EQ(r.user, "u-1");
  EXPECT_TRUE(r.stream);
  ASSERT_TRUE(r.shape.has_value());
  EXPECT_EQ(r.shape->max_buffer_size, 16);
  EXPECT_EQ(r.shape->min_delay_ms, 20);
  EXPECT_EQ(r.shape->network_rtt_ms, 80);
  ASSERT_EQ(r.messages.size(), 7u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[0].content, "sys A\nsys B");
  EXPECT_EQ(r.messages[1].content, "hello");
  EXPECT_EQ(r.messages[2].role, "assistant");
  EXPECT_EQ(r.messages[2].content, "calling");
  ASSERT_EQ(r.messages[2].thinking.size(), 1u);
  EXPECT_EQ(r.messages[2].thinking[0].text, "hm");
  ASSERT_EQ(r.messages[2].tool_calls.size(), 1u);
  EXPECT_EQ(r.messages[2].tool_calls[0].name, "get_weather");
  EXPECT_EQ(r.messages[2].tool_calls[0].arguments_json, R"({"city":"Paris"})");
  EXPECT_EQ(r.messages[3].role, "tool");
  EXPECT_EQ(r.messages[3].tool_call_id, "toolu_1");
  EXPECT_EQ(r.messages[3].content, "sunny");
  EXPECT_EQ(r.messages[4].content, "thanks");
  EXPECT_EQ(r.messages[5].role, "system");
  EXPECT_EQ(r.messages[6].content, "Sure,");
  EXPECT_TRUE(r.continue_final_message);
  EXPECT_EQ(r.tool_choice, "tool:get_weather");
  EXPECT_FALSE(r.parallel_tool_calls);  // disable_parallel_tool_use: true
  EXPECT_NE(r.tools_json.find("get_weather"), std::string::npos);
}

TEST(AnthropicParse, DefaultsAndNulls) {
  ChatRequest r = parse_ok(R"({"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}],"temperature":null,"stream":null})");
  EXPECT_FLOAT_EQ(r.sampling.temperature, 1.0f);
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.continue_final_message);
  EXPECT_FALSE(r.shape.has_value());
  EXPECT_TRUE(r.parallel_tool_calls);
  // A system entry last is not a prefill.
  r = parse_ok(R"({"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"},{"role":"system","content":"y"}]})");
  EXPECT_FALSE(r.continue_final_message);
}

TEST(AnthropicParse, ErrorsNameTheField) {
  struct Case {
    const char* body;
    const char* param;
    const char* reason;
  };
  const Case cases[] = {
      {R"({"model":"m","messages":[{"role":"user","content":"x"}]})", "max_tokens", "missing_field"},
      {R"({"model":"m","max_tokens":0,"messages":[{"role":"user","content":"x"}]})", "max_tokens", "out_of_range"},
      {R"({"model":"m","max_tokens":2147483648,"messages":[{"role":"user","content":"x"}]})", "max_tokens", "out_of_range"},
      {R"({"model":"m","max_tokens":1.5,"messages":[{"role":"user","content":"x"}]})", "max_tokens", "invalid_type"},
      {R"({"model":"m","max_tokens":true,"messages":[{"role":"user","content":"x"}]})", "max_tokens", "invalid_type"},
      {R"({"model":5,"max_tokens":1,"messages":[{"role":"user","content":"x"}]})", "model", "invalid_type"},
      {R"({"model":"m","max_tokens":1,"messages":{}})", "messages", "invalid_type"},
      {R"({"model":"m","max_tokens":1,"messages":[]})", "messages", "empty_messages"},
      {R"({"model":"m","max_tokens":1,"messages":["x"]})", "messages[0]", "invalid_type"},
      {R"({"model":"m","max_tokens":1,"messages":[{"role":"robot","content":"x"}]})", "messages[0].role", "invalid_role"},
      {R"({"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"text":"x"}]}]})", "messages[0].content[0].type", "missing_field"},
      {R"({"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"text"}]}]})", "messages[0].content[0].text", "missing_field"},
      {R"({"model":"m","max_tokens":1,"system":42,"messages":[{"role":"user","content":"x"}]})", "system", "invalid_type"},
      {R"({"model":"m","max_tokens":1,"temperature":2.5,"messages":[{"role":"user","content":"x"}]})", "temperature", "out_of_range"},
      {R"({"model":"m","max_tokens":1,"temperature":"hot","messages":[{"role":"user","content":"x"}]})", "temperature", "invalid_type"},
      {R"({"model":"m","max_tokens":1,"top_p":1.5,"messages":[{"role":"user","content":"x"}]})", "top_p", "out_of_range"},
      {R"({"model":"m","max_tokens":1,"top_k":-1,"messages":[{"role":"user","content":"x"}]})", "top_k", "out_of_range"},
      {R"({"model":"m","max_tokens":1,"stop_sequences":[""],"messages":[{"role":"user","content":"x"}]})", "stop_sequences[0]", "invalid_value"},
      {R"({"model":"m","max_tokens":1,"stop_sequences":[1],"messages":[{"role":"user","content":"x"}]})", "stop_sequences[0]", "invalid_type"},
      {R"({"model":"m","max_tokens":1,"metadata":{"user_id":3},"messages":[{"role":"user","content":"x"}]})", "metadata.user_id", "invalid_type"},
      {R"({"model":"m","max_tokens":1,"stream":"yes","messages":[{"role":"user","content":"x"}]})", "stream", "invalid_type"},
      {R"({"model":"m","max_tokens":1,"stream_options":{},"messages":[{"role":"user","content":"x"}]})", "stream_options", "invalid_value"},
      {R"({"model":"m","max_tokens":1,"stream":true,"stream_options":{"min_delay_ms":-1},"messages":[{"role":"user","content":"x"}]})", "stream_options.min_delay_ms", "out_of_range"},
      {R"({"model":"m","max_tokens":1,"stream":true,"stream_options":{"max_buffer_size":2},"messages":[{"role":"user","content":"x"}]})", "stream_options.max_buffer_size", "out_of_range"},
      {R"({"model":"m","max_tokens":1,"stream":true,"stream_options":{"network_rtt_ms":60001},"messages":[{"role":"user","content":"x"}]})", "stream_options.network_rtt_ms", "out_of_range"},
      {R"({"model":"m","max_tokens":1,"tools":[{"description":"no name"}],"messages":[{"role":"user","content":"x"}]})", "tools[0].name", "missing_field"},
      {R"({"model":"m","max_tokens":1,"tool_choice":{"type":"sometimes"},"messages":[{"role":"user","content":"x"}]})", "tool_choice.type", "invalid_value"},
      {R"({"model":"m","max_tokens":1,"tool_choice":{"type":"auto","disable_parallel_tool_use":"yes"},"messages":[{"role":"user","content":"x"}]})", "tool_choice.disable_parallel_tool_use", "invalid_type"},
      {R"({"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"tool_result"}]}]})", "messages[0].content[0].tool_use_id", "missing_field"},
  };
  for (const Case& c : cases) {
    ApiError e = parse_err(c.body);
    EXPECT_EQ(e.type(), ErrorType::kInvalidRequest) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_EQ(error_reason_name(e.reason), c.reason) << c.body;
    EXPECT_EQ(e.message.rfind(c.param, 0), 0u) << e.message;
  }
  EXPECT_EQ(parse_err("{").reason, ErrorReason::kInvalidJson);
  EXPECT_EQ(parse_err("\"str\"").reason, ErrorReason::kInvalidJson);
  EXPECT_EQ(parse_err("").reason, ErrorReason::kInvalidJson);
}

TEST(AnthropicParse, CountTokensNeedsNoMaxTokens) {
  auto r = anthropic::parse_count_tokens_request(R"({"model":"m","messages":[{"role":"user","content":"x"}],"thinking":{"type":"adaptive"}})");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r.value().max_tokens.has_value());
  EXPECT_FALSE(anthropic::parse_count_tokens_request(R"({"model":"m"})").ok());
}

TEST(OpenAIParse, FieldsAndErrors) {
  auto r = openai::parse_chat_request(R"({"model":"gpt","max_completion_tokens":9,"temperature":1.5,"top_p":0.9,
    "presence_penalty":0.5,"frequency_penalty":-0.5,"seed":42,"stop":"###","user":"u","n":1,"logit_bias":{"15":-100},
    "stream":true,"stream_options":{"include_usage":true,"max_buffer_size":8},
    "messages":[{"role":"developer","content":"dev"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
                {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},
                {"role":"tool","tool_call_id":"c1","content":"r"}],
    "tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"tool_choice":{"type":"function","function":{"name":"f"}}})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  const ChatRequest& c = r.value();
  EXPECT_EQ(c.max_tokens, 9);
  EXPECT_FLOAT_EQ(c.sampling.temperature, 1.5f);
  EXPECT_FLOAT_EQ(c.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(c.sampling.frequency_penalty, -0.5f);
  EXPECT_EQ(c.sampling.seed, 42u);
  EXPECT_FLOAT_EQ(c.sampling.logit_bias.at(15), -100.0f);
  EXPECT_EQ(c.stop, std::vector<std::string>{"###"});
  EXPECT_TRUE(c.include_usage);
  EXPECT_EQ(c.shape->max_buffer_size, 8);
  EXPECT_EQ(c.messages[0].role, "system");
  EXPECT_EQ(c.messages[1].content, "a\nb");
  EXPECT_EQ(c.messages[2].tool_calls[0].name, "f");
  EXPECT_EQ(c.messages[3].tool_call_id, "c1");
  EXPECT_EQ(c.tool_choice, "tool:f");
  EXPECT_TRUE(c.parallel_tool_calls);
  EXPECT_FALSE(c.continue_final_message);
  auto single = openai::parse_chat_request(R"({"model":"m","parallel_tool_calls":false,"messages":[{"role":"user","content":"x"}]})");
  ASSERT_TRUE(single.ok());
  EXPECT_FALSE(single.value().parallel_tool_calls);

  auto bad = [](const char* body, const char* param) {
    auto e = openai::parse_chat_request(body);
    ASSERT_FALSE(e.ok()) << body;
    EXPECT_EQ(e.error().param, param) << body;
  };
  bad(R"({"model":"m","messages":[]})", "messages");
  bad(R"({"messages":[{"role":"user","content":"x"}]})", "model");
  bad(R"({"model":"m","n":0,"messages":[{"role":"user","content":"x"}]})", "n");
  bad(R"({"model":"m","n":129,"messages":[{"role":"user","content":"x"}]})", "n");
  bad(R"({"model":"m","n":1.5,"messages":[{"role":"user","content":"x"}]})", "n");
  bad(R"({"model":"m","temperature":-0.1,"messages":[{"role":"user","content":"x"}]})", "temperature");
  bad(R"({"model":"m","max_tokens":0,"messages":[{"role":"user","content":"x"}]})", "max_tokens");
  bad(R"({"model":"m","logit_bias":{"x":1},"messages":[{"role":"user","content":"x"}]})", "logit_bias.x");
  bad(R"({"model":"m","stream_options":{"include_usage":true},"messages":[{"role":"user","content":"x"}]})", "stream_options");
  bad(R"({"model":"m","messages":[{"role":"function","content":"x"}]})", "messages[0].role");
  bad(R"({"model":"m","parallel_tool_calls":0,"messages":[{"role":"user","content":"x"}]})", "parallel_tool_calls");
  bad(R"({"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]})", "messages[0].content[0].type");

  auto comp = openai::parse_completion_request(R"({"model":"m","prompt":["Once"]})");
  ASSERT_TRUE(comp.ok());
  EXPECT_TRUE(comp.value().raw_prompt);
  EXPECT_EQ(comp.value().prompt, "Once");
  EXPECT_EQ(comp.value().max_tokens, 16);
  EXPECT_FALSE(openai::parse_completion_request(R"({"model":"m","prompt":["a",["b"]]})").ok());
}

// Logprobs: chat logprobs (bool) + top_logprobs (0..20, needs logprobs: true), completions
// logprobs (0..5, 0 the chosen token's only) become ChatRequest::logprobs; "off" values are -1.
TEST(OpenAiParse, LogprobsFields) {
  const std::string msgs = R"("messages":[{"role":"user","content":"x"}])";
  auto chat = [&](const std::string& f) { return openai::parse_chat_request(R"({"model":"m",)" + f + "," + msgs + "}"); };
  for (const auto& [f, want] : std::vector<std::pair<std::string, int>>{
           {R"("logprobs":true)", 0}, {R"("logprobs":true,"top_logprobs":2)", 2}, {R"("logprobs":true,"top_logprobs":20)", 20},
           {R"("logprobs":true,"top_logprobs":null)", 0}, {R"("logprobs":false)", -1}, {R"("logprobs":null)", -1},
           {R"("top_logprobs":0)", -1}, {R"("logprobs":false,"top_logprobs":0)", -1}, {R"("top_logprobs":null)", -1}}) {
    auto r = chat(f);
    ASSERT_TRUE(r.ok()) << f;
    EXPECT_EQ(r.value().logprobs, want) << f;
  }
  for (const std::string f : {R"("top_logprobs":3)", R"("logprobs":false,"top_logprobs":1)"}) {
    auto e = chat(f);
    ASSERT_FALSE(e.ok()) << f;
    EXPECT_EQ(e.error().reason, ErrorReason::kInvalidRequest) << f;
    EXPECT_EQ(e.error().param, "top_logprobs") << f;
    EXPECT_NE(e.error().message.find("logprobs: true"), std::string::npos) << f;
  }
  for (const std::string f : {R"("logprobs":true,"top_logprobs":21)", R"("logprobs":true,"top_logprobs":-1)"}) {
    auto e = chat(f);
    ASSERT_FALSE(e.ok()) << f;
    EXPECT_EQ(e.error().param, "top_logprobs") << f;
  }
  EXPECT_FALSE(chat(R"("logprobs":"yes")").ok());  // a typed 400
  EXPECT_FALSE(chat(R"("logprobs":1)").ok());
  auto completion = [](const std::string& f) {
    return openai::parse_completion_request(R"({"model":"m","prompt":"Once",)" + f + "}");
  };
  for (const auto& [f, want] : std::vector<std::pair<std::string, int>>{
           {R"("logprobs":0)", 0}, {R"("logprobs":1)", 1}, {R"("logprobs":5)", 5}, {R"("logprobs":null)", -1},
           {R"("logprobs":false)", -1}}) {
    auto r = completion(f);
    ASSERT_TRUE(r.ok()) << f;
    EXPECT_EQ(r.value().logprobs, want) << f;
  }
  for (const std::string f : {R"("logprobs":6)", R"("logprobs":-1)", R"("logprobs":true)"}) {
    auto e = completion(f);
    ASSERT_FALSE(e.ok()) << f;
    EXPECT_EQ(e.error().param, "logprobs") << f;
  }
  // echo: with logprobs, the prompt's too; max_tokens 0 only with echo; echo must be a bool.
  for (const auto& [f, prompt_logprobs] : std::vector<std::pair<std::string, int>>{
           {R"("echo":true,"logprobs":2)", 2}, {R"("echo":true)", -1}, {R"("echo":false,"logprobs":2)", -1},
           {R"("echo":true,"logprobs":0,"max_tokens":0)", 0}}) {
    auto r = completion(f);
    ASSERT_TRUE(r.ok()) << f;
    EXPECT_EQ(r.value().echo, f.find("true") != std::string::npos) << f;
    EXPECT_EQ(r.value().prompt_logprobs, prompt_logprobs) << f;
  }
  for (const auto& [f, param] : std::vector<std::pair<std::string, std::string>>{
           {R"("max_tokens":0)", "max_tokens"}, {R"("echo":false,"max_tokens":0)", "max_tokens"},
           {R"("echo":"yes")", "echo"}}) {
    auto e = completion(f);
    ASSERT_FALSE(e.ok()) << f;
    EXPECT_EQ(e.error().param, param) << f;
  }
}

using FieldParser = std::function<ApiResult<ChatRequest>(const std::string&)>;

// Both OpenAI routes, each parsing a body of these fields beside the model and a message / a prompt.
std::vector<FieldParser> openai_routes() {
  return {[](const std::string& f) {
            return openai::parse_chat_request(R"({"model":"m",)" + f + R"(,"messages":[{"role":"user","content":"x"}]})");
          },
          [](const std::string& f) { return openai::parse_completion_request(R"({"model":"m","prompt":"Once",)" + f + "}"); }};
}

// vLLM's stop extensions on both routes; its other output-changing fields are a 400
// unsupported_value naming them unless neutral; guided_json is a json_schema response_format,
// guided_regex and guided_choice text grammars (guided_grammar: OpenAiParse.GbnfGrammarFields).
TEST(OpenAiParse, VllmExtensionFields) {
  for (const auto& parse : openai_routes()) {
    auto r = parse(R"("stop_token_ids":[13,2],"ignore_eos":true,"min_tokens":4,"max_tokens":8)");
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r.value().stop_token_ids, (std::vector<int32_t>{13, 2}));
    EXPECT_TRUE(r.value().ignore_eos);
    EXPECT_EQ(r.value().min_tokens, 4);
    // Neutral values of the refused fields pass.
    EXPECT_TRUE(parse(R"("best_of":1,"use_beam_search":false,"typical_p":1,"prompt_logprobs":null,"guided_regex":null,)"
                      R"("include_stop_str_in_output":false,"suffix":"","stop_token_ids":null,"ignore_eos":null,"min_tokens":null)")
                    .ok());
    for (const auto& [f, param, reason] : std::vector<std::tuple<std::string, std::string, ErrorReason>>{
             {R"("min_tokens":9,"max_tokens":8)", "min_tokens", ErrorReason::kInvalidValue},
             {R"("min_tokens":-1)", "min_tokens", ErrorReason::kOutOfRange},
             {R"("stop_token_ids":[1,-2])", "stop_token_ids[1]", ErrorReason::kOutOfRange},
             {R"("stop_token_ids":7)", "stop_token_ids", ErrorReason::kInvalidType},
             {R"("ignore_eos":1)", "ignore_eos", ErrorReason::kInvalidType},
             {R"("best_of":2)", "best_of", ErrorReason::kUnsupportedValue},
             {R"("use_beam_search":true)", "use_beam_search", ErrorReason::kUnsupportedValue},
             {R"("guided_choice":[])", "guided_choice", ErrorReason::kInvalidValue},
             {R"("guided_choice":["a",""])", "guided_choice", ErrorReason::kInvalidValue},
             {R"("guided_choice":"a")", "guided_choice", ErrorReason::kInvalidType},
             {R"("guided_choice":["a",1])", "guided_choice[1]", ErrorReason::kInvalidType},
             {R"("guided_regex":"(a")", "guided_regex", ErrorReason::kInvalidValue},
             {R"("guided_regex":"(?<=a)b")", "guided_regex", ErrorReason::kUnsupportedValue},
             {R"("guided_regex":"a","guided_choice":["a"])", "guided_choice", ErrorReason::kInvalidValue},
             {R"("guided_regex":"a","guided_json":{})", "guided_regex", ErrorReason::kInvalidValue},
             {R"("guided_choice":["a"],"response_format":{"type":"json_object"})", "guided_choice", ErrorReason::kInvalidValue},
             {R"("prompt_logprobs":1)", "prompt_logprobs", ErrorReason::kUnsupportedValue},
             {R"("include_stop_str_in_output":true)", "include_stop_str_in_output", ErrorReason::kUnsupportedValue},
             {R"("typical_p":0.5)", "typical_p", ErrorReason::kUnsupportedValue},
             {R"("functions":[{"name":"f"}])", "functions", ErrorReason::kUnsupportedValue},
             {R"("suffix":"}")", "suffix", ErrorReason::kUnsupportedValue},
             {R"("guided_json":"{bad")", "guided_json", ErrorReason::kInvalidValue},
             {R"("guided_json":{},"response_format":{"type":"json_object"})", "guided_json", ErrorReason::kInvalidValue}}) {
      auto e = parse(f);
      ASSERT_FALSE(e.ok()) << f;
      EXPECT_EQ(e.error().param, param) << f;
      EXPECT_EQ(e.error().reason, reason) << f << ": " << e.error().message;
    }
    for (const std::string f : {R"("guided_json":{"type":"object"})", R"("guided_json":"{\"type\":\"object\"}")"}) {
      auto g = parse(f);
      ASSERT_TRUE(g.ok()) << f;
      ASSERT_TRUE(g.value().response_format.has_value()) << f;
      EXPECT_EQ(g.value().response_format->schema_json, R"({"type":"object"})") << f;
    }
    // guided_regex and guided_choice: text grammars (grammar/regex.h), null when absent.
    auto re = parse(R"("guided_regex":"[0-9]+","guided_choice":null,"guided_json":null)");
    ASSERT_TRUE(re.ok()) << re.error().message;
    ASSERT_TRUE(re.value().response_format.has_value());
    EXPECT_EQ(re.value().response_format->kind, ResponseFormat::Kind::kRegex);
    EXPECT_EQ(re.value().response_format->schema_json, "[0-9]+");
    EXPECT_NE(re.value().response_format->grammar, nullptr);
    auto choice = parse(R"("guided_choice":["yes","no"])");
    ASSERT_TRUE(choice.ok()) << choice.error().message;
    EXPECT_EQ(choice.value().response_format->kind, ResponseFormat::Kind::kChoice);
    EXPECT_EQ(choice.value().response_format->schema_json, R"(["yes","no"])");
  }
}

// llama-server's grammar and vLLM's guided_grammar (GBNF text, grammar/gbnf.h) and
// llama-server's json_schema (the schema itself) on both routes; at most one guided-decoding
// field per request, none beside a response_format other than text.
TEST(OpenAiParse, GbnfGrammarFields) {
  const std::string yes_no = R"(root ::= (\"yes\" | \"no\") \" \" [0-9]{2,3})";
  for (const auto& parse : openai_routes()) {
    for (const std::string field : {"grammar", "guided_grammar"}) {
      auto r = parse("\"" + field + "\":\"" + yes_no + "\",\"response_format\":{\"type\":\"text\"}");
      ASSERT_TRUE(r.ok()) << field << ": " << r.error().message;
      ASSERT_TRUE(r.value().response_format.has_value());
      const ResponseFormat& rf = *r.value().response_format;
      EXPECT_EQ(rf.kind, ResponseFormat::Kind::kGrammar);
      EXPECT_EQ(rf.schema_json, R"(root ::= ("yes" | "no") " " [0-9]{2,3})");
      ASSERT_NE(rf.grammar, nullptr);
      grammar::Matcher m(rf.grammar);
      EXPECT_TRUE(m.advance("no 123") && m.accepting());
      EXPECT_FALSE(m.advance("!"));
      // The constraint's identity (the response cache key) names the kind: not the same
      // text as a regex.
      auto c = plan_constraint(r.value(), ToolPlan{}, ThinkingPlan{});
      ASSERT_TRUE(c.ok() && c.value());
      EXPECT_EQ(c.value()->identity, "grammar\n" + rf.schema_json);
    }
    auto js = parse(R"("json_schema":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]})");
    ASSERT_TRUE(js.ok()) << js.error().message;
    EXPECT_EQ(js.value().response_format->kind, ResponseFormat::Kind::kJsonSchema);
    EXPECT_EQ(js.value().response_format->schema_json,
              R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]})");
    grammar::Matcher m(js.value().response_format->grammar);
    EXPECT_TRUE(m.advance(R"({"a": 12})") && m.accepting());
    EXPECT_TRUE(parse(R"("grammar":null,"guided_grammar":null,"json_schema":null)").ok());
    for (const auto& [f, param, reason] : std::vector<std::tuple<std::string, std::string, ErrorReason>>{
             {R"("grammar":"")", "grammar", ErrorReason::kInvalidValue},
             {R"("grammar":5)", "grammar", ErrorReason::kInvalidType},
             {R"("guided_grammar":["root ::= \"a\""])", "guided_grammar", ErrorReason::kInvalidType},
             {R"("grammar":"root ::= foo")", "grammar", ErrorReason::kInvalidValue},
             {R"("guided_grammar":"root ::= x\nx ::= x \"a\" | \"b\"")", "guided_grammar", ErrorReason::kInvalidValue},
             {R"("grammar":"root ::= (\"a\"")", "grammar", ErrorReason::kInvalidValue},
             {R"("grammar":"root ::= <[12]>")", "grammar", ErrorReason::kUnsupportedValue},
             {R"("grammar":"root ::= \"a\"{5000}")", "grammar", ErrorReason::kUnsupportedValue},
             {R"("json_schema":"{}")", "json_schema", ErrorReason::kInvalidType},
             {R"("json_schema":true)", "json_schema", ErrorReason::kInvalidType},
             {R"("json_schema":{"type":"object","not":{}})", "json_schema", ErrorReason::kUnsupportedValue},
             {R"("json_schema":{"type":"array","minItems":3,"maxItems":2})", "json_schema", ErrorReason::kInvalidValue},
             // Exclusivity: the second field present is named.
             {R"("grammar":"root ::= \"a\"","json_schema":{})", "json_schema", ErrorReason::kInvalidValue},
             {R"("guided_grammar":"root ::= \"a\"","grammar":"root ::= \"a\"")", "grammar", ErrorReason::kInvalidValue},
             {R"("guided_json":{},"grammar":"root ::= \"a\"")", "grammar", ErrorReason::kInvalidValue},
             {R"("guided_choice":["a"],"guided_grammar":"root ::= \"a\"")", "guided_grammar", ErrorReason::kInvalidValue},
             {R"("json_schema":{},"guided_regex":"a")", "json_schema", ErrorReason::kInvalidValue},
             {R"("grammar":"root ::= \"a\"","response_format":{"type":"json_object"})", "grammar", ErrorReason::kInvalidValue},
             {R"("json_schema":{},"response_format":{"type":"json_schema","json_schema":{"schema":{}}})", "json_schema",
              ErrorReason::kInvalidValue}}) {
      auto e = parse(f);
      ASSERT_FALSE(e.ok()) << f;
      EXPECT_EQ(e.error().param, param) << f;
      EXPECT_EQ(e.error().reason, reason) << f << ": " << e.error().message;
    }
    // A compile error is the compiler's message, with its position.
    auto bad = parse(R"("grammar":"root ::= \"a\" foo")");
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().message.find("line 1, column 14: undefined rule 'foo'"), std::string::npos) << bad.error().message;
  }
}

// `n` choices (1 by default, null too; 1..128) on both routes.
TEST(OpenAiParse, ChoicesPerPrompt) {
  auto chat = openai::parse_chat_request(R"({"model":"m","n":3,"messages":[{"role":"user","content":"x"}]})");
  ASSERT_TRUE(chat.ok());
  EXPECT_EQ(chat.value().n, 3);
  auto plain = openai::parse_chat_request(R"({"model":"m","n":null,"messages":[{"role":"user","content":"x"}]})");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain.value().n, 1);
  auto completion = openai::parse_completion_request(R"({"model":"m","n":128,"prompt":"x"})");
  ASSERT_TRUE(completion.ok());
  EXPECT_EQ(completion.value().n, 128);
}

// Several /v1/completions prompts, strings and token-id arrays mixed: the first in
// prompt / prompt_ids, the others in order in more_prompts; at most 128 choices (prompts x n).
TEST(OpenAiParse, CompletionWithSeveralPrompts) {
  auto r = openai::parse_completion_request(R"({"model":"m","n":2,"prompt":["Once",[1,2],"The cat"]})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r.value().prompt, "Once");
  EXPECT_FALSE(r.value().prompt_ids.has_value());
  ASSERT_EQ(r.value().more_prompts.size(), 2u);
  EXPECT_EQ(r.value().more_prompts[0].ids, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(r.value().more_prompts[1].text, "The cat");
  EXPECT_FALSE(r.value().more_prompts[1].ids.has_value());
  auto ids = openai::parse_completion_request(R"({"model":"m","prompt":[[1],[2,3]]})");
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(ids.value().prompt_ids, (std::vector<int32_t>{1}));
  ASSERT_EQ(ids.value().more_prompts.size(), 1u);
  EXPECT_EQ(ids.value().more_prompts[0].ids, (std::vector<int32_t>{2, 3}));
  auto over = openai::parse_completion_request(R"({"model":"m","n":65,"prompt":["a","b"]})");
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().param, "prompt");
  auto fits = openai::parse_completion_request(R"({"model":"m","n":64,"prompt":["a","b"]})");
  EXPECT_TRUE(fits.ok());
}

// A /v1/completions prompt of token ids, alone or in an array; anything but non-negative
// integers is a 400 naming the element.
TEST(OpenAiParse, CompletionPromptsOfTokenIds) {
  auto completion = [](const std::string& prompt) {
    return openai::parse_completion_request(R"({"model":"m","prompt":)" + prompt + "}");
  };
  for (const std::string p : {"[1,2,3]", "[[1,2,3]]"}) {
    auto r = completion(p);
    ASSERT_TRUE(r.ok()) << p;
    ASSERT_TRUE(r.value().prompt_ids.has_value()) << p;
    EXPECT_EQ(*r.value().prompt_ids, (std::vector<int32_t>{1, 2, 3})) << p;
  }
  auto text = completion(R"(["Once"])");
  ASSERT_TRUE(text.ok());
  EXPECT_FALSE(text.value().prompt_ids.has_value());
  EXPECT_EQ(text.value().prompt, "Once");
  for (const auto& [p, param] : std::vector<std::pair<std::string, std::string>>{
           {"[]", "prompt"}, {"[[]]", "prompt[0]"}, {"[[1],[]]", "prompt[1]"}, {"[1,-1]", "prompt[1]"},
           {"[1,2.5]", "prompt[1]"}, {R"([1,"a"])", "prompt[1]"}, {"[[1,null]]", "prompt[0][1]"},
           {"[1,4294967296]", "prompt[1]"}, {R"(["a",2])", "prompt[1]"}}) {
    auto e = completion(p);
    ASSERT_FALSE(e.ok()) << p;
    EXPECT_EQ(e.error().param, param) << p;
  }
}

TEST(Errors, EnvelopesAndStatuses) {
  ApiError e = context_length_error(300, 256);
  EXPECT_EQ(anthropic_error_json(e, "req_1"),
            R"J({"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 300 tokens > 255 maximum (context window 256 tokens)","detail":{"reason":"context_length_exceeded","n_prompt_tokens":300,"n_ctx":256,"max_tokens_fit":0}},"request_id":"req_1"})J");
  EXPECT_EQ(openai_error_json(invalid_request("max_tokens", "max_tokens: bad")),
            R"({"error":{"message":"max_tokens: bad","type":"invalid_request_error","param":"max_tokens","code":"invalid_request"}})");
  const std::pair<ErrorType, int> statuses[] = {
      {ErrorType::kInvalidRequest, 400}, {ErrorType::kAuthentication, 401}, {ErrorType::kPermission, 403},
      {ErrorType::kNotFound, 404},       {ErrorType::kMethodNotAllowed, 405}, {ErrorType::kRequestTooLarge, 413},
      {ErrorType::kRateLimit, 429},      {ErrorType::kApi, 500},              {ErrorType::kOverloaded, 529},
      {ErrorType::kUnavailable, 503}};
  for (auto [t, s] : statuses) EXPECT_EQ(http_status(t), s);
  EXPECT_EQ(anthropic_type_name(ErrorType::kOverloaded), "overloaded_error");
  EXPECT_EQ(anthropic_type_name(ErrorType::kRequestTooLarge), "request_too_large");
  http::HttpResponse r = anthropic_error_response(ApiError{.reason = ErrorReason::kOverloaded, .message = "busy"}, "req_2");
  EXPECT_EQ(r.status, 529);
  EXPECT_EQ(r.content_type, "application/json");
  bool has_retry = false;
  for (auto& [k, v] : r.headers) has_retry |= k == "retry-after";
  EXPECT_TRUE(has_retry);
  EXPECT_EQ(from_status(resource_exhausted("kv")).type(), ErrorType::kOverloaded);
  EXPECT_EQ(from_status(internal_error("x")).type(), ErrorType::kApi);
}

// The table: every reason has a distinct name, a type and its HTTP status.
TEST(Errors, EveryReasonHasOneRowOfTheTable) {
  std::set<std::string_view> names;
  for (int i = 0; i < kNumErrorReasons; ++i) {
    const auto r = static_cast<ErrorReason>(i);
    EXPECT_FALSE(error_reason_name(r).empty()) << i;
    EXPECT_TRUE(names.insert(error_reason_name(r)).second) << "duplicate name " << error_reason_name(r);
  }
  struct Row {
    ErrorReason reason;
    const char* name;
    int status;
    const char* anthropic_type;
    const char* openai_type;
  };
  const Row rows[] = {
      {ErrorReason::kInvalidRequest, "invalid_request", 400, "invalid_request_error", "invalid_request_error"},
      {ErrorReason::kContextLengthExceeded, "context_length_exceeded", 400, "invalid_request_error", "invalid_request_error"},
      {ErrorReason::kSafetyViolation, "safety_violation", 400, "invalid_request_error", "invalid_request_error"},
      {ErrorReason::kInvalidApiKey, "invalid_api_key", 401, "authentication_error", "authentication_error"},
      {ErrorReason::kNotFound, "not_found", 404, "not_found_error", "not_found_error"},
      {ErrorReason::kModelNotFound, "model_not_found", 404, "not_found_error", "not_found_error"},
      {ErrorReason::kMethodNotAllowed, "method_not_allowed", 405, "invalid_request_error", "invalid_request_error"},
      {ErrorReason::kRequestTooLarge, "request_too_large", 413, "request_too_large", "invalid_request_error"},
      {ErrorReason::kRateLimitExceeded, "rate_limit_exceeded", 429, "rate_limit_error", "rate_limit_error"},
      {ErrorReason::kInternalServerError, "internal_server_error", 500, "api_error", "server_error"},
      {ErrorReason::kInvalidToolCall, "invalid_tool_call", 500, "api_error", "server_error"},
      {ErrorReason::kOverloaded, "overloaded", 529, "overloaded_error", "overloaded_error"},
      {ErrorReason::kQueueTimeout, "queue_timeout", 529, "overloaded_error", "overloaded_error"},
      {ErrorReason::kQuotaBackendUnavailable, "quota_backend_unavailable", 503, "api_error", "server_error"},
      {ErrorReason::kKvCacheOverflow, "kv_cache_overflow", 400, "invalid_request_error", "invalid_request_error"},
      {ErrorReason::kEngineShuttingDown, "engine_shutting_down", 529, "overloaded_error", "overloaded_error"},
  };
  for (const Row& row : rows) {
    const ApiError e{.reason = row.reason, .message = "m"};
    EXPECT_EQ(error_reason_name(row.reason), row.name);
    EXPECT_EQ(http_status(e), row.status) << row.name;
    json::object a = json::parse(anthropic_error_json(e, "req_1")).as_object();
    EXPECT_EQ(a.at("error").at("type").as_string(), row.anthropic_type) << row.name;
    EXPECT_EQ(a.at("error").at("detail").at("reason").as_string(), row.name);
    json::object o = json::parse(openai_error_json(e)).as_object();
    EXPECT_EQ(o.at("error").at("type").as_string(), row.openai_type) << row.name;
    EXPECT_EQ(o.at("error").at("code").as_string(), row.name);
    EXPECT_EQ(anthropic_error_response(e, "r").status, row.status);
    // OpenAI clients know 503, not Anthropic's 529.
    EXPECT_EQ(openai_error_response(e).status, row.status == 529 ? 503 : row.status) << row.name;
  }
}

// Numbers travel from a Status's detail into both envelopes; retry_after_ms
// also into the headers.
TEST(Errors, NumbersFromTheEngineReachTheEnvelopes) {
  const Status s = out_of_range("the prompt has 300 tokens", {.reason = ErrorReason::kContextLengthExceeded,
                                                              .numbers = {.n_prompt_tokens = 300, .n_ctx = 256, .max_tokens_fit = 0}});
  const ApiError e = from_status(s.with_context("admission"));
  EXPECT_EQ(e.reason, ErrorReason::kContextLengthExceeded);
  EXPECT_EQ(http_status(e), 400);
  EXPECT_EQ(openai_error_json(e),
            R"({"error":{"message":"admission: the prompt has 300 tokens","type":"invalid_request_error","param":null,)"
            R"("code":"context_length_exceeded","n_prompt_tokens":300,"n_ctx":256,"max_tokens_fit":0}})");
  const ApiError busy{.reason = ErrorReason::kRateLimitExceeded, .message = "slow down", .numbers = {.retry_after_ms = 2500}};
  EXPECT_EQ(anthropic_error_json(busy, ""),
            R"({"type":"error","error":{"type":"rate_limit_error","message":"slow down","detail":{"reason":"rate_limit_exceeded","retry_after_ms":2500}}})");
  http::HttpResponse r = openai_error_response(busy);
  EXPECT_EQ(r.status, 429);
  std::map<std::string, std::string> h(r.headers.begin(), r.headers.end());
  EXPECT_EQ(h["retry-after"], "3");
  EXPECT_EQ(h["retry-after-ms"], "2500");
  // Labels and the requested max_tokens go beside the numbers.
  const ApiError limited{.reason = ErrorReason::kRateLimitExceeded, .message = "m",
                         .numbers = {.retry_after_ms = 1000, .max_tokens = 7}, .labels = {.limit = "input_tokens"}};
  EXPECT_EQ(anthropic_error_json(limited, ""),
            R"({"type":"error","error":{"type":"rate_limit_error","message":"m","detail":{"reason":"rate_limit_exceeded",)"
            R"("limit":"input_tokens","max_tokens":7,"retry_after_ms":1000}}})");
  // Without a detail the kind decides, never a context or KV reason.
  EXPECT_EQ(from_status(resource_exhausted("x")).reason, ErrorReason::kOverloaded);
  EXPECT_EQ(from_status(out_of_range("x")).reason, ErrorReason::kInvalidRequest);
  EXPECT_EQ(from_status(not_found("x")).reason, ErrorReason::kNotFound);
  EXPECT_EQ(from_status(io_error("x")).reason, ErrorReason::kInternalServerError);
  EXPECT_EQ(from_status(resource_exhausted("bye", {.reason = ErrorReason::kEngineShuttingDown})).reason,
            ErrorReason::kEngineShuttingDown);
  // Strings are escaped and made valid UTF-8.
  const ApiError odd{.reason = ErrorReason::kInvalidRole, .message = "bad \"\xff\x01", .param = "messages[0].role"};
  EXPECT_EQ(openai_error_json(odd),
            "{\"error\":{\"message\":\"bad \\\"\xEF\xBF\xBD\\u0001\",\"type\":\"invalid_request_error\","
            "\"param\":\"messages[0].role\",\"code\":\"invalid_role\"}}");
}

TEST(Formatting, AnthropicStreamGolden) {
  auto f = anthropic::make_formatter("m", "req_1");
  std::string out;
  f->stream_start(Usage{.n_prompt_tokens = 10, .n_cached_tokens = 4, .n_generated_tokens = 1}, out);
  f->stream_text("Hi \"there\"\n", out);
  f->stream_finish(Completion{.finish = FinishReason::kStopSequence, .stop_sequence = "END",
                              .usage = {.n_prompt_tokens = 10, .n_cached_tokens = 4, .n_generated_tokens = 3}},
                   out);
  // The message id is random: cut it out.
  const size_t id = out.find("msg_");
  ASSERT_NE(id, std::string::npos);
  out.replace(id, 28, "msg_X");
  EXPECT_EQ(out,
            "event: message_start\n"
            R"(data: {"type":"message_start","message":{"id":"msg_X","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":6,"cache_creation_input_tokens":0,"cache_read_input_tokens":4,"output_tokens":1}}})"
            "\n\nevent: content_block_start\n"
            R"(data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}})"
            "\n\nevent: ping\n"
            R"(data: {"type":"ping"})"
            "\n\nevent: content_block_delta\n"
            R"(data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi \"there\"\n"}})"
            "\n\nevent: content_block_stop\n"
            R"(data: {"type":"content_block_stop","index":0})"
            "\n\nevent: message_delta\n"
            R"(data: {"type":"message_delta","delta":{"stop_reason":"stop_sequence","stop_sequence":"END"},"usage":{"input_tokens":6,"cache_creation_input_tokens":0,"cache_read_input_tokens":4,"output_tokens":3}})"
            "\n\nevent: message_stop\n"
            R"(data: {"type":"message_stop"})"
            "\n\n");
  std::string err;
  f->stream_error(ApiError{.reason = ErrorReason::kOverloaded, .message = "Overloaded"}, err);
  EXPECT_EQ(err,
            "event: error\n"
            R"(data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded","detail":{"reason":"overloaded"}},"request_id":"req_1"})"
            "\n\n");
}

TEST(Formatting, KeepAliveFrames) {
  std::string a;
  anthropic::make_formatter("m", "req_1")->stream_ping(a);
  EXPECT_EQ(a, "event: ping\ndata: {\"type\":\"ping\"}\n\n");
  for (openai::Kind kind : {openai::Kind::kChat, openai::Kind::kCompletion}) {
    std::string o;
    openai::make_formatter(kind, "gpt", /*include_usage=*/true)->stream_ping(o);
    EXPECT_EQ(o, ": ping\n\n");  // an SSE comment: no event, no data
  }
}

TEST(Formatting, StopReasons) {
  auto a = [](FinishReason r, bool clamped = false) {
    return std::string(anthropic::stop_reason(Completion{.finish = r, .max_tokens_clamped = clamped}));
  };
  EXPECT_EQ(a(FinishReason::kEndOfSequence), "end_turn");
  EXPECT_EQ(a(FinishReason::kMaxTokens), "max_tokens");
  EXPECT_EQ(a(FinishReason::kMaxTokens, true), "model_context_window_exceeded");
  EXPECT_EQ(a(FinishReason::kStopSequence), "stop_sequence");
  EXPECT_EQ(a(FinishReason::kContextWindow), "model_context_window_exceeded");
  EXPECT_EQ(a(FinishReason::kSafety), "refusal");
  auto o = [](FinishReason r) { return std::string(openai::finish_reason(Completion{.finish = r})); };
  EXPECT_EQ(o(FinishReason::kEndOfSequence), "stop");
  EXPECT_EQ(o(FinishReason::kStopSequence), "stop");
  EXPECT_EQ(o(FinishReason::kMaxTokens), "length");
  EXPECT_EQ(o(FinishReason::kContextWindow), "length");
  EXPECT_EQ(o(FinishReason::kSafety), "content_filter");
}

TEST(Formatting, OpenAIChunks) {
  auto f = openai::make_formatter(openai::Kind::kChat, "gpt", /*include_usage=*/true);
  std::string out;
  f->stream_start({}, out);
  f->stream_text("a", out);
  f->stream_finish(Completion{.finish = FinishReason::kMaxTokens, .usage = {.n_prompt_tokens = 5, .n_generated_tokens = 1}}, out);
  std::vector<std::string> frames;
  for (size_t p = 0, e; (e = out.find("\n\n", p)) != std::string::npos; p = e + 2) frames.push_back(out.substr(p, e - p));
  ASSERT_EQ(frames.size(), 5u);
  for (auto& fr : frames) EXPECT_EQ(fr.rfind("data: ", 0), 0u);
  EXPECT_EQ(frames.back(), "data: [DONE]");
  auto usage = json::parse(frames[3].substr(6)).as_object();
  EXPECT_TRUE(usage["choices"].as_array().empty());
  EXPECT_EQ(usage["usage"].as_object()["total_tokens"].as_int64(), 6);
  auto fin = json::parse(frames[2].substr(6)).as_object();
  EXPECT_EQ(fin["choices"].as_array()[0].as_object()["finish_reason"].as_string(), "length");
  EXPECT_TRUE(fin["usage"].is_null());
  EXPECT_EQ(fin["id"], json::parse(frames[0].substr(6)).as_object()["id"]);
}

// Logprobs in OpenAI's shapes: chat content entries with bytes and top_logprobs, the legacy
// completions arrays; -inf written as -9999.0; a piece that is part of a UTF-8 character
// gets U+FFFD in `token`, its exact bytes in `bytes`; chunks carry what arrived since the last.
TEST(Formatting, OpenAILogprobs) {
  const float kInf = std::numeric_limits<float>::infinity();
  const std::vector<TokenLogprobs> entries = {
      {.chosen = {.id = 7, .logprob = -0.25f, .piece = "Hi"},
       .top = {{.id = 7, .logprob = -0.25f, .piece = "Hi"}, {.id = 9, .logprob = -1.5f, .piece = " there"}}},
      {.chosen = {.id = 3, .logprob = -kInf, .piece = "\xC3"},
       .top = {{.id = 4, .logprob = -0.5f, .piece = "Hi"}, {.id = 5, .logprob = -0.75f, .piece = "\xC3"}}},
  };
  auto choice = [](const std::string& body) { return json::parse(body).as_object()["choices"].as_array()[0].as_object(); };
  {
    auto f = openai::make_formatter(openai::Kind::kChat, "gpt", false, /*logprobs=*/true);
    f->take_logprobs(entries);
    auto c = choice(f->complete({AnswerPart{.text = "Hi\xC3"}}, Completion{.finish = FinishReason::kMaxTokens}).body);
    const auto& lp = c["logprobs"].as_object();
    EXPECT_TRUE(lp.at("refusal").is_null());
    const auto& content = lp.at("content").as_array();
    ASSERT_EQ(content.size(), 2u);
    const auto& e0 = content[0].as_object();
    EXPECT_EQ(e0.at("token").as_string(), "Hi");
    EXPECT_DOUBLE_EQ(e0.at("logprob").to_number<double>(), -0.25);
    EXPECT_EQ(json::serialize(e0.at("bytes")), "[72,105]");
    ASSERT_EQ(e0.at("top_logprobs").as_array().size(), 2u);
    EXPECT_EQ(e0.at("top_logprobs").as_array()[1].as_object().at("token").as_string(), " there");
    EXPECT_DOUBLE_EQ(e0.at("top_logprobs").as_array()[1].as_object().at("logprob").to_number<double>(), -1.5);
    const auto& e1 = content[1].as_object();
    EXPECT_EQ(e1.at("token").as_string(), "\xEF\xBF\xBD");  // U+FFFD
    EXPECT_EQ(json::serialize(e1.at("bytes")), "[195]");
    EXPECT_DOUBLE_EQ(e1.at("logprob").to_number<double>(), -9999.0);
    // Asked, no token: an empty list; not asked: null.
    auto g = openai::make_formatter(openai::Kind::kChat, "gpt", false, true);
    EXPECT_EQ(choice(g->complete({}, Completion{.finish = FinishReason::kEndOfSequence}).body)["logprobs"]
                  .as_object().at("content").as_array().size(), 0u);
    auto h = openai::make_formatter(openai::Kind::kChat, "gpt", false, false);
    EXPECT_TRUE(choice(h->complete({}, Completion{.finish = FinishReason::kEndOfSequence}).body)["logprobs"].is_null());
  }
  {
    auto f = openai::make_formatter(openai::Kind::kCompletion, "gpt", false, /*logprobs=*/true);
    f->take_logprobs(entries);
    auto c = choice(f->complete({AnswerPart{.text = "Hi\xC3"}}, Completion{.finish = FinishReason::kMaxTokens}).body);
    const auto& lp = c["logprobs"].as_object();
    ASSERT_EQ(lp.at("tokens").as_array().size(), 2u);
    EXPECT_EQ(lp.at("tokens").as_array()[0].as_string(), "Hi");
    EXPECT_EQ(lp.at("tokens").as_array()[1].as_string(), "\xEF\xBF\xBD");
    EXPECT_DOUBLE_EQ(lp.at("token_logprobs").as_array()[0].to_number<double>(), -0.25);
    EXPECT_DOUBLE_EQ(lp.at("token_logprobs").as_array()[1].to_number<double>(), -9999.0);
    EXPECT_EQ(json::serialize(lp.at("text_offset")), "[0,2]");
    const auto& top = lp.at("top_logprobs").as_array();
    ASSERT_EQ(top.size(), 2u);
    // The chosen token first, then the alternatives; a repeated text is left out.
    EXPECT_EQ(top[0].as_object().size(), 2u);
    EXPECT_DOUBLE_EQ(top[0].as_object().at(" there").to_number<double>(), -1.5);
    EXPECT_EQ(top[1].as_object().size(), 2u);
    EXPECT_DOUBLE_EQ(top[1].as_object().at("\xEF\xBF\xBD").to_number<double>(), -9999.0);
    EXPECT_DOUBLE_EQ(top[1].as_object().at("Hi").to_number<double>(), -0.5);
  }
  {
    // Streaming: the chunk after take_logprobs carries them, the next one null; the text
    // offsets go on across chunks.
    auto f = openai::make_formatter(openai::Kind::kCompletion, "gpt", false, true);
    std::string out;
    f->stream_start({}, out);
    f->take_logprobs(std::span(entries).subspan(0, 1));
    f->stream_text("Hi", out);
    f->stream_text("", out);
    f->take_logprobs(std::span(entries).subspan(1, 1));
    f->stream_finish(Completion{.finish = FinishReason::kMaxTokens}, out);
    std::vector<json::object> chunks;
    for (size_t p = 0, e; (e = out.find("\n\n", p)) != std::string::npos; p = e + 2) {
      if (out.compare(p, 12, "data: [DONE]") != 0) chunks.push_back(choice(out.substr(p + 6, e - p - 6)));
    }
    ASSERT_EQ(chunks.size(), 3u);
    EXPECT_EQ(json::serialize(chunks[0]["logprobs"].as_object().at("tokens")), R"(["Hi"])");
    EXPECT_TRUE(chunks[1]["logprobs"].is_null());
    EXPECT_EQ(json::serialize(chunks[2]["logprobs"].as_object().at("text_offset")), "[2]");
  }
}

TEST(Prepare, ContextCheckAndClamp) {
  fake::FakeCodec codec;
  ChatRequest chat;
  chat.messages = {{.role = "user", .content = std::string(100, 'x')}};
  chat.max_tokens = 1000000;
  const int64_t n_prompt = static_cast<int64_t>(codec.encode_chat(chat)->size());
  auto p = prepare_request(chat, codec, n_prompt + 10, "req_1");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.value().request.stop.max_tokens, 10);
  EXPECT_TRUE(p.value().max_tokens_clamped);
  chat.max_tokens = 10;
  EXPECT_FALSE(prepare_request(chat, codec, n_prompt + 10, "r").value().max_tokens_clamped);
  auto e = prepare_request(chat, codec, n_prompt, "r");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().reason, ErrorReason::kContextLengthExceeded);
  EXPECT_EQ(e.error().numbers.n_prompt_tokens, n_prompt);
  EXPECT_EQ(e.error().numbers.n_ctx, n_prompt);
  EXPECT_EQ(e.error().numbers.max_tokens_fit, 0);
}

// vLLM's stop fields reach the engine request; min_tokens beside a grammar is refused.
TEST(Prepare, StopExtensionsReachTheRequest) {
  fake::FakeCodec codec;
  auto chat = openai::parse_chat_request(
      R"({"model":"m","messages":[{"role":"user","content":"hi"}],"stop_token_ids":[7],"ignore_eos":true,"min_tokens":3})");
  ASSERT_TRUE(chat.ok());
  auto p = prepare_request(chat.value(), codec, 0, "r");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.value().request.stop.stop_token_ids, (std::vector<int32_t>{7}));
  EXPECT_TRUE(p.value().request.stop.ignore_eos);
  EXPECT_EQ(p.value().request.stop.min_tokens, 3);
  chat = openai::parse_chat_request(R"({"model":"m","messages":[{"role":"user","content":"hi"}],"min_tokens":3,)"
                                    R"("response_format":{"type":"json_object"}})");
  ASSERT_TRUE(chat.ok());
  auto e = prepare_request(chat.value(), codec, 0, "r");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().reason, ErrorReason::kUnsupportedValue);
  EXPECT_EQ(e.error().param, "min_tokens");
}

TEST(Prepare, TenantIsTheKeyThenTheUser) {
  fake::FakeCodec codec;
  ChatRequest chat;
  chat.messages = {{.role = "user", .content = "hi"}};
  chat.user = "u-1";
  EXPECT_EQ(prepare_request(chat, codec, 0, "r", "key:00ff").value().request.tenant, tenant_of("key:00ff", "u-1"));
  EXPECT_NE(tenant_of("key:00ff", "u-1"), tenant_of("key:00fe", "u-1"));
  EXPECT_NE(tenant_of("key:00ff", ""), tenant_of("key:00ff", "u-1"));
  // A client's user id cannot name another key's tenant on a keyless server.
  EXPECT_NE(tenant_of("", "key:00ff/"), tenant_of("key:00ff", ""));
}

TEST(Codec, ChatMappingOntoTemplates) {
  ChatRequest chat;
  chat.messages = {{.role = "system", .content = "a"}, {.role = "system", .content = "b"}, {.role = "user", .content = "u"},
                   {.role = "assistant", .content = "", .tool_calls = {{"id", "f", "{}"}}},
                   {.role = "tool", .content = "r", .tool_call_id = "id"}, {.role = "system", .content = "late"}};
  TokenizerCodec phi3(nullptr, ChatTemplate(ChatTemplateKind::kPhi3));  // no native tool syntax
  auto m = phi3.to_template_messages(chat);
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[0].content, "a\n\nb");
  EXPECT_EQ(m[2].content, "[tool call f] {}");
  EXPECT_EQ(m[3].role, "user");
  EXPECT_EQ(m[4].role, "system");
  TokenizerCodec llama2(nullptr, ChatTemplate(ChatTemplateKind::kLlama2));
  EXPECT_EQ(llama2.to_template_messages(chat)[4].role, "user");
}

TEST(Json, EscapesAndRepairsUtf8) {
  std::string out;
  append_json_string(out, std::string("a\"b\\c\n\t\x01\x7f", 9));
  EXPECT_EQ(out, R"("a\"b\\c\n\t\u0001\u007f")");
  out.clear();
  append_json_string(out, "caf\xC3\xA9 \xF0\x9F\x8E\x89 bad:\xC3 \xFF");
  EXPECT_EQ(out, "\"caf\xC3\xA9 \xF0\x9F\x8E\x89 bad:\xEF\xBF\xBD \xEF\xBF\xBD\"");
  EXPECT_NO_THROW(json::parse(out));
}

TEST(StreamShaper, SplitsOnUtf8BoundariesAndPaces) {
  EXPECT_EQ(http::utf8_safe_prefix("ab\xC3\xA9", 3), 2u);
  EXPECT_EQ(http::utf8_safe_prefix("\xF0\x9F\x8E\x89x", 2), 4u);
  http::StreamShaper split({.max_buffer_size = 4});
  split.push("hello w\xC3\xB6rld");
  auto now = http::StreamShaper::Clock::now();
  auto pieces = split.take_ready(now);
  std::string joined;
  for (auto& p : pieces) {
    EXPECT_LE(p.size(), 4u);
    joined += p;
  }
  EXPECT_EQ(joined, "hello w\xC3\xB6rld");
  http::StreamShaper paced({.min_delay_ms = 50});
  paced.push("a");
  EXPECT_EQ(paced.take_ready(now).size(), 1u);
  paced.push("b");
  paced.push("c");
  EXPECT_TRUE(paced.take_ready(now + std::chrono::milliseconds(10)).empty());
  EXPECT_EQ(*paced.next_due(), now + std::chrono::milliseconds(50));
  auto later = paced.take_ready(now + std::chrono::milliseconds(50));
  ASSERT_EQ(later.size(), 1u);
  EXPECT_EQ(later[0], "bc");
  // take_all: everything now, window or not (the text before a tool call), still cut to max_buffer_size.
  http::StreamShaper held({.max_buffer_size = 4, .min_delay_ms = 50});
  held.push("abcdef");
  EXPECT_EQ(held.take_ready(now), std::vector<std::string>{"abcd"});
  EXPECT_TRUE(held.take_ready(now).empty());
  EXPECT_EQ(held.take_all(now), std::vector<std::string>{"ef"});
  held.push("gh");
  EXPECT_TRUE(held.take_ready(now + std::chrono::milliseconds(10)).empty());  // take_all counted as an event
  EXPECT_EQ(http::StreamShaper({.min_delay_ms = 5, .network_rtt_ms = 200}).window().count(), 50);
  EXPECT_EQ(http::StreamShaper({.network_rtt_ms = 10000}).window().count(), 100);
}

// fuzz_stream_shaper (tests/fuzz/fuzz_stream_shaper/regressions/continuation_run_over_max):
// a run of continuation bytes, which is not UTF-8, went out whole as one
// event, past max_buffer_size.
TEST(StreamShaper, BytesThatAreNotUtf8StayWithinMaxBufferSize) {
  EXPECT_EQ(http::utf8_safe_prefix("a\x80\x80\x80\x80\x80\x80", 5), 5u);
  EXPECT_EQ(http::utf8_safe_prefix("\x80\x80\x80\x80\x80\x80", 4), 4u);
  EXPECT_EQ(http::utf8_safe_prefix("ab\xF0\x9F\x8E\x89", 5), 2u);  // a real character still moves whole
  const std::string garbage = "\x80\x80\x80\x80\x80\x80\xFF\xE2\x82\xAC\xC3";
  http::StreamShaper shaper({.max_buffer_size = 5});
  shaper.push(garbage);
  std::string joined;
  for (const std::string& e : shaper.take_all(http::StreamShaper::Clock::now())) {
    EXPECT_LE(e.size(), 5u);
    joined += e;
  }
  EXPECT_EQ(joined, garbage);
}

TEST(Router, CapturesAnd404And405) {
  http::Router router;
  std::string seen;
  router.add("GET", "/v1/models/{id}", [&](http::HttpRequest& r, std::shared_ptr<http::Responder>) { seen = r.path_params[0]; });
  std::vector<int> statuses;
  router.set_error_formatter([&](http::HttpError e, const http::HttpRequest&) {
    statuses.push_back(e == http::HttpError::kNotFound ? 404 : 405);
    return http::HttpResponse{};
  });

  auto res = std::make_shared<test::NullResponder>();
  http::HttpRequest r{.method = "GET", .path = "/v1/models/abc"};
  router.dispatch(r, res);
  EXPECT_EQ(seen, "abc");
  r = http::HttpRequest{.method = "HEAD", .path = "/v1/models/zz"};
  router.dispatch(r, res);
  EXPECT_EQ(seen, "zz");
  r = http::HttpRequest{.method = "POST", .path = "/v1/models/abc"};
  router.dispatch(r, res);
  r = http::HttpRequest{.method = "GET", .path = "/v1/models"};
  router.dispatch(r, res);
  EXPECT_EQ(statuses, (std::vector<int>{405, 404}));
}

TEST(RequestLog, OneJsonObjectPerLineAndAHumanForm) {
  RequestLog r{.request_id = "req_1", .method = "POST", .route = "/v1/messages", .status = 200, .generation = true,
               .stream = true, .usage = {.n_prompt_tokens = 12, .n_cached_tokens = 4, .n_generated_tokens = 34},
               .finish = FinishReason::kMaxTokens, .t_first_token_ms = 5.25, .t_total_ms = 40.5};
  r.engine.t_submit = Timings::Clock::now();
  r.engine.t_scheduled = r.engine.t_submit + std::chrono::milliseconds(1);
  r.engine.t_first_token = r.engine.t_scheduled + std::chrono::milliseconds(3);
  r.engine.t_last_token = r.engine.t_first_token + std::chrono::milliseconds(30);
  const std::string line = format_request_log_json(r);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  json::object o = json::parse(line).as_object();
  EXPECT_EQ(o["request_id"].as_string(), "req_1");
  EXPECT_EQ(o["route"].as_string(), "/v1/messages");
  EXPECT_EQ(o["status"].as_int64(), 200);
  EXPECT_EQ(o["n_prompt_tokens"].as_int64(), 12);
  EXPECT_EQ(o["n_cached_tokens"].as_int64(), 4);
  EXPECT_EQ(o["n_generated_tokens"].as_int64(), 34);
  EXPECT_EQ(o["finish"].as_string(), "max_tokens");
  EXPECT_NEAR(o["t_queued_ms"].to_number<double>(), 1.0, 1e-6);
  EXPECT_NEAR(o["t_prefill_ms"].to_number<double>(), 3.0, 1e-6);
  EXPECT_NEAR(o["t_decode_ms"].to_number<double>(), 30.0, 1e-6);
  EXPECT_FALSE(o.contains("error_reason"));
  EXPECT_EQ(format_request_log_human(r), "200 POST /v1/messages req_1 12+34 tok first 5.2 ms total 40.5 ms max_tokens");

  RequestLog e{.request_id = "req_2\"x", .method = "POST", .route = "/v1/messages", .status = 400,
               .error_reason = "context_length_exceeded"};
  json::object eo = json::parse(format_request_log_json(e)).as_object();
  EXPECT_EQ(eo["request_id"].as_string(), "req_2\"x");
  EXPECT_EQ(eo["error_reason"].as_string(), "context_length_exceeded");
  EXPECT_FALSE(eo.contains("n_prompt_tokens"));
}

TEST(ServeConfig, FlagOverEnvOverTomlOverDefault) {
  const std::string path = ::testing::TempDir() + "serve_config_test.toml";
  {
    std::ofstream f(path);
    f << "port = 9000\nhost = \"0.0.0.0\"\nmodel_alias = \"from-toml\"\nctx = 1024\napi_keys = [\"t1\", \"t2\"]\n";
  }
  std::map<std::string, std::string> env = {{"ZEROLAYER_PORT", "9100"}, {"ZEROLAYER_CTX", "2048"}};
  auto getenv = [&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  auto c = cli::resolve_serve_config({{"config", path}, {"port", "9200"}}, {}, getenv);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->port, 9200);           // flag
  EXPECT_EQ(c->ctx, 2048);            // env
  EXPECT_EQ(c->host, "0.0.0.0");      // toml
  EXPECT_EQ(c->model_alias, "from-toml");
  EXPECT_EQ(c->parallel, 0);          // default: derived from the KV budget at load
  EXPECT_EQ(c->api_keys, (std::vector<std::string>{"t1", "t2"}));
  env["ZEROLAYER_API_KEY"] = "e1, e2";
  EXPECT_EQ(cli::resolve_serve_config({{"config", path}}, {}, getenv)->api_keys, (std::vector<std::string>{"e1", "e2"}));
  EXPECT_EQ(cli::resolve_serve_config({{"config", path}}, {"f1"}, getenv)->api_keys, std::vector<std::string>{"f1"});
  auto bad = cli::resolve_serve_config({{"port", "70000"}}, {}, getenv);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--port"), std::string::npos);
  env["ZEROLAYER_PARALLEL"] = "many";
  bad = cli::resolve_serve_config({}, {}, getenv);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("ZEROLAYER_PARALLEL"), std::string::npos);
  {
    std::ofstream f(path);
    f << "port = = 1\n";
  }
  EXPECT_FALSE(cli::resolve_serve_config({{"config", path}}, {}, [](const char*) -> const char* { return nullptr; }).ok());
}

TEST(ServeConfig, MetricsSettings) {
  const std::string path = ::testing::TempDir() + "serve_config_metrics_test.toml";
  {
    std::ofstream f(path);
    f << "metrics_compat = \"none\"\nmetrics_auth = true\n";
  }
  std::map<std::string, std::string> env;
  auto getenv = [&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  auto c = cli::resolve_serve_config({}, {}, getenv);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->metrics_compat, "");  // default: no aliases, /metrics open
  EXPECT_FALSE(c->metrics_auth);
  c = cli::resolve_serve_config({{"config", path}}, {}, getenv);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->metrics_compat, "none");  // TOML
  EXPECT_TRUE(c->metrics_auth);
  env["ZEROLAYER_METRICS_COMPAT"] = "vllm";
  env["ZEROLAYER_METRICS_AUTH"] = "false";
  c = cli::resolve_serve_config({{"config", path}}, {}, getenv);
  EXPECT_EQ(c->metrics_compat, "vllm");  // env over TOML
  EXPECT_FALSE(c->metrics_auth);
  c = cli::resolve_serve_config({{"config", path}, {"metrics-compat", "none"}, {"metrics-auth", "true"}}, {}, getenv);
  EXPECT_EQ(c->metrics_compat, "none");  // flag over env
  EXPECT_TRUE(c->metrics_auth);
  auto bad = cli::resolve_serve_config({{"metrics-compat", "tgi"}}, {}, getenv);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--metrics-compat"), std::string::npos);
  EXPECT_FALSE(cli::resolve_serve_config({{"metrics-auth", "maybe"}}, {}, getenv).ok());
}

TEST(ServeConfig, DrainTimeout) {
  const std::string path = ::testing::TempDir() + "serve_config_drain_test.toml";
  {
    std::ofstream f(path);
    f << "drain_timeout = 90\n";
  }
  std::map<std::string, std::string> env;
  auto getenv = [&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  EXPECT_EQ(cli::resolve_serve_config({}, {}, getenv)->drain_timeout_s, 30);
  EXPECT_EQ(cli::resolve_serve_config({{"config", path}}, {}, getenv)->drain_timeout_s, 90);
  env["ZEROLAYER_DRAIN_TIMEOUT"] = "0";
  EXPECT_EQ(cli::resolve_serve_config({{"config", path}}, {}, getenv)->drain_timeout_s, 0);
  EXPECT_EQ(cli::resolve_serve_config({{"config", path}, {"drain-timeout", "3600"}}, {}, getenv)->drain_timeout_s, 3600);
  auto bad = cli::resolve_serve_config({{"drain-timeout", "3601"}}, {}, getenv);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--drain-timeout"), std::string::npos);
  env["ZEROLAYER_DRAIN_TIMEOUT"] = "-1";
  EXPECT_FALSE(cli::resolve_serve_config({}, {}, getenv).ok());
}

TEST(ServeConfig, SsePingInterval) {
  const std::string path = ::testing::TempDir() + "serve_config_ping_test.toml";
  auto write_toml = [&](const std::string& text) {
    std::ofstream f(path);
    f << text;
  };
  std::map<std::string, std::string> env;
  auto getenv = [&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  auto interval = [&](const std::map<std::string, std::string>& flags) {
    auto c = cli::resolve_serve_config(flags, {}, getenv);
    EXPECT_TRUE(c.ok()) << c.status().to_string();
    return c.ok() ? c->sse_ping_interval_s : -1.0;
  };
  EXPECT_DOUBLE_EQ(interval({}), 5.0);  // default
  write_toml("sse_ping_interval = 0.25\n");
  EXPECT_DOUBLE_EQ(interval({{"config", path}}), 0.25);
  write_toml("sse_ping_interval = 7\n");  // a TOML integer
  EXPECT_DOUBLE_EQ(interval({{"config", path}}), 7.0);
  env["ZEROLAYER_SSE_PING_INTERVAL"] = "0";
  EXPECT_DOUBLE_EQ(interval({{"config", path}}), 0.0);  // env over TOML; 0: off
  EXPECT_DOUBLE_EQ(interval({{"config", path}, {"sse-ping-interval", "0.05"}}), 0.05);  // flag over env
  EXPECT_DOUBLE_EQ(interval({{"sse-ping-interval", "3600"}}), 3600.0);

  auto bad = [&](const std::map<std::string, std::string>& flags, const std::string& source) {
    auto c = cli::resolve_serve_config(flags, {}, getenv);
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find(source), std::string::npos) << c.status().message();
    EXPECT_NE(c.status().message().find("sse-ping-interval"), std::string::npos) << c.status().message();
  };
  for (const char* v : {"3600.5", "-0.5", "-1", "abc", "5s", "", "nan", "inf", "1e9"}) {
    bad({{"sse-ping-interval", v}}, "--sse-ping-interval");
  }
  env["ZEROLAYER_SSE_PING_INTERVAL"] = "-1";
  bad({}, "ZEROLAYER_SSE_PING_INTERVAL");
  env.erase("ZEROLAYER_SSE_PING_INTERVAL");
  write_toml("sse_ping_interval = 5000\n");
  bad({{"config", path}}, "config file");
}

}  // namespace
}  // namespace zl::api

namespace zl::api {
namespace {

TEST(Codec, RealTokenizerOnStories260K) {
  const std::string path = std::string(ZL_SHARED_DIR) + "/models/stories260K.gguf";
  if (!std::ifstream(path).good()) GTEST_SKIP() << "SKIPPED: " << path << " not found (../shared absent)";
  auto tok = Tokenizer::load(path);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  auto tmpl = ChatTemplate::for_vocab((*tok)->vocab());
  ASSERT_TRUE(tmpl.ok());
  TokenizerCodec codec(tok->get(), std::move(tmpl).value());
  ChatRequest chat;
  chat.messages = {{.role = "system", .content = "Be kind."}, {.role = "user", .content = "Once upon a time"}};
  auto ids = codec.encode_chat(chat);
  ASSERT_TRUE(ids.ok()) << ids.status().to_string();
  EXPECT_GT(ids->size(), 5u);
  EXPECT_EQ((*ids)[0], (*tok)->vocab().bos());
  chat.messages.push_back({.role = "assistant", .content = "There was"});
  chat.continue_final_message = true;
  auto prefill = codec.encode_chat(chat);
  ASSERT_TRUE(prefill.ok());
  EXPECT_GT(prefill->size(), ids->size());
  auto raw = codec.encode_text("Once upon a time");
  ASSERT_TRUE(raw.ok());
  EXPECT_LT(raw->size(), ids->size());
}

}  // namespace
}  // namespace zl::api

// ---- HttpServer: graceful drain (begin_drain, requests_in_progress) ----

namespace zl::api {
namespace {

using test::HttpReply;
using test::RawClient;

constexpr int kWaitMs = 20000;  // generous: a loaded 2-core machine

// Polls `pred` for up to kWaitMs.
template <typename Pred>
bool wait_for(Pred pred) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kWaitMs);
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// The fake engine (5 ms a token) behind the real API routes on two I/O
// threads (connections alternate between them). Torn down like `serve`:
// no more I/O, then the engine, then the server.
class DrainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    http::ServerConfig cfg;
    cfg.n_io_threads = 2;
    cfg.max_body_bytes = 1 << 20;
    api_ = std::make_unique<test::FakeApiServer>(
        fake::FakeEngineConfig{.n_ctx = 4096, .step_time = std::chrono::microseconds(5000)}, ApiConfig{}, cfg);
    ASSERT_TRUE(api_->listening());
    server_ = &api_->server();
  }
  void TearDown() override { api_.reset(); }

  int port() const { return server_->port(); }
  bool wait_in_progress(int64_t n) {
    return wait_for([&] { return server_->requests_in_progress() == n; });
  }
  bool wait_no_connections() {
    return wait_for([&] { return server_->counters().n_connections_open == 0; });
  }

  std::unique_ptr<test::FakeApiServer> api_;
  http::HttpServer* server_ = nullptr;
};

std::string messages_request(int max_tokens, bool stream) {
  const std::string body = R"({"model":"m","max_tokens":)" + std::to_string(max_tokens) +
                           (stream ? R"(,"stream":true)" : "") +
                           R"(,"messages":[{"role":"user","content":"[[fake:long]]"}]})";
  return test::http_request("POST", "/v1/messages", body);
}

std::string repeated_story(int n_tokens) {
  std::string text;
  for (int i = 0; i < n_tokens; ++i) text += fake::kStory[i % fake::kStory.size()];
  return text;
}

// Checks that an Anthropic SSE body ends cleanly after max_tokens; its text.
std::string complete_stream_text(const std::string& body) {
  std::vector<test::SseEvent> ev = test::parse_sse(body);
  std::string text;
  for (const auto& e : ev) {
    if (e.event != "content_block_delta") continue;
    text += std::string(json::parse(e.data).as_object().at("delta").as_object().at("text").as_string());
  }
  EXPECT_GE(ev.size(), 2u);
  if (ev.size() >= 2) {
    EXPECT_EQ(ev.back().event, "message_stop");
    EXPECT_EQ(ev[ev.size() - 2].event, "message_delta");
    EXPECT_EQ(json::parse(ev[ev.size() - 2].data).as_object().at("delta").as_object().at("stop_reason").as_string(), "max_tokens");
  }
  return text;
}

TEST_F(DrainTest, StreamInProgressRunsToItsEnd) {
  // 200 tokens at 5 ms: a second of stream, nearly all of it after the drain begins.
  RawClient c(port());
  ASSERT_TRUE(c.send_raw(messages_request(200, /*stream=*/true)));
  ASSERT_TRUE(c.read_until([](const std::string& b) { return b.find("content_block_delta") != std::string::npos; },
                           kWaitMs));
  EXPECT_EQ(server_->requests_in_progress(), 1);
  server_->begin_drain();
  server_->begin_drain();  // idempotent
  EXPECT_TRUE(test::wait_refused(port(), kWaitMs));
  HttpReply r = c.read_response(kWaitMs);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(complete_stream_text(r.body), repeated_story(200));
  // Its head went out before the drain (keep-alive): the connection closes after the stream.
  EXPECT_TRUE(c.wait_closed(kWaitMs));
  EXPECT_EQ(server_->requests_in_progress(), 0);
  EXPECT_TRUE(wait_no_connections());
}

TEST_F(DrainTest, RequestsBeingReadAreAnsweredWithConnectionClose) {
  const std::string stream_req = messages_request(50, /*stream=*/true);
  const std::string plain_req = messages_request(50, /*stream=*/false);
  RawClient s(port());  // one on each I/O thread
  RawClient p(port());
  ASSERT_TRUE(s.send_raw(stream_req.substr(0, stream_req.size() - 10)));
  ASSERT_TRUE(p.send_raw(plain_req.substr(0, 20)));  // mid-headers
  ASSERT_TRUE(wait_in_progress(2));
  server_->begin_drain();
  ASSERT_TRUE(test::wait_refused(port(), kWaitMs));
  ASSERT_TRUE(s.send_raw(stream_req.substr(stream_req.size() - 10)));
  ASSERT_TRUE(p.send_raw(plain_req.substr(20)));
  HttpReply rs = s.read_response(kWaitMs);
  HttpReply rp = p.read_response(kWaitMs);
  ASSERT_TRUE(rs.complete);
  ASSERT_TRUE(rp.complete);
  EXPECT_EQ(rs.status, 200);
  EXPECT_EQ(rp.status, 200);
  EXPECT_EQ(rs.header("connection"), "close");
  EXPECT_EQ(rp.header("connection"), "close");
  EXPECT_EQ(complete_stream_text(rs.body), repeated_story(50));
  json::value full = json::parse(rp.body);
  EXPECT_EQ(full.as_object().at("content").as_array().at(0).as_object().at("text").as_string(), repeated_story(50));
  EXPECT_TRUE(s.wait_closed(kWaitMs));
  EXPECT_TRUE(p.wait_closed(kWaitMs));
  EXPECT_EQ(server_->requests_in_progress(), 0);
}

TEST_F(DrainTest, IdleKeepAliveConnectionsClose) {
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < 4; ++i) {  // two on each I/O thread, one answer behind each
    clients.push_back(std::make_unique<RawClient>(port()));
    ASSERT_TRUE(clients.back()->send_raw(test::http_request("GET", "/health", "")));
    HttpReply r = clients.back()->read_response(kWaitMs);
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(r.header("connection"), "");  // keep-alive
  }
  ASSERT_TRUE(wait_in_progress(0));
  EXPECT_EQ(server_->counters().n_connections_open, 4);
  server_->begin_drain();
  for (auto& c : clients) EXPECT_TRUE(c->wait_closed(kWaitMs));
  EXPECT_TRUE(wait_no_connections());
  EXPECT_TRUE(test::wait_refused(port(), kWaitMs));
}

TEST_F(DrainTest, EveryRequestCountsOnce) {
  {
    RawClient c(port());  // keep-alive: GET, HEAD, 404, a stream, then three pipelined
    ASSERT_TRUE(c.send_raw(test::http_request("GET", "/health", "")));
    EXPECT_EQ(c.read_response(kWaitMs).status, 200);
    ASSERT_TRUE(wait_in_progress(0));
    ASSERT_TRUE(c.send_raw(test::http_request("HEAD", "/", "")));
    EXPECT_TRUE(c.read_response(kWaitMs, /*head_request=*/true).complete);
    ASSERT_TRUE(wait_in_progress(0));
    ASSERT_TRUE(c.send_raw(test::http_request("GET", "/nope", "")));
    EXPECT_EQ(c.read_response(kWaitMs).status, 404);
    ASSERT_TRUE(wait_in_progress(0));
    ASSERT_TRUE(c.send_raw(messages_request(5, /*stream=*/true)));
    EXPECT_EQ(complete_stream_text(c.read_response(kWaitMs).body), repeated_story(5));
    ASSERT_TRUE(wait_in_progress(0));
    const std::string get = test::http_request("GET", "/health", "");
    ASSERT_TRUE(c.send_raw(get + get + get));
    for (int i = 0; i < 3; ++i) EXPECT_EQ(c.read_response(kWaitMs).status, 200);
    ASSERT_TRUE(wait_in_progress(0));
  }
  {
    RawClient c(port());  // answer_and_close: 413 from the Content-Length alone
    ASSERT_TRUE(c.send_raw("POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n"));
    EXPECT_EQ(c.read_response(kWaitMs).status, 413);
    EXPECT_TRUE(c.wait_closed(kWaitMs));
    ASSERT_TRUE(wait_in_progress(0));
  }
  {
    RawClient c(port());  // answer_and_close: malformed
    ASSERT_TRUE(c.send_raw("NOT HTTP AT ALL\r\n\r\n"));
    EXPECT_EQ(c.read_response(kWaitMs).status, 400);
    EXPECT_TRUE(c.wait_closed(kWaitMs));
    ASSERT_TRUE(wait_in_progress(0));
  }
  {
    RawClient c(port());  // the client leaves mid-headers
    ASSERT_TRUE(c.send_raw("GET /health HT"));
    ASSERT_TRUE(wait_in_progress(1));
  }
  ASSERT_TRUE(wait_in_progress(0));
  // Once every connection is gone no request can still be counted: a
  // double count would show here as a negative number.
  EXPECT_TRUE(wait_no_connections());
  EXPECT_EQ(server_->requests_in_progress(), 0);
}

TEST_F(DrainTest, StopAfterDrainCutsWhatIsLeft) {
  RawClient c(port());
  ASSERT_TRUE(c.send_raw(messages_request(100000, /*stream=*/true)));  // minutes
  ASSERT_TRUE(c.read_until([](const std::string& b) { return b.find("content_block_delta") != std::string::npos; },
                           kWaitMs));
  server_->begin_drain();
  ASSERT_TRUE(test::wait_refused(port(), kWaitMs));
  EXPECT_EQ(server_->requests_in_progress(), 1);
  server_->stop();
  EXPECT_EQ(server_->requests_in_progress(), 0);
  HttpReply r = c.read_response(kWaitMs);
  EXPECT_FALSE(r.complete);
  EXPECT_EQ(r.body.find("message_stop"), std::string::npos);
  EXPECT_TRUE(c.eof());
}

}  // namespace
}  // namespace zl::api

// ---- SSE keep-alive pings (ApiConfig::sse_ping_interval) ----

namespace zl::api {
namespace {

using test::HttpReply;
using test::RawClient;

// The fake engine (5 ms a token) behind the real API routes, with the
// keep-alive interval each test chooses. `[[fake:prefill=MS]]` in a prompt
// holds its first token back MS ms: a long prefill.
// ---- HttpServer: phase deadlines (idle, body, writes), checked lazily ----

class DeadlineTest : public ::testing::Test {
 protected:
  static constexpr auto kDeadline = std::chrono::milliseconds(300);
  void SetUp() override {
    http::ServerConfig cfg;
    cfg.idle_timeout = cfg.header_timeout = cfg.body_timeout = cfg.write_timeout = kDeadline;
    api_ = std::make_unique<test::FakeApiServer>(
        fake::FakeEngineConfig{.n_ctx = 4096, .step_time = std::chrono::microseconds(5000)}, ApiConfig{}, cfg);
    ASSERT_TRUE(api_->listening());
    server_ = &api_->server();
  }
  void TearDown() override { api_.reset(); }
  static double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }

  std::unique_ptr<test::FakeApiServer> api_;
  http::HttpServer* server_ = nullptr;
};

TEST_F(DeadlineTest, AnIdleConnectionClosesAtTheIdleDeadline) {
  const auto t0 = std::chrono::steady_clock::now();
  RawClient c(server_->port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.wait_closed(kWaitMs));
  EXPECT_GE(ms_since(t0), 250.0);  // not before its deadline (a wait fires at it, not earlier)
}

// Each request moves the idle deadline later: the wait armed for the first
// deadline fires, finds the deadline moved, and waits again.
TEST_F(DeadlineTest, UseMovesTheIdleDeadline) {
  RawClient c(server_->port());
  const auto t0 = std::chrono::steady_clock::now();
  // A request every ~100 ms (a gap of 300 ms would close it: margin for a
  // loaded machine), for over twice the idle timeout.
  for (int i = 0; i < 7; ++i) {
    ASSERT_TRUE(c.send_raw(test::http_request("GET", "/health", ""))) << i;
    HttpReply r = c.read_response(kWaitMs);
    ASSERT_TRUE(r.complete) << "request " << i << " at " << ms_since(t0) << " ms";
    ASSERT_EQ(r.status, 200);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_GT(ms_since(t0), 2.0 * kDeadline.count());
  const auto t1 = std::chrono::steady_clock::now();
  ASSERT_TRUE(c.wait_closed(kWaitMs));  // and it still closes once idle
  EXPECT_GE(ms_since(t1), 100.0);       // the last deadline was 300 ms after the last answer
}

TEST_F(DeadlineTest, AStalledBodyIsCut) {
  RawClient c(server_->port());
  const std::string body(100, 'x');
  std::string req = test::http_request("POST", "/v1/messages", body);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(c.send_raw(req.substr(0, req.size() - 90)));  // headers and 10 body bytes
  ASSERT_TRUE(c.wait_closed(kWaitMs));
  EXPECT_GE(ms_since(t0), 250.0);
}

// A stream much longer than the write deadline: every write completes in
// time, so none of the deadlines armed at each flush may cut it.
TEST_F(DeadlineTest, ALongStreamIsNotCutByTheWriteDeadline) {
  RawClient c(server_->port());
  const std::string body = R"({"model":"m","max_tokens":200,"stream":true,"messages":[{"role":"user","content":"[[fake:long]]"}]})";
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(c.send_raw(test::http_request("POST", "/v1/messages", body)));
  HttpReply r = c.read_response(kWaitMs);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200);
  EXPECT_GT(ms_since(t0), 2.0 * kDeadline.count());  // 200 tokens at 5 ms
  EXPECT_EQ(test::parse_sse(r.body).back().event, "message_stop");
}

class PingTest : public ::testing::Test {
 protected:
  void start(std::chrono::milliseconds interval) {
    ApiConfig cfg;
    cfg.sse_ping_interval = interval;
    http::ServerConfig scfg;
    scfg.max_body_bytes = 1 << 20;
    api_ = std::make_unique<test::FakeApiServer>(
        fake::FakeEngineConfig{.n_ctx = 4096, .step_time = std::chrono::microseconds(5000)}, cfg, scfg);
    ASSERT_TRUE(api_->listening());
    server_ = &api_->server();
  }
  void TearDown() override { api_.reset(); }
  int port() const { return server_->port(); }

  std::unique_ptr<test::FakeApiServer> api_;
  http::HttpServer* server_ = nullptr;
};

std::string anthropic_body(const std::string& content, int max_tokens, bool stream = true) {
  return R"({"model":"m","max_tokens":)" + std::to_string(max_tokens) + (stream ? R"(,"stream":true)" : "") +
         R"(,"messages":[{"role":"user","content":")" + content + R"("}]})";
}

// The prompt's token count as prepare_request() measures it.
int64_t prompt_tokens(const std::string& body) {
  auto chat = anthropic::parse_messages_request(body);
  EXPECT_TRUE(chat.ok());
  return chat.ok() ? static_cast<int64_t>(fake::FakeCodec().encode_chat(chat.value())->size()) : -1;
}

std::string str(const json::value& v) { return v.is_string() ? std::string(v.get_string()) : std::string(); }

size_t count_of(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + needle.size())) ++n;
  return n;
}

int64_t usage_field(const std::string& data, bool in_message, const char* key) {
  json::object o = test::parse_obj(data);
  const json::value& u = in_message ? o["message"].as_object().at("usage") : o["usage"];
  return u.as_object().at(key).as_int64();
}

TEST_F(PingTest, AnthropicStreamStartsEarlyAndPingsUntilTheFirstToken) {
  start(std::chrono::milliseconds(50));
  const std::string body = anthropic_body("[[fake:prefill=500]] hello", 5);
  HttpReply r = test::fetch(port(), "POST", "/v1/messages", body, {}, kWaitMs);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-type"), "text/event-stream");
  std::vector<test::SseEvent> ev = test::parse_sse(r.body);
  ASSERT_GE(ev.size(), 4u) << r.body;
  EXPECT_EQ(ev[0].event, "message_start");
  EXPECT_EQ(ev[1].event, "content_block_start");
  size_t first_delta = 0;
  while (first_delta < ev.size() && ev[first_delta].event != "content_block_delta") ++first_delta;
  ASSERT_LT(first_delta, ev.size()) << r.body;
  // Between the start and the first token: only pings, the stream start's
  // own and at least one keep-alive (500 ms of prefill, a 50 ms interval).
  for (size_t i = 2; i < first_delta; ++i) EXPECT_EQ(ev[i].event, "ping") << i;
  EXPECT_GE(first_delta - 2, 2u) << r.body;
  for (size_t i = 2; i < first_delta; ++i) EXPECT_EQ(ev[i].data, R"({"type":"ping"})");
  // message_start went out before the engine said anything: the prompt's
  // count from prepare_request, nothing cached or generated yet.
  const int64_t n_prompt = prompt_tokens(body);
  EXPECT_GT(n_prompt, 10);
  EXPECT_EQ(usage_field(ev[0].data, true, "input_tokens"), n_prompt);
  EXPECT_EQ(usage_field(ev[0].data, true, "cache_read_input_tokens"), 0);
  EXPECT_EQ(usage_field(ev[0].data, true, "output_tokens"), 0);
  // Then a normal stream; the final usage is the engine's.
  EXPECT_EQ(complete_stream_text(r.body), repeated_story(5));
  EXPECT_EQ(usage_field(ev[ev.size() - 2].data, false, "input_tokens"), n_prompt);
  EXPECT_EQ(usage_field(ev[ev.size() - 2].data, false, "output_tokens"), 5);
}

TEST_F(PingTest, OpenAIPingsAreSseComments) {
  start(std::chrono::milliseconds(50));
  for (const bool chat : {true, false}) {
    SCOPED_TRACE(chat ? "chat" : "completions");
    const std::string body =
        std::string(R"({"model":"m","max_tokens":5,"stream":true,)") +
        (chat ? R"("messages":[{"role":"user","content":"[[fake:prefill=500]]"}]})"
              : R"("prompt":"[[fake:prefill=500]]"})");
    HttpReply r = test::fetch(port(), "POST", chat ? "/v1/chat/completions" : "/v1/completions", body, {}, kWaitMs);
    ASSERT_TRUE(r.complete);
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body.find("event:"), std::string::npos);
    std::vector<std::string> frames;
    for (size_t p = 0, e; (e = r.body.find("\n\n", p)) != std::string::npos; p = e + 2) {
      frames.push_back(r.body.substr(p, e - p));
    }
    ASSERT_GE(frames.size(), 3u) << r.body;
    EXPECT_EQ(frames.back(), "data: [DONE]");
    // Chat starts with its role chunk; a completion has no start chunk, so
    // its first bytes are a ping.
    size_t i = 0;
    if (chat) {
      ASSERT_EQ(frames[0].rfind("data: ", 0), 0u);
      EXPECT_NE(frames[0].find(R"("role":"assistant")"), std::string::npos);
      i = 1;
    }
    size_t n_pings = 0;
    for (; i < frames.size() && frames[i] == ": ping"; ++i) ++n_pings;
    EXPECT_GE(n_pings, 2u) << r.body;
    std::string text;
    for (; i + 1 < frames.size(); ++i) {
      if (frames[i] == ": ping") continue;  // a late one, e.g. a stalled machine
      ASSERT_EQ(frames[i].rfind("data: ", 0), 0u) << frames[i];
      json::object o = test::parse_obj(frames[i].substr(6));
      const json::object& c0 = o["choices"].as_array().at(0).as_object();
      if (chat) {
        const json::object& d = c0.at("delta").as_object();
        if (d.contains("content")) text += std::string(d.at("content").as_string());
      } else {
        text += std::string(c0.at("text").as_string());
      }
    }
    EXPECT_EQ(text, repeated_story(5));
  }
}

TEST_F(PingTest, BusyStreamGetsNoPings) {
  // A token every ~5 ms for 2 s or more; a 300 ms interval never passes in
  // silence. Only the stream start's own ping is there.
  start(std::chrono::milliseconds(300));
  HttpReply r = test::fetch(port(), "POST", "/v1/messages", anthropic_body("[[fake:long]]", 400), {}, kWaitMs);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(complete_stream_text(r.body), repeated_story(400));
  EXPECT_EQ(count_of(r.body, "event: ping\n"), 1u);
}

TEST_F(PingTest, IntervalZeroSendsNothingBeforeTheFirstToken) {
  start(std::chrono::milliseconds(0));
  RawClient c(port());
  const std::string body = anthropic_body("[[fake:prefill=500]] hello", 5);
  ASSERT_TRUE(c.send_raw(test::http_request("POST", "/v1/messages", body)));
  // The first token comes 500 ms after submission at the earliest: for the
  // first 250 ms not even the status line may arrive.
  EXPECT_FALSE(c.read_until([](const std::string& b) { return !b.empty(); }, 250));
  EXPECT_TRUE(c.buffer().empty()) << c.buffer();
  HttpReply r = c.read_response(kWaitMs);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(count_of(r.body, "event: ping\n"), 1u);  // the stream start's
  EXPECT_EQ(complete_stream_text(r.body), repeated_story(5));
  // message_start came with the first token: the engine's usage.
  std::vector<test::SseEvent> ev = test::parse_sse(r.body);
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(usage_field(ev[0].data, true, "input_tokens"), prompt_tokens(body));
  EXPECT_EQ(usage_field(ev[0].data, true, "output_tokens"), 1);
}

TEST_F(PingTest, NonStreamingRequestsAreNotCommittedEarly) {
  start(std::chrono::milliseconds(50));
  HttpReply r =
      test::fetch(port(), "POST", "/v1/messages", anthropic_body("[[fake:prefill=300]]", 5, false), {}, kWaitMs);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.header("content-type"), "application/json");
  EXPECT_FALSE(r.header("content-length").empty());
  EXPECT_EQ(str(test::parse_obj(r.body)["content"].as_array().at(0).as_object()["text"]), repeated_story(5));
  // An error before any token is still a plain HTTP error when nothing was
  // committed (a stream whose engine fails before the first interval).
  HttpReply o = test::fetch(port(), "POST", "/v1/messages",
                            anthropic_body("[[fake:prefill=300]][[fake:overload]]", 5, false), {}, kWaitMs);
  EXPECT_EQ(o.status, 529);
}

TEST_F(PingTest, EngineErrorAfterAnEarlyStartIsAnSseErrorEvent) {
  start(std::chrono::milliseconds(50));
  HttpReply r = test::fetch(port(), "POST", "/v1/messages", anthropic_body("[[fake:prefill=500]][[fake:overload]]", 5),
                            {}, kWaitMs);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200);  // committed before the engine failed
  std::vector<test::SseEvent> ev = test::parse_sse(r.body);
  ASSERT_GE(ev.size(), 4u) << r.body;
  EXPECT_EQ(ev[0].event, "message_start");
  EXPECT_GE(count_of(r.body, "event: ping\n"), 2u);
  EXPECT_EQ(r.body.find("content_block_delta"), std::string::npos);
  EXPECT_EQ(r.body.find("message_stop"), std::string::npos);
  EXPECT_EQ(ev.back().event, "error");
  json::object e = test::parse_obj(ev.back().data);
  EXPECT_EQ(str(e["type"]), "error");
  ASSERT_TRUE(e["error"].is_object());
  EXPECT_EQ(str(e["error"].as_object()["type"]), "overloaded_error");
  EXPECT_FALSE(str(e["error"].as_object()["message"]).empty());

  // OpenAI: a data frame with the error object after the pings.
  const std::string openai_body =
      R"({"model":"m","stream":true,"messages":[{"role":"user","content":"[[fake:prefill=500]][[fake:overload]]"}]})";
  HttpReply o = test::fetch(port(), "POST", "/v1/chat/completions", openai_body, {}, kWaitMs);
  ASSERT_TRUE(o.complete);
  EXPECT_EQ(o.status, 200);
  EXPECT_GE(count_of(o.body, ": ping\n\n"), 2u);
  std::vector<test::SseEvent> oev = test::parse_sse(o.body);
  ASSERT_FALSE(oev.empty());
  EXPECT_TRUE(test::parse_obj(oev.back().data)["error"].is_object()) << o.body;
  // Both error events after the 200 count, by API and reason.
  HttpReply m = test::fetch(port(), "GET", "/metrics", "", {}, kWaitMs);
  EXPECT_NE(m.body.find(R"(engine_requests_rejected_total{api="anthropic",reason="overloaded"} 1)" "\n"),
            std::string::npos);
  EXPECT_NE(m.body.find(R"(engine_requests_rejected_total{api="openai",reason="overloaded"} 1)" "\n"),
            std::string::npos);
}

// Every error answer counts once under its reason: parser, router, auth-free
// context check and engine errors, in both APIs.
TEST_F(PingTest, ErrorAnswersAreCountedByReason) {
  start(std::chrono::milliseconds(0));
  auto metric = [&](const std::string& api, const std::string& reason) -> int64_t {
    HttpReply m = test::fetch(port(), "GET", "/metrics", "", {}, kWaitMs);
    const std::string key = R"(engine_requests_rejected_total{api=")" + api + R"(",reason=")" + reason + "\"} ";
    const size_t at = m.body.find(key);
    return at == std::string::npos ? -1 : std::stoll(m.body.substr(at + key.size()));
  };
  EXPECT_EQ(metric("anthropic", "invalid_json"), 0);
  EXPECT_EQ(metric("openai", "client_gone"), 0);
  EXPECT_EQ(test::fetch(port(), "POST", "/v1/messages", "{", {}, kWaitMs).status, 400);
  EXPECT_EQ(test::fetch(port(), "POST", "/v1/messages", "{", {}, kWaitMs).status, 400);
  EXPECT_EQ(test::fetch(port(), "POST", "/v1/chat/completions", "[]", {}, kWaitMs).status, 400);
  EXPECT_EQ(test::fetch(port(), "GET", "/v1/nothing", "", {}, kWaitMs).status, 404);
  const std::string too_long = anthropic_body(std::string(5000, 'x'), 5, /*stream=*/false);
  EXPECT_EQ(test::fetch(port(), "POST", "/v1/messages", too_long, {}, kWaitMs).status, 400);
  EXPECT_EQ(test::fetch(port(), "POST", "/v1/messages", anthropic_body("[[fake:overload]]", 5, false), {}, kWaitMs).status,
            529);
  EXPECT_EQ(metric("anthropic", "invalid_json"), 2);
  EXPECT_EQ(metric("openai", "invalid_json"), 1);
  EXPECT_EQ(metric("anthropic", "route_not_found"), 1);
  EXPECT_EQ(metric("anthropic", "context_length_exceeded"), 1);
  EXPECT_EQ(metric("anthropic", "overloaded"), 1);
  EXPECT_EQ(metric("openai", "overloaded"), 0);
}

TEST_F(PingTest, ClientGoneWhilePingingCancelsTheEngineRequest) {
  start(std::chrono::milliseconds(50));
  RawClient c(port());
  ASSERT_TRUE(c.send_raw(test::http_request("POST", "/v1/messages", anthropic_body("[[fake:prefill=600000]]", 5))));
  // The stream start's ping and two keep-alives: the session is in its ping phase.
  ASSERT_TRUE(c.read_until([](const std::string& b) { return count_of(b, "event: ping\n") >= 3; }, kWaitMs));
  EXPECT_EQ(c.buffer().find("content_block_delta"), std::string::npos);
  EXPECT_EQ(api_->engine().n_cancelled(), 0);
  c.abort_now();
  EXPECT_TRUE(wait_for([&] { return api_->engine().n_cancelled() == 1; }));
  EXPECT_TRUE(wait_for([&] { return server_->requests_in_progress() == 0 && api_->engine().stats().n_running == 0; }));
}

// OpenAI n and several prompts on the real API routes over the fake engine: a
// fan-out runs at most as many choices at once as the engine has batch slots
// (more would wait in its queue, or be refused by it, on an idle server) and,
// for a key with max_concurrent, as the key may run; the others start as
// those end, and the answer is whole.
class FanOutServiceTest : public ::testing::Test {
 protected:
  void start(int64_t max_seqs) {
    auto table = limits::KeyTable::parse(
        "[[key]]\nname = \"two\"\nkey = \"sk-two\"\nmax_concurrent = 2\n[[key]]\nname = \"free\"\nkey = \"sk-free\"\n",
        "keys.toml");
    ASSERT_TRUE(table.ok());
    keys_ = std::make_unique<limits::KeyStore>("keys.toml", *table);
    ApiConfig api;
    api.keys = keys_.get();
    api.quota = &quota_;
    api_ = std::make_unique<test::FakeApiServer>(
        fake::FakeEngineConfig{.n_ctx = 4096, .step_time = std::chrono::microseconds(2000), .max_seqs = max_seqs},
        std::move(api), http::ServerConfig{});
    ASSERT_TRUE(api_->listening());
  }
  void TearDown() override { api_.reset(); }

  HttpReply post(const std::string& key, const std::string& body, bool validate = false) {
    std::vector<std::string> headers{"Authorization: Bearer " + key};
    if (validate) headers.push_back("X-Engine-Mode: validate");
    return test::fetch(api_->port(), "POST", "/v1/completions", body, headers, kWaitMs);
  }

  limits::LocalBucketStore store_;
  limits::QuotaManager quota_{store_};
  std::unique_ptr<limits::KeyStore> keys_;
  std::unique_ptr<test::FakeApiServer> api_;
};

// Every choice of a whole answer and of a stream, in order, the story's first tokens each.
void expect_choices(const HttpReply& r, bool stream, size_t n, const std::string& text) {
  ASSERT_EQ(r.status, 200) << r.body;
  std::vector<std::string> texts(n);
  if (!stream) {
    const json::value answer = json::parse(r.body);
    const json::array& choices = answer.at("choices").as_array();
    ASSERT_EQ(choices.size(), n) << r.body;
    for (size_t i = 0; i < n; ++i) {
      EXPECT_EQ(choices[i].at("index").as_int64(), static_cast<int64_t>(i));
      texts[i] = choices[i].at("text").as_string().c_str();
    }
  } else {
    std::vector<test::SseEvent> ev = test::parse_sse(r.body);
    ASSERT_FALSE(ev.empty());
    EXPECT_EQ(ev.back().data, "[DONE]");
    for (size_t k = 0; k + 1 < ev.size(); ++k) {
      const json::value chunk = json::parse(ev[k].data);
      for (const auto& c : chunk.at("choices").as_array()) {
        texts.at(static_cast<size_t>(c.at("index").as_int64())) += c.at("text").as_string().c_str();
      }
    }
  }
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(texts[i], text) << i;
}

TEST_F(FanOutServiceTest, ChoicesRunAtMostTheEnginesBatchSlotsAtOnce) {
  start(/*max_seqs=*/3);
  const std::string text = repeated_story(6);
  for (bool stream : {false, true}) {
    const std::string body = std::string(R"({"model":"m","max_tokens":6,"n":7,"prompt":"Once")") +
                             (stream ? R"(,"stream":true})" : "}");
    expect_choices(post("sk-free", body), stream, 7, text);
    EXPECT_LE(api_->engine().max_live(), 3) << "more choices at once than the engine has batch slots";
  }
}

TEST_F(FanOutServiceTest, AKeysMaxConcurrentBoundsItsChoicesAtOnce) {
  start(/*max_seqs=*/0);
  const std::string text = repeated_story(6);
  for (bool stream : {false, true}) {
    const std::string body = std::string(R"({"model":"m","max_tokens":6,"n":3,"prompt":["Once","Twice"])") +
                             (stream ? R"(,"stream":true})" : "}");
    expect_choices(post("sk-two", body), stream, 6, text);
    EXPECT_LE(api_->engine().max_live(), 2) << "a key with max_concurrent = 2 ran more generations at once";
  }
  // Its slots are back: the next request is admitted.
  EXPECT_EQ(post("sk-two", R"({"model":"m","max_tokens":2,"prompt":"Once","n":2})").status, 200);
}

// Validate mode answers several prompts and n choices as the request itself would be answered:
// a later prompt that does not fit is the same 400, and the key's max_concurrent is checked for
// the slots the request would hold.
TEST_F(FanOutServiceTest, ValidateModeChecksEveryPromptAndEveryChoice) {
  start(/*max_seqs=*/0);
  const std::string too_long = R"({"model":"m","max_tokens":4,"prompt":["Once",")" + std::string(5000, 'x') + R"("]})";
  for (bool validate : {false, true}) {
    HttpReply r = post("sk-free", too_long, validate);
    EXPECT_EQ(r.status, 400) << (validate ? "validated: " : "") << r.body;
    EXPECT_NE(r.body.find(R"("param":"prompt[1]")"), std::string::npos) << r.body;
  }
  // A stream holds one of the key's two slots; two choices need both.
  RawClient c(api_->port());
  ASSERT_TRUE(c.send_raw(test::http_request(
      "POST", "/v1/completions", R"({"model":"m","max_tokens":100000,"stream":true,"prompt":"[[fake:long]]"})",
      {"Authorization: Bearer sk-two"})));
  ASSERT_TRUE(c.read_until([](const std::string& b) { return b.find("data: ") != std::string::npos; }, kWaitMs));
  const std::string two = R"({"model":"m","max_tokens":4,"n":2,"prompt":"Once"})";
  for (bool validate : {false, true}) {
    HttpReply r = post("sk-two", two, validate);
    EXPECT_EQ(r.status, 429) << (validate ? "validated: " : "") << r.body;
  }
  c.abort_now();
  EXPECT_TRUE(wait_for([&] { return post("sk-two", two, /*validate=*/true).status == 200; }));
}

}  // namespace
}  // namespace zl::api
