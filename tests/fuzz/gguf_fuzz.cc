// libFuzzer target for the GGUF parser. Not part of the CMake build:
//   clang++-14 -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -Isrc tests/fuzz/gguf_fuzz.cc
//   \
//     src/format/gguf.cc src/format/ggml_type.cc src/core/status.cc -o /tmp/gguf_fuzz
//   /tmp/gguf_fuzz -max_total_time=60 -max_len=65536
// Any input must parse or fail with a Status; a parsed file must keep every
// tensor inside the input and every lookup consistent.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "format/gguf.h"

namespace {

// Touches everything a parsed file exposes, so that ASan sees any bad pointer.
void walk(const zl::GgufValue& v, uint64_t* sink) {
  if (const std::string* s = v.as_string()) {
    for (char c : *s) *sink += static_cast<uint8_t>(c);
  } else if (const zl::GgufArray* a = v.as_array()) {
    for (const zl::GgufValue& item : a->items) {
      if (item.type() != a->elem_type) std::abort();
      walk(item, sink);
    }
  } else {
    *sink += v.raw_bits();
    (void)v.as_int();
    (void)v.as_float();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // An exact-size heap copy, so that ASan flags any read past the end.
  std::unique_ptr<uint8_t[]> bytes(new uint8_t[size]);
  if (size > 0) std::memcpy(bytes.get(), data, size);
  auto r = zl::GgufFile::parse(bytes.get(), size);
  if (!r.ok()) {
    if (r.status().message().empty()) std::abort();
    return 0;
  }
  const zl::GgufFile& f = **r;
  uint64_t sink = 0;
  for (const auto& [key, value] : f.metadata()) {
    if (f.find(key) != &value) std::abort();
    walk(value, &sink);
  }
  for (const zl::GgufTensor& t : f.tensors()) {
    if (f.find_tensor(t.name) != &t) std::abort();
    if (t.data < bytes.get() || t.data + t.n_bytes > bytes.get() + size) std::abort();
    if (t.n_dims < 1 || t.n_dims > 4 || t.n_elements() < 0) std::abort();
    for (uint64_t i = 0; i < t.n_bytes; ++i) sink += t.data[i];
  }
  volatile uint64_t keep = sink;
  (void)keep;
  return 0;
}
