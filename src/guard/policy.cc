// Loading and validating guard policies (guard/policy.h) with toml++.
#include "guard/policy.h"

#include <toml++/toml.h>

#include <fstream>
#include <set>
#include <sstream>

#include "guard/normalize.h"
#include "guard/regex.h"

namespace zl::guard {
namespace {

constexpr std::string_view kPiiNames[] = {"email", "phone", "credit_card", "iban", "us_ssn", "api_key"};
constexpr std::string_view kInputNames[] = {"allow", "block", "redact"};
constexpr std::string_view kOutputNames[] = {"allow", "mask", "redact", "stop"};

Status at_line(std::string_view source, int64_t line, const std::string& what) {
  return invalid_argument(std::string(source) + ":" + std::to_string(line) + ": " + what);
}
// 'key' (built by appending: GCC 12 warns falsely on "'" + std::string(k)).
std::string quoted(std::string_view k) {
  std::string s = "'";
  s.append(k);
  s += '\'';
  return s;
}
int64_t line_of(const toml::node& n) { return static_cast<int64_t>(n.source().begin.line); }

// A TOML array of strings, each with its line.
Status string_list(std::string_view source, const toml::node& n, std::string_view key,
                   std::vector<std::pair<std::string, int64_t>>* out) {
  const toml::array* arr = n.as_array();
  if (arr == nullptr) return at_line(source, line_of(n), quoted(key) + " must be an array of strings");
  for (const toml::node& e : *arr) {
    const auto* s = e.as_string();
    if (s == nullptr) return at_line(source, line_of(e), quoted(key) + " must hold strings only");
    out->emplace_back(s->get(), line_of(e));
  }
  return Status::ok_status();
}

template <typename Enum, size_t N>
Status parse_action(std::string_view source, const toml::node& n, std::string_view key,
                    const std::string_view (&names)[N], Enum* out) {
  const auto* s = n.as_string();
  std::string allowed;
  for (size_t i = 0; i < N; ++i) allowed += (i ? " | " : "") + std::string(names[i]);
  if (s != nullptr) {
    for (size_t i = 0; i < N; ++i) {
      if (s->get() == names[i]) {
        *out = static_cast<Enum>(i);
        return Status::ok_status();
      }
    }
  }
  return at_line(source, line_of(n), quoted(key) + " must be one of " + allowed);
}

// One [[rule]] table, with per-item checks that need the item's line.
Status parse_rule(std::string_view source, const toml::table& t, Rule* rule) {
  rule->line = static_cast<int>(line_of(t));
  for (auto&& [key, node] : t) {
    const std::string k(key.str());
    std::vector<std::pair<std::string, int64_t>> items;
    if (k == "name") {
      const auto* s = node.as_string();
      if (s == nullptr || s->get().empty()) return at_line(source, line_of(node), "'name' must be a non-empty string");
      rule->name = s->get();
    } else if (k == "pii") {
      RETURN_IF_ERROR(string_list(source, node, k, &items));
      for (const auto& [name, line] : items) {
        const auto kind = parse_pii_kind(name);
        if (!kind) return at_line(source, line, "unknown pii kind '" + name + "' (email, phone, credit_card, iban, us_ssn, api_key)");
        for (PiiKind have : rule->pii) {
          if (have == *kind) return at_line(source, line, "pii kind '" + name + "' given twice");
        }
        rule->pii.push_back(*kind);
      }
    } else if (k == "phrases") {
      RETURN_IF_ERROR(string_list(source, node, k, &items));
      for (const auto& [phrase, line] : items) {
        if (normalize_text(phrase).empty()) return at_line(source, line, "phrase '" + phrase + "' is empty after normalisation");
        rule->phrases.push_back(phrase);
      }
    } else if (k == "regex") {
      RETURN_IF_ERROR(string_list(source, node, k, &items));
      for (const auto& [pattern, line] : items) {
        auto re = BoundedRegex::compile(pattern);
        if (!re.ok()) return at_line(source, line, "regex '" + pattern + "': " + re.status().message());
        rule->regexes.push_back(pattern);
      }
    } else if (k == "input") {
      RETURN_IF_ERROR(parse_action(source, node, k, kInputNames, &rule->input));
    } else if (k == "output") {
      RETURN_IF_ERROR(parse_action(source, node, k, kOutputNames, &rule->output));
    } else {
      return at_line(source, line_of(node), "unknown key '" + k + "' in [[rule]] (name, pii, phrases, regex, input, output)");
    }
  }
  return Status::ok_status();
}

}  // namespace

std::string_view pii_kind_name(PiiKind kind) { return kPiiNames[static_cast<int>(kind)]; }

std::optional<PiiKind> parse_pii_kind(std::string_view name) {
  for (int i = 0; i < kNumPiiKinds; ++i) {
    if (kPiiNames[i] == name) return static_cast<PiiKind>(i);
  }
  return std::nullopt;
}

std::string_view input_action_name(InputAction a) { return kInputNames[static_cast<int>(a)]; }
std::string_view output_action_name(OutputAction a) { return kOutputNames[static_cast<int>(a)]; }

Result<Policy> parse_policy(std::string_view text, std::string_view source) {
  toml::table root;
  try {
    root = toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    return at_line(source, static_cast<int64_t>(e.source().begin.line), std::string(e.description()));
  }
  Policy policy;
  for (auto&& [key, node] : root) {
    if (key.str() != "rule") {
      return at_line(source, line_of(node), "unknown key '" + std::string(key.str()) + "' (a policy holds [[rule]] tables)");
    }
    const toml::array* rules = node.as_array();
    if (rules == nullptr) return at_line(source, line_of(node), "'rule' must be an array of tables: [[rule]]");
    for (const toml::node& r : *rules) {
      const toml::table* t = r.as_table();
      if (t == nullptr) return at_line(source, line_of(r), "each rule must be a table: [[rule]]");
      Rule rule;
      RETURN_IF_ERROR(parse_rule(source, *t, &rule));
      policy.rules.push_back(std::move(rule));
    }
  }
  if (policy.rules.empty()) return at_line(source, 1, "no [[rule]] in the policy");
  RETURN_IF_ERROR(validate_policy(policy, source));
  return policy;
}

Result<Policy> load_policy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("guard policy " + path + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return io_error("guard policy " + path + ": read failed");
  return parse_policy(ss.str(), path);
}

Status validate_policy(const Policy& policy, std::string_view source) {
  std::set<std::string> names;
  for (const Rule& rule : policy.rules) {
    const int64_t line = rule.line;
    if (rule.name.empty()) return at_line(source, line, "rule without a 'name'");
    if (!names.insert(rule.name).second) return at_line(source, line, "rule name '" + rule.name + "' used twice");
    if (rule.pii.empty() && rule.phrases.empty() && rule.regexes.empty()) {
      return at_line(source, line, "rule '" + rule.name + "' has no pii, phrases or regex");
    }
    if (rule.output == OutputAction::kMask && (!rule.pii.empty() || !rule.regexes.empty())) {
      return at_line(source, line, "rule '" + rule.name + "': output = \"mask\" works on phrases only; use redact or stop for pii and regex");
    }
    for (const std::string& p : rule.phrases) {
      if (normalize_text(p).empty()) return at_line(source, line, "rule '" + rule.name + "': phrase '" + p + "' is empty after normalisation");
    }
    for (const std::string& r : rule.regexes) {
      auto re = BoundedRegex::compile(r);
      if (!re.ok()) return at_line(source, line, "rule '" + rule.name + "': regex '" + r + "': " + re.status().message());
    }
  }
  return Status::ok_status();
}

}  // namespace zl::guard
