// DecoderFor<T, Ds...>: the one of a kernel file's decoder structs Ds whose
// kType is T, so that the file can define its per-type kernels once as
// templates over T (avx2/avx2.h) with a single list of the decoders it has.
// Compile-time only: no code, so any file may include it.
#pragma once

#include <cstddef>
#include <tuple>

#include "gguf/tensor_type.h"

namespace tokenmill::kernels {

template <gguf::TensorType T, class... Ds>
constexpr size_t decoder_index() {
  constexpr gguf::TensorType types[] = {Ds::kType...};
  for (size_t i = 0; i < sizeof...(Ds); ++i) {
    if (types[i] == T) return i;
  }
  return sizeof...(Ds);  // not in the list: tuple_element_t below fails to compile
}

template <gguf::TensorType T, class... Ds>
using DecoderFor = std::tuple_element_t<decoder_index<T, Ds...>(), std::tuple<Ds...>>;

}  // namespace tokenmill::kernels
