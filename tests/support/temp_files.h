// Test-scoped temporary files: a path prefix unique to this test process,
// and a gtest environment that deletes every file under it when the tests
// end (models written by make_model in a test are not left in /tmp).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace zl::testing_support {

// TempDir()/<tag>_<pid>_<name>.
inline std::string temp_file(const std::string& tag, const std::string& name) {
  return ::testing::TempDir() + tag + "_" + std::to_string(::getpid()) + "_" + name;
}

class TempFilesCleanup : public ::testing::Environment {
 public:
  explicit TempFilesCleanup(std::string tag) : prefix_(tag + "_" + std::to_string(::getpid()) + "_") {}
  void TearDown() override {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(::testing::TempDir(), ec)) {
      if (e.path().filename().string().rfind(prefix_, 0) == 0) std::filesystem::remove(e.path(), ec);
    }
  }

 private:
  std::string prefix_;
};

// Registers the cleanup of `tag`'s files; use at namespace scope:
//   const auto* const kCleanup = register_temp_cleanup("zl_model_test");
inline ::testing::Environment* register_temp_cleanup(const std::string& tag) {
  return ::testing::AddGlobalTestEnvironment(new TempFilesCleanup(tag));
}

}  // namespace zl::testing_support
