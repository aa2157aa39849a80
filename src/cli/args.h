// Minimal flag parsing for subcommands: `--name value`, `--name=value` and
// boolean `--flag`. Unknown flags are a usage error (exit status 2).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"

namespace zl::cli {

struct FlagSpec {
  std::string name;   // without dashes: "model"
  bool takes_value;   // false for boolean flags
  std::string help;   // one line
};

class Args {
 public:
  // Parses argv[first..argc). Returns InvalidArgument on an unknown flag, a
  // missing value or a stray positional argument.
  static Result<Args> parse(int argc, char** argv, int first, const std::vector<FlagSpec>& specs);

  bool has(const std::string& name) const { return values_.count(name) > 0; }
  std::optional<std::string> get(const std::string& name) const;
  std::string get_or(const std::string& name, const std::string& def) const;
  Result<int64_t> get_int(const std::string& name, int64_t def) const;
  Result<double> get_double(const std::string& name, double def) const;

 private:
  std::map<std::string, std::string> values_;
};

// "Usage: zerolayer <cmd> <synopsis>\n\n" followed by one line per flag.
std::string usage(const std::string& cmd, const std::string& synopsis, const std::vector<FlagSpec>& specs);

// Parses "1,2,3" (spaces allowed) into ids.
Result<std::vector<int32_t>> parse_id_list(const std::string& s);

// Exit statuses of DESIGN.md §5.
constexpr int kExitOk = 0;
constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;

}  // namespace zl::cli

namespace zl::cli {

// Parses flags for `cmd`, adding --help. On --help prints the usage to stdout
// and sets *exit_code to 0; on a usage error prints the error and the usage to
// stderr and sets it to 2. Returns nullopt in both cases.
std::optional<Args> parse_command(int argc, char** argv, int first, const std::string& cmd,
                                  const std::string& synopsis, std::vector<FlagSpec> specs, int* exit_code);

// Prints "zerolayer <cmd>: <status>" to stderr and returns kExitRuntime (or
// kExitUsage for InvalidArgument).
int report_error(const std::string& cmd, const Status& status);

}  // namespace zl::cli
