// A Prometheus text exposition format (0.0.4) parser for tests, written from
// the format's specification: what the tests scrape from /metrics goes
// through it, and every violation is reported (not only the first).
//
//   # HELP name escaped-help        # TYPE name counter|gauge|histogram|summary|untyped
//   name{label="escaped value",...} value [timestamp]
//
// Checked: metric and label names, label-value escapes (\\ \" \n only),
// values (floats, +Inf, -Inf, NaN), one TYPE/HELP per family before its
// samples, a family's samples contiguous, no duplicate series, counters
// non-negative, histograms: _bucket with `le`, buckets cumulative and
// ending at le="+Inf" equal to _count, _sum present for each series.
// Also runs `promtool check metrics` when it is installed.
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "support/process.h"

namespace zl::test {

struct PromSample {
  std::string name;                          // with suffix (_bucket, _sum, _count)
  std::map<std::string, std::string> labels;  // unescaped values
  double value = 0;
};

struct PromFamily {
  std::string type = "untyped";
  std::string help;
  std::vector<PromSample> samples;
};

struct PromText {
  std::map<std::string, PromFamily> families;
  std::vector<std::string> errors;  // empty: the text is valid

  // The value of the sample `name` with exactly these labels, or NaN.
  double value(const std::string& family, const std::string& name,
               const std::map<std::string, std::string>& labels = {}) const {
    auto it = families.find(family);
    if (it == families.end()) return NAN;
    for (const PromSample& s : it->second.samples) {
      if (s.name == name && s.labels == labels) return s.value;
    }
    return NAN;
  }
  double value(const std::string& name, const std::map<std::string, std::string>& labels = {}) const {
    return value(name, name, labels);
  }
};

namespace prom_detail {

inline bool name_char(char c, bool first, bool colon) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':') ||
         (!first && c >= '0' && c <= '9');
}

inline bool valid_name(const std::string& s, bool colon) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (!name_char(s[i], i == 0, colon)) return false;
  }
  return true;
}

inline bool parse_value(const std::string& s, double* out) {
  if (s == "+Inf" || s == "Inf") return *out = INFINITY, true;
  if (s == "-Inf") return *out = -INFINITY, true;
  if (s == "NaN") return *out = NAN, true;
  if (s.empty()) return false;
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return *end == '\0' && !std::isnan(*out) && !std::isinf(*out);
}

// The family a sample name belongs to (histogram suffixes stripped when the
// base is a declared histogram).
inline std::string family_of(const std::string& name, const std::map<std::string, PromFamily>& families) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string sfx(suffix);
    if (name.size() > sfx.size() && name.ends_with(sfx)) {
      auto it = families.find(name.substr(0, name.size() - sfx.size()));
      if (it != families.end() && it->second.type == "histogram") return it->first;
    }
  }
  return name;
}

// Parses `{a="x",b="y"}` at s[*i] (just after the name). False on bad syntax.
inline bool parse_labels(const std::string& s, size_t* i, std::map<std::string, std::string>* out, std::string* err) {
  if (*i >= s.size() || s[*i] != '{') return true;
  ++*i;
  for (;;) {
    if (*i < s.size() && s[*i] == '}') return ++*i, true;
    size_t b = *i;
    while (*i < s.size() && name_char(s[*i], *i == b, false)) ++*i;
    const std::string lname = s.substr(b, *i - b);
    if (lname.empty() || *i + 1 >= s.size() || s[*i] != '=' || s[*i + 1] != '"') return *err = "bad label name", false;
    *i += 2;
    std::string v;
    for (;;) {
      if (*i >= s.size()) return *err = "unterminated label value", false;
      const char c = s[(*i)++];
      if (c == '"') break;
      if (c == '\n') return *err = "raw newline in label value", false;
      if (c != '\\') {
        v += c;
        continue;
      }
      if (*i >= s.size()) return *err = "dangling escape", false;
      const char e = s[(*i)++];
      if (e == '\\') v += '\\';
      else if (e == '"') v += '"';
      else if (e == 'n') v += '\n';
      else return *err = std::string("bad escape \\") + e, false;
    }
    if (lname.starts_with("__")) return *err = "reserved label name " + lname, false;
    if (!out->emplace(lname, v).second) return *err = "duplicate label " + lname, false;
    if (*i < s.size() && s[*i] == ',') ++*i;
    else if (*i >= s.size() || s[*i] != '}') return *err = "expected , or }", false;
  }
}

