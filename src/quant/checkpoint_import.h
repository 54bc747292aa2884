// `tokenmill convert --from gptq|awq`: the 4-bit linear layers of a GPTQ or
// AWQ safetensors checkpoint imported into a GGUF whose architecture
// metadata, tokenizer and every other tensor (embeddings, norms, output)
// come from a base GGUF of the same model. The checkpoint's codes are kept
// where the chosen GGUF type holds them exactly (see int4_gguf_encode.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gguf/tensor_type.h"
#include "quant/checkpoint_config.h"

namespace tokenmill::quant {

struct CheckpointImportOptions {
  CheckpointMethod method = CheckpointMethod::kGptq;
  std::string checkpoint_dir;  // quantization settings and *.safetensors
  std::string base_path;       // GGUF of the same model, any float type
  std::string output_path;
  std::string type = "auto";  // auto, Q4_0, Q4_1, Q5_0 or Q8_0
  int num_threads = 0;        // <= 0: all cores
};

struct CheckpointImportResult {
  CheckpointConfig config;
  gguf::TensorType type = gguf::TensorType::Q5_0;
  std::string type_reason;  // why auto chose it (empty when asked for)
  int64_t num_matrices = 0;
  int64_t num_biases = 0;  // biases taken from the checkpoint
  int64_t num_blocks = 0;
  int64_t requantized_blocks = 0;  // not exact: went through float
  double max_abs_error = 0.0;      // over all imported matrices
  std::vector<std::string> warnings;
};

// "auto|Q4_0|Q4_1|Q5_0|Q8_0", for help texts.
std::string checkpoint_import_type_choices();

// Runs the import and writes options.output_path atomically. Everything is
// validated before the file is written: a missing or extra layer, a
// shape that does not match the base tensor, bits != 4, an unsupported
// group size, an unknown checkpoint format, a malformed safetensors file,
// an unsupported architecture -- each throws tokenmill::Error naming it,
// and no output is left behind. `log` receives progress lines.
CheckpointImportResult import_quantized_checkpoint(const CheckpointImportOptions& options,
                                                   const std::function<void(const std::string&)>& log);

}  // namespace tokenmill::quant
