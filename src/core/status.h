// Status and Result<T>: errors as values.
//
// Bad input (a malformed file, a bad request, a bad flag) is reported as a
// Status carrying a typed ErrorKind and a message that names the problem.
// Broken invariants use CHECK (core/check.h) instead. The kind's name is also
// its metric label and maps to an HTTP status in exactly one place (the API
// layer). A Status may also carry an ErrorDetail (core/error_reason.h): the
// typed fine-grained reason and the numbers a client needs, for the API's
// error table. The detail is shared and immutable: an OK Status or one
// without detail holds a null pointer; copying one with detail is a
// reference-count increment.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

#include "core/check.h"
#include "core/error_reason.h"

namespace zl {

enum class ErrorKind {
  kOk,
  kInvalidArgument,   // bad user input: flags, request fields
  kNotFound,          // a file, key, tensor or route that does not exist
  kIo,                // the OS refused: open, read, mmap
  kCorruptFile,       // a file that does not follow its format
  kUnsupported,       // well-formed but not something we implement
  kOutOfRange,        // a value outside the allowed range (context, limits)
  kResourceExhausted, // memory, KV blocks, quotas
  kInternal,          // a bug: should never reach a user
};

// Stable snake_case name of a kind ("corrupt_file"): used in logs and metrics.
std::string_view error_kind_name(ErrorKind kind);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorKind kind, std::string message) : kind_(kind), message_(std::move(message)) {}
  // With a typed reason and numbers (an empty detail allocates nothing).
  Status(ErrorKind kind, std::string message, ErrorDetail detail);

  static Status ok_status() { return {}; }

  bool ok() const { return kind_ == ErrorKind::kOk; }
  ErrorKind kind() const { return kind_; }
  const std::string& message() const { return message_; }
  // The typed reason; kUnspecified when none was given.
  ErrorReason reason() const { return detail_ ? detail_->reason : ErrorReason::kUnspecified; }
  // The detail, or null when none was given.
  const ErrorDetail* detail() const { return detail_.get(); }
  // "corrupt_file: tensor 'x' data lies past the end of the file"
  std::string to_string() const;

  // Returns a copy with `context + ": "` prepended to the message (the detail kept).
  Status with_context(std::string_view context) const;

 private:
  ErrorKind kind_ = ErrorKind::kOk;
  std::string message_;
  std::shared_ptr<const ErrorDetail> detail_;
};

// Each optionally with a detail: out_of_range("…", {.reason = ErrorReason::kContextLengthExceeded,
// .numbers = {.n_prompt_tokens = n, .n_ctx = c}}).
inline Status invalid_argument(std::string msg, ErrorDetail d = {}) { return {ErrorKind::kInvalidArgument, std::move(msg), std::move(d)}; }
inline Status not_found(std::string msg, ErrorDetail d = {}) { return {ErrorKind::kNotFound, std::move(msg), std::move(d)}; }
inline Status io_error(std::string msg) { return {ErrorKind::kIo, std::move(msg)}; }
inline Status corrupt_file(std::string msg) { return {ErrorKind::kCorruptFile, std::move(msg)}; }
inline Status unsupported(std::string msg, ErrorDetail d = {}) { return {ErrorKind::kUnsupported, std::move(msg), std::move(d)}; }
inline Status out_of_range(std::string msg, ErrorDetail d = {}) { return {ErrorKind::kOutOfRange, std::move(msg), std::move(d)}; }
inline Status resource_exhausted(std::string msg, ErrorDetail d = {}) { return {ErrorKind::kResourceExhausted, std::move(msg), std::move(d)}; }
inline Status internal_error(std::string msg) { return {ErrorKind::kInternal, std::move(msg)}; }

// A value or an error. Access to value() on an error is a CHECK failure.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}                   // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {             // NOLINT: implicit by design
    CHECK(!std::get<Status>(v_).ok()) << "Result constructed from an OK status";
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & {
    CHECK(ok()) << status().to_string();
    return std::get<T>(v_);
  }
  const T& value() const& {
    CHECK(ok()) << status().to_string();
    return std::get<T>(v_);
  }
  T&& value() && {
    CHECK(ok()) << status().to_string();
    return std::get<T>(std::move(v_));
  }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace zl

#define ZL_CONCAT_INNER(a, b) a##b
#define ZL_CONCAT(a, b) ZL_CONCAT_INNER(a, b)

// Returns the Status from the enclosing function if `expr` is an error.
#define RETURN_IF_ERROR(expr)                 \
  do {                                        \
    ::zl::Status zl_status_ = (expr);         \
    if (!zl_status_.ok()) return zl_status_;  \
  } while (0)

// ASSIGN_OR_RETURN(auto x, f()): declares x from a Result or returns its error.
#define ASSIGN_OR_RETURN(lhs, expr) ASSIGN_OR_RETURN_IMPL(ZL_CONCAT(zl_result_, __LINE__), lhs, expr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                          \
  if (!tmp.ok()) return tmp.status();         \
  lhs = std::move(tmp).value()
