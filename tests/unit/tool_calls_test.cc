// ToolCallParser (api/tool_calls.h): the same answer whatever the chunking
// of the deltas, text held back only while it can still start a call, and
// every failure (invalid JSON, unknown tool, a call cut short) kept as text.
#include <gtest/gtest.h>

#include <random>

#include "api/json_scan.h"  // minify_json
#include "api/tool_calls.h"
#include "api/tool_formats.h"

namespace zl::api {
namespace {

const std::vector<std::string> kTools = {"get_weather", "get_time"};

// An answer as a readable list: "T:<text>" and "C:<name> <arguments>".
std::vector<std::string> describe(const std::vector<AnswerPart>& parts) {
  std::vector<std::string> d;
  for (const AnswerPart& p : parts) {
    if (p.kind == AnswerPart::Kind::kToolCall) {
      d.push_back("C:" + p.call.name + " " + p.call.arguments_json);
    } else if (!d.empty() && d.back().starts_with("T:")) {
      d.back() += p.text;  // pieces from separate pushes
    } else {
      d.push_back("T:" + p.text);
    }
  }
  return d;
}

struct Parsed {
  std::vector<std::string> parts;
  std::string text_before_finish;  // text emitted by push() alone
};

Parsed parse(ToolSyntax syntax, const std::vector<std::string>& chunks, std::string_view seed = {},
             ToolParserOptions options = {}) {
  ToolCallParser p(syntax, kTools, seed, options);
  std::vector<AnswerPart> all;
  std::string streamed;
  for (const std::string& c : chunks) {
    std::vector<AnswerPart> out;
    p.push(c, &out);
    for (const AnswerPart& a : out) {
      EXPECT_TRUE(a.kind == AnswerPart::Kind::kToolCall || !a.text.empty()) << "empty text piece";
      if (a.kind == AnswerPart::Kind::kText) streamed += a.text;
    }
    all.insert(all.end(), out.begin(), out.end());
  }
  p.finish(&all);
  EXPECT_EQ(p.n_calls(), std::count_if(all.begin(), all.end(), [](const AnswerPart& a) {
              return a.kind == AnswerPart::Kind::kToolCall;
            }));
  return {describe(all), streamed};
}

Parsed parse_whole(ToolSyntax syntax, const std::string& text, std::string_view seed = {},
                   ToolParserOptions options = {}) {
  return parse(syntax, {text}, seed, options);
}

std::vector<std::string> chars(const std::string& s) {
  std::vector<std::string> c;
  for (char ch : s) c.push_back(std::string(1, ch));
  return c;
}

std::vector<std::string> chunks_of(const std::string& s, size_t n) {
  std::vector<std::string> c;
  for (size_t pos = 0; pos < s.size(); pos += n) c.push_back(s.substr(pos, n));
  return c;
}

// Every chunking gives the same parts: char by char, every two-way split,
// and random chunkings.
void expect_chunking_invariant(ToolSyntax syntax, const std::string& text, const std::vector<std::string>& expected,
                               ToolParserOptions options = {}) {
  EXPECT_EQ(parse_whole(syntax, text, {}, options).parts, expected) << "whole";
  EXPECT_EQ(parse(syntax, chars(text), {}, options).parts, expected) << "char by char";
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    EXPECT_EQ(parse(syntax, {text.substr(0, cut), text.substr(cut)}, {}, options).parts, expected) << "split at " << cut;
  }
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 200; ++iter) {
    std::vector<std::string> chunks;
    for (size_t pos = 0; pos < text.size();) {
      const size_t n = std::min<size_t>(text.size() - pos, 1 + rng() % 7);
      chunks.push_back(text.substr(pos, n));
      pos += n;
    }
    EXPECT_EQ(parse(syntax, chunks, {}, options).parts, expected) << "random chunking " << iter;
  }
}

const std::string kHermesCall =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>";

const std::string kLlamaCall = R"({"name": "get_weather", "parameters": {"location": "Paris"}})";

TEST(ToolCallParser, HermesTextCallTextAtEverySplitPoint) {
  expect_chunking_invariant(ToolSyntax::kHermes, "Let me check.\n" + kHermesCall + "\nDone.",
                            {"T:Let me check.", R"(C:get_weather {"location":"Paris","unit":"c"})", "T:Done."});
}

TEST(ToolCallParser, HermesTwoCallsAndNoText) {
  const std::string two = kHermesCall + "\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}\n</tool_call>\n";
  expect_chunking_invariant(ToolSyntax::kHermes, two,
                            {R"(C:get_weather {"location":"Paris","unit":"c"})", R"(C:get_time {"tz":"CET"})"});
}

TEST(ToolCallParser, HermesInvalidJsonIsTextExactly) {
  const std::string bad = "Hi <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": }\n</tool_call> bye";
  expect_chunking_invariant(ToolSyntax::kHermes, bad, {"T:" + bad});
}

TEST(ToolCallParser, HermesUnknownToolIsTextExactly) {
  const std::string unknown = "<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>";
  expect_chunking_invariant(ToolSyntax::kHermes, unknown, {"T:" + unknown});
  // Beside a valid call: the valid one is a call, the unknown one its text.
  expect_chunking_invariant(ToolSyntax::kHermes, kHermesCall + "\n" + unknown,
                            {R"(C:get_weather {"location":"Paris","unit":"c"})", "T:" + unknown});
}

TEST(ToolCallParser, HermesArgumentsForms) {
  auto one = [](const std::string& call_json) {
    return parse_whole(ToolSyntax::kHermes, "<tool_call>" + call_json + "</tool_call>").parts;
  };
  EXPECT_EQ(one(R"({"name": "get_time"})"), std::vector<std::string>{"C:get_time {}"});
  EXPECT_EQ(one(R"({"name": "get_time", "arguments": "{\"tz\": \"UTC\"}"})"),
            std::vector<std::string>{R"(C:get_time {"tz":"UTC"})"});
  EXPECT_EQ(one(R"({"name": "get_time", "parameters": {"tz": "UTC"}})"),
            std::vector<std::string>{R"(C:get_time {"tz":"UTC"})"});
  EXPECT_EQ(one(R"({"name": "get_time", "arguments": [1]})"),
            std::vector<std::string>{R"(T:<tool_call>{"name": "get_time", "arguments": [1]}</tool_call>)"});
  EXPECT_EQ(one(R"({"name": "get_time"} {"name": "get_time"})"),
            std::vector<std::string>{R"(T:<tool_call>{"name": "get_time"} {"name": "get_time"}</tool_call>)"});
}

TEST(ToolCallParser, HermesMarkerPrefixAtTheEndIsFlushedAsText) {
  Parsed r = parse(ToolSyntax::kHermes, {"Hello", " <tool_c"});
  EXPECT_EQ(r.text_before_finish, "Hello");  // " <tool_c" held: it may still open a call
  EXPECT_EQ(r.parts, std::vector<std::string>{"T:Hello <tool_c"});
  // A call cut short (max_tokens, a stop string): all of it is text.
  const std::string cut = "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"loc";
  r = parse(ToolSyntax::kHermes, chars(cut));
  EXPECT_EQ(r.text_before_finish, "Sure.");
  EXPECT_EQ(r.parts, std::vector<std::string>{"T:" + cut});
}

