// The grammar module: JSON Schema compilation (accepted / refused schemas),
// the matcher on hand-written texts, integer ranges and patterns against
// independent references, token masks against a brute-force scan, and random
// generation through the masks validated by an independent validator
// (tests/support/schema_validator.h).
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <random>
#include <regex>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/regex.h"
#include "grammar/token_trie.h"
#include "support/ambiguous_grammar.h"
#include "support/schema_validator.h"

namespace zl::grammar {
namespace {

namespace json = boost::json;

std::shared_ptr<const Grammar> compile(std::string_view schema) {
  auto g = compile_json_schema(schema);
  EXPECT_TRUE(g.ok()) << schema << ": " << g.status().to_string();
  return g.ok() ? *g : nullptr;
}

bool matches(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  Matcher m(g);
  return m.advance(text) && m.accepting();
}

bool viable(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  Matcher m(g);
  return m.advance(text);
}

TEST(GrammarSchemaTest, ObjectWithRequiredAndOptionalProperties) {
  auto g = compile(R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},
      "c":{"type":"boolean"}},"required":["a","c"],"additionalProperties":false})");
  EXPECT_TRUE(matches(g, R"({"a":1,"c":true})"));
  EXPECT_TRUE(matches(g, R"({"a": -12, "b": "x\"y", "c": false})"));
  EXPECT_TRUE(matches(g, " {\n  \"a\": 0,\n  \"c\": true\n}"));
  EXPECT_FALSE(matches(g, R"({"a":1})"));             // c missing
  EXPECT_FALSE(matches(g, R"({"c":true,"a":1})"));    // schema order
  EXPECT_FALSE(matches(g, R"({"a":1,"c":true,"d":1})"));
  EXPECT_FALSE(matches(g, R"({"a":01,"c":true})"));
  EXPECT_FALSE(matches(g, R"({"a":1,"c":true} )"));   // nothing after the value
  EXPECT_TRUE(viable(g, R"({"a":1,"b":"unfinished)"));
}

TEST(GrammarSchemaTest, EnumConstAnyOfRefArrays) {
  auto g = compile(R"({"$defs":{"node":{"type":"object","properties":{"v":{"enum":["x",1,null]},
      "kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["v"]}},
      "anyOf":[{"$ref":"#/$defs/node"},{"const":"leaf"}]})");
  EXPECT_TRUE(matches(g, R"("leaf")"));
  EXPECT_TRUE(matches(g, R"({"v":"x"})"));
  EXPECT_TRUE(matches(g, R"({"v":1,"kids":[{"v":null},{"v":"x","kids":[]}]})"));
  EXPECT_FALSE(matches(g, R"({"v":2})"));
  EXPECT_FALSE(matches(g, R"({"v":1,"kids":[{"v":null},{"v":null},{"v":null}]})"));
  EXPECT_FALSE(matches(g, R"("leaves")"));
}

TEST(GrammarSchemaTest, StringLengthsCountCharacters) {
  auto g = compile(R"({"type":"string","minLength":2,"maxLength":3})");
  EXPECT_FALSE(matches(g, R"("a")"));
  EXPECT_TRUE(matches(g, R"("ab")"));
  EXPECT_TRUE(matches(g, "\"\xc3\xa9\xe2\x82\xac\\n\""));  // é € \n: 3 characters
  EXPECT_FALSE(matches(g, R"("abcd")"));
  EXPECT_FALSE(matches(g, "\"a\xc3\""));       // a broken UTF-8 sequence
  EXPECT_FALSE(matches(g, "\"a\\ud800b\""));   // a lone surrogate escape
}

TEST(GrammarSchemaTest, ArraysMinMaxItems) {
  auto g = compile(R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})");
  EXPECT_FALSE(matches(g, "[]"));
  EXPECT_TRUE(matches(g, "[1]"));
  EXPECT_TRUE(matches(g, "[1, 2,3]"));
  EXPECT_FALSE(matches(g, "[1,2,3,4]"));
  EXPECT_FALSE(matches(g, "[1,]"));
}

