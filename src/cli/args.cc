#include "cli/args.h"

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdio>
#include <cstdlib>

namespace zl::cli {

Result<Args> Args::parse(int argc, char** argv, int first, const std::vector<FlagSpec>& specs) {
  CLI::App app;
  app.set_help_flag();  // --help is an ordinary flag here (parse_command declares it)
  app.allow_extras(false);
  std::vector<std::vector<std::string>> values(specs.size());
  std::vector<CLI::Option*> options(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const FlagSpec& s = specs[i];
    // A one-letter name is both -n and --n.
    const std::string names = s.name == "help"        ? "-h,--help"
                              : s.name.size() == 1 ? "-" + s.name + ",--" + s.name
                                                   : "--" + s.name;
    if (!s.takes_value) {
      // A value (--json=false) is refused rather than read as a boolean.
      options[i] = app.add_flag(names, s.help)->disable_flag_override();
      continue;
    }
    // One value per occurrence (`--api-key a b` leaves b stray), every
    // occurrence kept so that a repeat can be refused below.
    options[i] = app.add_option(names, values[i], s.help)
                     ->expected(1)
                     ->allow_extra_args(false)
                     ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  }
  // CLI11 reads argv[0] as the program name: argv[first - 1] plays it.
  try {
    app.parse(argc - first + 1, argv + first - 1);
  } catch (const CLI::ParseError& e) {
    return invalid_argument(e.what());
  }
  Args args;
  for (size_t i = 0; i < specs.size(); ++i) {
    const FlagSpec& s = specs[i];
    const size_t n = options[i]->count();
    if (n == 0) continue;
    // A repeat is refused for booleans too: `--json --json` is as likely a
    // mistake (a flag meant to be another) as `--model a --model b`.
    if (!s.repeatable && n > 1) {
      return invalid_argument("--" + s.name + " given " + std::to_string(n) + " times; " +
                              (s.takes_value ? "it takes one value" : "give it once"));
    }
    if (!s.takes_value) {
      args.values_[s.name] = {"true"};
      continue;
    }
    args.values_[s.name] = std::move(values[i]);
  }
  return args;
}

std::optional<std::string> Args::get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> Args::get_all(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

std::string Args::get_or(const std::string& name, const std::string& def) const {
  return get(name).value_or(def);
}

Result<int64_t> Args::get_int(const std::string& name, int64_t def) const {
  auto v = get(name);
  if (!v) return def;
  int64_t out = 0;
  auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  if (ec != std::errc() || p != v->data() + v->size()) {
    return invalid_argument("--" + name + " expects an integer, got '" + *v + "'");
  }
  return out;
}

Result<int64_t> Args::get_int_in(const std::string& name, int64_t def, int64_t min, int64_t max) const {
  auto v = get(name);
  if (!v) return def;
  int64_t out = 0;
  auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  if (ec != std::errc() || p != v->data() + v->size() || out < min || out > max) {
    return invalid_argument("--" + name + " must be an integer in [" + std::to_string(min) + ", " +
                            std::to_string(max) + "], got '" + *v + "'");
  }
  return out;
}

Result<double> Args::get_double(const std::string& name, double def) const {
  auto v = get(name);
  if (!v) return def;
  char* end = nullptr;
  double out = std::strtod(v->c_str(), &end);
  if (v->empty() || end != v->c_str() + v->size()) {
    return invalid_argument("--" + name + " expects a number, got '" + *v + "'");
  }
  return out;
}

std::string usage(const std::string& cmd, const std::string& synopsis, const std::vector<FlagSpec>& specs) {
  std::string out = "Usage: zerolayer " + cmd + " " + synopsis + "\n\n";
  for (const auto& s : specs) {
    std::string left = (s.name.size() == 1 ? "  -" : "  --") + s.name + (s.takes_value ? " VALUE" : "") +
                       (s.repeatable ? "..." : "");
    if (left.size() < 26) left.resize(26, ' ');
    out += left + " " + s.help + "\n";
  }
  return out;
}

std::optional<bool> parse_bool_word(std::string_view v) {
  if (v == "true" || v == "1" || v == "yes") return true;
  if (v == "false" || v == "0" || v == "no") return false;
  return std::nullopt;
}

Result<std::vector<int32_t>> parse_id_list(const std::string& s) {
  const auto bad = [&] { return invalid_argument("bad token id list '" + s + "' (expected e.g. 1,2,3)"); };
  const auto trim = [](std::string_view v) {
    while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
    while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
    return v;
  };
  std::string_view body = trim(s);
  if (!body.empty() && body.front() == '[') {  // the JSON form, [1,2,3]
    if (body.size() < 2 || body.back() != ']') return bad();
    body = trim(body.substr(1, body.size() - 2));
  }
  std::vector<int32_t> ids;
  if (body.empty()) return ids;  // no ids: the callers say what that means
  // Every item between commas is one id: an empty one ("1,,2", "1,2,", ",1") is as malformed as "x".
  for (size_t start = 0;;) {
    const size_t comma = body.find(',', start);
    const std::string_view item = trim(body.substr(start, comma == std::string_view::npos ? comma : comma - start));
    int64_t v = 0;
    const auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || p != item.data() + item.size() || v < 0 || v > INT32_MAX) return bad();
    ids.push_back(static_cast<int32_t>(v));
    if (comma == std::string_view::npos) return ids;
    start = comma + 1;
  }
}

}  // namespace zl::cli

namespace zl::cli {

std::optional<Args> parse_command(int argc, char** argv, int first, const std::string& cmd,
                                  const std::string& synopsis, std::vector<FlagSpec> specs, int* exit_code) {
  specs.push_back({"help", false, "show this help (-h)"});
  auto args = Args::parse(argc, argv, first, specs);
  if (!args.ok()) {
    std::fprintf(stderr, "zerolayer %s: %s\n\n%s", cmd.c_str(), args.status().message().c_str(),
                 usage(cmd, synopsis, specs).c_str());
    *exit_code = kExitUsage;
    return std::nullopt;
  }
  if (args->has("help")) {
    std::fputs(usage(cmd, synopsis, specs).c_str(), stdout);
    *exit_code = kExitOk;
    return std::nullopt;
  }
  return std::move(args).value();
}

int report_error(const std::string& cmd, const Status& status) {
  std::fprintf(stderr, "zerolayer %s: %s\n", cmd.c_str(), status.to_string().c_str());
  return status.kind() == ErrorKind::kInvalidArgument ? kExitUsage : kExitRuntime;
}

}  // namespace zl::cli
