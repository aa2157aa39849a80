// `zerolayer serve` as a function of its engine: the command line, the
// settings (cli/serve_config.h), the HTTP server, signals and the drain are
// the same whichever engine and codec a caller plugs in. The product plugs in
// the real engine (cli/serve_engine.h); the test-only server
// (tests/support/test_server_main.cc) a model-free one.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "cli/args.h"
#include "cli/serve_config.h"
#include "cli/serve_engine.h"

namespace zl::cli {

// Builds the engine + codec from the resolved settings and the parsed
// command line (where a caller's extra flags are); the engine reports into
// the sink (obs/engine_sink.h; outlives the backend).
using BackendFactory = std::function<Result<ServeBackend>(const ServeConfig&, const Args&, obs::EngineSink*)>;

struct ServeHooks {
  BackendFactory make_backend;
  // Flags the caller adds to serve's own (listed in --help after them).
  std::vector<FlagSpec> extra_flags;
};

// serve's flags (without --help).
std::vector<FlagSpec> serve_flags();

struct ServeCommandLine {
  Args args;
  ServeConfig config;
};

// Parses serve's command line (plus `extra_flags`) and resolves the settings
// against `env` and the TOML file. On --help prints the usage and sets
// *exit_code to 0; on a usage error or a bad setting prints it and sets 2.
// Returns nullopt in those cases.
std::optional<ServeCommandLine> parse_serve_command(int argc, char** argv, int first,
                                                    const std::vector<FlagSpec>& extra_flags, const EnvFn& env,
                                                    int* exit_code);

// Runs the server until SIGTERM/SIGINT (then drains); the exit status.
int run_serve(int argc, char** argv, int first, const ServeHooks& hooks);

}  // namespace zl::cli