TEST(GrammarSchemaTest, TypeListsAndUntypedValues) {
  auto g = compile(R"({"type":["string","null"]})");
  EXPECT_TRUE(matches(g, "null"));
  EXPECT_TRUE(matches(g, R"("s")"));
  EXPECT_FALSE(matches(g, "1"));
  auto any = compile("{}");
  EXPECT_TRUE(matches(any, R"([1.5e3, {"k": [true, null]}, "x"])"));
  EXPECT_FALSE(matches(any, "[1,]"));
  auto obj = json_object_grammar();
  EXPECT_TRUE(matches(obj, R"({"k": {"n": -0.5}})"));
  EXPECT_FALSE(matches(obj, "[]"));
  EXPECT_FALSE(matches(obj, R"("s")"));
}

TEST(GrammarSchemaTest, IntegerRangesMatchArithmetic) {
  const std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>> cases = {
      {R"({"type":"integer","minimum":0,"maximum":100})", {0, 100}},
      {R"({"type":"integer","minimum":-37,"maximum":1203})", {-37, 1203}},
      {R"({"type":"integer","minimum":15,"maximum":15})", {15, 15}},
      {R"({"type":"integer","minimum":-1000,"maximum":-10})", {-1000, -10}},
      {R"({"type":"integer","exclusiveMinimum":9,"exclusiveMaximum":99})", {10, 98}},
      {R"({"type":"integer","minimum":7})", {7, INT64_MAX}},
      {R"({"type":"integer","maximum":-3})", {INT64_MIN, -3}},
      {R"({"type":"integer","minimum":199,"maximum":1000})", {199, 1000}},
  };
  for (const auto& [schema, range] : cases) {
    auto g = compile(schema);
    for (int64_t x = -1300; x <= 1300; ++x) {
      const bool in = x >= range.first && x <= range.second;
      EXPECT_EQ(matches(g, std::to_string(x)), in) << schema << " " << x;
    }
    EXPECT_FALSE(matches(g, "-0" + std::string(range.first <= 0 && range.second >= 0 ? "1" : "")));
  }
}

TEST(GrammarSchemaTest, PatternsMatchStdRegex) {
  const std::vector<std::string> patterns = {"^[a-z]{2,4}-\\d+$", "(ab|cd)*e?", "\\w+@\\w+\\.com",
                                             "[^0-9]x", "a.c", "\\(\\d{3}\\) \\d{3}-\\d{4}", "[A-F0-9]{4}"};
  const std::vector<std::string> samples = {"ab-1",  "abcde-12", "abcd-123", "", "e", "abcde", "cdab", "ab",
                                            "x@y.com", "x@y.org", "ax", "1x", "abc", "a\nc", "a\"c",
                                            "(555) 123-4567", "555-1234", "BEEF", "beef", "A0F9"};
  for (const std::string& p : patterns) {
    auto g = compile(json::serialize(json::object{{"type", "string"}, {"pattern", p}}));
    std::string core = p;
    if (core.front() == '^') core.erase(0, 1);
    if (core.back() == '$') core.pop_back();
    const std::regex re(core);
    for (const std::string& s : samples) {
      EXPECT_EQ(matches(g, json_quote(s)), std::regex_match(s, re)) << p << " on " << s;
    }
  }
}

// guided_regex: the text itself matches (no JSON escaping: quotes and backslashes plain),
// as std::regex says; control characters other than \t \n \r are never generated.
TEST(GrammarTextTest, TextRegexMatchesStdRegexUnescaped) {
  const std::vector<std::string> patterns = {"^[a-z]{2,4}-\\d+$", "(ab|cd)*e?", "a.c", "say \"(hi|bye)\"",
                                             "[\\\\/]+", "(yes|no)\n?"};
  const std::vector<std::string> samples = {"ab-1", "abcd-123", "", "e", "abcde", "cdab", "a\"c", "abc", "a\nc",
                                            "say \"hi\"", "say \\\"hi\\\"", "\\/\\", "yes", "no\n", "yes\\n"};
  for (const std::string& p : patterns) {
    auto g = compile_text_regex(p);
    ASSERT_TRUE(g.ok()) << p << ": " << g.status().to_string();
    std::string core = p;
    if (core.front() == '^') core.erase(0, 1);
    if (core.back() == '$') core.pop_back();
    const std::regex re(core);
    for (const std::string& s : samples) EXPECT_EQ(matches(*g, s), std::regex_match(s, re)) << p << " on " << s;
  }
  auto ctl = compile_text_regex("a.b");
  ASSERT_TRUE(ctl.ok());
  EXPECT_TRUE(matches(*ctl, "a\tb"));
  EXPECT_FALSE(matches(*ctl, std::string("a\x01b")));
  EXPECT_EQ(compile_text_regex("\\x01").status().reason(), ErrorReason::kUnsupportedValue);
  EXPECT_EQ(compile_text_regex("(a").status().reason(), ErrorReason::kInvalidValue);
}

