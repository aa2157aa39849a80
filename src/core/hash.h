// A stable 64-bit hash of bytes: FNV-1a, then splitmix64's finalizer (so
// that every input bit moves every output bit). The same on every machine,
// build and run: for decisions that replicas must agree on (which user is
// sampled) and names derived from secrets inside the process. Not a
// cryptographic digest. Pure, thread-safe, O(n).
#pragma once

#include <cstdint>
#include <string_view>

namespace zl {

inline uint64_t stable_hash64(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ULL;
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  h ^= h >> 31;
  return h;
}

}  // namespace zl