TEST(ToolCallParser, HermesPlainTextIsNotHeldLonger) {
  // Only a possible marker start and the whitespace before it wait.
  Parsed r = parse(ToolSyntax::kHermes, {"a < b", " and c<d", "\n\n"});
  EXPECT_EQ(r.text_before_finish, "a < b and c<d");
  EXPECT_EQ(r.parts, std::vector<std::string>{"T:a < b and c<d\n\n"});
  expect_chunking_invariant(ToolSyntax::kHermes, "x <tool_calls> y </tool_call> <tool", {"T:x <tool_calls> y </tool_call> <tool"});
}

TEST(ToolCallParser, HermesSeedForcesTheCallStart) {
  const std::string seed = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\":";
  Parsed r = parse(ToolSyntax::kHermes, chars(" {\"location\": \"Oslo\"}}\n</tool_call>"), seed);
  EXPECT_EQ(r.parts, std::vector<std::string>{R"(C:get_weather {"location":"Oslo"})"});
  // The model did not finish the call: the text is what the model wrote,
  // without the seed (prompt markup it never wrote).
  r = parse(ToolSyntax::kHermes, {" nonsense"}, seed);
  EXPECT_EQ(r.parts, std::vector<std::string>{"T: nonsense"});
  r = parse(ToolSyntax::kHermes, {}, seed);
  EXPECT_TRUE(r.parts.empty());
  r = parse(ToolSyntax::kHermes, chars(" {\"location\": \"Oslo\"}"), seed);  // cut short
  EXPECT_EQ(r.parts, std::vector<std::string>{"T: {\"location\": \"Oslo\"}"});
  // Past the cap: the seed is not released with the body either.
  const std::string long_args = " {\"q\": \"" + std::string(ToolCallParser::kMaxCallBytes, 'a');
  r = parse(ToolSyntax::kHermes, chunks_of(long_args, 1000), seed);
  EXPECT_TRUE(r.parts == std::vector<std::string>{"T:" + long_args});
  EXPECT_TRUE(long_args.starts_with(r.text_before_finish));
  EXPECT_GE(r.text_before_finish.size(), ToolCallParser::kMaxCallBytes - 1000);
}

TEST(ToolCallParser, HermesTagInProseStreamsAtOnce) {
  // The marker not followed by `{` is prose: streamed at once, not held to the end.
  Parsed r = parse(ToolSyntax::kHermes, {"Wrap a call in ", "<tool_call>", " tags", " and the rest", " streams."});
  EXPECT_EQ(r.text_before_finish, "Wrap a call in <tool_call> tags and the rest streams.");
  r = parse(ToolSyntax::kHermes, {"Use <tool_call>", "\n\n", "x"});
  EXPECT_EQ(r.text_before_finish, "Use <tool_call>\n\nx");
  // A real call after the mention is still a call.
  expect_chunking_invariant(ToolSyntax::kHermes, "Wrap it in <tool_call> tags:\n" + kHermesCall,
                            {"T:Wrap it in <tool_call> tags:", R"(C:get_weather {"location":"Paris","unit":"c"})"});
  expect_chunking_invariant(ToolSyntax::kHermes, "a <tool_call><tool_call>{\"name\": \"get_time\"}</tool_call>",
                            {"T:a <tool_call>", "C:get_time {}"});
}

// A Hermes call whose body (between the markers) is `body_bytes` long.
std::string hermes_call_of_size(size_t body_bytes) {
  const std::string head = R"({"name": "get_time", "arguments": {"pad": ")";
  const std::string tail = "\"}}";
  return "<tool_call>" + head + std::string(body_bytes - head.size() - tail.size(), 'a') + tail + "</tool_call>";
}

TEST(ToolCallParser, HermesUnclosedCallIsReleasedPastTheCap) {
  constexpr size_t kMax = ToolCallParser::kMaxCallBytes;
  const std::string open = "Sure.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"x\": \"";
  const std::string text = open + std::string(kMax + 1000, 'a');
  Parsed r = parse(ToolSyntax::kHermes, chunks_of(text, 100));
  // The body's first kMaxCallBytes bytes went out as text before the end, the rest streams on.
  EXPECT_GE(r.text_before_finish.size(), open.size() + kMax - 100);
  EXPECT_TRUE(text.starts_with(r.text_before_finish));
  EXPECT_EQ(r.parts, std::vector<std::string>{"T:" + text});
  // The cut is the content's, not the chunking's: a body of exactly the cap
  // is a call, one byte more is text, however it arrives.
  const std::string at_cap = hermes_call_of_size(kMax);
  const std::string over_cap = hermes_call_of_size(kMax + 1);
  for (size_t n : {size_t{1}, size_t{7}, size_t{4096}, at_cap.size()}) {
    SCOPED_TRACE(n);
    const std::vector<std::string> call = parse(ToolSyntax::kHermes, chunks_of(at_cap + "\nok", n)).parts;
    ASSERT_EQ(call.size(), 2u);
    EXPECT_TRUE(call[0].starts_with("C:get_time {\"pad\":\"aaa"));
    EXPECT_EQ(call[1], "T:ok");
    EXPECT_EQ(parse(ToolSyntax::kHermes, chunks_of(over_cap + "\n" + kHermesCall, n)).parts,
              (std::vector<std::string>{"T:" + over_cap, R"(C:get_weather {"location":"Paris","unit":"c"})"}));
  }
}

TEST(ToolCallParser, Llama3CallsAreFinalWhenTheyCloseAndProseAfterThemIsText) {
  // The call is out when its object closes; what follows it is text at once
  // (the separators after the call dropped), not the call turned into text.
  Parsed r = parse(ToolSyntax::kLlama3Json, {kLlamaCall, " because", " it is", " sunny."});
  EXPECT_EQ(r.text_before_finish, "because it is sunny.");
  EXPECT_EQ(r.parts, (std::vector<std::string>{R"(C:get_weather {"location":"Paris"})", "T:because it is sunny."}));
  expect_chunking_invariant(ToolSyntax::kLlama3Json, kLlamaCall + "; and more",
                            {R"(C:get_weather {"location":"Paris"})", "T:and more"});
  {
    ToolCallParser p(ToolSyntax::kLlama3Json, kTools);
    std::vector<AnswerPart> out;
    p.push(kLlamaCall, &out);
    EXPECT_EQ(describe(out), std::vector<std::string>{R"(C:get_weather {"location":"Paris"})"});
  }
  // An object that is not a valid call is text as soon as it closes, with all after it.
  r = parse(ToolSyntax::kLlama3Json, {R"({"name": "rm", "parameters": {}})", "\n", "Done"});
  EXPECT_EQ(r.text_before_finish, "{\"name\": \"rm\", \"parameters\": {}}\nDone");
  // After a valid call: the call stays, the invalid one is text from its `{`.
  expect_chunking_invariant(ToolSyntax::kLlama3Json, kLlamaCall + "; " + R"({"name": "rm", "parameters": {}}; )" + kLlamaCall,
                            {R"(C:get_weather {"location":"Paris"})", R"(T:{"name": "rm", "parameters": {}}; )" + kLlamaCall});
  // Braces and quotes inside strings do not end the object.
  expect_chunking_invariant(ToolSyntax::kLlama3Json, R"({"name": "get_weather", "parameters": {"q": "}\"{ ;"}} x)",
                            {R"(C:get_weather {"q":"}\"{ ;"})", "T:x"});
  expect_chunking_invariant(ToolSyntax::kLlama3Json, R"({"name": "get_weather", "parameters": {"q": "}\"{ ;"}} )",
                            {R"(C:get_weather {"q":"}\"{ ;"})"});
  // An object longer than the cap is text before it ends.
  const std::string big = R"({"name": "get_weather", "parameters": {"q": ")" +
                          std::string(ToolCallParser::kMaxCallBytes, 'a') + "\"}}";
  r = parse(ToolSyntax::kLlama3Json, chunks_of(big, 1000));
  EXPECT_GE(r.text_before_finish.size(), ToolCallParser::kMaxCallBytes);
  EXPECT_EQ(r.parts, std::vector<std::string>{"T:" + big});
}

