// CHECK(cond) << "message": aborts with file, line and message when an
// invariant is broken. Use for bugs only; bad input is a Status (core/status.h).
// DCHECK compiles away in release builds (NDEBUG).
#pragma once

#include <sstream>

namespace zl::detail {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* cond);
  [[noreturn]] ~CheckFailure();
  template <typename T>
  CheckFailure& operator<<(const T& v) {
    os_ << v;
    return *this;
  }

 private:
  std::ostringstream os_;
};

// Lets `CHECK(x) << ...` be an expression of type void in both branches.
struct Voidify {
  void operator&(const CheckFailure&) {}
};

}  // namespace zl::detail

#define CHECK(cond) \
  (cond) ? (void)0 : ::zl::detail::Voidify() & ::zl::detail::CheckFailure(__FILE__, __LINE__, #cond)

#ifdef NDEBUG
#define DCHECK(cond) \
  true ? (void)0 : ::zl::detail::Voidify() & ::zl::detail::CheckFailure(__FILE__, __LINE__, #cond)
#else
#define DCHECK(cond) CHECK(cond)
#endif
