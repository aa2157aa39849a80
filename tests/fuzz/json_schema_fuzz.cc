// libFuzzer target fuzz_json_schema: the JSON Schema compiler and the matcher
// (grammar/json_schema.h, grammar/matcher.h) on arbitrary schemas.
// Input: a schema (bytes up to the first NUL), then bytes that drive a walk
// through the grammar: each picks one of the bytes the state accepts, until
// the grammar is complete or the input ends.
// Invariants: compiling never crashes and fails only with unsupported_value
// or invalid_value; a walk never reaches a live state that takes no byte
// unless it is complete; and every complete text parses as JSON and, for
// schemas without `pattern` (std::regex differs in corner cases), validates
// against the schema (tests/support/schema_validator.h).
#include <boost/json.hpp>
#include <string>

#include "fuzz/fuzz_target.h"
#include "fuzz/grammar_walk.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "support/schema_validator.h"

ZL_FUZZ_TARGET(fuzz_json_schema) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string schema_text = input.substr(0, nul);
  const std::string walk = nul == std::string::npos ? std::string() : input.substr(nul + 1);
  auto g = zl::grammar::compile_json_schema(schema_text);
  if (!g.ok()) {
    FUZZ_CHECK(g.status().reason() == zl::ErrorReason::kUnsupportedValue ||
               g.status().reason() == zl::ErrorReason::kInvalidValue);
    return 0;
  }
  zl::grammar::Matcher m(*g);
  const std::string text = zl::fuzz::walk_grammar(m, walk, [](const zl::grammar::Matcher&) { return false; });
  if (!m.accepting()) return 0;
  boost::system::error_code ec;
  // A recursive schema nests as deep as the walk goes (one byte a level at
  // most): past Boost.JSON's default limit of 32.
  boost::json::parse_options deep;
  deep.max_depth = 1 << 13;
  const boost::json::value v = boost::json::parse(text, ec, boost::json::storage_ptr(), deep);
  FUZZ_CHECK(!ec);
  const boost::json::value schema = boost::json::parse(schema_text, ec, boost::json::storage_ptr(), deep);
  if (!ec && schema_text.find("\"pattern\"") == std::string::npos) {
    FUZZ_CHECK(zl::testing::validate_schema(v, schema, schema).empty());
  }
  return 0;
}
