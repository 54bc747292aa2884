// libFuzzer target for the GGUF reader. Any input must either parse or throw
// tokenmill::Error; every tensor's data range must lie inside the input
// (AddressSanitizer checks the first and last byte of each), and a parsed
// file must survive a writer round trip.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "util/error.h"

namespace {

using tokenmill::gguf::GgufFile;
using tokenmill::gguf::GgufWriter;

// Re-encodes a parsed file and parses the result: the writer must accept all
// the reader produces, and the reader must accept all the writer produces.
void check_round_trip(const GgufFile& file) {
  GgufWriter writer(file.alignment());
  for (const auto& entry : file.metadata()) writer.set(entry.key, entry.value);
  for (const auto& t : file.tensors()) {
    writer.add_tensor(t.name, t.type, std::vector<int64_t>(t.dims, t.dims + t.num_dims),
                      std::vector<uint8_t>(t.data, t.data + t.num_bytes));
  }
  std::vector<uint8_t> bytes = writer.to_bytes();
  GgufFile again = GgufFile::parse(bytes, "round-trip");
  if (again.metadata().size() < file.metadata().size() || again.tensors().size() != file.tensors().size()) {
    __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    GgufFile file = GgufFile::parse(std::span<const uint8_t>(data, size), "fuzz.gguf");
    volatile uint8_t sink = 0;
    uint64_t total_bytes = 0;
    for (const auto& t : file.tensors()) {
      sink = sink ^ t.data[0] ^ t.data[t.num_bytes - 1];
      total_bytes += t.num_bytes;
      (void)t.shape_string();
    }
    for (const auto& entry : file.metadata()) (void)entry.value.to_display_string();
    // Tensors may overlap, so their total can exceed the input, and a huge
    // general.alignment (legal up to 2^31) pads the re-encoded file by as
    // much: skip the round trip when it would allocate far beyond the input.
    if (total_bytes <= 4 * size && file.alignment() <= 4096) check_round_trip(file);
  } catch (const tokenmill::Error&) {
  }
  return 0;
}
