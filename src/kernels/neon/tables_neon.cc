// The kernel table of AArch64: the scalar table with the NEON kernels
// (neon.h) in place of the scalar ones they replace. Built only for AArch64
// (tm_library).
#include "kernels/dispatch.h"
#include "kernels/neon/neon.h"

namespace tokenmill::kernels {
namespace {

using gguf::TensorType;

// No packed int16 GEMM here: calls of more tokens than q16_rows takes
// (kMaxQ16RowTokens) dequantize panels of rows and use gemm_f32.
template <TensorType... Ts>
void set_q16_kernels(KernelTable& t) {
  ((t.of(Ts).q16_rows = neon::Q16Kernels<Ts>::q16_rows, t.of(Ts).q16_row_max_tokens = kMaxQ16RowTokens), ...);
}

}  // namespace

KernelTable make_neon_table() {
  KernelTable t = kernel_table_definition(Isa::kScalar);
  t.isa = Isa::kNeon;
  t.gemm_f32 = neon::gemm_f32;
  t.quantize_acts = neon::quantize_acts;
  set_q16_kernels<TensorType::Q8_0, TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1,
                  TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K>(t);
  t.attend_head = neon::attend_head;
  t.paged_attend_group = neon::paged_attend_group;
  return t;
}

}  // namespace tokenmill::kernels
