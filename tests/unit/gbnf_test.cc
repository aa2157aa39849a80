// GBNF (grammar/gbnf.h): typical grammars of our own run by the matcher on
// texts they accept and refuse, Unicode classes against the code points they
// name (and against utf8::is_valid for the bytes), the errors with their
// reasons and positions, and ambiguous grammars that must not hang the matcher.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "core/utf8.h"
#include "grammar/gbnf.h"
#include "grammar/matcher.h"

namespace zl::grammar {
namespace {

std::shared_ptr<const Grammar> gbnf(std::string_view text) {
  auto g = compile_gbnf(text);
  EXPECT_TRUE(g.ok()) << text << "\n" << g.status().to_string();
  return g.ok() ? *g : nullptr;
}

bool accepts(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  if (!g) return false;
  Matcher m(g);
  return m.advance(text) && m.accepting();
}

// The error of a grammar that must not compile.
Status error_of(std::string_view text) {
  auto g = compile_gbnf(text);
  EXPECT_FALSE(g.ok()) << text;
  return g.ok() ? Status() : g.status();
}

void expect_texts(const std::shared_ptr<const Grammar>& g, std::initializer_list<std::string_view> good,
                  std::initializer_list<std::string_view> bad) {
  for (std::string_view s : good) EXPECT_TRUE(accepts(g, s)) << "should accept: " << s;
  for (std::string_view s : bad) EXPECT_FALSE(accepts(g, s)) << "should refuse: " << s;
}

TEST(GbnfTest, JsonGrammar) {
  auto g = gbnf(R"g(# JSON, as a grammar of our own
root   ::= value
value  ::= object | array | string | number | ("true" | "false" | "null")
object ::=
  "{" ws (
    member ("," ws member)*
  )? "}"
member ::= string ws ":" ws value ws
array  ::= "[" ws ( value ws ("," ws value ws)* )? "]"
string ::= "\"" ( [^"\\\x00-\x1f] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) )* "\""
number ::= "-"? ("0" | [1-9] [0-9]*) ("." [0-9]+)? ([eE] [-+]? [0-9]+)?
ws     ::= [ \t\n]*
)g");
  expect_texts(g,
               {R"({"a": [1, 2.5e3, "x\"y"], "b": {"c": null}})", "[]", "{}", "-0.5", R"("\u00e9 é 中")", "true",
                "[\n  1,\n  {\"k\":false}\n]"},
               {R"({"a": 01})", R"({"a" 1})", "[1,]", "\"\x01\"", R"("\x")", "tru", "{\"a\":1} ", " 1", "[1 2]"});
}

TEST(GbnfTest, ArithmeticExpressions) {
  auto g = gbnf(R"g(
root   ::= expr
expr   ::= term (ws [-+] ws term)*
term   ::= factor (ws [*/] ws factor)*
factor ::= number | "(" ws expr ws ")" | "-" factor
number ::= [0-9]+
ws     ::= " "?
)g");
  expect_texts(g, {"1+2*3", "(1 + 2) * -3", "((4))", "--7", "12 / 4 - 0"}, {"1+", "(1", "1 2", "+1", "()", "1 +  2"});
}

TEST(GbnfTest, ListOfItems) {
  auto g = gbnf("root ::= (\"- \" item \"\\n\")+\nitem ::= [^\\n]+\n");
  expect_texts(g, {"- a\n", "- milk\n- two eggs\n", "- é\n"}, {"- \n", "- a", "-a\n", "", "- a\n\n"});
}

TEST(GbnfTest, ChessMoves) {
  auto g = gbnf(R"g(root ::= (
    "1. " move " " move "\n"
    ([1-9] [0-9]? ". " move " " move "\n")*
)
move   ::= (pawn | piece | castle) [+#]?
pawn   ::= ([a-h] "x")? [a-h] [1-8] ("=" [NBRQ])?
piece  ::= [NBKQR] [a-h]? [1-8]? "x"? [a-h] [1-8]
castle ::= "O-O" ("-O")?
)g");
  expect_texts(g, {"1. e4 e5\n", "1. e4 e5\n2. Nf3 Nc6\n", "1. d4 d5\n2. Bxf7+ Kxf7\n10. O-O-O exd8=Q#\n"},
               {"1. e9 e5\n", "1. e4\n", "1. e4 e5\n0. e4 e5\n", "1. e4 e5", "1. Zf3 e5\n", "1. e4 e5\n100. e4 e5\n"});
}

// Names with _ and -, rules used before their definition, comments, line ends
// (CRLF too), newlines inside groups and after | and ::=, every repetition form.
TEST(GbnfTest, SyntaxForms) {
  auto g = gbnf("root ::= greeting_word \" \" name-part{1,2} tail? # a comment\r\n"
                "tail ::=\n  \"!\" |\n  \"?\"{2,} | \"x\"{,2} \".\"\n"
                "greeting_word ::= (\"hi\" |\n \"hello\") # another\n"
                "name-part ::= [A-Z] [a-z]*\n");
  expect_texts(g, {"hi Ann", "hello AnnLee!", "hi B??", "hi B???", "hi Bo.", "hi BoXx."},
               {"hi", "hey Ann", "hi ann", "hi AnnLeeMo", "hi B?", "hi B!!", "hi Ann Lee", "hi BoXxX."});
  // . is any character, newline and multi-byte ones included; {m} exactly m.
  auto dot = gbnf("root ::= .{3}\n");
  expect_texts(dot, {"abc", "a\nc", "é中😀"}, {"ab", "abcd", "\xC3"});
  // Classes: a leading or trailing -, escapes of ] [ - and \, ranges, a negated set.
  auto cls = gbnf(R"g(root ::= [-+] [a-] [\]\[\-\\] [^a-z0-9] "\x41\u00e9\U0001F600")g");
  expect_texts(cls, {"+a]!Aé😀", "--\\ Aé😀", "-a-\nAé😀"}, {"*a]!Aé😀", "+b]!Aé😀", "+a]qAé😀", "+a]!A\xC3\xA9"});
  // Right recursion and repetitions of what may be empty are fine (not left recursion).
  expect_texts(gbnf("root ::= \"(\" root \")\" | \"\"\n"), {"", "()", "(())"}, {"(", "())"});
  expect_texts(gbnf("root ::= (\"a\"? \"b\"?)* \"c\"\n"), {"c", "abbac", "bc"}, {"", "ca"});
  expect_texts(gbnf("root ::= \"\"\n"), {""}, {"a"});
}

// The bytes of a class are exactly the UTF-8 encodings of its code points:
// every code point against the set it names, then random byte strings
// (valid or not) against utf8::is_valid.
TEST(GbnfTest, UnicodeClassesAreExactlyTheirCodePoints) {
  struct Case {
    const char* grammar;
    bool (*in)(uint32_t cp);
  };
  const Case cases[] = {
      {R"g(root ::= [α-ω])g", [](uint32_t cp) { return cp >= 0x3B1 && cp <= 0x3C9; }},
      {R"g(root ::= [^"\\])g", [](uint32_t cp) { return cp != '"' && cp != '\\'; }},
      {R"g(root ::= [^a\u00e9\u4e2d])g", [](uint32_t cp) { return cp != 'a' && cp != 0xE9 && cp != 0x4E2D; }},
      {R"g(root ::= [\u07ff-\u0800\uffff-\U00010000\U0010FFFF])g",
       [](uint32_t cp) { return cp == 0x7FF || cp == 0x800 || cp == 0xFFFF || cp == 0x10000 || cp == 0x10FFFF; }},
      {R"g(root ::= [\x00-\uD7FF\uE000-\U0010FFFF])g", [](uint32_t) { return true; }},
      {R"g(root ::= [\u00e0-\u00e9\u00f0-\u00ff\u0100])g", [](uint32_t cp) { return (cp >= 0xE0 && cp <= 0xE9) || (cp >= 0xF0 && cp <= 0x100); }},
      {R"g(root ::= .)g", [](uint32_t) { return true; }},
  };
  for (const Case& c : cases) {
    auto g = gbnf(c.grammar);
    ASSERT_NE(g, nullptr);
    Matcher m(g);
    for (uint32_t cp = 0; cp <= utf8::kMaxCodePoint; ++cp) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      m.reset();
      const bool ok = m.advance(utf8::encode(cp)) && m.accepting();
      ASSERT_EQ(ok, c.in(cp)) << c.grammar << " U+" << std::hex << cp;
    }
    std::mt19937 rng(7);
    for (int i = 0; i < 20000; ++i) {
      std::string s(1 + rng() % 4, '\0');
      for (char& b : s) b = static_cast<char>(i % 3 == 0 ? rng() : 0x80 + rng() % 0x78);  // bias to non-ASCII
      if (i % 3 == 1) s[0] = static_cast<char>(0xC0 + rng() % 0x40);
      m.reset();
      const bool ok = m.advance(s) && m.accepting();
      size_t pos = 0;
      const bool one_char = utf8::is_valid(s) && utf8::valid_sequence_length(s, 0) == s.size();
      const bool expected = one_char && c.in(utf8::decode_one(s, &pos));
      ASSERT_EQ(ok, expected) << c.grammar << " on " << testing::PrintToString(s);
    }
  }
}

