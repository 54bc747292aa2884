// The LoRA adapters a server offers, by name (docs/api.md, "LoRA
// adapters"): loaded at start-up (serve --lora NAME=FILE) or at run time
// (POST /v1/load_lora_adapter), picked by a request's `model`, removed by
// POST /v1/unload_lora_adapter.
//
// Unloading drains: the adapter leaves the table at once, so no new
// request can pick it, while every request that already holds it (its
// GenerateRequest::adapter shared_ptr) runs to its end on it. The adapter's
// mapped file is released when the last of those finishes.
//
// --max-loras bounds the adapters resident at once: those in the table,
// those being loaded, and unloaded ones still alive for their in-flight
// requests (watched through weak_ptrs). A load over the bound is refused,
// never queued.
//
// Thread-safety: every method may be called from any thread (one mutex).
// The loader (file mapping, checks, hashing: O(adapter bytes)) runs
// outside the lock, with the name reserved so that a second load of the
// same name is refused meanwhile.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/lora_adapter.h"

namespace tokenmill::server {

// One adapter of the table, as GET /v1/models and GET /lora-adapters show it.
struct LoraEntry {
  std::string name;
  std::string path;
  std::shared_ptr<const model::LoraAdapter> adapter;
};

// What /metrics reports about adapters.
struct LoraServingStats {
  int64_t loaded = 0;    // in the table
  int64_t draining = 0;  // unloaded, still used by requests in flight
  // Requests that picked each adapter, in first-seen order; at most
  // kMaxAdapterLabels names, the rest counted under "_other".
  std::vector<std::pair<std::string, uint64_t>> requests;
};

class LoraRegistry {
 public:
  static constexpr size_t kMaxNameBytes = 256;
  static constexpr size_t kMaxAdapterLabels = 64;

  // Maps and checks the file at `path` for the served model, naming it
  // `name`; throws tokenmill::Error naming the file and the problem.
  using Loader =
      std::function<std::shared_ptr<const model::LoraAdapter>(const std::string& path, const std::string& name)>;

  // `base_names`: the base model's served names, which no adapter may take.
  // `max_loras` >= 1.
  LoraRegistry(Loader loader, std::vector<std::string> base_names, int max_loras);

  // Loads and registers an adapter. Throws ApiError: 400 for a bad name or
  // a file the loader refuses (param lora_path), 409 for a name in use
  // (code lora_name_in_use) or a full table (code max_loras_reached).
  std::shared_ptr<const model::LoraAdapter> load(const std::string& name, const std::string& path);
  // Removes `name` from the table (requests holding it finish on it).
  // Throws ApiError 404 (code lora_not_found) for a name not in the table.
  void unload(const std::string& name);

  // The adapter registered as `name`, or null.
  std::shared_ptr<const model::LoraAdapter> find(std::string_view name) const;
  // The table in load order.
  std::vector<LoraEntry> list() const;
  // Counts a request that picked `name` (for /metrics).
  void count_request(const std::string& name);
  LoraServingStats stats() const;
  int max_loras() const { return max_loras_; }

 private:
  // Adapters in the table, being loaded, or unloaded and alive (mutex_ held).
  int64_t resident_locked();
  void check_name_locked(const std::string& name) const;

  const Loader loader_;
  const std::vector<std::string> base_names_;
  const int max_loras_;

  mutable std::mutex mutex_;
  std::vector<LoraEntry> entries_;  // load order (small: a linear search is cheapest)
  std::set<std::string, std::less<>> loading_;
  std::vector<std::weak_ptr<const model::LoraAdapter>> unloaded_;
  std::vector<std::pair<std::string, uint64_t>> requests_;
};

}  // namespace tokenmill::server
