#include "core/log.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <mutex>

#include "core/json_escape.h"

namespace zl::log {
namespace {

// -1: not decided yet (the first use looks at stderr).
std::atomic<int> g_format{-1};
std::atomic<int> g_min_level{static_cast<int>(Level::kInfo)};
std::atomic<int> g_fd{STDERR_FILENO};

std::mutex& write_mutex() {
  static std::mutex mu;
  return mu;
}

void append_double(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";  // JSON has no NaN or infinity
    return;
  }
  char buf[32];
  const int n = std::snprintf(buf, sizeof buf, "%.6g", v);
  out.append(buf, static_cast<size_t>(n > 0 ? n : 0));
}

// Text form: bare when the value has no space, quote or control character.
void append_text_value(std::string& out, std::string_view s) {
  bool bare = !s.empty();
  for (char c : s) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == '"' || c == '=' || c == 0x7F) bare = false;
  }
  if (bare) {
    out.append(s);
  } else {
    append_json_string(out, s);
  }
}

}  // namespace

std::string_view level_name(Level level) {
  switch (level) {
    case Level::kDebug: return "debug";
    case Level::kInfo: return "info";
    case Level::kWarn: return "warn";
    case Level::kError: return "error";
    case Level::kFatal: return "fatal";
  }
  return "info";
}

void Field::append_json(std::string& out) const {
  out += ',';
  append_json_string(out, key_);
  out += ':';
  switch (kind_) {
    case Kind::kString: append_json_string(out, str_); break;
    case Kind::kInt: out += std::to_string(int_); break;
    case Kind::kDouble: append_double(out, double_); break;
    case Kind::kBool: out += int_ ? "true" : "false"; break;
  }
}

void Field::append_text(std::string& out) const {
  out += ' ';
  out.append(key_);
  out += '=';
  switch (kind_) {
    case Kind::kString: append_text_value(out, str_); break;
    case Kind::kInt: out += std::to_string(int_); break;
    case Kind::kDouble: append_double(out, double_); break;
    case Kind::kBool: out += int_ ? "true" : "false"; break;
  }
}

void set_format(Format format) { g_format.store(static_cast<int>(format)); }

Format format() {
  int f = g_format.load();
  if (f < 0) {
    const Format guess = isatty(STDERR_FILENO) == 1 ? Format::kText : Format::kJson;
    // The first caller decides; a set_format() meanwhile wins.
    g_format.compare_exchange_strong(f, static_cast<int>(guess));
    f = g_format.load();
  }
  return static_cast<Format>(f);
}

void set_min_level(Level level) { g_min_level.store(static_cast<int>(level)); }
bool enabled(Level level) { return static_cast<int>(level) >= g_min_level.load(); }

int set_fd(int fd) {
  std::lock_guard<std::mutex> lock(write_mutex());
  return g_fd.exchange(fd);
}

void write_line(std::string_view line) {
  std::string buf;
  buf.reserve(line.size() + 1);
  buf.append(line);
  buf += '\n';
  std::lock_guard<std::mutex> lock(write_mutex());
  const int fd = g_fd.load();
  size_t off = 0;
  // One write(2) for the line; more only when the kernel takes part of it
  // (a full pipe), still under the mutex: no other line comes between.
  while (off < buf.size()) {
    const ssize_t n = ::write(fd, buf.data() + off, buf.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // nowhere to log to: drop the line
    off += static_cast<size_t>(n);
  }
}

std::string utc_timestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  const size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(ms));
  return buf;
}

std::string format_record(Format format, Level level, std::string_view msg, std::initializer_list<Field> fields) {
  std::string out;
  out.reserve(96 + msg.size() + fields.size() * 24);
  if (format == Format::kJson) {
    out += "{\"ts\":\"" + utc_timestamp() + "\",\"level\":\"";
    out += level_name(level);
    out += "\",\"msg\":";
    append_json_string(out, msg);
    for (const Field& f : fields) f.append_json(out);
    out += '}';
    return out;
  }
  out += utc_timestamp();
  out += ' ';
  for (char c : level_name(level)) out += static_cast<char>(c - 'a' + 'A');
  out += ' ';
  // The message as is, but on one line: a newline cannot start a forged record.
  for (char c : msg) out += (c == '\n' || c == '\r') ? ' ' : c;
  for (const Field& f : fields) f.append_text(out);
  return out;
}

void write(Level level, std::string_view msg, std::initializer_list<Field> fields) {
  if (!enabled(level)) return;
  write_line(format_record(format(), level, msg, fields));
}

}  // namespace zl::log
