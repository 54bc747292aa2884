// Synthetic models: GGUF files with the exact layout (tensors, keys and
// tokenizer type) of real models of each SynthArch, filled with
// deterministic random weights. They let tests,
// benchmarks and the quantization tools run on any model size without
// downloading one. Same options and seed => byte-identical file, whatever
// the thread count (the normals come from tokenmill's own splitmix64 and
// Box-Muller, so only libm's float log/sin/cos could differ across C
// libraries).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/tensor_type.h"
#include "gguf/writer.h"
#include "model/model_shapes.h"
#include "model/synth_rope.h"

namespace tokenmill::model {

enum class SynthArch {
  kLlama,
  kQwen2,
  kGemma3,
  kQwen3,
  kOlmo2,
  kGranite,
  kPhi3,
  kGemma2,
  kQwen2Moe,
  kQwen3Moe,
  kOlmoe
};

std::optional<SynthArch> parse_synth_arch(std::string_view name);  // general.architecture names: "llama", "qwen3" ...
std::string_view synth_arch_name(SynthArch arch);

struct SynthShape {
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_kv_head = 0;
  int64_t n_ff = 0;
  int64_t vocab = 0;
  int64_t head_dim = 0;  // 0 in presets: n_embd / n_head
  int64_t ctx = 0;
  int64_t sliding_window = 0;  // gemma3, gemma2 (and stated but unused: phi3)
  bool tied_output = false;    // no output.weight; token_embd doubles as the classifier
  // gemma2's soft-capping; 0: the released models' 50 (attention) and 30 (logits).
  float attn_softcap = 0.0f;
  float final_softcap = 0.0f;
  // Mixture of experts (n_expert > 0; synth_moe.h): experts, experts per
  // token, each expert's width and the shared expert's (qwen2moe).
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t n_ff_exp = 0;
  int64_t n_ff_shexp = 0;
};

// Command-line overrides of a preset's shape; unset fields keep the preset.
struct ShapeOverrides {
  std::optional<int64_t> n_embd, n_layer, n_head, n_kv_head, n_ff, vocab, head_dim, ctx;
  std::optional<int64_t> n_expert, n_expert_used, n_ff_exp, n_ff_shexp;
};

// "tiny", "tinyllama-1.1b", "llama-7b", "phi3-mini", "gemma2-2b", ...,
// "qwen3moe-mini" (Qwen3-30B-A3B's proportions, scaled down).
std::vector<std::string> synth_preset_names();

// The preset's shape with the overrides applied, head_dim resolved and the
// output tied for gemma3 (as in real Gemma 3). Throws Error for an unknown
// preset or an inconsistent shape (non-positive sizes, n_embd not divisible
// by n_head without --head-dim, n_head not a multiple of n_kv_head).
SynthShape resolve_synth_shape(SynthArch arch, std::string_view preset, const ShapeOverrides& overrides);

// How a tensor's values are drawn.
enum class SynthInit {
  kNorm,    // 1 + N(0, 0.02): a unit gain, jittered so a forward pass that
            // ignores a norm weight differs from one that applies it
  kMatrix,  // N(0, 1/sqrt(dims[0])): keeps activations O(1) through x @ W
  kBias,    // N(0, 0.02)
};

struct SynthTensor {
  std::string name;
  std::vector<int64_t> dims;  // GGUF order: dims[0] is the row length
  gguf::TensorType type;      // storage type after the fallback rules
  SynthInit init;
};

// The model's tensors in file order with their storage types: matrices in
// the requested format (Q4_K_M mixes Q6_K and Q4_K, see synth.cc), falling
// back per tensor when the row length does not fit the type's blocks
// (K-quants -> Q8_0 -> `last_resort`); 1-D tensors F32. One line per
// fallback is appended to `notes` when it is not null. Pure computation:
// this is how large presets are checked without writing gigabytes.
std::vector<SynthTensor> plan_synth_tensors(SynthArch arch, const SynthShape& shape, const WeightFormat& format,
                                            gguf::TensorType last_resort, std::vector<std::string>* notes);

// Writes the hyperparameter keys of the architecture (ARCH.context_length,
// embedding_length, block_count, ..., rope, norm epsilon) and
// general.architecture. Shared with the llama2.c importer.
void set_arch_keys(gguf::GgufWriter& writer, SynthArch arch, const SynthShape& shape);

struct SynthOptions {
  SynthArch arch = SynthArch::kLlama;
  std::string preset = "tiny";
  ShapeOverrides overrides;
  WeightFormat format;
  uint64_t seed = 0;
  // A GGUF whose tokenizer.* keys are copied (its token count sets vocab).
  std::optional<std::string> vocab_from;
  // Folder holding vocab/ggml-vocab-llama-spm.gguf, the default vocabulary
  // of the 32000-token presets; empty: always the built-in vocabulary.
  std::string shared_dir;
  int num_threads = 0;  // 0: one per CPU
  SynthRope rope;       // RoPE scaling keys (and llama3 tensor) to write; none by default
};

// Builds the whole model in memory (the size of the output file: a few GB
// for llama-7b in Q4_K_M, about 27 GB in F32). Notes on type fallbacks go to
// `notes` when it is not null. Throws Error for bad options.
// Cost: one PRNG draw and one quantization per weight, split over threads.
gguf::GgufWriter build_synth_model(const SynthOptions& options, std::vector<std::string>* notes);

// build_synth_model + write to `path`, printing the notes to stderr.
void write_synth_model(const SynthOptions& options, const std::string& path);

}  // namespace tokenmill::model
