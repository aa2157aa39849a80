// core/: Status/Result, the thread pool, CLI flag parsing.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <numeric>
#include <vector>

#include "cli/args.h"
#include "core/status.h"
#include "core/thread_pool.h"

namespace zl {
namespace {

Result<int> parse_positive(int v) {
  if (v <= 0) return invalid_argument("not positive: " + std::to_string(v));
  return v;
}

Result<int> doubled(int v) {
  ASSIGN_OR_RETURN(int x, parse_positive(v));
  return 2 * x;
}

TEST(Status, ResultCarriesValueOrTypedError) {
  EXPECT_EQ(*doubled(4), 8);
  auto bad = doubled(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().kind(), ErrorKind::kInvalidArgument);
  EXPECT_EQ(bad.status().to_string(), "invalid_argument: not positive: -1");
  EXPECT_EQ(bad.status().with_context("flag --n").message(), "flag --n: not positive: -1");
  EXPECT_EQ(error_kind_name(ErrorKind::kCorruptFile), "corrupt_file");
}

TEST(Status, CarriesATypedReasonAndNumbers) {
  const Status plain = out_of_range("x");
  EXPECT_EQ(plain.reason(), ErrorReason::kUnspecified);
  EXPECT_EQ(plain.detail(), nullptr);  // no detail given: nothing allocated
  EXPECT_EQ(out_of_range("x", {}).detail(), nullptr);
  const Status s = out_of_range("too long", {.reason = ErrorReason::kContextLengthExceeded,
                                             .numbers = {.n_prompt_tokens = 70, .n_ctx = 64}});
  EXPECT_EQ(s.kind(), ErrorKind::kOutOfRange);
  EXPECT_EQ(s.reason(), ErrorReason::kContextLengthExceeded);
  ASSERT_NE(s.detail(), nullptr);
  EXPECT_EQ(s.detail()->numbers.n_prompt_tokens, 70);
  EXPECT_EQ(s.detail()->numbers.n_ctx, 64);
  EXPECT_FALSE(s.detail()->numbers.max_tokens_fit.has_value());
  // Context and copies keep the detail (shared, not copied).
  const Status c = s.with_context("admit");
  EXPECT_EQ(c.message(), "admit: too long");
  EXPECT_EQ(c.detail(), s.detail());
  const Status copy = s;
  EXPECT_EQ(copy.detail(), s.detail());
  Result<int> r = Status(ErrorKind::kResourceExhausted, "bye", {.reason = ErrorReason::kEngineShuttingDown});
  EXPECT_EQ(r.status().reason(), ErrorReason::kEngineShuttingDown);
}

TEST(ThreadPool, CoversEveryIndexExactlyOnceForAwkwardSizes) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 3, 7, 64, 1000, 1023}) {
      for (int64_t grain : {1, 4, 16}) {
        std::vector<std::atomic<int>> hits(n);
        pool.parallel_for(n, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) hits[i]++;
        }, grain);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "threads " << threads << " n " << n;
      }
    }
  }
}

// Ranges start where own_range says, are grain-aligned, and a thread that
// finishes early steals: with one thread's work 50x slower per element, the
// fast threads take most of the slow one's range, and each index still runs
// exactly once.
TEST(ThreadPool, OwnRangesAndStealing) {
  for (int threads : {2, 3, 4}) {
    ThreadPool pool(threads);
    const int64_t n = 4000, grain = 16;
    int64_t covered = 0;
    for (int t = 0; t < threads; ++t) {
      int64_t b = 0, e = 0;
      pool.own_range(n, grain, t, &b, &e);
      EXPECT_EQ(b, covered) << "thread " << t;
      EXPECT_EQ(b % grain, 0);
      covered = e;
    }
    EXPECT_EQ(covered, n);
    int64_t b0 = 0, e0 = 0;
    pool.own_range(n, grain, 0, &b0, &e0);
    std::vector<std::atomic<int>> hits(n);
    std::atomic<int64_t> caller_elements{0};
    const auto caller = std::this_thread::get_id();
    pool.parallel_for(n, [&](int64_t b, int64_t e) {
      ASSERT_EQ(b % grain, 0);
      const bool slow = std::this_thread::get_id() == caller;
      if (slow) caller_elements += e - b;
      for (int64_t i = b; i < e; ++i) {
        hits[i]++;
        if (slow) std::this_thread::sleep_for(std::chrono::microseconds(20));
      }
    }, grain);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "threads " << threads << " i " << i;
    EXPECT_LT(caller_elements.load(), (e0 - b0) / 2) << "threads " << threads << ": no stealing from the slow thread";
  }
}

