#include "cli/rope_flags.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cli/engine_flags.h"

namespace tokenmill::cli {
namespace {

EngineFlags parse(std::vector<std::string> args, EngineFlagSet set) {
  CLI::App app("test");
  EngineFlags flags;
  add_engine_flags(app, flags, set);
  std::reverse(args.begin(), args.end());  // CLI11 takes them last-first
  app.parse(args);
  return flags;
}

// The flags reach the engine's config as llama.cpp spells them; the
// serving context (-c, --ctx-size or --max-model-len) is the override's ctx.
TEST(RopeFlags, ServeFlagsBecomeTheEnginesOverrides) {
  const EngineFlags f = parse({"--rope-scaling", "yarn", "--rope-scale", "4", "--yarn-orig-ctx", "4096",
                               "--rope-freq-base", "500000", "-c", "32768"},
                              EngineFlagSet::kServe);
  const engine::EngineConfig c = engine_config("m.gguf", f);
  EXPECT_EQ(c.rope.scaling, "yarn");
  EXPECT_EQ(c.rope.scale, 4.0);
  EXPECT_EQ(c.rope.yarn_orig_ctx, 4096);
  EXPECT_EQ(c.rope.freq_base, 500000.0);
  EXPECT_EQ(c.rope.ctx, 32768);
  EXPECT_EQ(c.max_model_len, 32768);
  EXPECT_EQ(parse({"--max-model-len", "100"}, EngineFlagSet::kServe).max_model_len, 100);
}

TEST(RopeFlags, UnsetFlagsOverrideNothing) {
  const engine::EngineConfig c = engine_config("m.gguf", parse({}, EngineFlagSet::kBench));
  EXPECT_TRUE(c.rope.empty());
  const model::RopeOverrides o = rope_overrides(RopeFlags{}, 0);
  EXPECT_TRUE(o.empty());
  EXPECT_EQ(rope_overrides(RopeFlags{}, 2048).ctx, 2048);
}

}  // namespace
}  // namespace tokenmill::cli
