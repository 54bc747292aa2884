#include "server/lora_registry.h"

#include <fmt/format.h>

#include <algorithm>

#include "server/api_error.h"
#include "util/check.h"
#include "util/error.h"

namespace tokenmill::server {

namespace {

constexpr std::string_view kOtherAdapters = "_other";

}  // namespace

LoraRegistry::LoraRegistry(Loader loader, std::vector<std::string> base_names, int max_loras)
    : loader_(std::move(loader)), base_names_(std::move(base_names)), max_loras_(max_loras) {
  TM_CHECK(max_loras_ >= 1);
}

int64_t LoraRegistry::resident_locked() {
  std::erase_if(unloaded_, [](const std::weak_ptr<const model::LoraAdapter>& w) { return w.expired(); });
  return static_cast<int64_t>(entries_.size() + loading_.size() + unloaded_.size());
}

void LoraRegistry::check_name_locked(const std::string& name) const {
  if (name.empty()) bad_request("lora_name", "'lora_name' must not be empty");
  if (name.size() > kMaxNameBytes)
    bad_request("lora_name", "'lora_name' is {} bytes; at most {} are allowed", name.size(), kMaxNameBytes);
  if (std::any_of(name.begin(), name.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
    bad_request("lora_name", "'lora_name' must not contain control characters");
  if (std::find(base_names_.begin(), base_names_.end(), name) != base_names_.end())
    bad_request("lora_name", "'{}' is a name of the base model; choose another name for the adapter", name);
  const bool registered =
      std::any_of(entries_.begin(), entries_.end(), [&](const LoraEntry& e) { return e.name == name; });
  if (registered || loading_.count(name))
    throw ApiError(409,
                   fmt::format("a LoRA adapter named '{}' is already {}; unload it first or choose another name", name,
                               registered ? "loaded" : "being loaded"),
                   "invalid_request_error", std::string("lora_name"), "lora_name_in_use");
}

std::shared_ptr<const model::LoraAdapter> LoraRegistry::load(const std::string& name, const std::string& path) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    check_name_locked(name);
    if (path.empty()) bad_request("lora_path", "'lora_path' must not be empty");
    const int64_t resident = resident_locked();
    if (resident >= max_loras_) {
      const int64_t draining = static_cast<int64_t>(unloaded_.size());
      throw ApiError(
          409,
          fmt::format(
              "cannot load '{}': {} LoRA adapters are resident, the server's limit (--max-loras) "
              "is {}{}; unload one first",
              name, resident, max_loras_,
              draining > 0 ? fmt::format(" ({} of them unloaded, still finishing requests)", draining) : std::string()),
          "invalid_request_error", std::nullopt, "max_loras_reached");
    }
    loading_.insert(name);  // reserves the name and a resident slot while the file is read
  }
  std::shared_ptr<const model::LoraAdapter> adapter;
  try {
    adapter = loader_(path, name);
  } catch (const Error& e) {
    std::lock_guard<std::mutex> lock(mutex_);
    loading_.erase(name);
    throw ApiError(400, fmt::format("cannot load LoRA adapter '{}': {}", name, e.what()), "invalid_request_error",
                   std::string("lora_path"), "invalid_lora_adapter");
  } catch (...) {
    std::lock_guard<std::mutex> lock(mutex_);
    loading_.erase(name);
    throw;
  }
  TM_CHECK(adapter != nullptr);
  std::lock_guard<std::mutex> lock(mutex_);
  loading_.erase(name);
  entries_.push_back(LoraEntry{name, path, adapter});
  return adapter;
}

void LoraRegistry::unload(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const LoraEntry& e) { return e.name == name; });
  if (it == entries_.end())
    throw ApiError(404, fmt::format("no LoRA adapter named '{}' is loaded", name), "invalid_request_error",
                   std::string("lora_name"), "lora_not_found");
  // Watched until the requests holding it finish: it still counts against
  // --max-loras until then.
  unloaded_.push_back(it->adapter);
  entries_.erase(it);
}

std::shared_ptr<const model::LoraAdapter> LoraRegistry::find(std::string_view name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const LoraEntry& e : entries_)
    if (e.name == name) return e.adapter;
  return nullptr;
}

std::vector<LoraEntry> LoraRegistry::list() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_;
}

void LoraRegistry::count_request(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [label, n] : requests_)
    if (label == name) {
      ++n;
      return;
    }
  // Bounded label set: names come from clients when runtime loading is on.
  if (requests_.size() < kMaxAdapterLabels) {
    requests_.emplace_back(name, 1);
    return;
  }
  for (auto& [label, n] : requests_)
    if (label == kOtherAdapters) {
      ++n;
      return;
    }
  requests_.emplace_back(std::string(kOtherAdapters), 1);
}

LoraServingStats LoraRegistry::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  LoraServingStats s;
  s.loaded = static_cast<int64_t>(entries_.size());
  s.draining = std::count_if(unloaded_.begin(), unloaded_.end(),
                             [](const std::weak_ptr<const model::LoraAdapter>& w) { return !w.expired(); });
  s.requests = requests_;
  return s;
}

}  // namespace tokenmill::server
