#include "kv/kv_dtype.h"

#include "util/check.h"

namespace tokenmill::kv {

int64_t kv_dtype_bits(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::F32: return 32;
    case KvDtype::F16: return 16;
    case KvDtype::Q8_0:
    case KvDtype::FP8_E4M3: return 8;
    case KvDtype::Q4_0:
    case KvDtype::Q4_0_KC: return 4;
  }
  TM_CHECK_MSG(false, "unknown KvDtype");
}

std::string_view kv_dtype_name(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::F32: return "f32";
    case KvDtype::F16: return "f16";
    case KvDtype::Q8_0: return "q8_0";
    case KvDtype::FP8_E4M3: return "fp8_e4m3";
    case KvDtype::Q4_0: return "q4_0";
    case KvDtype::Q4_0_KC: return "q4_0_kc";
  }
  return "unknown";
}

std::optional<KvDtype> kv_dtype_from_name(std::string_view name) {
  if (name == "f32") return KvDtype::F32;
  if (name == "f16") return KvDtype::F16;
  if (name == "q8_0") return KvDtype::Q8_0;
  if (name == "fp8_e4m3" || name == "fp8") return KvDtype::FP8_E4M3;
  if (name == "q4_0") return KvDtype::Q4_0;
  if (name == "q4_0_kc") return KvDtype::Q4_0_KC;
  return std::nullopt;
}

std::string kv_dtype_choices() { return "f32|f16|q8_0|fp8_e4m3|q4_0|q4_0_kc"; }

}  // namespace tokenmill::kv
