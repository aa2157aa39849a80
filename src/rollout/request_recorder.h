// --record-requests FILE: every Messages request the server generates for
// is appended to FILE as one line (its body, with JSON whitespace newlines
// turned into spaces), the input `zerolayer diff --requests` replays.
// Bodies hold prompts: the file is created 0600 and is the operator's to
// protect and rotate.
//
// Thread-safe: one mutex-guarded write per line (no line interleaves).
#pragma once

#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "core/status.h"

namespace zl::rollout {

class RequestRecorder {
 public:
  static Result<std::unique_ptr<RequestRecorder>> open(const std::string& path);
  ~RequestRecorder();
  void record(std::string_view body);
  int64_t n_recorded() const;

 private:
  explicit RequestRecorder(FILE* f) : file_(f) {}
  mutable std::mutex mu_;
  FILE* file_;
  int64_t n_ = 0;
};

}  // namespace zl::rollout
