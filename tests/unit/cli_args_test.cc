// cli/args (CLI11) and serve's command line: usage errors and their exit
// status, --help, repeated flags, and the precedence flag > environment >
// TOML file > default through the real parser.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/serve.h"
#include "cli/serve_config.h"

namespace zl::cli {
namespace {

// argv for `zerolayer <cmd> args...` (strings kept alive by the object).
struct Argv {
  explicit Argv(std::vector<std::string> a) : strings(std::move(a)) {
    strings.insert(strings.begin(), {"zerolayer", "cmd"});
    for (auto& s : strings) ptrs.push_back(s.data());
  }
  int argc() const { return static_cast<int>(ptrs.size()); }
  char** argv() { return ptrs.data(); }
  std::vector<std::string> strings;
  std::vector<char*> ptrs;
};

const std::vector<FlagSpec> kSpecs = {{"model", true, "model"},
                                      {"n", true, "count"},
                                      {"json", false, "json"},
                                      {"api-key", true, "keys", /*repeatable=*/true}};

// parse_command's exit code (-1: parsed).
int exit_code_of(std::vector<std::string> args) {
  Argv a(std::move(args));
  int code = -1;
  auto parsed = parse_command(a.argc(), a.argv(), 2, "cmd", "[flags]", kSpecs, &code);
  return parsed ? -1 : code;
}

TEST(CliArgs, UsageErrorsExitTwoAndHelpExitsZero) {
  EXPECT_EQ(exit_code_of({"--model", "a", "--model", "b"}), kExitUsage);  // repeated single-valued flag
  EXPECT_EQ(exit_code_of({"--model=a", "--model", "b"}), kExitUsage);
  EXPECT_EQ(exit_code_of({"-n", "1", "--n", "2"}), kExitUsage);
  EXPECT_EQ(exit_code_of({"--modle", "a"}), kExitUsage);                  // unknown flag
  EXPECT_EQ(exit_code_of({"--fake-engine"}), kExitUsage);
  EXPECT_EQ(exit_code_of({"--model"}), kExitUsage);                       // missing value
  EXPECT_EQ(exit_code_of({"stray"}), kExitUsage);                         // positional
  EXPECT_EQ(exit_code_of({"--api-key", "a", "b"}), kExitUsage);           // one value per --api-key
  EXPECT_EQ(exit_code_of({"--json=false"}), kExitUsage);                  // booleans take no value
  EXPECT_EQ(exit_code_of({"--json", "--json"}), kExitUsage);              // repeated boolean flag
  EXPECT_EQ(exit_code_of({"--json", "--model", "a", "--json"}), kExitUsage);
  EXPECT_EQ(exit_code_of({"--api-key", "a", "--api-key", "b"}), -1);      // repeatable
  EXPECT_EQ(exit_code_of({"--help"}), kExitOk);
  EXPECT_EQ(exit_code_of({"-h"}), kExitOk);
  EXPECT_EQ(exit_code_of({"--model", "a", "--help"}), kExitOk);
  EXPECT_EQ(exit_code_of({}), -1);
}

TEST(CliArgs, RepeatableFlagsKeepEveryValueInOrder) {
  Argv a({"--api-key", "k1", "--api-key=k2", "--model", "m", "-n", "-3", "--json"});
  auto args = Args::parse(a.argc(), a.argv(), 2, kSpecs);
  ASSERT_TRUE(args.ok()) << args.status().to_string();
  EXPECT_EQ(args->get_all("api-key"), (std::vector<std::string>{"k1", "k2"}));
  EXPECT_EQ(*args->get("model"), "m");
  EXPECT_EQ(*args->get_int("n", 0), -3);  // a negative number is a value, not a flag
  EXPECT_TRUE(args->has("json"));
  EXPECT_FALSE(args->has("absent"));
  EXPECT_EQ(args->get_or("absent", "d"), "d");
  Argv twice({"--model", "a", "--model", "b"});
  auto bad = Args::parse(twice.argc(), twice.argv(), 2, kSpecs);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().kind(), ErrorKind::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("--model given 2 times"), std::string::npos) << bad.status().message();
  Argv thrice({"--json", "--json", "--json"});
  auto bad_flag = Args::parse(thrice.argc(), thrice.argv(), 2, kSpecs);
  ASSERT_FALSE(bad_flag.ok());
  EXPECT_EQ(bad_flag.status().kind(), ErrorKind::kInvalidArgument);
  EXPECT_NE(bad_flag.status().message().find("--json given 3 times"), std::string::npos) << bad_flag.status().message();
}

TEST(CliArgs, RangedIntegersNameTheFlagAndTheRange) {
  Argv a({"-n", "1025", "--model", "7"});
  auto args = Args::parse(a.argc(), a.argv(), 2, kSpecs);
  ASSERT_TRUE(args.ok());
  auto n = args->get_int_in("n", 0, 0, kMaxThreads);
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().kind(), ErrorKind::kInvalidArgument);
  EXPECT_EQ(n.status().message(), "--n must be an integer in [0, 1024], got '1025'");
  EXPECT_EQ(*args->get_int_in("model", 0, 7, 7), 7);
  EXPECT_EQ(*args->get_int_in("absent", 3, 5, 9), 3);  // the default is the caller's, not checked
  EXPECT_FALSE(args->get_int_in("model", 0, 0, 6).ok());
  Argv big({"-n", "99999999999999999999"});
  auto overflow = Args::parse(big.argc(), big.argv(), 2, kSpecs);
  ASSERT_TRUE(overflow.ok());
  EXPECT_FALSE(overflow->get_int_in("n", 0, 0, INT64_MAX).ok());
}

