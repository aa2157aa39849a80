// core/random_id: the id shape, no repeats across threads, and the cost
// (no std::random_device per call).
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/random_id.h"

namespace zl {
namespace {

bool is_base62(char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }

TEST(RandomId, PrefixAndBase62Tail) {
  for (const char* prefix : {"req_", "msg_", "toolu_", "chatcmpl-", "call_", ""}) {
    const std::string id = random_id(prefix);
    ASSERT_EQ(id.size(), std::string_view(prefix).size() + 24) << id;
    EXPECT_EQ(id.compare(0, std::string_view(prefix).size(), prefix), 0) << id;
    for (size_t i = std::string_view(prefix).size(); i < id.size(); ++i) EXPECT_TRUE(is_base62(id[i])) << id;
  }
  EXPECT_EQ(random_id("x_", 3).size(), 5u);
  EXPECT_EQ(random_id("x_", 0), "x_");
  EXPECT_EQ(random_id("", 31).size(), 31u);
}

// Every character position takes many values (a stuck position would show
// as a constant column), and no id repeats, over 8 threads drawing at once.
TEST(RandomId, DistinctAcrossThreads) {
  constexpr int kThreads = 8, kPerThread = 20000;
  std::vector<std::vector<std::string>> ids(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&ids, t] {
      ids[t].reserve(kPerThread);
      for (int i = 0; i < kPerThread; ++i) ids[t].push_back(random_id("msg_"));
    });
  }
  for (auto& th : threads) th.join();
  std::set<std::string> all;
  std::vector<std::set<char>> columns(24);
  for (const auto& v : ids) {
    for (const std::string& id : v) {
      all.insert(id);
      for (size_t i = 0; i < 24; ++i) columns[i].insert(id[4 + i]);
    }
  }
  EXPECT_EQ(all.size(), size_t{kThreads} * kPerThread);
  for (size_t i = 0; i < 24; ++i) EXPECT_GE(columns[i].size(), 60u) << "position " << i;
}

TEST(RandomId, U64HasNoStuckBits) {
  uint64_t ored = 0, anded = ~uint64_t{0};
  std::set<uint64_t> seen;
  for (int i = 0; i < 4096; ++i) {
    const uint64_t v = random_u64();
    ored |= v;
    anded &= v;
    seen.insert(v);
  }
  EXPECT_EQ(ored, ~uint64_t{0});
  EXPECT_EQ(anded, 0u);
  EXPECT_EQ(seen.size(), 4096u);
}

// Cheap enough for every request and every tool call: well under a
// microsecond an id (a std::random_device per call costs tens of them in a VM).
TEST(RandomId, Cheap) {
  constexpr int kN = 200000;
  size_t sink = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kN; ++i) sink += random_id("req_").back();
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / kN;
  EXPECT_GT(sink, 0u);
  std::printf("[ random_id ] %.0f ns an id\n", ns);
  EXPECT_LT(ns, 2000.0);
}

}  // namespace
}  // namespace zl
