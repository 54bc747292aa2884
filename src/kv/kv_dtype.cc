#include "kv/kv_dtype.h"

#include "util/check.h"

namespace tokenmill::kv {

int64_t kv_dtype_bytes(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::F32:
      return 4;
    case KvDtype::F16:
      return 2;
  }
  TM_CHECK_MSG(false, "unknown KvDtype");
}

std::string_view kv_dtype_name(KvDtype dtype) {
  switch (dtype) {
    case KvDtype::F32:
      return "f32";
    case KvDtype::F16:
      return "f16";
  }
  return "unknown";
}

std::optional<KvDtype> kv_dtype_from_name(std::string_view name) {
  if (name == "f32") return KvDtype::F32;
  if (name == "f16") return KvDtype::F16;
  return std::nullopt;
}

}  // namespace tokenmill::kv