// Ambiguity makes the matcher follow several parses at once; it must stay
// bounded by the input, whatever the grammar.
TEST(GbnfTest, AmbiguousGrammarsDoNotBlowUpTheMatcher) {
  // Every split of a run of a's: the parses merge into a few stacks.
  auto g = gbnf(R"g(root ::= ("a" | "a" "a" | "a"*)*)g");
  Matcher m(g);
  for (int i = 0; i < 500; ++i) {
    ASSERT_TRUE(m.advance('a')) << i;
    ASSERT_TRUE(m.accepting());
  }
  EXPECT_LT(m.state().size(), 16u);
  EXPECT_LT(m.n_nodes(), 64u);
  EXPECT_FALSE(m.advance('b'));

  // Parses that do not merge: after n a's, 2^n ways to close them. The state
  // keeps kMaxStacks of them and the matcher at most about kMaxNodes nodes.
  auto e = gbnf("root ::= x\nx ::= \"a\" x \"b\" | \"a\" x \"c\" | \"\"\n");
  Matcher big(e);
  for (int i = 0; i < 400; ++i) {
    big.advance('a');  // refused once the nodes run out: bounded either way
    ASSERT_LE(big.state().size(), Matcher::kMaxStacks);
  }
  EXPECT_LE(big.n_nodes(), Matcher::kMaxNodes + 64);
  // What the matcher still accepts follows the grammar: under the bound every
  // way of closing, past it the parses it kept.
  EXPECT_TRUE(accepts(e, "aaaaaaa" "bcbbccb"));
  EXPECT_TRUE(accepts(e, std::string(40, 'a') + std::string(40, 'b')));
  EXPECT_FALSE(accepts(e, std::string(40, 'a') + std::string(39, 'b')));
  EXPECT_FALSE(accepts(e, "aab"));
}

