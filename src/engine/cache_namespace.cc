#include "engine/cache_namespace.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <filesystem>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "model/rope_config.h"
#include "util/error.h"

namespace tokenmill::engine {
namespace {

// Appends a length-prefixed field so that ("ab","c") and ("a","bc") differ.
void add_field(XXH3_state_t* state, std::string_view s) {
  const uint64_t n = s.size();
  XXH3_64bits_update(state, &n, sizeof n);
  XXH3_64bits_update(state, s.data(), s.size());
}

}  // namespace

std::string model_identity(const std::string& weights_path, const model::ModelConfig& c) {
  std::error_code ec;
  std::filesystem::path canonical = std::filesystem::weakly_canonical(weights_path, ec);
  if (ec) canonical = weights_path;
  struct stat st {};
  if (::stat(canonical.c_str(), &st) != 0) fail("{}: cannot stat the model file", weights_path);
  return fmt::format("{}|size={}|mtime={}.{:09}|{}|vocab={},embd={},layers={},heads={},kv_heads={},head_dim={},ff={}",
                     canonical.native(), static_cast<int64_t>(st.st_size), static_cast<int64_t>(st.st_mtim.tv_sec),
                     static_cast<int64_t>(st.st_mtim.tv_nsec), c.arch_name, c.n_vocab, c.n_embd, c.n_layer, c.n_head,
                     c.n_kv_head, c.head_dim, c.n_ff);
}

std::string tokenizer_identity(const tokenizer::Tokenizer& t) {
  XXH3_state_t state;
  XXH3_64bits_reset(&state);
  add_field(&state,
            fmt::format("kind={},pre={},bos={},eos={},unk={},add_bos={},space={}", static_cast<int>(t.kind()),
                        t.pre_tokenizer_name(), t.bos_id(), t.eos_id(), t.unk_id(), t.add_bos(), t.add_space_prefix()));
  for (int32_t id = 0; id < t.vocab_size(); ++id) {
    add_field(&state, t.token_text(id));
    const int64_t type = static_cast<int64_t>(t.token_type(id));
    XXH3_64bits_update(&state, &type, sizeof type);
  }
  return fmt::format("n={},xxh3={:016x}", t.vocab_size(), XXH3_64bits_digest(&state));
}

// Every input of the rotation, after the user's overrides: the file's
// rope_freqs tensor is covered by the model identity (the file's bytes).
std::string rope_identity(const model::ModelConfig& c) {
  std::string id =
      fmt::format("base={},local={},scale={},local_scale={},dims={},neox={},type={},factor={},attn={}", c.rope_base,
                  c.rope_base_local, c.rope_freq_scale, c.rope_freq_scale_local, c.rope_dims, c.rope_neox ? 1 : 0,
                  model::rope_scaling_name(c.rope_scaling), c.rope_scaling_factor, c.rope_attn_factor);
  if (c.rope_scaling == model::RopeScalingType::kYarn)
    id += fmt::format(",orig={},ext={},beta={}/{}", c.rope_orig_ctx, c.yarn_ext_factor, c.yarn_beta_fast,
                      c.yarn_beta_slow);
  return id;
}

std::string attention_mask_identity(const model::ModelConfig& c) {
  bool any_local = false;
  std::string layers;
  for (bool local : c.layer_is_local) {
    layers += local ? 'L' : 'G';
    any_local = any_local || local;
  }
  if (!any_local || c.sliding_window <= 0) return "causal";
  return fmt::format("causal+sliding:{}:{}", c.sliding_window, layers);
}

kv::CacheNamespace make_cache_namespace(const std::string& weights_path, const model::ModelConfig& config,
                                        const tokenizer::Tokenizer* tokenizer, std::string_view adapter_id,
                                        kv::KvDtype kv_dtype, const kv::KvPolicy& kv_policy) {
  kv::CacheNamespace ns;
  ns.model = model_identity(weights_path, config);
  ns.tokenizer = tokenizer ? tokenizer_identity(*tokenizer) : "none";
  ns.adapter = std::string(adapter_id);
  ns.rope = rope_identity(config);
  ns.attention = attention_mask_identity(config);
  ns.kv_dtype = std::string(kv::kv_dtype_name(kv_dtype));
  if (kv_policy.evicts()) ns.kv_policy = kv_policy.describe();
  return ns;
}

uint64_t request_namespace(const kv::CacheNamespace& base, bool isolate_tenants, std::string_view tenant) {
  if (!isolate_tenants) return kv::namespace_id(base);
  kv::CacheNamespace ns = base;
  ns.isolation = fmt::format("tenant:{}", tenant);
  return kv::namespace_id(ns);
}

}  // namespace tokenmill::engine
