// core/json_text.h: compact JSON with numbers as written (Boost.JSON's
// serialize() spells 7.78 as "7.78E0").
#include "core/json_text.h"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cmath>
#include <limits>

namespace zl {
namespace {

namespace json = boost::json;

std::string round_trip(std::string_view text) { return json_text(json::parse(text)); }

TEST(JsonText, NumbersReadAsWritten) {
  EXPECT_EQ(round_trip("7.78"), "7.78");
  EXPECT_EQ(round_trip("0.1"), "0.1");
  EXPECT_EQ(round_trip("-2.5"), "-2.5");
  EXPECT_EQ(round_trip("2.0"), "2.0");
  EXPECT_EQ(round_trip("-0.0"), "-0.0");
  EXPECT_EQ(round_trip("1e100"), "1e+100");
  EXPECT_EQ(round_trip("1.5e-7"), "1.5e-07");
  EXPECT_EQ(round_trip("42"), "42");
  EXPECT_EQ(round_trip("-9223372036854775808"), "-9223372036854775808");
  EXPECT_EQ(round_trip("18446744073709551615"), "18446744073709551615");
  for (const char* t : {"3.141592653589793", "1e-300", "123456.789", "0.30000000000000004"}) {
    EXPECT_EQ(json::parse(round_trip(t)).as_double(), json::parse(t).as_double()) << t;
  }
  EXPECT_EQ(json_text(json::value(std::numeric_limits<double>::quiet_NaN())), "null");
  EXPECT_EQ(json_text(json::value(HUGE_VAL)), "null");
}

TEST(JsonText, CompactInOrderAndEscaped) {
  EXPECT_EQ(round_trip(R"( { "b" : [ 1 , 2.5 , true , null ] , "a" : { } , "s" : "q\"\\\n\u0001é" } )"),
            R"({"b":[1,2.5,true,null],"a":{},"s":"q\"\\\n\u0001é"})");
  EXPECT_EQ(round_trip("[]"), "[]");
  EXPECT_EQ(round_trip(R"("")"), R"("")");
  // Whatever the value, the text parses back to an equal value.
  const char* nested = R"({"x":[{"y":[[0.5,-1e-5,{"z":"\u2028"}]]}],"w":false})";
  EXPECT_EQ(json::parse(round_trip(nested)), json::parse(nested));
}

}  // namespace
}  // namespace zl
