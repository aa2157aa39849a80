// JsonScanner (api/json_scan.h): its verdict on every byte is Boost.JSON's
// on the whole document (a corpus, random mutations, the depth limit), no
// prefix of valid JSON fails, a failure is at the first bad byte, and the
// bytes are classified as the tool-call parser needs (keys, strings, depth).
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <random>
#include <string>
#include <vector>

#include "api/json_scan.h"
#include "api/json_util.h"  // kMaxJsonDepth

namespace zl::api {
namespace {

// Does the scanner take `text` as one whole JSON value? (Every byte fed, not failed, done.)
bool scanner_accepts(std::string_view text) {
  JsonScanner j;
  for (char c : text) j.feed(c);
  return j.done() && !j.failed();
}

bool boost_accepts(std::string_view text) {
  boost::system::error_code ec;
  boost::json::parse_options opts;
  opts.max_depth = kMaxJsonDepth;
  boost::json::parse(text, ec, boost::json::storage_ptr(), opts);
  return !ec;
}

// The byte at which the scanner fails (npos: it does not).
size_t fails_at(std::string_view text) {
  JsonScanner j;
  for (size_t i = 0; i < text.size(); ++i) {
    if (j.feed(text[i]) == JsonScanner::Byte::kError) return i;
  }
  return std::string::npos;
}

const std::vector<std::string> kJsonCorpus = {
    // Valid.
    "{}", "[]", " { } ", "{\"a\":1}", "{\"a\": [1, 2.5, -3e+2, 0, -0.0, 1E5, 10e-1]}", "[true, false, null]",
    "{\"a\": {\"b\": {\"c\": []}}, \"d\": \"\"}", R"({"esc": "\" \\ \/ \b \f \n \r \t \u00e9 \uD83D\uDE00"})",
    "{\"utf8\": \"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80 \xEF\xBF\xBF \xF4\x8F\xBF\xBF\"}", "{\"del\": \"\x7F\"}",
    "[1e400, 123456789012345678901234567890, -1.5e-400]", "{\"a\":1,\"a\":2}", "[[[[[]]]]]",
    // Invalid.
    "{", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "[1,]", "[,1]", "{,}", "{\"a\" 1}", "{a:1}", "{'a':1}", "[01]", "[1.]",
    "[.5]", "[-]", "[1e]", "[1e+]", "[+1]", "[0x1]", "[tru]", "[nul]", "[True]", "[NaN]", "[Infinity]",
    "{\"a\":1}x", "{\"a\":1}{}", "[\"\\x\"]", "[\"\\u12\"]", "[\"\\u12G4\"]", R"(["\uD800"])", R"(["\uD800x"])",
    R"(["\uD800\n"])", R"(["\uDC00"])", R"(["\uD800\uD800"])", "[\"a\x01\"]", "[\"a\nb\"]", "[\"\xC0\x80\"]",
    "[\"\xC1\xBF\"]", "[\"\xE0\x80\x80\"]", "[\"\xED\xA0\x80\"]", "[\"\xF0\x80\x80\x80\"]", "[\"\xF4\x90\x80\x80\"]",
    "[\"\xF5\x80\x80\x80\"]", "[\"\xFF\"]", "[\"\x80\"]", "[\"\xC3\"]", "[\"\xE2\x82\"]", "[\xC3\xA9]", "[1 2]",
    "{\"a\":1 \"b\":2}", "[\"a\" \"b\"]", "]", "}", "[}", "{]",
};

TEST(JsonScanner, AgreesWithBoostJson) {
  for (const std::string& doc : kJsonCorpus) {
    EXPECT_EQ(scanner_accepts(doc), boost_accepts(doc)) << doc;
  }
  // Depth: kMaxJsonDepth containers are fine, one more is not, for both.
  for (int depth : {kMaxJsonDepth - 1, kMaxJsonDepth, kMaxJsonDepth + 1}) {
    const std::string doc = std::string(static_cast<size_t>(depth), '[') + std::string(static_cast<size_t>(depth), ']');
    EXPECT_EQ(scanner_accepts(doc), boost_accepts(doc)) << depth;
  }
  EXPECT_TRUE(scanner_accepts(std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']')));
}

