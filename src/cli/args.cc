#include "cli/args.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>

namespace zl::cli {

Result<Args> Args::parse(int argc, char** argv, int first, const std::vector<FlagSpec>& specs) {
  Args args;
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    std::string name;
    if (a.size() == 2 && a[0] == '-' && a[1] != '-') {
      name = a.substr(1);  // one-letter short form: -n
    } else if (a.size() >= 3 && a.rfind("--", 0) == 0) {
      name = a.substr(2);
    } else {
      return invalid_argument("unexpected argument '" + a + "'");
    }
    std::optional<std::string> inline_value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    const FlagSpec* spec = nullptr;
    for (const auto& s : specs) {
      if (s.name == name) spec = &s;
    }
    if (!spec) return invalid_argument("unknown flag --" + name);
    if (!spec->takes_value) {
      if (inline_value) return invalid_argument("flag --" + name + " takes no value");
      args.values_[name] = "true";
      continue;
    }
    if (inline_value) {
      args.values_[name] = *inline_value;
    } else {
      if (i + 1 >= argc) return invalid_argument("flag --" + name + " needs a value");
      args.values_[name] = argv[++i];
    }
  }
  return args;
}

std::optional<std::string> Args::get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
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
    std::string left = (s.name.size() == 1 ? "  -" : "  --") + s.name + (s.takes_value ? " VALUE" : "");
    if (left.size() < 26) left.resize(26, ' ');
    out += left + " " + s.help + "\n";
  }
  return out;
}

Result<std::vector<int32_t>> parse_id_list(const std::string& s) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == ',' || s[i] == '[' || s[i] == ']')) ++i;
    if (i >= s.size()) break;
    int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data() + i, s.data() + s.size(), v);
    if (ec != std::errc() || v < 0 || v > INT32_MAX) {
      return invalid_argument("bad token id list '" + s + "' (expected e.g. 1,2,3)");
    }
    ids.push_back(static_cast<int32_t>(v));
    i = static_cast<size_t>(p - s.data());
    if (i < s.size() && s[i] != ',' && s[i] != ' ' && s[i] != ']') {
      return invalid_argument("bad token id list '" + s + "' (expected e.g. 1,2,3)");
    }
  }
  return ids;
}

}  // namespace zl::cli

namespace zl::cli {

std::optional<Args> parse_command(int argc, char** argv, int first, const std::string& cmd,
                                  const std::string& synopsis, std::vector<FlagSpec> specs, int* exit_code) {
  specs.push_back({"help", false, "show this help"});
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