TEST(ToolCallParser, LongWhitespaceRunsAreLinear) {
  // One token at a time; quadratic rescans of the held whitespace would take
  // minutes at this count. (EXPECT_TRUE: no megabyte diffs on failure.)
  constexpr size_t kN = 100000;
  const std::string run(kN, '\n');
  auto one_by_one = [&](ToolSyntax syntax, const std::string& before, const std::string& after) {
    std::vector<std::string> c = {before};
    c.insert(c.end(), kN, "\n");
    c.push_back(after);
    return parse(syntax, c).parts;
  };
  auto text = [](const std::string& t) { return std::vector<std::string>{"T:" + t}; };
  const std::string call = "{\"name\": \"get_time\"}";
  EXPECT_TRUE(one_by_one(ToolSyntax::kHermes, "Hi", "bye") == text("Hi" + run + "bye"));
  EXPECT_TRUE(one_by_one(ToolSyntax::kHermes, "Hi", "<tool_call>" + call + "</tool_call>") ==
              (std::vector<std::string>{"T:Hi", "C:get_time {}"}));
  // Whitespace inside a call counts towards its cap: these are text.
  EXPECT_TRUE(one_by_one(ToolSyntax::kHermes, "<tool_call>", call + "</tool_call>") ==
              text("<tool_call>" + run + call + "</tool_call>"));
  EXPECT_TRUE(one_by_one(ToolSyntax::kHermes, "<tool_call>{\"name\": \"get_time\",", "}</tool_call>") ==
              text("<tool_call>{\"name\": \"get_time\"," + run + "}</tool_call>"));
  EXPECT_TRUE(one_by_one(ToolSyntax::kLlama3Json, "", "Hello") == text(run + "Hello"));
  EXPECT_TRUE(one_by_one(ToolSyntax::kLlama3Json, "", call) == std::vector<std::string>{"C:get_time {}"});
  EXPECT_TRUE(one_by_one(ToolSyntax::kLlama3Json, "{", "\"name\": \"get_time\"}") ==
              text("{" + run + "\"name\": \"get_time\"}"));
  EXPECT_TRUE(one_by_one(ToolSyntax::kLlama3Json, kLlamaCall, "") ==
              std::vector<std::string>{R"(C:get_weather {"location":"Paris"})"});
}

TEST(ToolCallParser, Llama3JsonCall) {
  expect_chunking_invariant(ToolSyntax::kLlama3Json, kLlamaCall, {R"(C:get_weather {"location":"Paris"})"});
  expect_chunking_invariant(ToolSyntax::kLlama3Json, "\n<|python_tag|>" + kLlamaCall,
                            {R"(C:get_weather {"location":"Paris"})"});
  expect_chunking_invariant(ToolSyntax::kLlama3Json, kLlamaCall + "; " + R"({"name": "get_time", "arguments": {}})",
                            {R"(C:get_weather {"location":"Paris"})", "C:get_time {}"});
  expect_chunking_invariant(ToolSyntax::kLlama3Json, "{\n  \"name\": \"get_time\"}", {"C:get_time {}"});
}

TEST(ToolCallParser, Llama3TypedCall) {
  // Llama 3.2 1B/3B: "type": "function" before the name.
  expect_chunking_invariant(ToolSyntax::kLlama3Json,
                            R"({"type": "function", "name": "get_weather", "parameters": {"location": "Paris"}})",
                            {R"(C:get_weather {"location":"Paris"})"});
  expect_chunking_invariant(ToolSyntax::kLlama3Json,
                            "<|python_tag|>{ \"type\" :\"function\",\n\"name\": \"get_time\", \"parameters\": {}}",
                            {"C:get_time {}"});
  // Another type, or a type that is not followed by the name, is text at once.
  for (const std::string& t : {std::string(R"({"type": "object", "name": "get_time"})"),
                               std::string(R"({"type": "function", "parameters": {}})")}) {
    Parsed r = parse(ToolSyntax::kLlama3Json, chars(t));
    EXPECT_EQ(r.text_before_finish, t);
    EXPECT_EQ(r.parts, std::vector<std::string>{"T:" + t});
  }
}

TEST(ToolCallParser, Llama3TextAnswersPassThrough) {
  // Decided at the first characters: streamed at once, not held to the end.
  Parsed r = parse(ToolSyntax::kLlama3Json, {"The", " weather", " is fine."});
  EXPECT_EQ(r.text_before_finish, "The weather is fine.");
  r = parse(ToolSyntax::kLlama3Json, {"{", "\"nam", "ing\": 1}"});
  EXPECT_EQ(r.text_before_finish, "{\"naming\": 1}");
  expect_chunking_invariant(ToolSyntax::kLlama3Json, "\n\nSure: {\"name\": \"get_time\"}",
                            {"T:\n\nSure: {\"name\": \"get_time\"}"});
  // A call is only a call at the start of the answer, and only when complete and known.
  for (const std::string& bad : {std::string(R"({"name": "rm", "parameters": {}})"),
                                std::string(R"({"name": "get_weather", "parameters": {"loc)"), std::string("{\"na"),
                                std::string("<|python_ta")}) {
    expect_chunking_invariant(ToolSyntax::kLlama3Json, bad, {"T:" + bad});
  }
}

TEST(ToolCallParser, Llama3Seed) {
  Parsed r = parse(ToolSyntax::kLlama3Json, chars(R"( {"location": "Rome"}})"), R"({"name": "get_weather", "parameters":)");
  EXPECT_EQ(r.parts, std::vector<std::string>{R"(C:get_weather {"location":"Rome"})"});
  // Not a valid call (arguments not an object), then prose: only the model's text.
  r = parse(ToolSyntax::kLlama3Json, {" 5}", " sorry"}, R"({"name": "get_weather", "parameters":)");
  EXPECT_EQ(r.text_before_finish, " 5} sorry");
  EXPECT_EQ(r.parts, std::vector<std::string>{"T: 5} sorry"});
}