void expect_error(std::string_view text, ErrorReason reason, std::initializer_list<std::string_view> parts) {
  const Status s = error_of(text);
  EXPECT_EQ(s.reason(), reason) << text << "\n" << s.to_string();
  for (std::string_view p : parts) EXPECT_NE(s.message().find(p), std::string::npos) << text << "\n" << s.message();
}

TEST(GbnfTest, RuleErrors) {
  const auto kInvalid = ErrorReason::kInvalidValue;
  expect_error("root ::= \"a\" foo\n", kInvalid, {"line 1, column 14", "undefined rule 'foo'"});
  expect_error("item ::= \"a\"\n", kInvalid, {"no rule 'root'"});
  expect_error("", kInvalid, {"no rule 'root'"});
  expect_error("# only a comment\n", kInvalid, {"no rule 'root'"});
  expect_error("root ::= \"a\"\nroot ::= \"b\"\n", kInvalid, {"line 2, column 1", "defined twice", "line 1, column 1"});
  expect_error("root ::= \"a\" loop\nloop ::= \"b\" loop\n", kInvalid, {"never finish", "'loop'"});
  // Left recursion: direct, indirect, through a prefix that may be empty, through groups and repetitions.
  expect_error("root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]\n", kInvalid,
               {"line 2, column 1", "'expr' is left-recursive"});
  expect_error("root ::= a\na ::= b \"x\" | \"y\"\nb ::= a \"z\"\n", kInvalid, {"'a' is left-recursive"});
  expect_error("root ::= ws root \"a\" | \"b\"\nws ::= \" \"*\n", kInvalid, {"'root' is left-recursive"});
  expect_error("root ::= (\"x\"? root)* \"y\"\n", kInvalid, {"'root' is left-recursive"});
  expect_error("root ::= x\nx ::= (\"\" | \"a\")+ y\ny ::= \"b\"? x \"c\" | \"d\"\n", kInvalid, {"'x' is left-recursive"});
  expect_error("root ::= x\nx ::= x | \"a\"\n", kInvalid, {"'x' is left-recursive"});
}

