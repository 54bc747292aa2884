#include "bench/capacity_search.h"

#include <gtest/gtest.h>

#include <cmath>

#include "util/error.h"

namespace tokenmill::bench {
namespace {

// A fake step: meets exactly when the load is at or below `capacity`.
struct KneeAt {
  double capacity;
  int calls = 0;
  bool operator()(double load) {
    ++calls;
    return load <= capacity;
  }
};

CapacitySearchResult search(const CapacitySearchOptions& o, KneeAt& knee) {
  return search_capacity(o, [&](double load) { return knee(load); });
}

TEST(CapacitySearch, BracketsUpwardThenBisectsToThePrecision) {
  for (double capacity : {0.37, 1.0, 3.3, 17.0, 123.4}) {
    KneeAt knee{capacity};
    const CapacitySearchOptions o{.start = 1, .precision = 0.1, .max_steps = 40};
    const CapacitySearchResult r = search(o, knee);
    ASSERT_TRUE(r.converged) << capacity << ": " << r.stop_reason;
    ASSERT_TRUE(r.highest_meeting && r.lowest_failing);
    EXPECT_LE(*r.highest_meeting, capacity);
    EXPECT_GT(*r.lowest_failing, capacity);
    EXPECT_LE(*r.lowest_failing - *r.highest_meeting, 0.1 * *r.highest_meeting + 1e-12) << capacity;
    EXPECT_EQ(knee.calls, static_cast<int>(r.loads.size()));
    ASSERT_EQ(r.loads.size(), r.met.size());
  }
}

TEST(CapacitySearch, StepsAreTheExpectedSequence) {
  KneeAt knee{5.0};
  const CapacitySearchOptions o{.start = 2, .precision = 0.1};
  const CapacitySearchResult r = search(o, knee);
  // 2 ok, 4 ok, 8 fail; then 6 fail, 5 ok, 5.5 fail -> gap 0.5 = 10 % of 5.
  EXPECT_EQ(r.loads, (std::vector<double>{2, 4, 8, 6, 5, 5.5}));
  EXPECT_EQ(r.met, (std::vector<bool>{true, true, false, false, true, false}));
  EXPECT_EQ(*r.highest_meeting, 5);
  EXPECT_EQ(*r.lowest_failing, 5.5);
}

TEST(CapacitySearch, HalvesWhenTheStartFails) {
  KneeAt knee{3.0};
  const CapacitySearchOptions o{.start = 40, .precision = 0.05};
  const CapacitySearchResult r = search(o, knee);
  ASSERT_TRUE(r.converged);
  EXPECT_EQ(r.loads[0], 40);
  EXPECT_EQ(r.loads[1], 20);
  EXPECT_EQ(r.loads[2], 10);
  EXPECT_EQ(r.loads[3], 5);
  EXPECT_EQ(r.loads[4], 2.5);
  EXPECT_LE(*r.highest_meeting, 3.0);
  EXPECT_GE(*r.highest_meeting, 3.0 / 1.05);
}

TEST(CapacitySearch, IntegerLoadsStopAtAGapOfOne) {
  for (int capacity = 1; capacity <= 70; ++capacity) {
    KneeAt knee{static_cast<double>(capacity)};
    // precision 0.01: only the gap of 1 can stop it.
    const CapacitySearchOptions o{
        .start = 1, .integer = true, .precision = 0.01, .max_steps = 40, .min_load = 1, .max_load = 4096};
    const CapacitySearchResult r = search(o, knee);
    ASSERT_TRUE(r.converged) << capacity;
    EXPECT_EQ(*r.highest_meeting, capacity);
    EXPECT_EQ(*r.lowest_failing, capacity + 1);
    for (double l : r.loads) EXPECT_EQ(l, std::floor(l)) << capacity;
  }
}

TEST(CapacitySearch, IntegerStartIsRoundedUp) {
  KneeAt knee{4};
  const CapacitySearchOptions o{.start = 2.2, .integer = true, .min_load = 1};
  const CapacitySearchResult r = search(o, knee);
  EXPECT_EQ(r.loads.front(), 3);
  EXPECT_EQ(*r.highest_meeting, 4);
}

TEST(CapacitySearch, NothingMeets) {
  KneeAt knee{0.5};
  const CapacitySearchOptions o{.start = 8, .integer = true, .min_load = 1};
  const CapacitySearchResult r = search(o, knee);
  EXPECT_FALSE(r.converged);
  EXPECT_FALSE(r.highest_meeting);
  EXPECT_EQ(*r.lowest_failing, 1);
  EXPECT_EQ(r.loads, (std::vector<double>{8, 4, 2, 1}));
  EXPECT_EQ(r.stop_reason, "even the lowest load allowed fails");
}

TEST(CapacitySearch, EverythingMeetsUpToTheMaximum) {
  KneeAt knee{1e9};
  const CapacitySearchOptions o{.start = 10, .max_load = 50};
  const CapacitySearchResult r = search(o, knee);
  EXPECT_FALSE(r.converged);
  EXPECT_FALSE(r.lowest_failing);
  EXPECT_EQ(*r.highest_meeting, 50);
  EXPECT_EQ(r.loads, (std::vector<double>{10, 20, 40, 50}));
}

TEST(CapacitySearch, StepLimitIsHonoured) {
  KneeAt knee{1000};
  CapacitySearchOptions o;
  o.start = 1;
  o.max_steps = 4;
  const CapacitySearchResult r = search(o, knee);
  EXPECT_EQ(r.loads.size(), 4u);
  EXPECT_FALSE(r.converged);
  EXPECT_EQ(*r.highest_meeting, 8);
  EXPECT_EQ(r.stop_reason, "step limit reached before the knee was bracketed");

  KneeAt knee2{5};
  o.max_steps = 5;  // 1 2 4 8 | 6: bracketed, not narrowed
  const CapacitySearchResult r2 = search(o, knee2);
  EXPECT_FALSE(r2.converged);
  EXPECT_EQ(*r2.highest_meeting, 4);
  EXPECT_EQ(*r2.lowest_failing, 6);
  EXPECT_EQ(r2.stop_reason, "step limit reached before the precision");
}

TEST(CapacitySearch, BadOptionsAreRefused) {
  KneeAt knee{1};
  CapacitySearchOptions o;
  o.precision = 0;
  EXPECT_THROW(search(o, knee), Error);
  o = {};
  o.max_steps = 0;
  EXPECT_THROW(search(o, knee), Error);
  o = {};
  o.start = -1;
  EXPECT_THROW(search(o, knee), Error);
  EXPECT_EQ(knee.calls, 0);
}

}  // namespace
}  // namespace tokenmill::bench