TEST(ToolCallParser, DeepArgumentsAreCalls) {
  // Deeper than Boost.JSON's default of 32, as deep as a request may be.
  std::string deep = "1";
  for (int i = 0; i < 40; ++i) deep = "{\"a\": " + deep + "}";
  std::string compact = "1";
  for (int i = 0; i < 40; ++i) compact = "{\"a\":" + compact + "}";
  const std::string args = R"({"location": )" + deep + "}";
  const std::vector<std::string> call = {R"(C:get_weather {"location":)" + compact + "}"};
  EXPECT_EQ(parse_whole(ToolSyntax::kHermes, "<tool_call>{\"name\": \"get_weather\", \"arguments\": " + args + "}</tool_call>").parts, call);
  EXPECT_EQ(parse_whole(ToolSyntax::kLlama3Json, "{\"name\": \"get_weather\", \"parameters\": " + args + "}").parts, call);
  // Arguments as a JSON string.
  std::string quoted;
  for (char c : args) quoted += c == '"' ? std::string("\\\"") : std::string(1, c);
  EXPECT_EQ(parse_whole(ToolSyntax::kHermes, "<tool_call>{\"name\": \"get_weather\", \"arguments\": \"" + quoted + "\"}</tool_call>").parts, call);
}

// single_call: the first complete, valid call ends the answer.
const ToolParserOptions kSingle{.single_call = true};

// Feeds `text` one byte at a time; the byte after which done() first holds
// (npos: never), and the answer.
std::pair<size_t, std::vector<std::string>> done_at(ToolSyntax syntax, const std::string& text, std::string_view seed = {}) {
  ToolCallParser p(syntax, kTools, seed, kSingle);
  std::vector<AnswerPart> all;
  size_t at = std::string::npos;
  for (size_t i = 0; i < text.size(); ++i) {
    p.push(text.substr(i, 1), &all);
    if (p.done() && at == std::string::npos) at = i;
  }
  p.finish(&all);
  return {at, describe(all)};
}

TEST(ToolCallParser, SingleCallEndsTheAnswerAtTheFirstCall) {
  const std::string second = "\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}\n</tool_call>";
  const std::vector<std::string> first_only = {"T:Let me check.", R"(C:get_weather {"location":"Paris","unit":"c"})"};
  // Neither the second call nor any text after the first comes out.
  expect_chunking_invariant(ToolSyntax::kHermes, "Let me check.\n" + kHermesCall + second, first_only, kSingle);
  expect_chunking_invariant(ToolSyntax::kHermes, "Let me check.\n" + kHermesCall + "\nDone.", first_only, kSingle);
  // done() turns true with the byte that completes the first call.
  const std::string text = "Let me check.\n" + kHermesCall + second;
  auto [at, parts] = done_at(ToolSyntax::kHermes, text);
  EXPECT_EQ(at, std::string("Let me check.\n").size() + kHermesCall.size() - 1);
  EXPECT_EQ(parts, first_only);
  // Without single_call the same output has both calls, and the parser is never done.
  ToolCallParser all(ToolSyntax::kHermes, kTools);
  std::vector<AnswerPart> out;
  all.push(text, &out);
  all.finish(&out);
  EXPECT_FALSE(all.done());
  EXPECT_EQ(all.n_calls(), 2);
}

TEST(ToolCallParser, SingleCallSkipsFailedCalls) {
  // A call that is not valid is text as always, and does not count: the next valid one is the call.
  const std::string unknown = "<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>";
  expect_chunking_invariant(ToolSyntax::kHermes, unknown + "\n" + kHermesCall + "\n" + kHermesCall,
                            {"T:" + unknown, R"(C:get_weather {"location":"Paris","unit":"c"})"}, kSingle);
  // No call at all: text, and never done.
  auto [at, parts] = done_at(ToolSyntax::kHermes, "Just text <tool_c");
  EXPECT_EQ(at, std::string::npos);
  EXPECT_EQ(parts, std::vector<std::string>{"T:Just text <tool_c"});
}

TEST(ToolCallParser, SingleCallLlama3IsFinalWhenItsObjectCloses) {
  // Not held to the end of the answer: the call's closing brace ends it.
  const std::string two = kLlamaCall + "; " + R"({"name": "get_time", "parameters": {}})";
  auto [at, parts] = done_at(ToolSyntax::kLlama3Json, two);
  EXPECT_EQ(at, kLlamaCall.size() - 1);
  EXPECT_EQ(parts, std::vector<std::string>{R"(C:get_weather {"location":"Paris"})"});
  expect_chunking_invariant(ToolSyntax::kLlama3Json, two, {R"(C:get_weather {"location":"Paris"})"}, kSingle);
  expect_chunking_invariant(ToolSyntax::kLlama3Json, kLlamaCall + " and prose", {R"(C:get_weather {"location":"Paris"})"},
                            kSingle);
  // Not a call: text, as without single_call.
  expect_chunking_invariant(ToolSyntax::kLlama3Json, R"({"name": "rm", "parameters": {}}; )" + kLlamaCall,
                            {R"(T:{"name": "rm", "parameters": {}}; )" + kLlamaCall}, kSingle);
}

TEST(ToolCallParser, SingleCallWithASeed) {
  const std::string seed = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\":";
  auto [at, parts] = done_at(ToolSyntax::kHermes, " {\"location\": \"Oslo\"}}\n</tool_call>\n" + kHermesCall, seed);
  EXPECT_EQ(at, std::string(" {\"location\": \"Oslo\"}}\n</tool_call>").size() - 1);
  EXPECT_EQ(parts, std::vector<std::string>{R"(C:get_weather {"location":"Oslo"})"});
  std::tie(at, parts) = done_at(ToolSyntax::kLlama3Json, R"( {"location": "Rome"}}; )" + kLlamaCall,
                                R"({"name": "get_weather", "parameters":)");
  EXPECT_EQ(parts, std::vector<std::string>{R"(C:get_weather {"location":"Rome"})"});
}

// The fallbacks a whole output gives, by name ("unknown_tool=1 …"), fed in `chunk`-byte pieces.
std::string fallbacks_of(ToolSyntax syntax, const std::string& text, size_t chunk = 1, std::string_view seed = {}) {
  ToolCallParser p(syntax, kTools, seed);
  std::vector<AnswerPart> out;
  for (const std::string& c : chunks_of(text, chunk)) p.push(c, &out);
  p.finish(&out);
  std::string d;
  for (int r = 0; r < kNumToolFallbacks; ++r) {
    if (p.n_fallbacks()[r] == 0) continue;
    if (!d.empty()) d += ' ';
    d += std::string(tool_fallback_name(static_cast<ToolFallback>(r))) + "=" + std::to_string(p.n_fallbacks()[r]);
  }
  return d;
}

