#include "obs/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "core/check.h"

namespace zl::obs {

std::string_view metric_type_name(MetricType type) {
  switch (type) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
  }
  return "untyped";
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(new std::atomic<uint64_t>[bounds_.size() + 1]) {
  CHECK(std::is_sorted(bounds_.begin(), bounds_.end()));
  for (size_t i = 0; i <= bounds_.size(); ++i) counts_[i].store(0, std::memory_order_relaxed);
}

void Histogram::observe_enabled(double v) {
  // First bound >= v; NaN compares false everywhere and lands in +Inf.
  const size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(v, std::memory_order_relaxed);
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.cumulative.resize(bounds_.size() + 1);
  uint64_t cum = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cum += counts_[i].load(std::memory_order_relaxed);
    s.cumulative[i] = cum;
  }
  s.count = cum;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

const std::vector<double>& latency_buckets() {
  static const std::vector<double> kBounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                              0.5,    1,     2.5,    5,     10,   30,    60,   120};
  return kBounds;
}

const std::vector<double>& batch_size_buckets() {
  static const std::vector<double> kBounds = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
  return kBounds;
}

void append_escaped_label_value(std::string& out, std::string_view v) {
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
}

void append_escaped_help(std::string& out, std::string_view v) {
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
}

void append_number(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
  } else {
    char buf[32];
    auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general);  // shortest, %g style
    out.append(buf, r.ptr);
  }
}

bool valid_metric_name(std::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
                    (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

bool valid_label_name(std::string_view name) {
  if (name.empty() || name.starts_with("__") || name == "le") return false;
  return valid_metric_name(name) && name.find(':') == std::string_view::npos;
}

Family::Series::Series(std::vector<std::string> v, const std::vector<double>& bounds, bool is_histogram)
    : values(std::move(v)) {
  if (is_histogram) histogram = std::make_unique<Histogram>(bounds);
}

Family::Family(std::string name, std::string help, MetricType type, std::vector<std::string> label_names,
               std::vector<double> bounds)
    : name_(std::move(name)), help_(std::move(help)), type_(type), label_names_(std::move(label_names)),
      bounds_(std::move(bounds)) {}

Family::Series& Family::series(const std::vector<std::string>& label_values, MetricType want) {
  CHECK(want == type_);
  CHECK(label_values.size() == label_names_.size());
  std::lock_guard<std::mutex> lock(mu_);
  for (Series& s : series_) {
    if (s.values == label_values) return s;
  }
  return series_.emplace_back(label_values, bounds_, type_ == MetricType::kHistogram);
}

Counter& Family::counter(const std::vector<std::string>& v) { return series(v, MetricType::kCounter).counter; }
Gauge& Family::gauge(const std::vector<std::string>& v) { return series(v, MetricType::kGauge).gauge; }
Histogram& Family::histogram(const std::vector<std::string>& v) { return *series(v, MetricType::kHistogram).histogram; }

namespace {

// `{a="x",b="y"` plus `extra` (e.g. `le="0.5"`), then `}`; nothing when both are empty.
void append_labels(std::string& out, const std::vector<std::string>& names, const std::vector<std::string>& values,
                   std::string_view extra_name = {}, std::string_view extra_value = {}) {
  if (names.empty() && extra_name.empty()) return;
  out += '{';
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ',';
    out += names[i];
    out += "=\"";
    append_escaped_label_value(out, values[i]);
    out += '"';
  }
  if (!extra_name.empty()) {
    if (!names.empty()) out += ',';
    out += extra_name;
    out += "=\"";
    out += extra_value;
    out += '"';
  }
  out += '}';
}

}  // namespace

void Family::render(std::string& out) const {
  out += "# HELP ";
  out += name_;
  out += ' ';
  append_escaped_help(out, help_);
  out += "\n# TYPE ";
  out += name_;
  out += ' ';
  out += metric_type_name(type_);
  out += '\n';
  std::lock_guard<std::mutex> lock(mu_);
  for (const Series& s : series_) {
    if (type_ != MetricType::kHistogram) {
      out += name_;
      append_labels(out, label_names_, s.values);
      out += ' ';
      if (type_ == MetricType::kCounter) {
        out += std::to_string(s.counter.value());
      } else {
        append_number(out, s.gauge.value());
      }
      out += '\n';
      continue;
    }
    const Histogram::Snapshot snap = s.histogram->snapshot();
    for (size_t i = 0; i <= bounds_.size(); ++i) {
      std::string le;
      append_number(le, i < bounds_.size() ? bounds_[i] : INFINITY);
      out += name_;
      out += "_bucket";
      append_labels(out, label_names_, s.values, "le", le);
      out += ' ';
      out += std::to_string(snap.cumulative[i]);
      out += '\n';
    }
    out += name_;
    out += "_sum";
    append_labels(out, label_names_, s.values);
    out += ' ';
    append_number(out, snap.sum);
    out += '\n';
    out += name_;
    out += "_count";
    append_labels(out, label_names_, s.values);
    out += ' ';
    out += std::to_string(snap.count);
    out += '\n';
  }
}

Family& Registry::add(std::string name, std::string help, MetricType type, std::vector<std::string> label_names,
                      std::vector<double> bounds) {
  CHECK(valid_metric_name(name));
  for (const std::string& l : label_names) CHECK(valid_label_name(l));
  CHECK(type != MetricType::kHistogram || !bounds.empty());
  std::lock_guard<std::mutex> lock(mu_);
  for (const Family& f : families_) CHECK(f.name() != name);
  Family& f = families_.emplace_back(std::move(name), std::move(help), type, std::move(label_names), std::move(bounds));
  if (f.n_labels() == 0) {
    // A family without labels has exactly one series, present from the start.
    if (type == MetricType::kCounter) f.counter();
    if (type == MetricType::kGauge) f.gauge();
    if (type == MetricType::kHistogram) f.histogram();
  }
  return f;
}

std::string Registry::render() const {
  std::string out;
  out.reserve(16384);
  std::lock_guard<std::mutex> lock(mu_);
  for (const Family& f : families_) f.render(out);
  return out;
}

}  // namespace zl::obs
