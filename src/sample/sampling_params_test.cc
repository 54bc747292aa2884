#include "sample/sampling_params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "util/error.h"

namespace tokenmill::sample {
namespace {

constexpr int32_t kVocab = 100;

// Expects validate() to throw an Error whose message mentions `needle`.
void expect_rejected(const std::function<void(SamplingParams&)>& edit, const std::string& needle) {
  SamplingParams p;
  edit(p);
  try {
    p.validate(kVocab);
    ADD_FAILURE() << "validate() accepted a bad value; expected an error mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(SamplingParams, DefaultsAreValid) {
  SamplingParams p;
  EXPECT_NO_THROW(p.validate(kVocab));
  p.temperature = 0.0f;
  p.top_k = 40;
  p.top_p = 0.95f;
  p.min_p = 1.0f;
  p.repetition_penalty = 1.1f;
  p.penalty_last_n = -1;
  p.frequency_penalty = -2.0f;
  p.presence_penalty = 2.0f;
  p.logit_bias = {{0, -std::numeric_limits<float>::infinity()}, {kVocab - 1, 5.0f}};
  p.stop = {"\n\n", "User:"};
  EXPECT_NO_THROW(p.validate(kVocab));
}

TEST(SamplingParams, RejectsOutOfRange) {
  const float nan = std::nanf("");
  const float inf = std::numeric_limits<float>::infinity();
  expect_rejected([](SamplingParams& p) { p.temperature = -0.1f; }, "temperature");
  expect_rejected([&](SamplingParams& p) { p.temperature = nan; }, "temperature");
  expect_rejected([&](SamplingParams& p) { p.temperature = inf; }, "temperature");
  expect_rejected([](SamplingParams& p) { p.top_k = -1; }, "top_k");
  expect_rejected([](SamplingParams& p) { p.top_p = 0.0f; }, "top_p");
  expect_rejected([](SamplingParams& p) { p.top_p = 1.01f; }, "top_p");
  expect_rejected([&](SamplingParams& p) { p.top_p = nan; }, "top_p");
  expect_rejected([](SamplingParams& p) { p.min_p = -0.01f; }, "min_p");
  expect_rejected([](SamplingParams& p) { p.min_p = 1.5f; }, "min_p");
  expect_rejected([](SamplingParams& p) { p.repetition_penalty = 0.0f; }, "repetition_penalty");
  expect_rejected([](SamplingParams& p) { p.repetition_penalty = 11.0f; }, "repetition_penalty");
  expect_rejected([&](SamplingParams& p) { p.repetition_penalty = nan; }, "repetition_penalty");
  expect_rejected([](SamplingParams& p) { p.penalty_last_n = -2; }, "penalty_last_n");
  expect_rejected([](SamplingParams& p) { p.frequency_penalty = 2.5f; }, "frequency_penalty");
  expect_rejected([&](SamplingParams& p) { p.frequency_penalty = nan; }, "frequency_penalty");
  expect_rejected([](SamplingParams& p) { p.presence_penalty = -3.0f; }, "presence_penalty");
  expect_rejected([](SamplingParams& p) { p.logit_bias = {{kVocab, 1.0f}}; }, "token id 100");
  expect_rejected([](SamplingParams& p) { p.logit_bias = {{-1, 1.0f}}; }, "token id -1");
  expect_rejected([&](SamplingParams& p) { p.logit_bias = {{3, nan}}; }, "logit_bias value");
  expect_rejected([&](SamplingParams& p) { p.logit_bias = {{3, inf}}; }, "logit_bias value");
  expect_rejected([](SamplingParams& p) { p.stop = {"a", ""}; }, "stop string #1 is empty");
  expect_rejected([](SamplingParams& p) { p.stop.assign(kMaxStopStrings + 1, "x"); }, "too many stop strings");
}

}  // namespace
}  // namespace tokenmill::sample