// A prefetch hint is advice: any address range (even one about to be freed)
// and any thread index are harmless, and the results do not change.
TEST(ThreadPool, PrefetchHintsAreHarmless) {
  ThreadPool pool(2);
  std::vector<char> buf(1 << 20, 1);
  std::atomic<int64_t> sum{0};
  for (int round = 0; round < 200; ++round) {
    pool.prefetch_hint(round % 4 - 1, buf.data() + round, buf.size() - round);
    pool.parallel_for(100, [&](int64_t b, int64_t e) { sum += e - b; });
  }
  {
    std::vector<char> gone(1 << 16);
    pool.prefetch_hint(1, gone.data(), gone.size());
  }
  pool.parallel_for(100, [&](int64_t b, int64_t e) { sum += e - b; });
  EXPECT_EQ(sum.load(), 20100);
}

TEST(ThreadPool, ManyRoundsInARow) {
  ThreadPool pool(2);
  std::atomic<int64_t> sum{0};
  for (int round = 0; round < 2000; ++round) {
    pool.parallel_for(10, [&](int64_t b, int64_t e) { sum += e - b; });
  }
  EXPECT_EQ(sum.load(), 20000);
}

TEST(Args, ParsesLongShortAndInlineForms) {
  const std::vector<cli::FlagSpec> specs = {{"model", true, ""}, {"n", true, ""}, {"json", false, ""}};
  const char* argv[] = {"zerolayer", "generate", "--model", "m.gguf", "-n", "5", "--json"};
  auto a = cli::Args::parse(7, const_cast<char**>(argv), 2, specs);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a->get("model"), "m.gguf");
  EXPECT_EQ(*a->get_int("n", 0), 5);
  EXPECT_TRUE(a->has("json"));
  const char* argv2[] = {"zerolayer", "x", "--model=a=b", "--n", "x5"};
  auto b = cli::Args::parse(5, const_cast<char**>(argv2), 2, specs);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b->get("model"), "a=b");
  EXPECT_FALSE(b->get_int("n", 0).ok());
}

TEST(Args, RejectsUnknownFlagsMissingValuesAndStrayArguments) {
  const std::vector<cli::FlagSpec> specs = {{"model", true, ""}, {"json", false, ""}};
  const char* unknown[] = {"z", "c", "--modle", "x"};
  EXPECT_FALSE(cli::Args::parse(4, const_cast<char**>(unknown), 2, specs).ok());
  const char* missing[] = {"z", "c", "--model"};
  EXPECT_FALSE(cli::Args::parse(3, const_cast<char**>(missing), 2, specs).ok());
  const char* stray[] = {"z", "c", "file.gguf"};
  EXPECT_FALSE(cli::Args::parse(3, const_cast<char**>(stray), 2, specs).ok());
  const char* valued_bool[] = {"z", "c", "--json=1"};
  EXPECT_FALSE(cli::Args::parse(3, const_cast<char**>(valued_bool), 2, specs).ok());
}

TEST(Args, IdLists) {
  EXPECT_EQ(*cli::parse_id_list("1,2, 3"), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(*cli::parse_id_list("[4,5]"), (std::vector<int32_t>{4, 5}));
  EXPECT_TRUE(cli::parse_id_list("")->empty());
  EXPECT_FALSE(cli::parse_id_list("1,x").ok());
  EXPECT_FALSE(cli::parse_id_list("-3").ok());
  EXPECT_FALSE(cli::parse_id_list("99999999999").ok());
  EXPECT_EQ(*cli::parse_id_list(" [ 6 , 7 ] "), (std::vector<int32_t>{6, 7}));
  EXPECT_EQ(*cli::parse_id_list("2147483647"), (std::vector<int32_t>{INT32_MAX}));
  EXPECT_TRUE(cli::parse_id_list("[]")->empty());
  EXPECT_TRUE(cli::parse_id_list("  ")->empty());
  // An empty item is as malformed as any other (review 23 #4), and so is a list with no commas.
  for (const char* bad : {"1,,2", "1,2,", ",1", ",", "[1,]", "[,1]", "1, ,2", "1 2", "[1,2", "1]", "1;2", "+1"}) {
    auto r = cli::parse_id_list(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().kind(), ErrorKind::kInvalidArgument);
    EXPECT_EQ(r.status().message(), std::string("bad token id list '") + bad + "' (expected e.g. 1,2,3)");
  }
}

}  // namespace
}  // namespace zl
