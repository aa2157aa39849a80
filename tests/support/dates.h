#pragma once

// Dates that chat templates print through strftime_now, masked as DATE.
//
// The reference renders in ../shared/templates were made on one day and mask
// two forms of it; a third form ("Dec 01 2026", firefunction-v2) is left as
// printed. So both sides are masked by shape, not by today's value: any
// "01 Dec 2026", "Dec 01 2026" or "2026-12-01" becomes DATE. A test that runs
// across midnight, or a reference rendered on another day, compares equal.

#include <regex>
#include <string>

namespace zl::test {

inline std::string mask_dates(const std::string& s) {
  static const std::regex kDate(
      R"((\b\d{2} (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4}\b)|)"
      R"((\b(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{2} \d{4}\b)|)"
      R"((\b\d{4}-\d{2}-\d{2}\b))");
  return std::regex_replace(s, kDate, "DATE");
}

}  // namespace zl::test
