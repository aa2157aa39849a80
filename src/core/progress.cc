#include "core/progress.h"

#include <unistd.h>

#include <cstdio>

namespace zl {

Progress::Progress(std::string label, uint64_t total)
    : label_(std::move(label)), total_(total), tty_(isatty(STDERR_FILENO) == 1), start_(std::chrono::steady_clock::now()) {}

Progress::~Progress() { finish(); }

void Progress::update(uint64_t done) {
  if (!tty_ || finished_ || total_ == 0) return;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (elapsed < 1.0) return;
  const int percent = static_cast<int>(100.0 * static_cast<double>(done) / static_cast<double>(total_));
  if (percent == last_percent_) return;
  last_percent_ = percent;
  std::fprintf(stderr, "\r%s: %3d%% (%.1f s)", label_.c_str(), percent, elapsed);
  std::fflush(stderr);
  printed_ = true;
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  if (printed_) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::fprintf(stderr, "\r%s: 100%% (%.1f s)\n", label_.c_str(), elapsed);
  }
}

}  // namespace zl
