// libFuzzer target fuzz_gguf: the GGUF parser (-DZL_FUZZ=ON; scripts/fuzz.sh).
// Any input must parse or fail with a Status; a parsed file must keep every
// tensor inside the input, back to back in info order, and every lookup
// consistent.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "fuzz/fuzz_target.h"
#include "format/gguf.h"

namespace {

// Touches everything a parsed file exposes, so that ASan sees any bad pointer.
void walk(const zl::GgufValue& v, uint64_t* sink) {
  if (const std::string* s = v.as_string()) {
    for (char c : *s) *sink += static_cast<uint8_t>(c);
  } else if (const zl::GgufArray* a = v.as_array()) {
    for (const zl::GgufValue& item : a->items) {
      FUZZ_CHECK(item.type() == a->elem_type);
      walk(item, sink);
    }
  } else {
    *sink += v.raw_bits();
    (void)v.as_int();
    (void)v.as_float();
  }
}

}  // namespace

ZL_FUZZ_TARGET(fuzz_gguf) {
  // An exact-size heap copy, so that ASan flags any read past the end.
  std::unique_ptr<uint8_t[]> bytes(new uint8_t[size]);
  if (size > 0) std::memcpy(bytes.get(), data, size);
  auto r = zl::GgufFile::parse(bytes.get(), size);
  if (!r.ok()) {
    FUZZ_CHECK(!r.status().message().empty());
    return 0;
  }
  const zl::GgufFile& f = **r;
  uint64_t sink = 0;
  for (const auto& [key, value] : f.metadata()) {
    FUZZ_CHECK(f.find(key) == &value);
    walk(value, &sink);
  }
  uint64_t expected_offset = 0;  // the previous tensor's end, aligned up
  for (const zl::GgufTensor& t : f.tensors()) {
    FUZZ_CHECK(f.find_tensor(t.name) == &t);
    FUZZ_CHECK(t.offset == expected_offset);
    expected_offset = (t.offset + t.n_bytes + f.alignment() - 1) / f.alignment() * f.alignment();
    FUZZ_CHECK(t.data >= bytes.get() && t.data + t.n_bytes <= bytes.get() + size);
    FUZZ_CHECK(t.n_dims >= 1 && t.n_dims <= 4 && t.n_elements() >= 0);
    for (uint64_t i = 0; i < t.n_bytes; ++i) sink += t.data[i];
  }
  volatile uint64_t keep = sink;
  (void)keep;
  return 0;
}