// Nested counted repetitions multiply: in (x{0,1000}){0,1000} each x may sit in a million
// places, every one a parse stack that the matcher carries through each step on the engine
// thread (seconds a token for every sequence). Their counts multiplied are bounded by
// kMaxRepeat, as one repetition's count is; a loop (* +) counts once.
TEST(GrammarTextTest, NestedRepetitionsAreBoundedInAll) {
  for (const std::string p : {"(x{0,1000}){0,1000}", "(x{0,10}){0,101}", "((a{10}){10}){11}",
                              "((a{1000}){1000}){1000}", "(?:\\d{1000}|b){2}", "(x{2,}){501}", "((x?){100}y){11}"}) {
    auto g = compile_text_regex(p);
    ASSERT_FALSE(g.ok()) << p;
    EXPECT_EQ(g.status().reason(), ErrorReason::kUnsupportedValue) << p;
    EXPECT_NE(g.status().message().find("nested repetitions"), std::string::npos) << g.status().message();
    auto schema = compile_json_schema(json::serialize(json::object{{"type", "string"}, {"pattern", p}}));
    ASSERT_FALSE(schema.ok()) << p;
    EXPECT_EQ(schema.status().reason(), ErrorReason::kUnsupportedValue) << p;
  }
  for (const std::string p : {"(\\d{1,3}\\.){3}\\d{1,3}", "(x{0,10}){0,100}", "((a?){10}){100}", "(ab{2,5})*c{1000}",
                              "(a{1000})*", "(a{1000}|b{1000})+", "a{1000}b{1000}", "((x?){100}y){10}"}) {
    EXPECT_TRUE(compile_text_regex(p).ok()) << p;
  }
}

// A repetition of something that may be empty — (x?){1000}, ((ab?){0,2}){2},
// (x*){3} — is compiled as one repetition (GrammarBuilder::repeat): the same
// texts, checked here against std::regex on every string up to 7 characters
// over the pattern's letters and one more; and a run of x's leaves one or two
// parse stacks, not one per way of splitting it between the copies (~1000
// for (x?){1000}, each step then merging ~10^6 successors).
TEST(GrammarTextTest, RepetitionsOfRepetitionsKeepTheirTexts) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"(x?){5}", "xy"},        {"(x?){2,4}y", "xy"},      {"((ab?){0,2}){2}", "abc"}, {"(x*){3}", "xy"},
      {"(x{0,2}){0,3}", "xy"},  {"(x?){0}z", "xz"},        {"(x*){0}z", "xz"},         {"((x?){0,0}){3}y", "xy"},
      {"((x{0,0})*){2}y", "xy"}, {"(x?)+y", "xy"},         {"(x?){3,}y", "xy"},        {"((x|yz)?){3}", "xyz"},
      {"(x?){2}(x?){2}", "xy"}, {"(?:x{1,2}){0,2}y", "xy"}};
  for (const auto& [pattern, letters] : cases) {
    auto g = compile_text_regex(pattern);
    ASSERT_TRUE(g.ok()) << pattern << ": " << g.status().to_string();
    std::string core = pattern;
    if (core.rfind("(?:", 0) == 0) core = "(" + core.substr(3);
    const std::regex re(core);
    std::vector<std::string> texts = {""};
    for (size_t i = 0; i < texts.size(); ++i) {
      const std::string t = texts[i];
      EXPECT_EQ(matches(*g, t), std::regex_match(t, re)) << pattern << " on \"" << t << "\"";
      if (t.size() < 7) {
        for (char c : letters) texts.push_back(t + c);
      }
    }
  }
  for (const std::string p : {"(x?){1000}", "((x?){30}){30}", "([a-z]?){1000}", "(x*){1000}"}) {
    auto g = compile_text_regex(p);
    ASSERT_TRUE(g.ok()) << p;
    Matcher m(*g);
    for (int i = 0; i < 900; ++i) {
      ASSERT_TRUE(m.advance('x')) << p << " at " << i;
      ASSERT_LE(m.state().size(), 2u) << p << " at " << i;
    }
    EXPECT_TRUE(m.accepting()) << p;
  }
}

