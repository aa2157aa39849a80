// The JSON object of an answer body, or a test failure and {} when the body
// is not one (the e2e server tests).
#pragma once

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <string>

namespace zl::test {

inline boost::json::object parse_obj(const std::string& s) {
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(s, ec);
  if (ec || !v.is_object()) {
    ADD_FAILURE() << "not a JSON object: " << s;
    return {};
  }
  return v.get_object();
}

}  // namespace zl::test
