// The kernel table of AArch64: the scalar table with the NEON kernels
// (neon.h) in place of the scalar ones they replace. Built only for AArch64
// (tm_library).
#include "kernels/dispatch.h"
#include "kernels/neon/neon.h"

namespace tokenmill::kernels {

KernelTable make_neon_table() {
  KernelTable t = kernel_table_definition(Isa::kScalar);
  t.isa = Isa::kNeon;
  t.gemm_f32 = neon::gemm_f32;
  t.quantize_acts = neon::quantize_acts;
  t.q16_supports = neon::q16_supports;
  t.q16_rows = neon::q16_rows;
  // No packed int16 GEMM here: calls of more tokens than q16_rows takes
  // (kMaxQ16RowTokens) dequantize panels of rows and use gemm_f32.
  t.q16_row_max_tokens = kMaxQ16RowTokens;
  t.q16_row_max_tokens_direct = kMaxQ16RowTokens;
  t.attend_head = neon::attend_head;
  t.paged_attend_group = neon::paged_attend_group;
  return t;
}

}  // namespace tokenmill::kernels
