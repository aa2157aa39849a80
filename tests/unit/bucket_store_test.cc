#include "limits/bucket_store.h"

#include <gtest/gtest.h>

#include <limits>

namespace zl::limits {
namespace {

struct Clock {
  double t = 1000;
  LocalBucketStore::Now fn() {
    return [this] { return t; };
  }
};

TEST(LocalBucketStore, AFreshBucketIsFullAndRefillsContinuously) {
  Clock clock;
  LocalBucketStore store(clock.fn());
  const BucketOp take10{.key = "a:input_tokens", .limit_per_minute = 60, .need = 10, .amount = 10};
  auto r = store.take(std::span(&take10, 1));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->admitted);
  EXPECT_DOUBLE_EQ(r->buckets[0].level, 50);
  EXPECT_DOUBLE_EQ(r->buckets[0].seconds_to_full, 10);  // 1 unit a second
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(store.take(std::span(&take10, 1))->admitted);
  r = store.take(std::span(&take10, 1));
  EXPECT_FALSE(r->admitted);
  EXPECT_DOUBLE_EQ(r->buckets[0].level, 0);
  EXPECT_DOUBLE_EQ(r->buckets[0].seconds_to_need, 10);
  clock.t += 2.5;  // 2.5 units back
  r = store.take(std::span(&take10, 1));
  EXPECT_FALSE(r->admitted);
  EXPECT_DOUBLE_EQ(r->buckets[0].seconds_to_need, 7.5);
  clock.t += 7.5;
  EXPECT_TRUE(store.take(std::span(&take10, 1))->admitted);
}

TEST(LocalBucketStore, ATakeIsAllOrNothing) {
  Clock clock;
  LocalBucketStore store(clock.fn());
  const BucketOp ops[] = {{.key = "a:requests", .limit_per_minute = 10, .need = 1, .amount = 1},
                          {.key = "a:input_tokens", .limit_per_minute = 100, .need = 150, .amount = 150}};
  auto r = store.take(ops);
  EXPECT_FALSE(r->admitted);
  EXPECT_DOUBLE_EQ(r->buckets[0].level, 10);  // nothing taken from the bucket that had room
  EXPECT_DOUBLE_EQ(r->buckets[1].level, 100);
}

TEST(LocalBucketStore, ChargesMayGoNegativeAndBlockUntilRefilled) {
  Clock clock;
  LocalBucketStore store(clock.fn());
  const BucketOp charge{.key = "a:output_tokens",
                        .limit_per_minute = 60,
                        .need = -std::numeric_limits<double>::infinity(),
                        .amount = 90};
  auto r = store.take(std::span(&charge, 1));
  EXPECT_TRUE(r->admitted);
  EXPECT_DOUBLE_EQ(r->buckets[0].level, -30);
  const BucketOp room{.key = "a:output_tokens", .limit_per_minute = 60, .need = 1, .amount = 0};
  r = store.take(std::span(&room, 1));
  EXPECT_FALSE(r->admitted);
  EXPECT_DOUBLE_EQ(r->buckets[0].seconds_to_need, 31);
  clock.t += 31;
  EXPECT_TRUE(store.take(std::span(&room, 1))->admitted);
}

TEST(LocalBucketStore, KeysAreIndependentAndForgettable) {
  Clock clock;
  LocalBucketStore store(clock.fn());
  const BucketOp a{.key = "a:requests", .limit_per_minute = 1, .need = 1, .amount = 1};
  const BucketOp b{.key = "b:requests", .limit_per_minute = 1, .need = 1, .amount = 1};
  EXPECT_TRUE(store.take(std::span(&a, 1))->admitted);
  EXPECT_FALSE(store.take(std::span(&a, 1))->admitted);
  EXPECT_TRUE(store.take(std::span(&b, 1))->admitted);  // another key is untouched
  const std::string keep[] = {"b:"};
  store.forget_except(keep);
  EXPECT_TRUE(store.take(std::span(&a, 1))->admitted);  // forgotten: full again
  EXPECT_FALSE(store.take(std::span(&b, 1))->admitted);
  const BucketOp bad{.key = "c:requests", .limit_per_minute = 0, .need = 1, .amount = 1};
  EXPECT_FALSE(store.take(std::span(&bad, 1)).ok());
}

}  // namespace
}  // namespace zl::limits
