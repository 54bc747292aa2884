#include "engine/engine_config.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace tokenmill::engine {
namespace {

model::ModelConfig model_with_context(int64_t ctx) {
  model::ModelConfig m;
  m.n_ctx_train = ctx;
  return m;
}

TEST(EngineConfigTest, KvBlocksFollowThePrecedence) {
  EngineConfig c;
  c.block_size = 16;
  c.max_seqs = 4;
  const model::ModelConfig m = model_with_context(1024);  // 64 blocks per sequence, 256 for 4
  c.kv_memory_fraction = 0.5;
  EXPECT_EQ(resolve_kv_blocks(c, m, 1000, 100000), 50);  // 0.5 * 100000 / 1000
  c.kv_memory_bytes = 30500;
  EXPECT_EQ(resolve_kv_blocks(c, m, 1000, 100000), 30);  // the byte budget wins, rounded down
  c.kv_num_blocks = 7;
  EXPECT_EQ(resolve_kv_blocks(c, m, 1000, 100000), 7);  // an exact count wins over both
}

// The window pool holds max_seqs windows (+2 blocks each) and one step's
// chunks when the budget allows; the full-attention pool gets the rest.
TEST(EngineConfigTest, WindowPoolIsSizedFirstAndTheRestGoesToTheFullPool) {
  EngineConfig c;
  c.block_size = 16;
  c.max_seqs = 4;
  c.max_batch_tokens = 100;
  model::ModelConfig m = model_with_context(4096);
  m.sliding_window = 512;
  // 4 * (32 + 2) + ceil(100 / 16) = 136 + 7 = 143.
  EXPECT_EQ(window_pool_blocks(c, 512), 143);
  c.kv_memory_bytes = 143 * 500 + 300 * 100 + 99;  // one pool of 600-byte blocks: 169
  KvPoolSizes p = resolve_kv_pools(c, m, 100, 500, 0);
  EXPECT_EQ(p.window_blocks, 143);
  EXPECT_EQ(p.blocks, 300);
  // No window bytes: one pool, as resolve_kv_blocks.
  p = resolve_kv_pools(c, m, 100, 0, 0);
  EXPECT_EQ(p.window_blocks, 0);
  EXPECT_EQ(p.blocks, resolve_kv_blocks(c, m, 100, 0));
  // An exact count sets the full-attention pool alone.
  c.kv_num_blocks = 9;
  p = resolve_kv_pools(c, m, 100, 500, 0);
  EXPECT_EQ(p.blocks, 9);
  EXPECT_EQ(p.window_blocks, 143);
  // A small budget: the window pool gets at most what one pool of 600-byte
  // blocks would have had, 60000 / 600 = 100 blocks; the rest, 10000 bytes,
  // is 100 full-attention blocks.
  c.kv_num_blocks = 0;
  c.kv_memory_bytes = 60000;
  p = resolve_kv_pools(c, m, 100, 500, 0);
  EXPECT_EQ(p.window_blocks, 100);
  EXPECT_EQ(p.blocks, 100);
  // Never below one sequence's window and step: ceil((511 + 100) / 16) + 1 = 40.
  c.kv_memory_bytes = 40 * 500 + 3 * 100;
  p = resolve_kv_pools(c, m, 100, 500, 0);
  EXPECT_EQ(p.window_blocks, 40);
  EXPECT_EQ(p.blocks, 3);
  // A budget that cannot hold that and one more block is refused.
  c.kv_memory_bytes = 40 * 500 + 99;
  EXPECT_THROW(resolve_kv_pools(c, m, 100, 500, 0), Error);
}

TEST(EngineConfigTest, KvBlocksAreCappedAtWhatSequencesCanUse) {
  EngineConfig c;
  c.block_size = 16;
  c.max_seqs = 4;
  c.kv_memory_bytes = int64_t{1} << 40;
  EXPECT_EQ(resolve_kv_blocks(c, model_with_context(1000), 1000, 0), 4 * 63);  // ceil(1000 / 16) = 63
  c.max_model_len = 100;
  EXPECT_EQ(resolve_kv_blocks(c, model_with_context(1000), 1000, 0), 4 * 7);
  c.kv_memory_bytes = 999;
  EXPECT_THROW(resolve_kv_blocks(c, model_with_context(1000), 1000, 0), Error);
}

TEST(EngineConfigTest, ValidateAndParse) {
  EngineConfig c;
  EXPECT_NO_THROW(c.validate());
  c.max_batch_tokens = c.max_seqs - 1;
  EXPECT_THROW(c.validate(), Error);
  c = EngineConfig{};
  c.kv_memory_fraction = 0;
  EXPECT_THROW(c.validate(), Error);
  EXPECT_EQ(parse_kv_policy("queue"), sched::KvExhaustedPolicy::kQueue);
  EXPECT_EQ(parse_kv_policy("reject"), sched::KvExhaustedPolicy::kReject);
  EXPECT_EQ(parse_kv_policy("preempt"), sched::KvExhaustedPolicy::kPreempt);
  EXPECT_THROW(parse_kv_policy("drop"), Error);
  EXPECT_EQ(parse_prefix_isolation("tenant"), PrefixIsolation::kTenant);
  EXPECT_THROW(parse_prefix_isolation("none"), Error);
}

TEST(EngineConfigTest, NegativeTenantLimitsNameTheField) {
  const auto message = [](const EngineConfig& c) -> std::string {
    try {
      c.validate();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EngineConfig c;
  c.tenant_limits["acme"] = TenantLimits{.max_running = 2, .max_waiting = -1};
  EXPECT_NE(message(c).find("tenant_limits[\"acme\"].max_waiting"), std::string::npos) << message(c);
  c = EngineConfig{};
  c.default_tenant_limits.max_prefix_blocks = -3;
  EXPECT_NE(message(c).find("default_tenant_limits.max_prefix_blocks"), std::string::npos) << message(c);
  c.default_tenant_limits = TenantLimits{.max_running = 1, .max_waiting = 2, .max_prefix_blocks = 3};
  EXPECT_NO_THROW(c.validate());
}

}  // namespace
}  // namespace tokenmill::engine