// guided_choice: exactly one of the strings, whole.
TEST(GrammarTextTest, TextChoiceIsExactlyOneOfTheStrings) {
  const std::vector<std::string> choices = {"yes", "no", "yes, \"maybe\"", "n\u00e9"};
  auto g = compile_text_choice(choices);
  ASSERT_TRUE(g.ok());
  for (const std::string& c : choices) EXPECT_TRUE(matches(*g, c)) << c;
  for (const std::string s : {"", "ye", "yess", "no ", "yes, ", "n\u00e9!"}) EXPECT_FALSE(matches(*g, s)) << s;
  EXPECT_TRUE(viable(*g, "ye"));
  EXPECT_EQ(compile_text_choice({}).status().reason(), ErrorReason::kInvalidValue);
  const std::vector<std::string> with_empty = {"a", ""};
  EXPECT_EQ(compile_text_choice(with_empty).status().reason(), ErrorReason::kInvalidValue);
  const std::vector<std::string> huge(17, std::string(4096, 'x'));
  EXPECT_EQ(compile_text_choice(huge).status().reason(), ErrorReason::kUnsupportedValue);
}

// An expansion follows any number of rules before the first byte: a thousand
// rules in a row that may match nothing, a chain of 3000 rules entered at
// once (it stopped at 1000 nested rules once, leaving no way to the end).
TEST(GrammarMatcherTest, LongChainsBeforeTheFirstByte) {
  auto runs = compile_text_regex("(a?){1000}x");
  ASSERT_TRUE(runs.ok()) << runs.status().to_string();
  EXPECT_TRUE(matches(*runs, "x"));
  EXPECT_TRUE(matches(*runs, "aax"));
  EXPECT_FALSE(matches(*runs, ""));
  GrammarBuilder b;
  uint32_t inner = b.rule({b.literal("a")});
  for (int i = 0; i < 3000; ++i) {
    GrammarBuilder::Seq s{b.ref(inner)};
    b.append_literal(s, "b");
    inner = b.rule({std::move(s)});
  }
  auto built = b.build(inner);
  ASSERT_TRUE(built.ok());
  const auto chain = std::make_shared<const Grammar>(std::move(built).value());
  EXPECT_TRUE(matches(chain, "a" + std::string(3000, 'b')));
  EXPECT_FALSE(matches(chain, "ab"));
}