TEST(ToolCallParser, FallbacksAreCountedByReason) {
  for (size_t chunk : {size_t{1}, size_t{5}, size_t{1} << 20}) {
    SCOPED_TRACE(chunk);
    // Hermes.
    EXPECT_EQ(fallbacks_of(ToolSyntax::kHermes, "Hi " + kHermesCall + " " + kHermesCall, chunk), "");
    EXPECT_EQ(fallbacks_of(ToolSyntax::kHermes, "No call <tool_c", chunk), "");
    EXPECT_EQ(fallbacks_of(ToolSyntax::kHermes, "<tool_call>{\"name\": \"get_time\",}</tool_call>", chunk), "invalid_json=1");
    EXPECT_EQ(fallbacks_of(ToolSyntax::kHermes, "Use <tool_call> tags", chunk), "invalid_json=1");
    EXPECT_EQ(fallbacks_of(ToolSyntax::kHermes, "<tool_call>{\"name\": \"get_time\", \"arguments\": [1]}</tool_call>", chunk),
              "invalid_call=1");
    EXPECT_EQ(fallbacks_of(ToolSyntax::kHermes, "<tool_call>{\"arguments\": {}}</tool_call>", chunk), "invalid_call=1");
    EXPECT_EQ(fallbacks_of(ToolSyntax::kHermes,
                           "<tool_call>{\"name\": \"rm_rf\"}</tool_call>" + kHermesCall + "<tool_call>{\"name\": \"ls\"}</tool_call>",
                           chunk),
              "unknown_tool=2");
    EXPECT_EQ(fallbacks_of(ToolSyntax::kHermes, hermes_call_of_size(ToolCallParser::kMaxCallBytes + 1), chunk),
              "too_large=1");
    EXPECT_EQ(fallbacks_of(ToolSyntax::kHermes, "Sure <tool_call>\n{\"name\": \"get_ti", chunk), "incomplete=1");
    // A forced call the model does not finish.
    EXPECT_EQ(fallbacks_of(ToolSyntax::kHermes, "", chunk, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\":"),
              "incomplete=1");
    // Llama 3.
    EXPECT_EQ(fallbacks_of(ToolSyntax::kLlama3Json, kLlamaCall + "; " + kLlamaCall, chunk), "");
    EXPECT_EQ(fallbacks_of(ToolSyntax::kLlama3Json, "The answer is {\"name\": \"rm\"}", chunk), "");
    EXPECT_EQ(fallbacks_of(ToolSyntax::kLlama3Json, "<|python_tag|>print(1)", chunk), "invalid_json=1");
    EXPECT_EQ(fallbacks_of(ToolSyntax::kLlama3Json, R"({"name": "get_time", "parameters": {"a": }})", chunk), "invalid_json=1");
    EXPECT_EQ(fallbacks_of(ToolSyntax::kLlama3Json, R"({"name": "rm", "parameters": {}})", chunk), "unknown_tool=1");
    EXPECT_EQ(fallbacks_of(ToolSyntax::kLlama3Json, R"({"name": "get_time", "parameters": 3})", chunk), "invalid_call=1");
    EXPECT_EQ(fallbacks_of(ToolSyntax::kLlama3Json,
                           R"({"name": "get_weather", "parameters": {"q": ")" + std::string(ToolCallParser::kMaxCallBytes, 'a') + "\"}}",
                           chunk),
              "too_large=1");
    EXPECT_EQ(fallbacks_of(ToolSyntax::kLlama3Json, R"({"name": "get_weather", "parameters": {"q": )", chunk), "incomplete=1");
  }
}

// ---- Streamed arguments ----

const ToolParserOptions kStream{.stream_arguments = true};

// A streamed answer, checked and described: "T:<text>", "C:<name> <args>"
// (whole), "S:<name> <args>" (a streamed call: start, deltas joined, end),
// "A:<reason>" (a streamed call that failed; "S:<name> <args so far>" before
// it). Checks the order (deltas only inside a call, nothing after an abort)
// and that the deltas join to the call's arguments_json. *n_deltas: the deltas.
std::vector<std::string> describe_streamed(const std::vector<AnswerPart>& parts, int* n_deltas = nullptr) {
  std::vector<std::string> d;
  bool open = false, aborted = false;
  std::string args;
  for (const AnswerPart& p : parts) {
    EXPECT_FALSE(aborted) << "a part after kToolCallAbort";
    switch (p.kind) {
      case AnswerPart::Kind::kText:
        EXPECT_FALSE(open) << "text inside a call";
        if (!d.empty() && d.back().starts_with("T:")) {
          d.back() += p.text;
        } else {
          d.push_back("T:" + p.text);
        }
        break;
      case AnswerPart::Kind::kToolCall:
        EXPECT_FALSE(open);
        d.push_back("C:" + p.call.name + " " + p.call.arguments_json);
        break;
      case AnswerPart::Kind::kToolCallStart:
        EXPECT_FALSE(open);
        open = true;
        args.clear();
        d.push_back("S:" + p.call.name + " ");
        break;
      case AnswerPart::Kind::kToolCallDelta:
        EXPECT_TRUE(open);
        EXPECT_FALSE(p.text.empty());
        if (n_deltas) ++*n_deltas;
        args += p.text;
        d.back() += p.text;
        break;
      case AnswerPart::Kind::kToolCallEnd:
        EXPECT_TRUE(open);
        open = false;
        EXPECT_EQ(args, p.call.arguments_json) << "the deltas join to the arguments";
        EXPECT_EQ(d.back(), "S:" + p.call.name + " " + p.call.arguments_json);
        break;
      case AnswerPart::Kind::kToolCallAbort:
        EXPECT_TRUE(open);
        aborted = true;
        d.push_back(std::string("A:") + std::string(tool_fallback_name(p.abort_reason)));
        break;
      case AnswerPart::Kind::kThinking:  // (the thinking parser's, never the tool parser's)
        break;
    }
  }
  EXPECT_TRUE(!open || aborted) << "a call left open";
  return d;
}

std::vector<std::string> parse_streamed(ToolSyntax syntax, const std::vector<std::string>& chunks, std::string_view seed = {},
                                        ToolParserOptions options = kStream, int* n_deltas = nullptr) {
  ToolCallParser p(syntax, kTools, seed, options);
  std::vector<AnswerPart> all;
  for (const std::string& c : chunks) p.push(c, &all);
  p.finish(&all);
  std::vector<std::string> d = describe_streamed(all, n_deltas);
  EXPECT_EQ(p.aborted(), !d.empty() && d.back().starts_with("A:"));
  return d;
}

// Streamed and whole give the same answer, at every chunking: a streamed
// call's "S:" is the whole parse's "C:".
void expect_streams_like_whole(ToolSyntax syntax, const std::string& text, std::string_view seed = {}) {
  std::vector<std::string> whole = parse(syntax, {text}, seed).parts;
  auto same = [&](std::vector<std::string> streamed) {
    for (std::string& p : streamed) {
      if (p.starts_with("S:")) p[0] = 'C';
    }
    return streamed;
  };
  EXPECT_EQ(same(parse_streamed(syntax, {text}, seed)), whole) << "whole";
  EXPECT_EQ(same(parse_streamed(syntax, chars(text), seed)), whole) << "char by char";
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    EXPECT_EQ(same(parse_streamed(syntax, {text.substr(0, cut), text.substr(cut)}, seed)), whole) << "split at " << cut;
  }
  std::mt19937 rng(99);
  for (int iter = 0; iter < 100; ++iter) {
    std::vector<std::string> chunks;
    for (size_t pos = 0; pos < text.size();) {
      const size_t n = std::min<size_t>(text.size() - pos, 1 + rng() % 7);
      chunks.push_back(text.substr(pos, n));
      pos += n;
    }
    EXPECT_EQ(same(parse_streamed(syntax, chunks, seed)), whole) << "random chunking " << iter;
  }
}

