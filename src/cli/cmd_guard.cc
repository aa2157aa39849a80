// `zerolayer guard --guard FILE`: tests a guard policy on JSON lines.
//
// stdin:  one JSON object per line, {"text": "..."} (blank lines skipped)
// stdout: one JSON line per input line, in order:
//   {"text": "<text with matches replaced>", "matches": [{"rule": "pii",
//    "kind": "email", "start": 12, "end": 31}, ...]}
// with byte offsets into the input text (UTF-8); with --direction input a
// "blocked": "<rule>" member when a block rule matched. A line that is not
// such an object gives {"error": {"line": N, "message": "..."}} and the
// command goes on. Exit 0; 2 for a bad flag or policy (the message names
// the policy's line); 1 when stdin cannot be read.
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "guard/guard.h"

namespace zl::cli {
namespace {

namespace json = boost::json;

std::string error_line(size_t line, std::string_view message) {
  json::object err;
  err["line"] = line;
  err["message"] = message;
  json::object o;
  o["error"] = std::move(err);
  return json::serialize(o);
}

// The answer for one input line.
std::string guard_line(const guard::Guard& g, guard::Direction direction, const std::string& line, size_t line_no) {
  boost::system::error_code ec;
  const json::value v = json::parse(line, ec);
  if (ec) return error_line(line_no, "invalid JSON: " + ec.message());
  const json::object* obj = v.if_object();
  const json::value* text_v = obj != nullptr ? obj->if_contains("text") : nullptr;
  if (text_v == nullptr || !text_v->is_string()) return error_line(line_no, "expected an object with a string \"text\"");
  const std::string_view text = text_v->get_string();

  const std::vector<guard::Match> matches = g.scan(text, direction);
  json::object out;
  out["text"] = guard::apply_redactions(g, text, matches);
  json::array arr;
  for (const guard::Match& m : matches) {
    json::object jm;
    jm["rule"] = g.rule(m).name;
    jm["kind"] = g.kind_name(m);
    jm["start"] = m.start;
    jm["end"] = m.end;
    arr.push_back(std::move(jm));
  }
  out["matches"] = std::move(arr);
  if (direction == guard::Direction::kInput) {
    for (const guard::Match& m : matches) {
      if (g.rule(m).input == guard::InputAction::kBlock) {
        out["blocked"] = g.rule(m).name;
        break;
      }
    }
  }
  return json::serialize(out);
}

}  // namespace

int cmd_guard(int argc, char** argv, int first) {
  int code = 0;
  auto args = parse_command(
      argc, argv, first, "guard", "--guard FILE [--direction all|input|output] < lines.jsonl",
      {{"guard", true, "TOML guard policy (default: $ZEROLAYER_GUARD)"},
       {"direction", true, "rules to apply: all (default), input (input != allow), output (output != allow)"}},
      &code);
  if (!args) return code;
  std::string path = args->get_or("guard", "");
  if (path.empty()) {
    if (const char* env = std::getenv("ZEROLAYER_GUARD")) path = env;
  }
  if (path.empty()) return report_error("guard", invalid_argument("--guard FILE is required"));
  const std::string dir = args->get_or("direction", "all");
  guard::Direction direction = guard::Direction::kAll;
  if (dir == "input") {
    direction = guard::Direction::kInput;
  } else if (dir == "output") {
    direction = guard::Direction::kOutput;
  } else if (dir != "all") {
    return report_error("guard", invalid_argument("--direction must be all, input or output, got '" + dir + "'"));
  }
  auto g = guard::Guard::load(path);
  if (!g.ok()) {
    std::fprintf(stderr, "zerolayer guard: %s\n", g.status().message().c_str());
    return kExitUsage;
  }

  std::string line;
  size_t line_no = 0;
  while (std::getline(std::cin, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::string out = guard_line(**g, direction, line, line_no);
    out += '\n';
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
  }
  if (std::cin.bad()) return report_error("guard", io_error("reading stdin failed"));
  return kExitOk;
}

}  // namespace zl::cli