// Every character a pattern names has a JSON spelling: DEL raw, control
// characters escaped (a set with only those once compiled to a dead end:
// fuzz_json_schema). A class that matches nothing is refused, not compiled.
TEST(GrammarSchemaTest, PatternsOfControlCharactersAndDel) {
  auto del = compile("{\"type\":\"string\",\"pattern\":\"\x7f[-{ca]4}$\"}");
  EXPECT_TRUE(matches(del, "\"\x7f-4}\""));
  EXPECT_TRUE(matches(del, "\"\x7f" "c4}\""));
  EXPECT_FALSE(matches(del, "\"\x7f" "b4}\""));
  auto ctl = compile(R"({"type":"string","pattern":"^[\\x01\\x08\\x1f]\\t$"})");
  EXPECT_TRUE(matches(ctl, R"("\u0001\t")"));
  EXPECT_TRUE(matches(ctl, R"("\u0008\t")"));
  EXPECT_TRUE(matches(ctl, R"("\u001f\t")"));
  EXPECT_FALSE(matches(ctl, R"("\u0002\t")"));
  auto dot = compile(R"({"type":"string","pattern":"^a.c$"})");
  EXPECT_TRUE(matches(dot, R"("a\u0000c")"));
  EXPECT_TRUE(matches(dot, R"("a\u0010c")"));
  EXPECT_FALSE(matches(dot, R"("a\nc")"));
  auto space = compile(R"({"type":"string","pattern":"^[^\\S]$"})");  // negating \S: whitespace only
  EXPECT_TRUE(matches(space, R"(" ")"));
  EXPECT_FALSE(matches(space, "\"\xc3\xa9\""));
  EXPECT_FALSE(matches(space, R"("x")"));
  auto none = compile_json_schema(R"({"type":"string","pattern":"a[^\\s\\S]"})");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().reason(), ErrorReason::kUnsupportedValue);
  EXPECT_NE(none.status().message().find("matches no character"), std::string::npos) << none.status().message();
}

// const / enum values are still held to the schema's other keywords (a
// forced call once returned {"t":0.1} under {"minimum":0.5,"enum":[0.1]}).
TEST(GrammarSchemaTest, EnumValuesMeetTheOtherKeywords) {
  auto num = compile(R"({"type":"number","minimum":0.5,"enum":[0.1,0.7,2]})");
  EXPECT_FALSE(matches(num, "0.1"));
  EXPECT_TRUE(matches(num, "0.7"));
  EXPECT_TRUE(matches(num, "2"));
  auto excl = compile(R"({"exclusiveMaximum":2,"enum":[1,2,"x"]})");
  EXPECT_TRUE(matches(excl, "1"));
  EXPECT_FALSE(matches(excl, "2"));
  EXPECT_TRUE(matches(excl, R"("x")"));  // bounds apply to numbers only
  auto str = compile(R"({"type":"string","maxLength":2,"pattern":"^[a-zé€]+$","enum":["ab","abc","é€","A"]})");
  EXPECT_TRUE(matches(str, R"("ab")"));
  EXPECT_TRUE(matches(str, "\"\xc3\xa9\xe2\x82\xac\""));  // two code points
  EXPECT_FALSE(matches(str, R"("abc")"));
  EXPECT_FALSE(matches(str, R"("A")"));
  auto arr = compile(R"({"maxItems":1,"enum":[[1],[1,2]]})");
  EXPECT_TRUE(matches(arr, "[1]"));
  EXPECT_FALSE(matches(arr, "[1,2]"));
  for (const char* schema : {R"({"type":"integer","minimum":5,"enum":[1]})", R"({"type":"number","maximum":0.5,"const":7.78})",
                             R"({"type":"string","minLength":3,"const":"ab"})"}) {
    auto g = compile_json_schema(schema);
    ASSERT_FALSE(g.ok()) << schema;
    EXPECT_EQ(g.status().reason(), ErrorReason::kInvalidValue) << schema;
    EXPECT_NE(g.status().message().find("no value satisfies"), std::string::npos) << g.status().message();
  }
  auto huge = compile_json_schema(R"({"type":"number","enum":[1e400]})");  // no JSON text would read back as it
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().reason(), ErrorReason::kInvalidValue);
  auto shaped = compile_json_schema(R"({"enum":[{"a":1}],"properties":{"a":{"type":"string"}}})");
  ASSERT_FALSE(shaped.ok());
  EXPECT_EQ(shaped.status().reason(), ErrorReason::kUnsupportedValue);
}