TEST(ToolCallParser, StreamedArgumentsHermes) {
  // Fed byte by byte: the call opens at the arguments' `{` (the name is
  // complete and known by then), every later byte of the arguments that is
  // not whitespace goes out as it comes, and the call ends at the closing marker.
  const std::string text = "Hi.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Par is\", \"n\": [1, 2]}}\n</tool_call>\nBye.";
  ToolCallParser p(ToolSyntax::kHermes, kTools, {}, kStream);
  std::vector<AnswerPart> all;
  const size_t args_at = text.find("{\"location\"");
  std::string sent;  // the deltas so far
  for (size_t i = 0; i < text.size(); ++i) {
    std::vector<AnswerPart> out;
    p.push(text.substr(i, 1), &out);
    for (const AnswerPart& a : out) {
      if (a.kind == AnswerPart::Kind::kToolCallStart) {
        EXPECT_EQ(i, args_at);
      }
      if (a.kind == AnswerPart::Kind::kToolCallDelta) sent += a.text;
      if (a.kind == AnswerPart::Kind::kToolCallEnd) {
        EXPECT_EQ(i, text.find("</tool_call>") + 11);
      }
    }
    if (i >= args_at && i < text.find("}}\n")) {
      // Everything of the arguments so far, minified, has gone out.
      EXPECT_EQ(sent, minify_json(text.substr(args_at, i + 1 - args_at))) << i;
    }
    all.insert(all.end(), out.begin(), out.end());
  }
  p.finish(&all);
  int n_deltas = 0;
  EXPECT_EQ(describe_streamed(all, &n_deltas),
            (std::vector<std::string>{"T:Hi.", R"(S:get_weather {"location":"Par is","n":[1,2]})", "T:Bye."}));
  EXPECT_GT(n_deltas, 20);
  EXPECT_EQ(p.n_calls(), 1);
  // The same answer as without streaming, however it is chunked.
  expect_streams_like_whole(ToolSyntax::kHermes, text);
  expect_streams_like_whole(ToolSyntax::kHermes, "Let me check.\n" + kHermesCall + "\n" + kHermesCall);
}

TEST(ToolCallParser, StreamedArgumentsLlama3) {
  int n_deltas = 0;
  EXPECT_EQ(parse_streamed(ToolSyntax::kLlama3Json, chars(kLlamaCall + "; " + R"({"type": "function", "name": "get_time", "parameters": {"tz": "CET"}})"),
                           {}, kStream, &n_deltas),
            (std::vector<std::string>{R"(S:get_weather {"location":"Paris"})", R"(S:get_time {"tz":"CET"})"}));
  EXPECT_GT(n_deltas, 10);
  expect_streams_like_whole(ToolSyntax::kLlama3Json, "<|python_tag|>" + kLlamaCall + "; " + kLlamaCall + " and text");
  expect_streams_like_whole(ToolSyntax::kLlama3Json, R"({"name": "get_weather", "parameters": {"q": "}\"{ ;"}} x)");
}

TEST(ToolCallParser, StreamedArgumentsWithASeed) {
  // A forced call: the prompt wrote the name, the model writes the arguments.
  const std::string seed = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\":";
  EXPECT_EQ(parse_streamed(ToolSyntax::kHermes, chars(" {\"location\": \"Oslo\"}}\n</tool_call>"), seed),
            std::vector<std::string>{R"(S:get_weather {"location":"Oslo"})"});
  expect_streams_like_whole(ToolSyntax::kHermes, " {\"location\": \"Oslo\"}}\n</tool_call>", seed);
  expect_streams_like_whole(ToolSyntax::kLlama3Json, R"( {"location": "Rome"}})", R"({"name": "get_weather", "parameters":)");
  // tool_choice any: the model writes the name too.
  expect_streams_like_whole(ToolSyntax::kHermes, "get_time\", \"arguments\": {\"tz\": \"UTC\"}}</tool_call>",
                            "<tool_call>\n{\"name\": \"");
}

TEST(ToolCallParser, CallsThatCannotStreamComeWhole) {
  // The arguments before the name, as a JSON string, or absent: the call
  // comes whole when complete; an unknown name never opens a call.
  for (const std::string& body : {std::string(R"({"arguments": {"tz": "UTC"}, "name": "get_time"})"),
                                  std::string(R"({"name": "get_time", "arguments": "{\"tz\": \"UTC\"}"})"),
                                  std::string(R"({"name": "get_time"})"),
                                  std::string(R"({"name": "rm_rf", "arguments": {"path": "/"}})")}) {
    SCOPED_TRACE(body);
    const std::vector<std::string> streamed = parse_streamed(ToolSyntax::kHermes, chars("<tool_call>" + body + "</tool_call>"));
    ASSERT_EQ(streamed.size(), 1u);
    EXPECT_TRUE(streamed[0].starts_with("C:") || streamed[0].starts_with("T:")) << streamed[0];
    expect_streams_like_whole(ToolSyntax::kHermes, "<tool_call>" + body + "</tool_call>");
  }
}

TEST(ToolCallParser, ArgumentsAreTheModelsJsonMinified) {
  // Numbers as written (Boost.JSON would write 2.15E1, 1E-1 and Infinity), escapes kept.
  const std::string args = R"({"t": 21.5, "p": 0.1, "big": 1e400, "s": "a\u00e9\n", "n": [ 1 , {} ]})";
  const std::string minified = R"({"t":21.5,"p":0.1,"big":1e400,"s":"a\u00e9\n","n":[1,{}]})";
  EXPECT_EQ(parse_whole(ToolSyntax::kHermes, "<tool_call>{\"name\": \"get_time\", \"arguments\": " + args + "}</tool_call>").parts,
            std::vector<std::string>{"C:get_time " + minified});
  EXPECT_EQ(parse_streamed(ToolSyntax::kHermes, chars("<tool_call>{\"name\": \"get_time\", \"arguments\": " + args + "}</tool_call>")),
            std::vector<std::string>{"S:get_time " + minified});
  EXPECT_EQ(parse_whole(ToolSyntax::kLlama3Json, "{\"name\": \"get_time\", \"parameters\": " + args + "}").parts,
            std::vector<std::string>{"C:get_time " + minified});
  // A key written with escapes: Boost's reading decides, and core/json_text.h writes the
  // arguments (numbers in their shortest form, never Boost's 1.5E0).
  EXPECT_EQ(parse_whole(ToolSyntax::kHermes, R"(<tool_call>{"name": "get_time", "\u0061rguments": {"a": 1.5}}</tool_call>)").parts,
            std::vector<std::string>{R"(C:get_time {"a":1.5})"});
}

