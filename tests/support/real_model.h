// The real-model e2e tests' common scaffolding: the demo model's path
// (stories260K under shared_dir()), the skip when it is absent, and the
// servers each test binary starts lazily, once per process, by name.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "support/http_client.h"
#include "support/process.h"

namespace zl::test {

// The demo model: a 260K-parameter Llama trained on TinyStories (context 2048).
inline std::string model_path() {
  return shared_dir() + "/models/stories260K.gguf";
}

// Skips the current test, with a message, when the demo model is absent.
#define REQUIRE_MODEL()                                                           \
  do {                                                                            \
    if (!::zl::test::file_exists(::zl::test::model_path()))                       \
      GTEST_SKIP() << ::zl::test::model_path() << " is absent (needs ../shared)"; \
  } while (0)

// `zerolayer serve` on the demo model, one thread, no request log, then `extra`.
inline std::vector<std::string> real_model_args(const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"--model", model_path(),    "--threads",
                                   "1",       "--request-log", "false"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// Servers by name, each started on its first use and kept (and stopped) with
// this object: CTest runs each test in its own process, so a binary starts
// only the servers its test needs. Thread-safe; a start holds the lock, so a
// second caller for the same name waits for the first's server.
class LazyServers {
 public:
  using Start = std::function<std::unique_ptr<ServerProcess>()>;

  // The server `name`, started by `start` on the first call for that name
  // (later calls ignore `start`).
  ServerProcess& get(const std::string& name, const Start& start) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& s = servers_[name];
    if (!s) s = start();
    return *s;
  }

  // The server `name` on the demo model: real_model_args(extra).
  ServerProcess& real(const std::string& name, const std::vector<std::string>& extra = {}) {
    return get(name, [&] { return std::make_unique<ServerProcess>(real_model_args(extra)); });
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<ServerProcess>> servers_;
};

}  // namespace zl::test
