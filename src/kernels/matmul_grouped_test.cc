// kernels::matmul_grouped (the experts of a mixture-of-experts layer): each
// product over its row range of x must equal a separate matmul call on
// those rows bit for bit, on every ISA and path (decode-sized ranges, the
// packed and interleaved prefill paths), with empty ranges and one thread
// or several.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/interleave.h"
#include "kernels/matmul.h"
#include "kernels/test_util.h"

namespace tokenmill::kernels {
namespace {

using gguf::TensorType;
using testing::gaussian;
using testing::Weights;

TEST(MatmulGrouped, EachProductEqualsItsOwnMatmul) {
  ThreadPool one(1), three(3);
  // Token counts of the experts: empty, decode-sized, around the paths'
  // thresholds, and a prefill-sized one.
  const std::vector<int64_t> counts = {3, 0, 1, 17, 5, 40};
  int64_t total = 0;
  for (int64_t n : counts) total += n;
  for (const KernelTable* kt : available_kernels()) {
    for (TensorType type :
         {TensorType::F32, TensorType::F16, TensorType::Q8_0, TensorType::Q4_0, TensorType::Q4_K, TensorType::Q6_K}) {
      // One matrix per expert, 72 rows of 512 columns; Q4_0 also with
      // interleaved copies.
      std::vector<Weights> experts;
      for (size_t e = 0; e < counts.size(); ++e) experts.emplace_back(type, 72, 512, static_cast<uint32_t>(20 + e));
      std::vector<std::vector<uint8_t>> copies;
      std::vector<WeightView> views;
      for (Weights& w : experts) {
        views.push_back(w.view);
        if (type == TensorType::Q4_0) {
          copies.emplace_back(static_cast<size_t>(interleaved_bytes(w.view)) + 64);
          auto* p = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(copies.back().data()) + 63) / 64 * 64);
          interleave_weights(w.view, p);
          views.back().interleaved = p;
        }
      }
      const std::vector<float> x = gaussian(total * 512, 5);
      for (ThreadPool* pool : {&one, &three}) {
        std::vector<float> grouped(static_cast<size_t>(total * 72), -7.0f), separate(grouped.size(), -7.0f);
        std::vector<GroupedProduct> products;
        int64_t row = 0;
        for (size_t e = 0; e < counts.size(); ++e) {
          products.push_back({&views[e], row, counts[e], grouped.data() + row * 72});
          if (counts[e] > 0)
            matmul_with(*kt, views[e], x.data() + row * 512, counts[e], separate.data() + row * 72, *pool);
          row += counts[e];
        }
        matmul_grouped_with(*kt, products, x.data(), total, *pool);
        EXPECT_EQ(0, std::memcmp(grouped.data(), separate.data(), grouped.size() * sizeof(float)))
            << isa_name(kt->isa) << " " << gguf::tensor_type_name(type) << " threads " << pool->num_threads();
      }
    }
  }
}

TEST(MatmulGrouped, NothingToDoIsFine) {
  ThreadPool pool(2);
  Weights w(TensorType::Q8_0, 8, 64, 1);
  const GroupedProduct empty{&w.view, 0, 0, nullptr};
  matmul_grouped({&empty, 1}, nullptr, 0, pool);
  matmul_grouped({}, nullptr, 0, pool);
}

}  // namespace
}  // namespace tokenmill::kernels
