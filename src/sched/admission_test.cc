// The admission arithmetic: never_fits names each limit, and
// max_completion_tokens is its exact inverse for the context and KV pool.
#include "sched/admission.h"

#include <gtest/gtest.h>

namespace tokenmill::sched {
namespace {

CapacityLimits limits(int64_t max_model_len, int64_t num_blocks, int64_t block_size) {
  CapacityLimits l;
  l.max_model_len = max_model_len;
  l.kv_groups = {{static_cast<int32_t>(num_blocks), 0}};
  l.block_size = block_size;
  l.max_batch_tokens = 4096;
  l.prefill_chunk = 64;
  return l;
}

TEST(Admission, NeverFitsNamesTheLimit) {
  const CapacityLimits l = limits(64, 3, 16);
  EXPECT_FALSE(never_fits(l, 10, 20, 1));
  EXPECT_EQ(never_fits(l, 64, 1, 1)->reason, RejectReason::kPromptTooLong);
  EXPECT_EQ(never_fits(l, 10, 60, 1)->reason, RejectReason::kContextExceeded);
  // 20 + 30 = 50 tokens: 49 positions need 4 blocks of 16 > 3.
  const std::optional<Refusal> r = never_fits(l, 20, 30, 1);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->reason, RejectReason::kKvNeverFits);
  EXPECT_NE(r->message.find("needs 4 KV blocks"), std::string::npos) << r->message;
  // 16 + 17 = 33 tokens: two samples share the prompt's full block and own
  // one each (3 blocks); with one more token each owns two (5 > 3).
  EXPECT_FALSE(never_fits(l, 16, 17, 2));
  EXPECT_EQ(never_fits(l, 16, 18, 2)->reason, RejectReason::kKvNeverFits);
  CapacityLimits unchunked = l;
  unchunked.prefill_chunk = 0;
  unchunked.max_batch_tokens = 8;
  EXPECT_EQ(never_fits(unchunked, 9, 1, 1)->reason, RejectReason::kPromptTooLong);
}

TEST(Admission, WindowPoolBoundsParallelSamples) {
  CapacityLimits l = limits(0, 1000, 4);
  l.prefill_chunk = 4;
  l.kv_groups.push_back({8, 8});  // window 8: a decode step holds ceil(8 / 4) + 1 = 3 window blocks
  EXPECT_FALSE(never_fits(l, 40, 40, 2));
  const std::optional<Refusal> r = never_fits(l, 40, 40, 3);  // 9 > 8
  ASSERT_TRUE(r);
  EXPECT_EQ(r->reason, RejectReason::kKvNeverFits);
  EXPECT_NE(r->message.find("sliding-window"), std::string::npos) << r->message;
}

TEST(Admission, MaxCompletionTokensIsTheInverseOfNeverFits) {
  for (int64_t max_len : {0, 50, 200}) {
    for (int64_t blocks : {1, 3, 10}) {
      for (int64_t bs : {1, 4, 16}) {
        const CapacityLimits l = limits(max_len, blocks, bs);
        for (int64_t prompt = 1; prompt < 60; prompt += 7) {
          for (int64_t n = 1; n <= 3; ++n) {
            const int64_t most = max_completion_tokens(l, prompt, n);
            SCOPED_TRACE(testing::Message() << "max_len " << max_len << " blocks " << blocks << " bs " << bs
                                            << " prompt " << prompt << " n " << n << " most " << most);
            if (most >= 1) EXPECT_FALSE(never_fits(l, prompt, most, n)) << never_fits(l, prompt, most, n)->message;
            EXPECT_TRUE(never_fits(l, prompt, most + 1, n));
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace tokenmill::sched
