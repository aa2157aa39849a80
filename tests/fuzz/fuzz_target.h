// One fuzz target's entry point, compiled two ways:
//   - for libFuzzer (-DZL_FUZZ=ON, clang): the fuzz_* executables, where
//     ZL_FUZZ_TARGET(name) is LLVMFuzzerTestOneInput;
//   - for the corpus replay of the normal build (ZL_FUZZ_REPLAY,
//     tests/unit/fuzz_corpus_test.cc): every target registers itself by
//     name, and the test feeds it the seeds and the regressions in
//     tests/fuzz/<name>/, so a crash found once stays fixed without clang.
// Usage:  ZL_FUZZ_TARGET(fuzz_http) { ... data, size ...; return 0; }
// FUZZ_CHECK(cond): an invariant of the code under test; a violation prints
// the condition and aborts (libFuzzer then saves the input as a crash).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#define FUZZ_CHECK(cond)                                                                   \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      std::fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                        \
    }                                                                                      \
  } while (0)

namespace zl::fuzz {

using TargetFn = int (*)(const uint8_t* data, size_t size);

// The targets linked into this executable, by name (replay builds only).
inline std::map<std::string, TargetFn>& targets() {
  static std::map<std::string, TargetFn> m;
  return m;
}
inline bool register_target(const char* name, TargetFn fn) {
  targets()[name] = fn;
  return true;
}

}  // namespace zl::fuzz

#ifdef ZL_FUZZ_REPLAY
#define ZL_FUZZ_TARGET(name)                                                             \
  static int name##_one(const uint8_t* data, size_t size);                               \
  [[maybe_unused]] static const bool name##_registered = ::zl::fuzz::register_target(#name, name##_one); \
  static int name##_one(const uint8_t* data, size_t size)
#else
#define ZL_FUZZ_TARGET(name) extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
#endif