TEST(GrammarSchemaTest, UnsupportedKeywordsAreNamed) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"type":"string","format":"date-time"})", "'format'"},
      {R"({"not":{"type":"string"}})", "'not'"},
      {R"({"type":"object","patternProperties":{"^x":{}}})", "'patternProperties'"},
      {R"({"type":"array","uniqueItems":true})", "'uniqueItems'"},
      {R"({"type":"number","minimum":0.5})", "'minimum'"},
      {R"({"type":"integer","multipleOf":3})", "'multipleOf'"},
      {R"({"properties":{"a":{"if":{}}}})", "#/properties/a"},
      {R"({"type":"string","pattern":"(a)\\1"})", "back-references"},
      {R"({"type":"string","pattern":"(?=a)b"})", "look-arounds"},
      {R"({"allOf":[{"type":"string"},{"maxLength":3}]})", "'allOf'"},
  };
  for (const auto& [schema, named] : cases) {
    auto g = compile_json_schema(schema);
    ASSERT_FALSE(g.ok()) << schema;
    EXPECT_EQ(g.status().reason(), ErrorReason::kUnsupportedValue) << schema;
    EXPECT_NE(g.status().message().find(named), std::string::npos) << g.status().message();
  }
}

TEST(GrammarSchemaTest, MalformedSchemasAreInvalid) {
  for (const char* schema : {R"({"$ref":"#/$defs/missing"})", R"({"type":"array","minItems":3,"maxItems":2})",
                             R"({"type":"integer","minimum":5,"maximum":4})", R"({"type":"strin"})",
                             R"({"enum":[]})", R"({"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})",
                             "[1]", "{", R"({"type":"string","maxLength":-1})",
                             // enum/const values must have the schema's type; $ref cycles read nothing
                             R"({"type":"integer","enum":["a"]})", R"({"type":"string","enum":[1,2]})",
                             R"({"type":"integer","const":"x"})",
                             R"({"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})"}) {
    auto g = compile_json_schema(schema);
    ASSERT_FALSE(g.ok()) << schema;
    EXPECT_EQ(g.status().reason(), ErrorReason::kInvalidValue) << schema << ": " << g.status().message();
  }
}

TEST(GrammarSchemaTest, HugeBoundsAreRefusedNotAllocated) {
  auto g = compile_json_schema(R"({"type":"string","minLength":100000000})");
  ASSERT_FALSE(g.ok());
  auto h = compile_json_schema(R"({"type":"array","maxItems":900000000000})");
  ASSERT_FALSE(h.ok());
}

// A small vocabulary: every byte, plus multi-byte tokens JSON output likes.
std::vector<std::string> test_vocab() {
  std::vector<std::string> v;
  v.push_back("");  // a control token (never allowed by the walk)
  for (int b = 0; b < 256; ++b) v.push_back(std::string(1, static_cast<char>(b)));
  for (const char* t : {"{\"", "\":", "\": ", "\",", "\", \"", "}", "},", "\"}", "true", "false", "null", "name",
                        " \"", "12", "0.", "[{", "}]", "é", "hello", "\\n", "\\u00e9", "ab\"", "\n  "}) {
    v.push_back(t);
  }
  return v;
}

TEST(GrammarMaskTest, TrieWalkEqualsBruteForce) {
  const std::vector<std::string> vocab = test_vocab();
  TokenTrie trie(vocab);
  auto g = compile(R"({"type":"object","properties":{"name":{"type":"string","maxLength":4},
      "n":{"type":"integer","minimum":0,"maximum":50}},"required":["name"]})");
  Matcher m(g);
  std::vector<uint64_t> bits((vocab.size() + 63) / 64);
  for (std::string_view prefix : {"", "{", "{\"", "{\"name\": \"ab", "{\"name\":\"abcd\"", "{\"name\":\"a\",\"n\":4"}) {
    m.reset();
    ASSERT_TRUE(m.advance(prefix)) << prefix;
    trie.fill_allowed(m, bits);
    for (size_t id = 0; id < vocab.size(); ++id) {
      Matcher probe = m;
      const bool expect = !vocab[id].empty() && probe.advance(vocab[id]);
      EXPECT_EQ(((bits[id >> 6] >> (id & 63)) & 1) != 0, expect) << "prefix " << prefix << " token " << vocab[id];
    }
  }
}

