// zerolayer_test_server: `zerolayer serve` with one more choice of engine,
// for tests only (built with ZL_BUILD_TESTS, never installed). The command
// line is the product's plus four flags:
//
//   zerolayer_test_server serve [serve flags] [--fake-engine] [--fake-ctx N] [--fake-step-us US]
//                               [--fake-kv-tokens N]
//
// With --fake-engine the model-free FakeEngine and FakeCodec
// (support/fake_engine.h) serve, with a window of --ctx or else --fake-ctx
// tokens (default 4096) and one token per --fake-step-us microseconds
// (default 2000), reporting a KV cache of --fake-kv-tokens; without it,
// the real engine exactly as `zerolayer serve`.
// Everything else (settings, HTTP, signals, drain) is the product's own code
// (cli/serve.h).
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>

#include "cli/serve.h"
#include "support/fake_engine.h"

namespace {

zl::Result<zl::cli::ServeBackend> make_test_backend(const zl::cli::ServeConfig& config, const zl::cli::Args& args,
                                                    zl::obs::EngineSink* obs_sink) {
  if (!args.has("fake-engine")) return zl::cli::make_backend(config, obs_sink);
  ASSIGN_OR_RETURN(int64_t fake_ctx, args.get_int("fake-ctx", 4096));
  ASSIGN_OR_RETURN(int64_t step_us, args.get_int("fake-step-us", 2000));
  ASSIGN_OR_RETURN(int64_t kv_tokens, args.get_int("fake-kv-tokens", 0));
  if (kv_tokens < 0 || kv_tokens > (int64_t{1} << 24)) return zl::invalid_argument("--fake-kv-tokens must be in [0, 16777216]");
  if (fake_ctx < 16 || fake_ctx > (int64_t{1} << 24)) return zl::invalid_argument("--fake-ctx must be in [16, 16777216]");
  if (step_us < 0 || step_us > 10'000'000) return zl::invalid_argument("--fake-step-us must be in [0, 10000000]");
  zl::cli::ServeBackend b;
  b.engine = std::make_unique<zl::fake::FakeEngine>(zl::fake::FakeEngineConfig{
      .n_ctx = config.ctx > 0 ? config.ctx : fake_ctx, .step_time = std::chrono::microseconds(step_us),
      .kv_tokens = kv_tokens});
  // --fake-tool-syntax mistral: the codec's tool syntax (default Hermes).
  const std::string syntax = args.get("fake-tool-syntax").value_or("hermes");
  if (syntax != "hermes" && syntax != "mistral") return zl::invalid_argument("--fake-tool-syntax must be hermes or mistral");
  b.codec = std::make_unique<zl::fake::FakeCodec>(syntax == "mistral" ? zl::api::ToolSyntax::kMistral
                                                                       : zl::api::ToolSyntax::kHermes);
  b.default_alias = "zerolayer-fake";
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "serve") != 0) {
    std::fprintf(stderr, "usage: zerolayer_test_server serve [serve flags] [--fake-engine] [--fake-ctx N] "
                         "[--fake-step-us US]\n");
    return zl::cli::kExitUsage;
  }
  zl::cli::ServeHooks hooks{
      .make_backend = make_test_backend,
      .extra_flags = {{"fake-engine", false, "tests: the model-free fake engine instead of the model"},
                      {"fake-ctx", true, "tests: the fake engine's window without --ctx (default 4096)"},
                      {"fake-step-us", true, "tests: the fake engine's time per token in us (default 2000)"},
                      {"fake-kv-tokens", true, "tests: the KV cache the fake engine reports (default 16384)"},
                      {"fake-tool-syntax", true, "tests: the fake codec's tool syntax, hermes or mistral (default hermes)"}}};
  return zl::cli::run_serve(argc, argv, 2, hooks);
}
