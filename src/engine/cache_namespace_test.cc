#include "engine/cache_namespace.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "engine/test_util.h"
#include "model/model.h"
#include "util/error.h"

namespace tokenmill::engine {
namespace {

// (Aggregate initialisation: assigning literals to the fields trips a GCC 12
// -Wrestrict false positive.)
kv::CacheNamespace some_namespace() { return kv::CacheNamespace{"m", "t", "", "r", "causal", "f16", ""}; }

TEST(CacheNamespaceTest, TenantsShareOnlyWithoutIsolation) {
  const kv::CacheNamespace ns = some_namespace();
  EXPECT_EQ(request_namespace(ns, false, "a"), request_namespace(ns, false, "b"));
  EXPECT_EQ(request_namespace(ns, false, "a"), kv::namespace_id(ns));
  EXPECT_NE(request_namespace(ns, true, "a"), request_namespace(ns, true, "b"));
  EXPECT_EQ(request_namespace(ns, true, "a"), request_namespace(ns, true, "a"));
  EXPECT_NE(request_namespace(ns, true, ""), kv::namespace_id(ns));
}

TEST(CacheNamespaceTest, IdentityFollowsTheFileAndConfig) {
  const std::string& path = testing::tiny_model_path();
  std::unique_ptr<model::Model> m = model::Model::load(path);
  const model::ModelConfig& c = m->config();
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(m->file());
  const auto id = [&](const tokenizer::Tokenizer* t, std::string_view adapter, kv::KvDtype dtype) {
    return kv::namespace_id(make_cache_namespace(path, c, t, adapter, dtype));
  };
  const uint64_t base = id(&tok, "", kv::KvDtype::F16);
  EXPECT_EQ(base, id(&tok, "", kv::KvDtype::F16));
  EXPECT_NE(base, id(&tok, "lora-1", kv::KvDtype::F16));
  EXPECT_NE(base, id(&tok, "", kv::KvDtype::F32));
  EXPECT_NE(base, id(nullptr, "", kv::KvDtype::F16));
  EXPECT_EQ(make_cache_namespace(path, c, &tok, "", kv::KvDtype::F16).kv_dtype, "f16");

  model::ModelConfig rope = c;
  rope.rope_base *= 2;
  EXPECT_NE(rope_identity(rope), rope_identity(c));
  EXPECT_EQ(attention_mask_identity(c), "causal");
  model::ModelConfig window = c;
  window.sliding_window = 8;
  window.layer_is_local = {true, false};
  EXPECT_EQ(attention_mask_identity(window), "causal+sliding:8:LG");

  // A copy of the file at another path is another model; a missing file is an error.
  const std::string copy = path + ".copy";
  std::filesystem::copy_file(path, copy, std::filesystem::copy_options::overwrite_existing);
  EXPECT_NE(model_identity(copy, c), model_identity(path, c));
  std::filesystem::remove(copy);
  EXPECT_THROW(model_identity(copy, c), Error);
}

// Two configurations that differ only in their RoPE scaling (type, factor,
// YaRN's parameters, or a --rope-scale override) must not share KV blocks.
TEST(CacheNamespaceTest, RopeScalingIsPartOfTheNamespace) {
  const std::string& path = testing::tiny_model_path();
  std::unique_ptr<model::Model> m = model::Model::load(path);
  const model::ModelConfig& c = m->config();
  const auto id = [&](const model::ModelConfig& config) {
    return kv::namespace_id(make_cache_namespace(path, config, nullptr, "", kv::KvDtype::F16));
  };
  model::ModelConfig linear = c;
  model::apply_rope_overrides(linear, {.scaling = "linear", .scale = 4.0});
  model::ModelConfig yarn = c;
  model::apply_rope_overrides(yarn, {.scaling = "yarn", .scale = 4.0});
  model::ModelConfig yarn_orig = yarn;
  model::apply_rope_overrides(yarn_orig, {.yarn_orig_ctx = 32});
  model::ModelConfig yarn_beta = yarn;
  yarn_beta.yarn_beta_fast = 16;
  model::ModelConfig linear2 = c;
  model::apply_rope_overrides(linear2, {.scale = 2.0});
  const uint64_t ids[] = {id(c), id(linear), id(yarn), id(yarn_orig), id(yarn_beta), id(linear2)};
  for (size_t i = 0; i < std::size(ids); ++i)
    for (size_t j = i + 1; j < std::size(ids); ++j) EXPECT_NE(ids[i], ids[j]) << i << " vs " << j;
  // The same overrides give the same namespace; a longer context alone does not change it.
  model::ModelConfig linear_again = c;
  model::apply_rope_overrides(linear_again, {.scaling = "linear", .scale = 4.0, .ctx = c.n_ctx_train * 2});
  EXPECT_EQ(id(linear_again), id(linear));
}

TEST(CacheNamespaceTest, TokenizerIdentityDependsOnTheTokens) {
  tokenizer::TokenizerSpec spec;
  spec.tokens = {"<unk>", "<s>", "</s>", "a", "b"};
  const tokenizer::Tokenizer a = tokenizer::Tokenizer::from_spec(spec);
  spec.tokens = {"<unk>", "<s>", "</s>", "a", "c"};
  const tokenizer::Tokenizer b = tokenizer::Tokenizer::from_spec(spec);
  EXPECT_NE(tokenizer_identity(a), tokenizer_identity(b));
  EXPECT_EQ(tokenizer_identity(b), tokenizer_identity(tokenizer::Tokenizer::from_spec(spec)));
}

}  // namespace
}  // namespace tokenmill::engine
