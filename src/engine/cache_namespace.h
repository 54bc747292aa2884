// The prefix-cache namespace of a request (see kv::CacheNamespace): two
// requests share cached KV blocks only when every input that shapes a
// block's contents is the same: the model's weights and architecture, the
// tokenizer (the same ids must mean the same text), the adapter, the RoPE
// configuration (positions are baked into K), the attention mask mode, the
// KV element type and, when isolation is per tenant, the tenant.
//
// The parts are computed once at engine start (cost: one pass over the
// tokenizer's token texts); per request only the isolation domain changes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "kv/kv_dtype.h"
#include "kv/kv_policy.h"
#include "kv/prefix_cache.h"
#include "model/config.h"
#include "tokenizer/tokenizer.h"

namespace tokenmill::engine {

// Identity of the weights file: its canonical path, size and modification
// time (a rewritten file gets a new identity), plus the architecture name
// and shape hyperparameters. Throws Error when the file cannot be stat'ed.
std::string model_identity(const std::string& weights_path, const model::ModelConfig& config);
// Hex hash of the token texts and types, the special ids and the pre-tokenizer.
std::string tokenizer_identity(const tokenizer::Tokenizer& tokenizer);
// "base=10000,local=10000,scale=1,local_scale=1,dims=16,neox=0,type=none,
// factor=1,attn=1", plus ",orig=N,ext=E,beta=F/S" for YaRN.
std::string rope_identity(const model::ModelConfig& config);
// "causal", or "causal+sliding:W:" followed by one L/G per layer.
std::string attention_mask_identity(const model::ModelConfig& config);

// Every part but the isolation domain (left empty: the shared domain).
// tokenizer may be null (a model without one: "none").
kv::CacheNamespace make_cache_namespace(const std::string& weights_path, const model::ModelConfig& config,
                                        const tokenizer::Tokenizer* tokenizer, std::string_view adapter_id,
                                        kv::KvDtype kv_dtype, const kv::KvPolicy& kv_policy = {});

// The namespace id of a request: the shared domain without isolation, else
// the tenant's own domain (the empty tenant is a tenant of its own, distinct
// from the shared domain).
uint64_t request_namespace(const kv::CacheNamespace& base, bool isolate_tenants, std::string_view tenant);

}  // namespace tokenmill::engine