TEST(CliArgs, UsageListsEveryFlag) {
  const std::string u = usage("cmd", "[flags]", kSpecs);
  EXPECT_EQ(u.rfind("Usage: zerolayer cmd [flags]\n\n", 0), 0u) << u;
  EXPECT_NE(u.find("  --model VALUE"), std::string::npos);
  EXPECT_NE(u.find("  -n VALUE"), std::string::npos);
  EXPECT_NE(u.find("  --api-key VALUE..."), std::string::npos);
}

// serve's command line through the real parser, with a fake environment.
struct ServeFixture {
  std::map<std::string, std::string> env;
  int code = -1;
  std::optional<ServeCommandLine> parse(std::vector<std::string> args, const std::vector<FlagSpec>& extra = {}) {
    Argv a(std::move(args));
    code = -1;
    return parse_serve_command(a.argc(), a.argv(), 2, extra,
                               [this](const char* n) -> const char* {
                                 auto it = env.find(n);
                                 return it == env.end() ? nullptr : it->second.c_str();
                               },
                               &code);
  }
};

std::string write_toml(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(ServeCommandLine, FlagOverEnvironmentOverTomlOverDefault) {
  const std::string path = write_toml("cli_serve_precedence.toml",
                                      "port = 9000\nctx = 1024\nparallel = 2\nkv_size = 4096\napi_keys = [\"t1\"]\n");
  ServeFixture f;
  f.env = {{"ZEROLAYER_PORT", "9100"}, {"ZEROLAYER_CTX", "2048"}};
  auto c = f.parse({"--config", path, "--port", "9200", "--api-key", "f1", "--api-key", "f2"});
  ASSERT_TRUE(c) << f.code;
  EXPECT_EQ(c->config.port, 9200);          // flag over env and file
  EXPECT_EQ(c->config.ctx, 2048);           // env over file
  EXPECT_EQ(c->config.parallel, 2);         // file over default
  EXPECT_EQ(c->config.batch_tokens, 512);   // default
  EXPECT_EQ(c->config.api_keys, (std::vector<std::string>{"f1", "f2"}));
  // Where each came from, for messages.
  EXPECT_EQ(c->config.given.at("port"), "--port 9200");
  EXPECT_EQ(c->config.given.at("ctx"), "ZEROLAYER_CTX=2048");
  EXPECT_EQ(c->config.given.at("kv-size"), "kv_size = 4096 in " + path);
  EXPECT_EQ(c->config.given.count("batch-tokens"), 0u);
  // ZEROLAYER_CONFIG names the file when --config does not.
  f.env = {{"ZEROLAYER_CONFIG", path}};
  c = f.parse({});
  ASSERT_TRUE(c);
  EXPECT_EQ(c->config.port, 9000);
  EXPECT_EQ(c->config.api_keys, std::vector<std::string>{"t1"});
}

TEST(ServeCommandLine, ScheduleAndDefaultParallel) {
  ServeFixture f;
  auto c = f.parse({});
  ASSERT_TRUE(c) << f.code;
  EXPECT_EQ(c->config.schedule, "latency");  // default
  EXPECT_EQ(c->config.parallel, 0);          // default: from the KV budget
  c = f.parse({"--schedule", "throughput"});
  ASSERT_TRUE(c) << f.code;
  EXPECT_EQ(c->config.schedule, "throughput");
  f.env = {{"ZEROLAYER_SCHEDULE", "throughput"}};
  c = f.parse({});
  ASSERT_TRUE(c) << f.code;
  EXPECT_EQ(c->config.schedule, "throughput");
  f.env = {};
  const std::string path = write_toml("cli_serve_schedule.toml", "schedule = \"latency\"\n");
  c = f.parse({"--config", path});
  ASSERT_TRUE(c) << f.code;
  EXPECT_EQ(c->config.schedule, "latency");
  EXPECT_FALSE(f.parse({"--schedule", "fast"}));
  EXPECT_EQ(f.code, kExitUsage);
}

// The boolean settings take the words their message names, true and false (also 1/0, yes/no),
// from a flag, the environment or the config file (a TOML boolean), and nothing else: on, TRUE
// are refused, as speculative refuses them.
TEST(ServeCommandLine, BooleanSettingsTakeTheWordsTheirMessageNames) {
  const auto env = [](const char*) -> const char* { return nullptr; };
  auto c = resolve_serve_config({{"ui", "false"}, {"request-log", "false"}, {"metrics-auth", "true"}}, {}, env);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_FALSE(c->ui);
  EXPECT_FALSE(c->request_log);
  EXPECT_TRUE(c->metrics_auth);
  const std::string path = write_toml("cli_serve_bools.toml", "ui = false\nmetrics_auth = true\n");
  c = resolve_serve_config({{"config", path}}, {}, env);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_FALSE(c->ui);
  EXPECT_TRUE(c->metrics_auth);
  for (const char* name : {"ui", "request-log", "metrics-auth"}) {
    for (const char* bad : {"on", "TRUE", "2", ""}) {
      auto r = resolve_serve_config({{name, bad}}, {}, env);
      ASSERT_FALSE(r.ok()) << name << " " << bad;
      EXPECT_EQ(r.status().message(),
                std::string("--") + name + ": " + name + " must be true or false (or 1/0, yes/no), got '" + bad + "'");
    }
  }
  for (const auto& [word, want] : std::vector<std::pair<std::string, bool>>{{"1", true}, {"yes", true}, {"0", false}, {"no", false}}) {
    auto r = resolve_serve_config({{"request-log", word}}, {}, env);
    ASSERT_TRUE(r.ok()) << word;
    EXPECT_EQ(r->request_log, want) << word;
  }
  c = resolve_serve_config({{"config", write_toml("cli_serve_bool_int.toml", "request_log = 2\n")}}, {}, env);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("request-log must be true or false (or 1/0, yes/no), got '2'"), std::string::npos)
      << c.status().message();
  ServeFixture f;
  f.env = {{"ZEROLAYER_UI", "on"}};
  EXPECT_FALSE(f.parse({}));
  EXPECT_EQ(f.code, kExitUsage);
}

