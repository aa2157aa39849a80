// The metrics registry: counters, gauges and histograms that every layer
// reports into, rendered as Prometheus text exposition format 0.0.4.
//
// Recording is lock-free: Counter::add, Gauge::set and Histogram::observe are
// a few relaxed atomic operations (a histogram: one bucket search over its
// bounds, two atomic adds). Families and their series are registered at
// start-up (Registry::add, Family::counter/gauge/histogram lock the family);
// whoever records on a hot path keeps the returned reference (stable for the
// registry's lifetime). render() locks the registry and each family in turn:
// scrapes never block recorders.
//
// Relaxed atomics: a scrape that races with observations may see a
// histogram's _sum without the latest bucket increment (or the reverse);
// every value is exact once the recorders are quiet.
//
// Build option ZL_OBS (CMake, default ON): with -DZL_OBS=OFF, kEnabled is
// false and every recording call compiles to nothing (the benchmark's
// baseline); registration and render() still work (all values stay 0).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#ifndef ZL_OBS_ENABLED
#define ZL_OBS_ENABLED 1
#endif

namespace zl::obs {

inline constexpr bool kEnabled = ZL_OBS_ENABLED != 0;

enum class MetricType { kCounter, kGauge, kHistogram };
std::string_view metric_type_name(MetricType type);

// A monotonically increasing integer. Thread-safe, lock-free.
class Counter {
 public:
  void add(int64_t n = 1) {
    if constexpr (kEnabled) v_.fetch_add(n, std::memory_order_relaxed);
  }
  // For a counter kept elsewhere (a monotonic total the engine already
  // counts): copied in just before a scrape.
  void mirror(int64_t total) {
    if constexpr (kEnabled) v_.store(total, std::memory_order_relaxed);
  }
  int64_t value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> v_{0};
};

// A value that goes up and down. Thread-safe, lock-free.
class Gauge {
 public:
  void set(double v) {
    if constexpr (kEnabled) v_.store(v, std::memory_order_relaxed);
  }
  double value() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> v_{0};
};

// Observations counted into buckets with upper bounds `bounds` (ascending,
// finite; +Inf is implicit). An observation v lands in the first bucket
// whose bound is >= v (Prometheus `le`). Thread-safe, lock-free.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);

  void observe(double v) {
    if constexpr (kEnabled) observe_enabled(v);
  }
  const std::vector<double>& bounds() const { return bounds_; }

  struct Snapshot {
    std::vector<uint64_t> cumulative;  // per bound, then +Inf (== count)
    uint64_t count = 0;
    double sum = 0;
  };
  Snapshot snapshot() const;

 private:
  void observe_enabled(double v);
  std::vector<double> bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;  // bounds_.size() + 1 (the last: +Inf)
  std::atomic<double> sum_{0};
};

// Bucket bounds in seconds for latencies, from 0.5 ms (one GPU decode step)
// to 2 minutes (a long CPU generation): the same on every device.
const std::vector<double>& latency_buckets();
// Bucket bounds for batch sizes (sequences in one step): powers of two to 512.
const std::vector<double>& batch_size_buckets();

// One metric family: a name, help, type, label names and its series (one
// per distinct tuple of label values, created at 0 on first use).
class Family {
 public:
  Family(std::string name, std::string help, MetricType type, std::vector<std::string> label_names,
         std::vector<double> bounds);

  const std::string& name() const { return name_; }
  MetricType type() const { return type_; }
  size_t n_labels() const { return label_names_.size(); }
  // The series with these label values (as many as label names), created on
  // first use. Locks the family: call at start-up or once per request, and
  // keep the reference for hot paths. CHECKs the type and the value count.
  Counter& counter(const std::vector<std::string>& label_values = {});
  Gauge& gauge(const std::vector<std::string>& label_values = {});
  Histogram& histogram(const std::vector<std::string>& label_values = {});

  void render(std::string& out) const;

 private:
  struct Series {
    Series(std::vector<std::string> v, const std::vector<double>& bounds, bool histogram);
    std::vector<std::string> values;
    Counter counter;
    Gauge gauge;
    std::unique_ptr<Histogram> histogram;
  };
  Series& series(const std::vector<std::string>& label_values, MetricType want);

  std::string name_;
  std::string help_;
  MetricType type_;
  std::vector<std::string> label_names_;
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::deque<Series> series_;  // append-only: references stay valid
};

// A set of families, rendered in registration order. Thread-safe.
class Registry {
 public:
  // Registers a family. CHECKs a valid, unused name (and valid label names);
  // histograms need bounds. A family without labels gets its one series now.
  Family& add(std::string name, std::string help, MetricType type, std::vector<std::string> label_names = {},
              std::vector<double> bounds = {});
  // The whole exposition (text format 0.0.4).
  std::string render() const;

 private:
  mutable std::mutex mu_;
  std::deque<Family> families_;
};

// Exposition helpers (also used by tests).
void append_escaped_label_value(std::string& out, std::string_view v);  // \ " and newline escaped
void append_escaped_help(std::string& out, std::string_view v);         // \ and newline escaped
void append_number(std::string& out, double v);  // shortest round-trip; +Inf, -Inf, NaN
bool valid_metric_name(std::string_view name);   // [a-zA-Z_:][a-zA-Z0-9_:]*
bool valid_label_name(std::string_view name);    // [a-zA-Z_][a-zA-Z0-9_]*, not __*

}  // namespace zl::obs
