#include "server/lora_registry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <thread>

#include "gguf/writer.h"
#include "model/model.h"
#include "model/test_gguf_variants.h"
#include "server/api_error.h"

namespace tokenmill::server {
namespace {

using gguf::Value;
using model::test_files::TinyModelFile;

// A rank-`rank` adapter of layer 0's Q projection for `base`, F32, every
// value `fill` (so two fills give two identities).
std::string write_adapter(const model::Model& base, const std::string& tag, float fill, int64_t rank = 2,
                          const std::string& arch = "") {
  const model::ModelConfig& c = base.config();
  gguf::GgufWriter w;
  w.set("general.architecture", Value::str(arch.empty() ? c.arch_name : arch));
  w.set("general.type", Value::str("adapter"));
  w.set("adapter.type", Value::str("lora"));
  w.set("adapter.lora.alpha", Value::f32(static_cast<float>(rank)));
  auto tensor = [&](int64_t n) {
    std::vector<float> v(static_cast<size_t>(n), fill);
    std::vector<uint8_t> bytes(v.size() * sizeof(float));
    std::memcpy(bytes.data(), v.data(), bytes.size());
    return bytes;
  };
  w.add_tensor("blk.0.attn_q.weight.lora_a", gguf::TensorType::F32, {c.n_embd, rank}, tensor(c.n_embd * rank));
  w.add_tensor("blk.0.attn_q.weight.lora_b", gguf::TensorType::F32, {rank, c.n_q_dim()}, tensor(rank * c.n_q_dim()));
  const std::string path =
      (std::filesystem::temp_directory_path() / (tag + "_" + std::to_string(getpid()) + ".gguf")).string();
  w.write(path);
  return path;
}

class LoraRegistryTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { base_ = new TinyModelFile(model::SynthArch::kLlama, 7, "lora_registry"); }
  static void TearDownTestSuite() {
    delete base_;
    base_ = nullptr;
  }
  void TearDown() override {
    for (const std::string& p : files_) std::filesystem::remove(p);
  }

  std::string adapter_file(float fill, const std::string& arch = "") {
    files_.push_back(write_adapter(base_->model(), "lora_registry_" + std::to_string(files_.size()), fill, 2, arch));
    return files_.back();
  }
  LoraRegistry registry(int max_loras) {
    return LoraRegistry(
        [this](const std::string& path, const std::string& name) {
          ++loads_;
          return model::LoraAdapter::load(path, base_->model(), name);
        },
        {"base", "base-alias"}, max_loras);
  }

  static TinyModelFile* base_;
  std::vector<std::string> files_;
  std::atomic<int> loads_{0};
};

TinyModelFile* LoraRegistryTest::base_ = nullptr;

// The status and code of the ApiError `fn` throws (0, "" when none).
template <typename Fn>
std::pair<int, std::string> api_error_of(Fn fn) {
  try {
    fn();
  } catch (const ApiError& e) {
    return {e.status(), e.code().value_or(e.param().value_or(""))};
  }
  return {0, ""};
}

TEST_F(LoraRegistryTest, LoadFindListUnload) {
  LoraRegistry r = registry(4);
  const std::string file = adapter_file(0.01f);
  const auto a = r.load("alpha", file);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->name(), "alpha");
  EXPECT_EQ(r.find("alpha"), a);
  EXPECT_EQ(r.find("beta"), nullptr);
  r.load("beta", file);
  const std::vector<LoraEntry> list = r.list();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].name, "alpha");
  EXPECT_EQ(list[1].name, "beta");
  EXPECT_EQ(list[1].path, file);
  // The same file under two names: one identity (the prefix cache shares).
  EXPECT_EQ(list[0].adapter->identity(), list[1].adapter->identity());
  r.unload("alpha");
  EXPECT_EQ(r.find("alpha"), nullptr);
  EXPECT_EQ(r.list().size(), 1u);
  EXPECT_EQ(api_error_of([&] { r.unload("alpha"); }), (std::pair<int, std::string>{404, "lora_not_found"}));
}

