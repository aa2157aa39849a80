// Logs (DESIGN.md §5): one line per record on stderr, either one JSON object
//   {"ts":"2026-12-01T15:08:19.123Z","level":"info","msg":"…","request_id":"req_…",<fields>…}
// or, for a human at a terminal, "2026-12-01T15:08:19.123Z INFO msg request_id=req_… key=value".
// The format is one process-wide setting: JSON unless stderr is a terminal,
// until set_format() (a --log-format flag) says otherwise.
//
//   log::info("model loaded", {{"path", path}, {"t_load_ms", 812.5}});
//   log::error("handler threw", {{"request_id", id}, {"what", e.what()}});
//
// Thread-safe: every line leaves in one write(2) under a process-wide mutex,
// so lines from concurrent threads never interleave. Costs a formatted string
// and a system call per line: not for the decode loop. Strings are escaped
// as JSON (control characters, quotes; invalid UTF-8 becomes U+FFFD), so a
// client-sent value cannot forge a field or break a log parser.
#pragma once

#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>

#include "core/json_escape.h"

namespace zl::log {

enum class Level { kDebug, kInfo, kWarn, kError, kFatal };
enum class Format { kJson, kText };

std::string_view level_name(Level level);  // "debug", "info", "warn", "error", "fatal"

// One extra key/value of a record. Holds views: valid for the call only.
class Field {
 public:
  Field(std::string_view key, std::string_view value) : key_(key), kind_(Kind::kString), str_(value) {}
  Field(std::string_view key, const char* value) : Field(key, std::string_view(value ? value : "")) {}
  Field(std::string_view key, const std::string& value) : Field(key, std::string_view(value)) {}
  Field(std::string_view key, bool value) : key_(key), kind_(Kind::kBool), int_(value ? 1 : 0) {}
  template <typename T>
    requires(std::integral<T> && !std::same_as<T, bool>)
  Field(std::string_view key, T value) : key_(key), kind_(Kind::kInt), int_(static_cast<int64_t>(value)) {}
  Field(std::string_view key, double value) : key_(key), kind_(Kind::kDouble), double_(value) {}

  // `,"key":value` (JSON) or ` key=value` (text).
  void append_json(std::string& out) const;
  void append_text(std::string& out) const;

 private:
  enum class Kind { kString, kInt, kDouble, kBool };
  std::string_view key_;
  Kind kind_;
  std::string_view str_;
  int64_t int_ = 0;
  double double_ = 0;
};

// The process-wide format. Thread-safe (an atomic).
void set_format(Format format);
Format format();
// Records below `level` are dropped (default kInfo). Thread-safe.
void set_min_level(Level level);
bool enabled(Level level);

// Where lines go: stderr by default. Returns the previous descriptor. For
// tests and for a process that redirects its logs; the caller keeps `fd` open.
int set_fd(int fd);

// Writes `line` and a newline in one write(2), under the log mutex. The
// writer that the request log (api/request_log.h) and every record share.
void write_line(std::string_view line);

// The record as one line (no newline) in `format`, at `ts` = now.
std::string format_record(Format format, Level level, std::string_view msg, std::initializer_list<Field> fields);

void write(Level level, std::string_view msg, std::initializer_list<Field> fields = {});
inline void debug(std::string_view msg, std::initializer_list<Field> fields = {}) { write(Level::kDebug, msg, fields); }
inline void info(std::string_view msg, std::initializer_list<Field> fields = {}) { write(Level::kInfo, msg, fields); }
inline void warn(std::string_view msg, std::initializer_list<Field> fields = {}) { write(Level::kWarn, msg, fields); }
inline void error(std::string_view msg, std::initializer_list<Field> fields = {}) { write(Level::kError, msg, fields); }

// Now as RFC 3339 UTC with milliseconds: "2026-12-01T15:08:19.123Z".
std::string utc_timestamp();
// Appends `s` as a JSON string literal (quotes included): core/json_escape.h.
using zl::append_json_string;

}  // namespace zl::log
