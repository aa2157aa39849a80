// Flag parsing for subcommands, on CLI11: `--name value`, `--name=value`,
// boolean `--flag`, one-letter `-n value`. Unknown flags, stray positional
// arguments, a missing value and a flag given twice (a boolean one too) are
// usage errors (exit status 2); only flags declared `repeatable` (--api-key)
// may come more than once.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace zl::cli {

struct FlagSpec {
  std::string name;         // without dashes: "model"; one letter: "n" (-n)
  bool takes_value;         // false for boolean flags
  std::string help;         // one line
  bool repeatable = false;  // may be given several times (else a repeat is a usage error)
};

// The parsed flags of one command line.
class Args {
 public:
  // Parses argv[first..argc) against `specs` (CLI11); first >= 1
  // (argv[first - 1] stands for the program name). InvalidArgument with
  // CLI11's message on any usage error. --help is a flag like the others
  // (parse_command handles it).
  static Result<Args> parse(int argc, char** argv, int first, const std::vector<FlagSpec>& specs);

  bool has(const std::string& name) const { return values_.count(name) > 0; }
  // The value of a single-valued flag (the last one of a repeatable flag).
  std::optional<std::string> get(const std::string& name) const;
  // Every value of a repeatable flag, in command-line order.
  std::vector<std::string> get_all(const std::string& name) const;
  std::string get_or(const std::string& name, const std::string& def) const;
  Result<int64_t> get_int(const std::string& name, int64_t def) const;
  // get_int, and InvalidArgument "--name must be an integer in [min, max],
  // got 'v'" outside that range: for every size a user gives (threads,
  // counts, shapes), so that none reaches an allocation or a narrowing cast
  // unchecked.
  Result<int64_t> get_int_in(const std::string& name, int64_t def, int64_t min, int64_t max) const;
  Result<double> get_double(const std::string& name, double def) const;

 private:
  std::map<std::string, std::vector<std::string>> values_;  // booleans: {"true"}
};

// "Usage: zerolayer <cmd> <synopsis>\n\n" followed by one line per flag.
std::string usage(const std::string& cmd, const std::string& synopsis, const std::vector<FlagSpec>& specs);

// A boolean setting's value: "true" or "false", or 1/0, yes/no (the
// spellings environment variables use), the words the messages name;
// nullopt for anything else (on, TRUE, 2...).
std::optional<bool> parse_bool_word(std::string_view v);

// Parses "1,2,3" into ids: ids between commas, spaces around them allowed,
// the whole optionally in brackets ("[1, 2, 3]"); "" and "[]" are no ids.
// InvalidArgument "bad token id list" for anything else, an empty item
// ("1,,2", "1,2,", ",1") or ids only spaces apart ("1 2") included.

Result<std::vector<int32_t>> parse_id_list(const std::string& s);

// Compute threads a command accepts (--threads; 0: all cores), as serve.
constexpr int64_t kMaxThreads = 1024;

// Exit statuses of DESIGN.md §5.
constexpr int kExitOk = 0;
constexpr int kExitRuntime = 1;
constexpr int kExitUsage = 2;

// Parses flags for `cmd`, adding --help (-h). On --help prints the usage to
// stdout and sets *exit_code to 0; on a usage error prints the error and the
// usage to stderr and sets it to 2. Returns nullopt in both cases.
std::optional<Args> parse_command(int argc, char** argv, int first, const std::string& cmd,
                                  const std::string& synopsis, std::vector<FlagSpec> specs, int* exit_code);

// Prints "zerolayer <cmd>: <status>" to stderr and returns kExitRuntime (or
// kExitUsage for InvalidArgument).
int report_error(const std::string& cmd, const Status& status);

}  // namespace zl::cli
