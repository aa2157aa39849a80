// Waiting in tests: for a condition with a deadline, so that a lost event
// fails the test with a message instead of hanging it, and no test sleeps a
// fixed time and hopes. Conditions without a notification (engine stats,
// /metrics) are polled.
#pragma once

#include <chrono>
#include <thread>

namespace zl::test {

// Generous for a loaded 2-core CI machine; a test that needs it is broken anyway.
constexpr std::chrono::milliseconds kDefaultWait{30000};

// Polls `pred` every `poll` until it holds (true) or `timeout` passes (false).
template <typename Pred>
bool wait_until(Pred pred, std::chrono::milliseconds timeout = kDefaultWait,
                std::chrono::milliseconds poll = std::chrono::milliseconds(2)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(poll);
  }
  return true;
}

}  // namespace zl::test
