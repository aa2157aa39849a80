#include "core/status.h"

#include <cstdlib>

#include "core/log.h"

namespace zl {

std::string_view error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kOk: return "ok";
    case ErrorKind::kInvalidArgument: return "invalid_argument";
    case ErrorKind::kNotFound: return "not_found";
    case ErrorKind::kIo: return "io_error";
    case ErrorKind::kCorruptFile: return "corrupt_file";
    case ErrorKind::kUnsupported: return "unsupported";
    case ErrorKind::kOutOfRange: return "out_of_range";
    case ErrorKind::kResourceExhausted: return "resource_exhausted";
    case ErrorKind::kInternal: return "internal";
  }
  return "unknown";
}

Status::Status(ErrorKind kind, std::string message, ErrorDetail detail) : kind_(kind), message_(std::move(message)) {
  if (!detail.empty()) detail_ = std::make_shared<const ErrorDetail>(std::move(detail));
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  return std::string(error_kind_name(kind_)) + ": " + message_;
}

Status Status::with_context(std::string_view context) const {
  if (ok()) return *this;
  Status s(kind_, std::string(context) + ": " + message_);
  s.detail_ = detail_;
  return s;
}

namespace detail {

CheckFailure::CheckFailure(const char* file, int line, const char* cond) {
  os_ << file << ":" << line << ": CHECK failed: " << cond << " ";
}

CheckFailure::~CheckFailure() {
  log::write(log::Level::kFatal, os_.str());
  std::abort();
}

}  // namespace detail
}  // namespace zl
