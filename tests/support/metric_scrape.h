// One sample of a running server's /metrics, for the e2e tests.
#pragma once

#include <cmath>
#include <map>
#include <string>

#include "support/http_client.h"
#include "support/prom_text.h"

namespace zl::test {

// The value of `family`'s sample of the same name with exactly these labels,
// scraped now (the exposition checked by parse_prom_text); NaN when the
// scrape is not a 200 or there is no such sample (NaN compares unequal to
// everything, so a test polling for a value keeps waiting).
inline double scrape_metric(int port, const std::string& family, const std::map<std::string, std::string>& labels = {}) {
  const HttpReply r = fetch(port, "GET", "/metrics");
  if (r.status != 200) return NAN;
  return parse_prom_text(r.body).value(family, family, labels);
}

}  // namespace zl::test