TEST(ToolCallParser, AStreamedCallThatFailsAborts) {
  struct Case {
    ToolSyntax syntax;
    std::string text;
    std::string streamed;  // the call as far as it went out
    std::string reason;
  };
  const std::string big(ToolCallParser::kMaxCallBytes, 'a');
  const std::vector<Case> cases = {
      // The JSON breaks: aborted at the bad byte, not at the closing marker.
      {ToolSyntax::kHermes, "Hi <tool_call>{\"name\": \"get_weather\", \"arguments\": {\"a\": 1,, \"b\": 2}}</tool_call> bye",
       R"(S:get_weather {"a":1,)", "invalid_json"},
      // The closing marker inside a string: the body ends there, unfinished.
      {ToolSyntax::kHermes, "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"a\": \"x</tool_call> more",
       R"(S:get_weather {"a":"x)", "invalid_json"},
      // Something after the object before the closing marker.
      {ToolSyntax::kHermes, "<tool_call>{\"name\": \"get_weather\", \"arguments\": {}} x</tool_call>", "S:get_weather {}",
       "invalid_json"},
      // The output ends inside it (max_tokens, a stop string).
      {ToolSyntax::kHermes, "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"a\": [1, ", R"(S:get_weather {"a":[1,)",
       "incomplete"},
      // What was streamed is not the call: a later "arguments" member, or a second name.
      {ToolSyntax::kHermes, "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"a\": 1}, \"arguments\": {}}</tool_call>",
       R"(S:get_weather {"a":1})", "invalid_call"},
      {ToolSyntax::kHermes, "<tool_call>{\"name\": \"get_weather\", \"arguments\": {}, \"name\": \"get_time\"}</tool_call>",
       "S:get_weather {}", "invalid_call"},
      {ToolSyntax::kLlama3Json, "{\"name\": \"get_weather\", \"parameters\": {\"a\": tru}}", R"(S:get_weather {"a":tru)",
       "invalid_json"},
      {ToolSyntax::kLlama3Json, "{\"name\": \"get_weather\", \"parameters\": {\"a\": 1", R"(S:get_weather {"a":1)", "incomplete"},
      {ToolSyntax::kLlama3Json, kLlamaCall + "; {\"name\": \"get_time\", \"parameters\": {,", "S:get_time {",
       "invalid_json"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    // Byte by byte: the call went out as far as the bad byte, then the abort.
    std::vector<std::string> d = parse_streamed(c.syntax, chars(c.text));
    ASSERT_GE(d.size(), 2u);
    EXPECT_EQ(d.back(), "A:" + c.reason);
    EXPECT_EQ(d[d.size() - 2], c.streamed);
    // The same however it is chunked: whether a call opened, and how far it
    // went, depend on the bytes before the failure only.
    for (size_t n : {size_t{2}, size_t{3}, size_t{4}, size_t{16}, c.text.size()}) {
      SCOPED_TRACE(n);
      EXPECT_EQ(parse_streamed(c.syntax, chunks_of(c.text, n)), d);
    }
    // Without streaming the same output is text (and calls) as always: the
    // abort is a streaming matter.
    for (const std::string& p : parse(c.syntax, {c.text}).parts) EXPECT_FALSE(p.starts_with("A:"));
  }
  // Past the cap.
  std::vector<std::string> d =
      parse_streamed(ToolSyntax::kHermes, chunks_of("<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"q\": \"" + big, 1000));
  EXPECT_EQ(d.back(), "A:too_large");
  d = parse_streamed(ToolSyntax::kLlama3Json, chunks_of("{\"name\": \"get_weather\", \"parameters\": {\"q\": \"" + big, 1000));
  EXPECT_EQ(d.back(), "A:too_large");
  // The abort is counted as a fallback, with its reason; nothing after it.
  ToolCallParser p(ToolSyntax::kHermes, kTools, {}, kStream);
  std::vector<AnswerPart> out;
  p.push("<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"a\": ]", &out);
  p.push(" more text </tool_call> <tool_call>", &out);
  p.finish(&out);
  EXPECT_TRUE(p.aborted());
  EXPECT_EQ(out.back().kind, AnswerPart::Kind::kToolCallAbort);
  EXPECT_EQ(p.n_fallbacks()[static_cast<int>(ToolFallback::kInvalidJson)], 1);
  EXPECT_EQ(p.n_calls(), 0);
}

TEST(ToolCallParser, StreamedSingleCall) {
  const std::string second = "<tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>";
  EXPECT_EQ(parse_streamed(ToolSyntax::kHermes, chars("Hi " + kHermesCall + second + " bye"), {},
                           ToolParserOptions{.single_call = true, .stream_arguments = true}),
            (std::vector<std::string>{"T:Hi", R"(S:get_weather {"location":"Paris","unit":"c"})"}));
}

// fuzz_tool_calls (tests/fuzz/fuzz_tool_calls/regressions/marker_after_streamed_call):
// an opening marker at the end of the output, after a streamed call had
// ended, aborted the answer as if that call were still open. It is text, as
// without streaming.
TEST(ToolCallParser, AMarkerAfterAStreamedCallOpensNothing) {
  const std::string text = "Hi " + kHermesCall + "<tool_call>";
  EXPECT_EQ(parse_streamed(ToolSyntax::kHermes, {text}),
            (std::vector<std::string>{"T:Hi", R"(S:get_weather {"location":"Paris","unit":"c"})", "T:<tool_call>"}));
  expect_streams_like_whole(ToolSyntax::kHermes, text);
  expect_streams_like_whole(ToolSyntax::kHermes, text + "\n ");
}

TEST(ToolCallParser, NoSyntaxPassesEverythingThrough) {
  Parsed r = parse(ToolSyntax::kNone, {"x ", kHermesCall});
  EXPECT_EQ(r.text_before_finish, "x " + kHermesCall);
  EXPECT_EQ(r.parts, std::vector<std::string>{"T:x " + kHermesCall});
}


// ---- block syntaxes (api/tool_formats.h), each on its family's exact format ----

const std::string kOslo = R"(C:get_weather {"location":"Oslo"})";

TEST(ToolCallParserBlocks, MistralJsonArray) {
  expect_chunking_invariant(ToolSyntax::kMistral,
                            R"(Sure. [TOOL_CALLS][{"name": "get_weather", "arguments": {"location": "Oslo"}}, {"name": "get_time", "arguments": {}}])",
                            {"T:Sure.", kOslo, "C:get_time {}"});
  // Numbers keep their written form (Boost.JSON alone would give 7.78E0 and 2E0).
  expect_chunking_invariant(ToolSyntax::kMistral,
                            R"([TOOL_CALLS][{"name": "get_time", "arguments": {"x": 7.78, "y": 2.0, "n": 3}}])",
                            {R"(C:get_time {"x":7.78,"y":2.0,"n":3})"});
}

TEST(ToolCallParserBlocks, MistralNameArgs) {
  expect_chunking_invariant(ToolSyntax::kMistral,
                            R"([TOOL_CALLS]get_weather[ARGS]{"location": "Oslo"}[TOOL_CALLS]get_time[CALL_ID]a1b2c3d4e[ARGS]{})",
                            {kOslo, "C:get_time {}"});
  // Not a call: text, as written.
  expect_chunking_invariant(ToolSyntax::kMistral, "[TOOL_CALLS]nope[ARGS]{} end",
                            {"T:[TOOL_CALLS]nope[ARGS]{} end"});
  expect_chunking_invariant(ToolSyntax::kMistral, "[TOOL_CALLS] get_weather is cut", {"T:[TOOL_CALLS] get_weather is cut"});
  expect_chunking_invariant(ToolSyntax::kMistral, "A [TOOL_CALL] mention", {"T:A [TOOL_CALL] mention"});
}

TEST(ToolCallParserBlocks, Llama3Pythonic) {
  expect_chunking_invariant(ToolSyntax::kLlama3Pythonic,
                            R"( [get_weather(location="Oslo"), get_time(tz='UTC', n=-1.5, ok=True, x=None, l=[1, {'a': "b"}])])",
                            {kOslo, R"(C:get_time {"tz":"UTC","n":-1.5,"ok":true,"x":null,"l":[1,{"a":"b"}]})"});
  expect_chunking_invariant(ToolSyntax::kLlama3Pythonic, "<|python_start|>[get_weather(location=\"Oslo\")]",
                            {kOslo});
  // Only at the start of the answer; a list that is not calls is text.
  expect_chunking_invariant(ToolSyntax::kLlama3Pythonic, "It is [get_weather(location=\"Oslo\")]",
                            {"T:It is [get_weather(location=\"Oslo\")]"});
  expect_chunking_invariant(ToolSyntax::kLlama3Pythonic, "[1, 2] are numbers", {"T:[1, 2] are numbers"});
  expect_chunking_invariant(ToolSyntax::kLlama3Pythonic, "[get_weather(location=\"Oslo\"", {"T:[get_weather(location=\"Oslo\""});
}

TEST(ToolCallParserBlocks, Qwen3CoderXml) {
  expect_chunking_invariant(ToolSyntax::kQwen3CoderXml,
                            "Checking.\n<tool_call>\n<function=get_weather>\n<parameter=location>\nOslo\n</parameter>\n"
                            "<parameter=days>\n3\n</parameter>\n<parameter=opts>\n{\"unit\": \"c\"}\n</parameter>\n</function>\n</tool_call>",
                            {"T:Checking.", R"(C:get_weather {"location":"Oslo","days":3,"opts":{"unit":"c"}})"});
  expect_chunking_invariant(ToolSyntax::kQwen3CoderXml, "<tool_call>\n{\"name\": \"get_time\"}\n</tool_call>",
                            {"T:<tool_call>\n{\"name\": \"get_time\"}\n</tool_call>"});
  // With the tools' schemas: string parameters keep their text ("42", "null", an enum's "2"), others read as JSON.
  const std::vector<ToolDef> tools = {
      {"get_weather", R"({"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{)"
                      R"("location":{"type":"string"},"days":{"type":"integer"},"unit":{"enum":["1","2"]},)"
                      R"("note":{"type":["string","null"]},"opts":{"type":"object"}}}}})"}};
  ToolParserOptions options;
  options.string_params = std::make_shared<const tool_formats::StringParams>(tool_formats::string_params_of(tools));
  ASSERT_EQ(options.string_params->size(), 1u);
  EXPECT_EQ(options.string_params->at("get_weather"), (std::set<std::string, std::less<>>{"location", "unit"}));
  expect_chunking_invariant(ToolSyntax::kQwen3CoderXml,
                            "<tool_call>\n<function=get_weather>\n<parameter=location>\n42\n</parameter>\n"
                            "<parameter=days>\n3\n</parameter>\n<parameter=unit>\n2\n</parameter>\n"
                            "<parameter=note>\nnull\n</parameter>\n<parameter=opts>\n{\"a\": 1.5}\n</parameter>\n</function>\n</tool_call>",
                            {R"(C:get_weather {"location":"42","days":3,"unit":"2","note":null,"opts":{"a":1.5}})"}, options);
}

TEST(ToolCallParserBlocks, Harmony) {
  expect_chunking_invariant(ToolSyntax::kHarmony,
                            R"(<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"location": "Oslo"}<|call|>)",
                            {kOslo});
  // <|call|> is a stop token: the output may end without it.
  expect_chunking_invariant(ToolSyntax::kHarmony,
                            R"(<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"location": "Oslo"})",
                            {kOslo});
  expect_chunking_invariant(ToolSyntax::kHarmony, R"(<|channel|>commentary to=functions.get_weather<|message|>{"location")",
                            {R"(T:<|channel|>commentary to=functions.get_weather<|message|>{"location")"});
}

TEST(ToolCallParserBlocks, DeepSeek) {
  expect_chunking_invariant(ToolSyntax::kDeepSeek,
                            "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"location\": \"Oslo\"}\n```"
                            "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
                            {kOslo});
  expect_chunking_invariant(ToolSyntax::kDeepSeek,
                            "Let me see.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"location\": \"Oslo\"}"
                            "<｜tool▁call▁end｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
                            {"T:Let me see.", kOslo, "C:get_time {}"});
}

TEST(ToolCallParserBlocks, Granite) {
  expect_chunking_invariant(ToolSyntax::kGranite, R"(<|tool_call|>[{"name": "get_weather", "arguments": {"location": "Oslo"}}])",
                            {kOslo});
  expect_chunking_invariant(ToolSyntax::kGranite, R"(<|tool_call|>[{"name": "launch", "arguments": {}}])",
                            {R"(T:<|tool_call|>[{"name": "launch", "arguments": {}}])"});
}

TEST(ToolCallParserBlocks, Phi) {
  expect_chunking_invariant(ToolSyntax::kPhi,
                            R"(functools[{"name": "get_weather", "arguments": {"location": "Oslo"}}, {"name": "get_time", "arguments": "{}"}])",
                            {kOslo, "C:get_time {}"});
  expect_chunking_invariant(ToolSyntax::kPhi, "import functools is Python", {"T:import functools is Python"});
}

TEST(ToolCallParserBlocks, SingleCallAndStreamingModes) {
  const std::string text = R"([TOOL_CALLS][{"name": "get_weather", "arguments": {"location": "Oslo"}}, {"name": "get_time", "arguments": {}}])";
  expect_chunking_invariant(ToolSyntax::kMistral, text, {kOslo}, {.single_call = true});
  expect_chunking_invariant(ToolSyntax::kMistral, text, {kOslo, "C:get_time {}"}, {.stream_arguments = true});
}

TEST(ToolFormats, PythonLiterals) {
  EXPECT_EQ(tool_formats::python_literal_to_json(R"({'a': [True, None, "x\n", 'it\'s'], "b": (1, 2)})"),
            R"({"a":[true,null,"x\n","it's"],"b":[1,2]})");
  EXPECT_EQ(tool_formats::python_literal_to_json("foo"), std::nullopt);
  EXPECT_EQ(tool_formats::python_literal_to_json("'open"), std::nullopt);
}

}  // namespace
}  // namespace zl::api
