// Test helpers: run a command and capture its stdout; read files.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace zl::test {

struct CommandResult {
  int exit_code = -1;
  std::string out;
};

// Runs `cmd` through /bin/sh; stderr goes to the test's stderr.
inline CommandResult run_command(const std::string& cmd) {
  CommandResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 65536> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

inline bool file_exists(const std::string& path) { return std::ifstream(path).good(); }

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

inline std::string shared_dir() { return ZL_SHARED_DIR; }
inline std::string zerolayer_bin() { return ZL_BIN; }

}  // namespace zl::test

namespace zl {
inline std::string read_file_bytes(const std::string& path) { return zl::test::read_file(path); }
}  // namespace zl