TEST_F(LoraRegistryTest, RefusesBadNamesAndFiles) {
  LoraRegistry r = registry(4);
  const std::string file = adapter_file(0.01f);
  EXPECT_EQ(api_error_of([&] { r.load("", file); }).first, 400);
  EXPECT_EQ(api_error_of([&] { r.load("base-alias", file); }), (std::pair<int, std::string>{400, "lora_name"}));
  EXPECT_EQ(api_error_of([&] { r.load("a\nb", file); }).first, 400);
  EXPECT_EQ(api_error_of([&] { r.load(std::string(LoraRegistry::kMaxNameBytes + 1, 'x'), file); }).first, 400);
  EXPECT_EQ(api_error_of([&] { r.load("x", ""); }), (std::pair<int, std::string>{400, "lora_path"}));
  EXPECT_EQ(api_error_of([&] { r.load("x", "/nonexistent/adapter.gguf"); }),
            (std::pair<int, std::string>{400, "invalid_lora_adapter"}));
  EXPECT_EQ(api_error_of([&] { r.load("x", adapter_file(0.01f, "qwen2")); }),
            (std::pair<int, std::string>{400, "invalid_lora_adapter"}));
  r.load("x", file);
  EXPECT_EQ(api_error_of([&] { r.load("x", file); }), (std::pair<int, std::string>{409, "lora_name_in_use"}));
  // Failed loads leave nothing behind: the names are free, no slot is held.
  EXPECT_EQ(r.list().size(), 1u);
  EXPECT_EQ(r.stats().loaded, 1);
}

// Unloaded adapters count against the bound while a request holds them.
TEST_F(LoraRegistryTest, MaxLorasCountsDrainingAdapters) {
  LoraRegistry r = registry(2);
  const std::string file = adapter_file(0.01f);
  std::shared_ptr<const model::LoraAdapter> in_flight = r.load("a", file);
  r.load("b", file);
  EXPECT_EQ(api_error_of([&] { r.load("c", file); }), (std::pair<int, std::string>{409, "max_loras_reached"}));
  r.unload("a");
  EXPECT_EQ(r.stats().draining, 1);
  EXPECT_EQ(api_error_of([&] { r.load("c", file); }), (std::pair<int, std::string>{409, "max_loras_reached"}));
  EXPECT_EQ(in_flight->name(), "a");  // still usable by its request
  in_flight.reset();                  // the request finished
  EXPECT_EQ(r.stats().draining, 0);
  r.load("c", file);
  EXPECT_EQ(r.stats().loaded, 2);
  // A name unloaded may be loaded again, with other contents.
  r.unload("c");
  const auto again = r.load("c", adapter_file(0.02f));
  EXPECT_NE(again->identity(), r.find("b")->identity());
}

// Concurrent loads of one name: exactly one wins, the rest get 409.
TEST_F(LoraRegistryTest, ConcurrentLoadsOfOneName) {
  LoraRegistry r = registry(8);
  const std::string file = adapter_file(0.01f);
  std::atomic<int> ok{0}, conflict{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 6; ++i)
    threads.emplace_back([&] {
      const auto [status, code] = api_error_of([&] { r.load("same", file); });
      if (status == 0) ++ok;
      if (status == 409 && code == "lora_name_in_use") ++conflict;
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), 1);
  EXPECT_EQ(conflict.load(), 5);
  EXPECT_EQ(r.list().size(), 1u);
}

TEST_F(LoraRegistryTest, RequestCountsAreBounded) {
  LoraRegistry r = registry(1);
  for (size_t i = 0; i < LoraRegistry::kMaxAdapterLabels + 5; ++i) r.count_request("n" + std::to_string(i));
  r.count_request("n0");
  const LoraServingStats s = r.stats();
  ASSERT_EQ(s.requests.size(), LoraRegistry::kMaxAdapterLabels + 1);
  EXPECT_EQ(s.requests[0], (std::pair<std::string, uint64_t>{"n0", 2}));
  EXPECT_EQ(s.requests.back(), (std::pair<std::string, uint64_t>{"_other", 5}));
}

}  // namespace
}  // namespace tokenmill::server