TEST(JsonScanner, RandomMutationsAgreeWithBoostJson) {
  // One byte replaced, inserted or removed in valid documents: the scanner's
  // verdict is Boost's (top-level objects and arrays: a top-level number is
  // never done for the scanner, which does not see the end of the input).
  const std::string alphabet = "{}[]:,\"\\ 0123456789.eE+-tfnurlasxu\x01\x7F\xC3\xA9\xE2\x82\xAC\xED\xA0\x80\xF0\x9F\x98\x80";
  std::mt19937 rng(42);
  int n_compared = 0, n_valid = 0;
  for (int iter = 0; iter < 50000; ++iter) {
    std::string doc;
    do {
      doc = kJsonCorpus[rng() % 13];  // the valid ones
    } while (doc.size() < 2);
    const size_t at = rng() % doc.size();
    const char c = alphabet[rng() % alphabet.size()];
    switch (rng() % 3) {
      case 0: doc[at] = c; break;
      case 1: doc.insert(doc.begin() + static_cast<long>(at), c); break;
      default: doc.erase(at, 1); break;
    }
    const size_t first = doc.find_first_not_of(" \n\t\r");
    if (first == std::string::npos || (doc[first] != '{' && doc[first] != '[')) continue;
    ++n_compared;
    const bool valid = boost_accepts(doc);
    n_valid += valid;
    ASSERT_EQ(scanner_accepts(doc), valid) << doc;
  }
  EXPECT_GT(n_compared, 40000);
  EXPECT_GT(n_valid, 1000);  // both kinds are exercised
}

TEST(JsonScanner, EveryPrefixOfValidJsonIsAcceptedAndFailureIsAtTheFirstBadByte) {
  for (const std::string& doc : kJsonCorpus) {
    if (!boost_accepts(doc)) continue;
    EXPECT_EQ(fails_at(doc), std::string::npos) << doc;  // no prefix fails
  }
  EXPECT_EQ(fails_at(R"({"a": [1, 2,, 3]})"), 12u);
  EXPECT_EQ(fails_at(R"({"a": 01})"), 7u);
  EXPECT_EQ(fails_at(R"({"a": "x)" "\x01"), 8u);
  EXPECT_EQ(fails_at(R"({"a": "\uD800x"})"), 13u);
  EXPECT_EQ(fails_at("{\"a\": \"\xE0\x80\""), 8u);
  EXPECT_EQ(fails_at(R"({"a": tx})"), 7u);
  EXPECT_EQ(fails_at(R"({"a": 1} ,)"), 9u);
  EXPECT_EQ(fails_at("[1e2147483647, 1e2147483648]"), 26u);  // Boost's exponent_overflow
}

TEST(JsonScanner, ByteKindsAndDepth) {
  using B = JsonScanner::Byte;
  const std::string doc = R"({"k": [1, "s"], "t": true})";
  JsonScanner j;
  std::string got;
  std::string depths;
  for (char c : doc) {
    const B b = j.feed(c);
    got += b == B::kSpace ? ' ' : b == B::kStructural ? c : b == B::kKey ? 'K' : b == B::kString ? 'S' : b == B::kScalar ? '#' : '!';
    depths += static_cast<char>('0' + j.depth());
  }
  EXPECT_EQ(got, R"({KKK: [#, SSS], KKK: ####})");  // K key, S string, # scalar
  EXPECT_EQ(depths, "11111122222221111111111110");
  EXPECT_TRUE(j.done());
}

TEST(JsonScanner, Minify) {
  EXPECT_EQ(minify_json(" { \"a b\" : [ 1 , 2.50 ] ,\n\t\"c\\\" d\": \" x \" } "), R"({"a b":[1,2.50],"c\" d":" x "})");
  EXPECT_EQ(minify_json(R"({"k": "\\", "l": 1e400})"), R"({"k":"\\","l":1e400})");
}

}  // namespace
}  // namespace zl::api
