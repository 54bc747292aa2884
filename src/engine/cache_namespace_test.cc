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