TEST(ServeCommandLine, UsageErrorsAndBadSettingsExitTwo) {
  ServeFixture f;
  EXPECT_FALSE(f.parse({"--port", "1", "--port", "2"}));
  EXPECT_EQ(f.code, kExitUsage);
  EXPECT_FALSE(f.parse({"--fake-engine"}));  // no such flag in the product
  EXPECT_EQ(f.code, kExitUsage);
  EXPECT_FALSE(f.parse({"--fake-ctx", "10"}));
  EXPECT_EQ(f.code, kExitUsage);
  EXPECT_FALSE(f.parse({"--port", "70000"}));
  EXPECT_EQ(f.code, kExitUsage);
  EXPECT_FALSE(f.parse({"--help"}));
  EXPECT_EQ(f.code, kExitOk);
  // A caller's extra flags are parsed with serve's and left to its factory.
  auto c = f.parse({"--fake-engine", "--port", "1"}, {{"fake-engine", false, "test"}});
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->args.has("fake-engine"));
}

TEST(ServeCommandLine, NoTestSwitchInTheEnvironmentOrTheConfigFile) {
  ServeFixture f;
  f.env = {{"ZEROLAYER_FAKE_ENGINE", "true"}, {"ZEROLAYER_FAKE_CTX", "99"}};
  auto c = f.parse({});
  ASSERT_TRUE(c);  // unknown variables are not settings: ignored like any other
  EXPECT_TRUE(c->config.given.empty());
  // An unknown key in the file (a typo, or the old test switch) is an error.
  for (const char* text : {"fake_engine = true\n", "kv_sise = 100\n", "[server]\nport = 1\n"}) {
    const std::string path = write_toml("cli_serve_unknown.toml", text);
    EXPECT_FALSE(f.parse({"--config", path})) << text;
    EXPECT_EQ(f.code, kExitUsage) << text;
  }
}

}  // namespace
}  // namespace zl::cli
