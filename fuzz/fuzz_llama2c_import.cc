// libFuzzer target for the llama2.c importer (src/model/llama2c_import.h).
// The first byte picks what the rest is: bit 0 clear, a checkpoint (bits
// 1..2 pick the weight format); bit 0 set, a tokenizer.bin whose vocabulary
// size is the byte >> 1 (0..127). The importer reads paths, so the bytes go
// to an in-memory file (memfd) opened through /proc/self/fd: nothing is
// left on disk and no per-run file name is needed.
//
// Contract: tokenmill::Error is the only clean rejection. A checkpoint
// whose header parses must have every size in 1..2^24, dim divisible by
// n_heads into even head sizes, n_heads divisible by n_kv_heads, and be
// exactly as long as the header implies; importing it must then give a GGUF
// that the reader accepts, with one tensor per weight (output.weight only
// when the classifier is unshared) and, in F32, the embedding bytes
// unchanged. A tokenizer that reads must give one token, score and type per
// vocabulary entry, with <unk>, <s>, </s> first. Anything else aborts.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "model/llama2c_import.h"
#include "util/error.h"

namespace {

using namespace tokenmill::model;
using tokenmill::gguf::GgufFile;

constexpr int64_t kMaxDim = int64_t{1} << 24;

void require(bool ok) {
  if (!ok) std::abort();  // an import that succeeded but breaks the contract
}

// One in-memory file per process, rewritten for every input.
const std::string& write_memfd(std::span<const uint8_t> bytes) {
  static const int fd = memfd_create("fuzz_llama2c", MFD_CLOEXEC);
  static const std::string path = "/proc/self/fd/" + std::to_string(fd);
  require(fd >= 0 && ftruncate(fd, 0) == 0);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = pwrite(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
    require(n > 0);
    done += static_cast<size_t>(n);
  }
  return path;
}

void check_header(const Llama2cHeader& h, size_t file_size) {
  for (int64_t v : {h.dim, h.hidden_dim, h.n_layers, h.n_heads, h.n_kv_heads, h.vocab_size, h.seq_len}) {
    require(v >= 1 && v <= kMaxDim);
  }
  require(h.dim % h.n_heads == 0 && (h.dim / h.n_heads) % 2 == 0 && h.n_heads % h.n_kv_heads == 0);
  require(file_size > static_cast<size_t>(kLlama2cHeaderBytes) && file_size % 4 == 0);
}

// Runs f, for which tokenmill::Error is a bug rather than a rejection.
template <typename F>
auto must_succeed(F f) {
  try {
    return f();
  } catch (const tokenmill::Error&) {
    std::abort();
  }
}

void import_checkpoint(uint8_t mode, std::span<const uint8_t> file) {
  static const char* const kFormats[] = {"F32", "F16", "Q8_0", "Q4_K_M"};
  const Llama2cHeader h = parse_llama2c_header(file, "fuzz.bin");
  check_header(h, file.size());
  // From here on the checkpoint is valid, so the import and the reader of
  // its output must accept it.
  const std::optional<WeightFormat> format = parse_weight_format(kFormats[(mode >> 1) % 4]);
  require(format.has_value());
  const std::vector<uint8_t> bytes = must_succeed([&] {
    std::vector<std::string> notes;
    return build_llama2c_gguf(write_memfd(file), std::nullopt, *format, &notes).to_bytes();
  });
  const GgufFile gguf = must_succeed([&] { return GgufFile::parse(bytes, "imported.gguf"); });
  require(gguf.get_string_or("general.architecture", "") == "llama");
  const int64_t expected_tensors = 9 * h.n_layers + 2 + (h.shared_classifier ? 0 : 1);
  require(static_cast<int64_t>(gguf.tensors().size()) == expected_tensors);
  const tokenmill::gguf::TensorInfo* emb = nullptr;
  for (const auto& t : gguf.tensors()) {
    if (t.name == "token_embd.weight") emb = &t;
  }
  require(emb != nullptr);
  if (!format->q4_k_m && format->base == tokenmill::gguf::TensorType::F32) {
    const size_t n = static_cast<size_t>(4 * h.vocab_size * h.dim);
    require(emb->num_bytes == n && std::memcmp(emb->data, file.data() + kLlama2cHeaderBytes, n) == 0);
  }
}

void read_tokenizer(uint8_t mode, std::span<const uint8_t> file) {
  const int64_t vocab_size = mode >> 1;
  const VocabTables v = read_llama2c_tokenizer(write_memfd(file), vocab_size);
  require(static_cast<int64_t>(v.tokens.size()) == vocab_size && v.scores.size() == v.tokens.size() &&
          v.types.size() == v.tokens.size());
  static const char* const kSpecial[] = {"<unk>", "<s>", "</s>"};
  for (int64_t i = 0; i < vocab_size && i < 3; ++i) require(v.tokens[i] == kSpecial[i]);
  for (int32_t type : v.types) {
    require(type == kTokenNormal || type == kTokenUnknown || type == kTokenControl || type == kTokenByte);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::span<const uint8_t> rest(data + 1, size - 1);
  try {
    if (data[0] & 1) {
      read_tokenizer(data[0], rest);
    } else {
      import_checkpoint(data[0], rest);
    }
  } catch (const tokenmill::Error&) {
  }
  return 0;
}