// A grammar ambiguous in a way that does not fold (1000 optional letters
// written out one by one, a bounded client grammar): after any letter ~1000
// parse stacks, each with ~1000 successors a byte, over a vocabulary of all
// words of 1 to 3 letters. Its mask walk stops at TokenMasker::kMaxMaskWork
// (minutes of the engine thread without the bound) and says so; the tokens
// it found are all ones the grammar allows, and the next mask of the same
// state is the cached one.
TEST(GrammarMaskTest, AmbiguousGrammarStopsAtTheWorkBound) {
  auto g = compile_gbnf(zl::test::optional_letters_gbnf(1000));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const std::vector<std::string> vocab = zl::test::short_words_vocab();
  TokenTrie trie(vocab);
  Matcher m(*g);
  ASSERT_TRUE(m.advance('q'));
  ASSERT_GT(m.state().size(), 500u);
  TokenMasker masker(trie);
  const std::span<const uint64_t> bits = masker.allowed(m);
  EXPECT_TRUE(masker.truncated());
  EXPECT_EQ(masker.n_walks(), 1);
  EXPECT_LE(masker.max_walk_work(), TokenMasker::kMaxMaskWork + 4 * Matcher::kMaxStacks * Matcher::kMaxStacks);
  size_t n_allowed = 0;
  for (size_t id = 0; id < vocab.size(); ++id) {
    if (((bits[id >> 6] >> (id & 63)) & 1) == 0) continue;
    ++n_allowed;
    Matcher probe = m;
    EXPECT_TRUE(probe.advance(vocab[id])) << vocab[id];
  }
  EXPECT_GT(n_allowed, 0u);
  EXPECT_LT(n_allowed, vocab.size() - 1);  // not all of them: the walk was cut
  masker.allowed(m);
  EXPECT_EQ(masker.n_walks(), 1);
  EXPECT_TRUE(masker.truncated());
}

// Random decoding through the masks: every finished text validates.
TEST(GrammarMaskTest, RandomDecodingAlwaysValidates) {
  const std::vector<std::string> vocab = test_vocab();
  TokenTrie trie(vocab);
  const std::vector<std::string> schemas = {
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer","minimum":0,"maximum":150},
         "tags":{"type":"array","items":{"enum":["a","b","c"]},"maxItems":3},"ok":{"type":"boolean"}},
         "required":["name","age"],"additionalProperties":false})",
      R"({"anyOf":[{"type":"object","properties":{"kind":{"const":"circle"},"r":{"type":"number"}},"required":["kind","r"]},
         {"type":"object","properties":{"kind":{"const":"square"},"side":{"type":"integer"}},"required":["kind","side"]}]})",
      R"({"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]{3}-\\d{2}$"},
         "list":{"type":"array","items":{"type":"string","minLength":1,"maxLength":3},"minItems":2,"maxItems":4}},
         "required":["code","list"]})",
      R"({"type":"object","properties":{"opt":{"type":["integer","null"]}}})",
  };
  for (const std::string& text : schemas) {
    const json::value schema = json::parse(text);
    auto g = compile(text);
    std::mt19937 rng(42);
    int n_finished = 0;
    for (int run = 0; run < 60; ++run) {
      Matcher m(g);
      TokenMasker masker(trie);
      std::string out;
      for (int step = 0; step < 400; ++step) {
        if (m.accepting() && (!m.can_continue() || rng() % 2 == 0)) break;
        std::span<const uint64_t> allowed = masker.allowed(m);
        std::vector<int32_t> ids, closing;
        for (size_t id = 0; id < vocab.size(); ++id) {
          if (!((allowed[id >> 6] >> (id & 63)) & 1)) continue;
          ids.push_back(static_cast<int32_t>(id));
          if (std::string_view("\"]}0").find(vocab[id][0]) != std::string_view::npos) closing.push_back(static_cast<int32_t>(id));
        }
        ASSERT_FALSE(ids.empty()) << "a live state with no token: " << out;
        const auto& pick = !closing.empty() && rng() % 3 != 0 ? closing : ids;
        const int32_t id = pick[rng() % pick.size()];
        ASSERT_TRUE(m.advance(vocab[id]));
        out += vocab[id];
      }
      if (!m.accepting()) continue;
      ++n_finished;
      EXPECT_EQ(zl::testing::parse_and_validate(out, schema), "") << out;
    }
    EXPECT_GT(n_finished, 30) << text;
  }
}

}  // namespace
}  // namespace zl::grammar
