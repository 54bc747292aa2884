// stories260K (a real trained llama2.c model, ../shared/models) run through
// Model::forward with whatever kernel table is active (TOKENMILL_ISA; under
// qemu-user on AArch64, the NEON one): imported as F32, its greedy
// continuations must equal the llama2.c reference token for token; imported
// as Q8_0 (the 64-column matrices take the integer decode kernels), its
// first-step logits must stay near the F32 run's, with the same top token. The end-to-end suite
// checks the same through the tokenmill program; this test needs no
// program, so a cross build can run it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "model/llama2c_import.h"
#include "model/model.h"
#include "model/single_sequence.h"
#include "model/synth.h"
#include "util/test_dependency.h"
#include "util/thread_pool.h"

namespace tokenmill::model {
namespace {

namespace fs = std::filesystem;

struct StoriesCase {
  std::vector<int32_t> prompt;
  std::vector<int32_t> greedy;
};

// The model imported in `format` into a temporary file, loaded.
class Stories {
 public:
  Stories(const fs::path& checkpoint, const char* format) {
    path_ =
        fs::temp_directory_path() / ("tm_stories_" + std::string(format) + "_" + std::to_string(getpid()) + ".gguf");
    import_llama2c(checkpoint.string(), std::nullopt, path_.string(), *parse_weight_format(format));
    model_ = Model::load(path_.string());
  }
  ~Stories() {
    model_.reset();
    fs::remove(path_);
  }
  Model& model() { return *model_; }

 private:
  fs::path path_;
  std::unique_ptr<Model> model_;
};

int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

class Stories260KGreedy : public ::testing::Test {
 protected:
  void SetUp() override {
    const fs::path dir = testing::shared_dir() / "models";
    checkpoint_ = dir / "stories260K.bin";
    if (!fs::exists(checkpoint_)) TM_MISSING_DEPENDENCY("no " << checkpoint_ << " (set TOKENMILL_SHARED)");
    std::ifstream in(dir / "stories260K.expected.json");
    const nlohmann::json expected = nlohmann::json::parse(in);
    for (const auto& c : expected.at("cases")) {
      cases_.push_back({c.at("prompt").get<std::vector<int32_t>>(), c.at("greedy").get<std::vector<int32_t>>()});
    }
    ASSERT_FALSE(cases_.empty());
  }
  fs::path checkpoint_;
  std::vector<StoriesCase> cases_;
};

TEST_F(Stories260KGreedy, F32MatchesTheReferenceTokenForToken) {
  Stories s(checkpoint_, "F32");
  ThreadPool pool(2);
  for (const StoriesCase& c : cases_) {
    EXPECT_EQ(greedy_continuation(s.model(), c.prompt, static_cast<int64_t>(c.greedy.size()), kv::KvDtype::F32, pool),
              c.greedy)
        << kernels::isa_name(kernels::active_kernels().isa) << ", prompt of " << c.prompt.size() << " tokens";
  }
}

// Q8_0 weights (the embedding and classifier included) move this tiny
// model's first-step logits by up to 0.90 from the F32 run's (measured with
// the scalar, AVX2 and AVX-512 tables alike: 0.47-0.90 over the three
// prompts, the tables within 1e-3 of each other). Bound 1.5: a wrong block,
// scale or token layout in a decode kernel scrambles the logits (errors of
// several units) and fails.
TEST_F(Stories260KGreedy, Q8_0StaysCloseToF32) {
  Stories f32(checkpoint_, "F32"), q8(checkpoint_, "Q8_0");
  ThreadPool pool(2);
  for (const StoriesCase& c : cases_) {
    std::vector<float> a, b;
    SingleSequence sa(f32.model(), static_cast<int64_t>(c.prompt.size()), kv::KvDtype::F32);
    SingleSequence sb(q8.model(), static_cast<int64_t>(c.prompt.size()), kv::KvDtype::F32);
    sa.forward(c.prompt, false, a, pool);
    sb.forward(c.prompt, false, b, pool);
    ASSERT_EQ(a.size(), b.size());
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(double(a[i]) - b[i]));
    EXPECT_LT(worst, 1.5) << kernels::isa_name(kernels::active_kernels().isa);
    EXPECT_EQ(argmax(a), argmax(b));
  }
}

}  // namespace
}  // namespace tokenmill::model