TEST(GbnfTest, SyntaxErrors) {
  const auto kInvalid = ErrorReason::kInvalidValue;
  const auto kUnsupported = ErrorReason::kUnsupportedValue;
  expect_error("root ::= (\"a\"\n", kInvalid, {"expected ')'", "line 1, column 10"});
  expect_error("root ::= \"a\")\n", kInvalid, {"line 1, column 13", "found ')'"});
  expect_error("root ::= \"a\" |\n  \"b\" )\n", kInvalid, {"line 2, column 7"});
  expect_error("root := \"a\"\n", kInvalid, {"expected '::='"});
  expect_error("root ::= \"abc\n", kInvalid, {"unterminated string"});
  expect_error("root ::= [abc\n", kInvalid, {"unterminated character class"});
  expect_error("root ::= *\n", kInvalid, {"nothing to repeat"});
  expect_error("root ::= \"\\q\"\n", kInvalid, {"unknown escape", "'q'"});
  expect_error("root ::= \"\\x4\"\n", kInvalid, {"hex digits"});
  expect_error("root ::= \"\\uD800\"\n", kInvalid, {"surrogate"});
  expect_error("root ::= [\\U00110000]\n", kInvalid, {"above U+10FFFF"});
  expect_error("root ::= [z-a]\n", kInvalid, {"out of order"});
  expect_error("root ::= []\n", kInvalid, {"matches no character"});
  expect_error("root ::= [^\\x00-\\U0010FFFF]\n", kInvalid, {"matches no character"});
  expect_error("root ::= \"a\"{3,2}\n", kInvalid, {"m > n"});
  expect_error("root ::= \"\xC3\"\n", kInvalid, {"invalid UTF-8"});
  // Unsupported: token references, limits.
  expect_error("root ::= <[12]>\n", kUnsupported, {"token references"});
  expect_error("root ::= \"a\" !<think>\n", kUnsupported, {"token references"});
  expect_error("root ::= \"a\"{1001}\n", kUnsupported, {"above 1000"});
  expect_error("root ::= \"a\"{2,99999999999999999999}\n", kUnsupported, {"above 1000"});
  expect_error("root ::= \"" + std::string(2000, 'x') + "\"{1000}\n", kUnsupported, {"too large"});
  expect_error("root ::= \"" + std::string(kMaxGbnfBytes, 'x') + "\"\n", kUnsupported, {"longer than"});
  const auto nested = [](int n) { return "root ::= " + std::string(n, '(') + "\"a\"" + std::string(n, ')') + "\n"; };
  EXPECT_TRUE(accepts(gbnf(nested(kMaxGbnfDepth)), "a"));
  expect_error(nested(kMaxGbnfDepth + 1), kUnsupported, {"nested deeper"});
  expect_error("root ::= " + std::string(60000, '('), kUnsupported, {"nested deeper"});  // no stack overflow
}

}  // namespace
}  // namespace zl::grammar
