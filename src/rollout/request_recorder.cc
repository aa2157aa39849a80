#include "rollout/request_recorder.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace zl::rollout {

Result<std::unique_ptr<RequestRecorder>> RequestRecorder::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return invalid_argument("cannot open '" + path + "' for appending: " + std::strerror(errno));
  FILE* f = ::fdopen(fd, "a");
  if (!f) {
    ::close(fd);
    return invalid_argument("cannot open '" + path + "': " + std::strerror(errno));
  }
  return std::unique_ptr<RequestRecorder>(new RequestRecorder(f));
}

RequestRecorder::~RequestRecorder() { std::fclose(file_); }

void RequestRecorder::record(std::string_view body) {
  // A raw newline in valid JSON is whitespace between tokens (strings hold
  // it escaped): a space keeps the document and makes it one line.
  std::string line(body);
  for (char& c : line) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  line += '\n';
  std::lock_guard<std::mutex> lock(mu_);
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fflush(file_);
  ++n_;
}

int64_t RequestRecorder::n_recorded() const {
  std::lock_guard<std::mutex> lock(mu_);
  return n_;
}

}  // namespace zl::rollout
