// Progress on a terminal for anything longer than a second (DESIGN.md §5).
// Prints nothing when stderr is not a terminal or when the work ends within
// a second. Not thread-safe: call update() from one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace zl {

class Progress {
 public:
  Progress(std::string label, uint64_t total);
  ~Progress();  // finishes the line if anything was printed
  void update(uint64_t done);
  void finish();

 private:
  std::string label_;
  uint64_t total_;
  bool tty_;
  bool printed_ = false;
  bool finished_ = false;
  int last_percent_ = -1;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace zl