inline void check_histograms(PromText& t) {
  for (auto& [name, f] : t.families) {
    if (f.type != "histogram") continue;
    // Series key: labels without le.
    std::map<std::map<std::string, std::string>, std::vector<std::pair<double, double>>> buckets;
    std::map<std::map<std::string, std::string>, double> counts, sums;
    for (const PromSample& s : f.samples) {
      auto labels = s.labels;
      if (s.name == name + "_bucket") {
        auto le = labels.find("le");
        double bound = 0;
        if (le == labels.end() || !parse_value(le->second, &bound)) {
          t.errors.push_back(name + ": bucket without a valid le");
          continue;
        }
        labels.erase(le);
        buckets[labels].emplace_back(bound, s.value);
      } else if (s.name == name + "_count") {
        counts[labels] = s.value;
      } else if (s.name == name + "_sum") {
        sums[labels] = s.value;
      } else {
        t.errors.push_back(name + ": unexpected sample " + s.name + " in a histogram");
      }
    }
    for (auto& [labels, bs] : buckets) {
      for (size_t i = 1; i < bs.size(); ++i) {
        if (!(bs[i].first > bs[i - 1].first)) t.errors.push_back(name + ": le not increasing");
        if (bs[i].second < bs[i - 1].second) t.errors.push_back(name + ": buckets not cumulative");
      }
      if (bs.empty() || !std::isinf(bs.back().first)) t.errors.push_back(name + ": no le=\"+Inf\" bucket");
      if (!counts.count(labels) || !sums.count(labels)) {
        t.errors.push_back(name + ": series without _count or _sum");
      } else if (!bs.empty() && bs.back().second != counts[labels]) {
        t.errors.push_back(name + ": +Inf bucket != _count");
      }
    }
  }
}

}  // namespace prom_detail

inline PromText parse_prom_text(const std::string& text) {
  using namespace prom_detail;
  PromText t;
  std::set<std::string> closed;  // families whose samples have ended
  std::set<std::string> seen_series;
  std::string current;
  size_t pos = 0;
  int line_no = 0;
  if (!text.empty() && text.back() != '\n') t.errors.push_back("no newline at the end");
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    const std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    const std::string where = "line " + std::to_string(line_no) + ": ";
    if (line.empty()) continue;
    if (line[0] == '#') {
      const bool help = line.starts_with("# HELP "), type = line.starts_with("# TYPE ");
      if (!help && !type) continue;  // a comment
      const size_t b = 7, e = line.find(' ', b);
      const std::string name = line.substr(b, e == std::string::npos ? std::string::npos : e - b);
      const std::string rest = e == std::string::npos ? "" : line.substr(e + 1);
      if (!valid_name(name, true)) t.errors.push_back(where + "bad metric name '" + name + "'");
      PromFamily& f = t.families[name];
      if (closed.count(name) || (!f.samples.empty())) t.errors.push_back(where + name + ": metadata after samples");
      if (type) {
        static const std::set<std::string> kTypes = {"counter", "gauge", "histogram", "summary", "untyped"};
        if (!kTypes.count(rest)) t.errors.push_back(where + "bad type '" + rest + "'");
        f.type = rest;
      } else {
        f.help = rest;
      }
      if (current != name && !current.empty()) closed.insert(current);
      current = name;
      continue;
    }
    size_t i = 0;
    while (i < line.size() && name_char(line[i], i == 0, true)) ++i;
    PromSample s;
    s.name = line.substr(0, i);
    std::string err;
    if (!valid_name(s.name, true) || !parse_labels(line, &i, &s.labels, &err)) {
      t.errors.push_back(where + "bad sample '" + line + "' " + err);
      continue;
    }
    if (i >= line.size() || line[i] != ' ') {
      t.errors.push_back(where + "no value in '" + line + "'");
      continue;
    }
    std::string value = line.substr(i + 1);
    if (size_t sp = value.find(' '); sp != std::string::npos) value.resize(sp);  // a timestamp follows
    if (!parse_value(value, &s.value)) {
      t.errors.push_back(where + "bad value '" + value + "'");
      continue;
    }
    const std::string fam = family_of(s.name, t.families);
    if (fam != current) {
      if (closed.count(fam)) t.errors.push_back(where + fam + ": samples not contiguous");
      if (!current.empty()) closed.insert(current);
      current = fam;
    }
    std::string key = s.name;
    for (const auto& [k, v] : s.labels) key += "\x01" + k + "\x02" + v;
    if (!seen_series.insert(key).second) t.errors.push_back(where + "duplicate series " + s.name);
    PromFamily& f = t.families[fam];
    if (f.type == "counter" && !(s.value >= 0)) t.errors.push_back(where + s.name + ": negative counter");
    f.samples.push_back(std::move(s));
  }
  check_histograms(t);
  return t;
}

struct PromtoolResult {
  bool ran = false;  // false: promtool is not installed
  int exit_code = 0;
  std::string output;
};

// `promtool check metrics` over `text` (it reads stdin).
inline PromtoolResult promtool_check(const std::string& text) {
  PromtoolResult r;
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) return r;
  r.ran = true;
  char path[] = "/tmp/zl_prom_XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return r.exit_code = -1, r;
  FILE* f = fdopen(fd, "w");
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
  const std::string cmd = std::string("promtool check metrics < ") + path + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  char buf[512];
  while (p && std::fgets(buf, sizeof buf, p)) r.output += buf;
  const int status = p ? pclose(p) : -1;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::remove(path);
  return r;
}

}  // namespace zl::test
