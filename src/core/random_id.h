// Random ids ("req_…", "msg_…", "toolu_…", "chatcmpl-…", "call_…") and fresh
// seeds, from one generator.
//
// Cost: an atomic add and a few multiplies per 64 bits; std::random_device
// is read once per process (its constructor probes the CPU with cpuid, which
// traps in a virtual machine: tens of microseconds a call). Thread-safe and
// lock-free. Values are distinct per call within a process (a splitmix64
// sequence over one counter) and unpredictable across processes, but NOT
// cryptographically secure: never use them for secrets or API keys.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace zl {

// 64 random bits; a different value on every call in this process.
uint64_t random_u64();

// `prefix` followed by `n_chars` base62 characters ([0-9A-Za-z]); the default
// 24 characters carry ~142 bits.
std::string random_id(std::string_view prefix, int n_chars = 24);

}  // namespace zl
