#include "quant/checkpoint_import.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/model_shapes.h"
#include "quant/checkpoint_tensors.h"
#include "quant/int4_gguf_encode.h"
#include "util/error.h"
#include "util/fp16.h"
#include "util/thread_pool.h"

namespace tokenmill::quant {
namespace {

using gguf::TensorType;
namespace fs = std::filesystem;

constexpr std::string_view kConvertKeyPrefix = "tokenmill.convert.";

// Architectures whose decoder layers use the seven projections by these
// names. Only llama's converter reorders q/k rows (see rope_row_order).
constexpr std::array<std::string_view, 6> kImportArchitectures = {"llama", "qwen2",  "qwen3",
                                                                  "gemma", "gemma2", "gemma3"};

struct ImportLayer {
  LinearLayerName name;
  PackedLinear packed;
  const gguf::TensorInfo* base = nullptr;
  const SafetensorsTensor* bias = nullptr;
  std::optional<std::vector<int64_t>> row_order;  // llama q/k
};

struct ImportContext {
  const CheckpointImportOptions& options;
  CheckpointConfig config;
  CheckpointTensors tensors;
  gguf::GgufFile base;
  std::string arch;
  std::vector<ImportLayer> layers;
};

std::optional<TensorType> parse_import_type(const std::string& name) {
  for (TensorType t : {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q8_0}) {
    std::string upper = name;
    std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
    if (upper == gguf::tensor_type_name(t)) return t;
  }
  return std::nullopt;
}

uint32_t import_file_type(TensorType t) { return model::llama_file_type(model::WeightFormat{t, false}); }

std::optional<std::vector<int64_t>> import_row_order(const ImportContext& c, std::string_view role, int64_t rows) {
  if (c.arch != "llama" || (role != "attn_q" && role != "attn_k")) return std::nullopt;
  const int64_t n_head = c.base.get_int(c.arch + ".attention.head_count");
  const int64_t n_head_kv = c.base.get_int_or(c.arch + ".attention.head_count_kv", n_head);
  return rope_row_order(rows, role == "attn_q" ? n_head : n_head_kv);
}

ImportLayer bind_import_layer(const ImportContext& c, const LinearLayerName& name) {
  ImportLayer l;
  l.name = name;
  l.base = c.base.find_tensor(name.gguf_name);
  if (l.base == nullptr) {
    fail("checkpoint layer {} has no counterpart {} in the base model {}", name.prefix, name.gguf_name,
         c.options.base_path);
  }
  if (l.base->num_dims != 2) fail("base tensor {} is not a matrix ({})", name.gguf_name, l.base->shape_string());
  const int64_t rows = l.base->dims[1], cols = l.base->dims[0];
  if (cols % 32 != 0) {
    fail("{}: row length {} is not a multiple of 32, which every GGUF 4/5/8-bit block type needs", name.gguf_name,
         cols);
  }
  l.packed =
      PackedLinear{name.prefix, c.tensors.find(name.prefix + ".qweight"), c.tensors.find(name.prefix + ".qzeros"),
                   c.tensors.find(name.prefix + ".scales"), c.tensors.find(name.prefix + ".g_idx")};
  l.bias = c.tensors.find(name.prefix + ".bias");
  if (l.bias != nullptr) {
    if (c.base.find_tensor(name.gguf_bias) == nullptr) {
      fail("checkpoint has {} but the base model has no {}", l.bias->name, name.gguf_bias);
    }
    if (l.bias->dtype != "F16" || l.bias->shape != std::vector<int64_t>{rows}) {
      fail("{}: {} {} does not match the base model (expected F16 [{}])", l.bias->name, l.bias->dtype,
           l.bias->shape_string(), rows);
    }
  }
  l.row_order = import_row_order(c, name.role, rows);
  return l;
}

// Every base projection must come from the checkpoint: a partly imported
// model would silently mix the base's float weights with the checkpoint's.
void check_import_coverage(const ImportContext& c) {
  std::map<std::string, bool> imported;
  for (const ImportLayer& l : c.layers) imported[l.name.gguf_name] = true;
  for (const gguf::TensorInfo& t : c.base.tensors()) {
    for (std::string_view role : {"attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"}) {
      if (!t.name.starts_with("blk.") || !t.name.ends_with(fmt::format(".{}.weight", role))) continue;
      if (!imported.count(t.name)) {
        const std::string layer = t.name.substr(4, t.name.find('.', 4) - 4);
        fail(
            "missing tensor: the checkpoint has no 4-bit layer for base tensor {} (looked for "
            "model.layers.{}.*.qweight)",
            t.name, layer);
      }
    }
  }
}

ImportContext open_import_context(const CheckpointImportOptions& o) {
  if (fs::exists(o.output_path) && fs::exists(o.base_path) && fs::equivalent(o.output_path, o.base_path)) {
    fail("{} is the base model; write the output to another file", o.output_path);
  }
  ImportContext c{o,
                  read_checkpoint_config(o.checkpoint_dir, o.method),
                  CheckpointTensors::open_dir(o.checkpoint_dir),
                  gguf::GgufFile::open(o.base_path),
                  "",
                  {}};
  c.arch = c.base.get_string("general.architecture");
  if (std::find(kImportArchitectures.begin(), kImportArchitectures.end(), c.arch) == kImportArchitectures.end()) {
    fail("{}: architecture '{}' is not supported for checkpoint import (llama, qwen2, qwen3, gemma, gemma2, gemma3)",
         o.base_path, c.arch);
  }
  for (const LinearLayerName& name : find_linear_layers(c.tensors)) c.layers.push_back(bind_import_layer(c, name));
  if (c.layers.empty()) fail("{}: no 4-bit layers (no tensor named *.qweight)", o.checkpoint_dir);
  check_import_coverage(c);
  return c;
}

Int4Matrix unpack_import_layer(const ImportContext& c, const ImportLayer& l) {
  Int4Matrix m = unpack_linear(l.packed, c.config, l.base->dims[1], l.base->dims[0]);
  if (l.row_order) reorder_rows(m, *l.row_order);
  return m;
}

// What the first pass learns about every matrix (and it validates them
// all before anything is written).
struct ImportSurvey {
  std::vector<bool> aligned;      // per layer: groups_align_to_blocks
  std::vector<bool> zeros_eight;  // per layer: all_zeros_are_eight
};

ImportSurvey survey_import_layers(const ImportContext& c) {
  ImportSurvey s;
  for (const ImportLayer& l : c.layers) {
    const Int4Matrix m = unpack_import_layer(c, l);
    s.aligned.push_back(groups_align_to_blocks(m));
    s.zeros_eight.push_back(all_zeros_are_eight(m));
  }
  return s;
}

void choose_import_type(const ImportContext& c, const ImportSurvey& s, CheckpointImportResult& r) {
  if (c.options.type != "auto") {
    const std::optional<TensorType> t = parse_import_type(c.options.type);
    if (!t) fail("--type {}: not one of {}", c.options.type, checkpoint_import_type_choices());
    r.type = *t;
    return;
  }
  const bool symmetric = std::all_of(s.zeros_eight.begin(), s.zeros_eight.end(), [](bool b) { return b; });
  r.type = symmetric ? TensorType::Q4_0 : TensorType::Q5_0;
  r.type_reason = symmetric ? "every zero point is 8 (symmetric quantization), so Q4_0 holds the 4-bit codes exactly"
                            : "the zero points are not all 8 (asymmetric quantization), so Q4_0 cannot hold them; "
                              "Q5_0 holds every code minus its zero exactly";
}

void set_import_metadata(const ImportContext& c, const CheckpointImportResult& r, gguf::GgufWriter& w) {
  for (const gguf::MetadataEntry& e : c.base.metadata()) {
    if (e.key == "general.file_type" || e.key == "general.quantization_version" ||
        e.key.starts_with(kConvertKeyPrefix)) {
      continue;
    }
    w.set(e.key, e.value);
  }
  w.set("general.file_type", gguf::Value::u32(import_file_type(r.type)));
  w.set("general.quantization_version", gguf::Value::u32(2));
  const std::string k(kConvertKeyPrefix);
  w.set(k + "source", gguf::Value::str(std::string(checkpoint_method_name(c.config.method))));
  w.set(k + "format", gguf::Value::str(c.config.format));
  w.set(k + "group_size", gguf::Value::i32(static_cast<int32_t>(c.config.group_size)));
}

// The checkpoint's fp16 bias as F32, in the GGUF row order.
std::vector<uint8_t> import_bias_bytes(const ImportLayer& l) {
  const int64_t n = l.bias->shape[0];
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t src = l.row_order ? (*l.row_order)[i] : i;
    uint16_t h;
    std::memcpy(&h, l.bias->data.data() + 2 * src, 2);
    v[i] = fp16_to_fp32(h);
  }
  const auto* p = reinterpret_cast<const uint8_t*>(v.data());
  return std::vector<uint8_t>(p, p + v.size() * sizeof(float));
}

// Per-reason worst errors, for the warnings.
struct ImportErrorTally {
  double spanning = 0, q4_1_offset = 0, q4_0_zeros = 0;
  int64_t spanning_layers = 0, q4_0_zero_layers = 0;
  std::string spanning_example;
};

void tally_import_errors(const ImportLayer& l, bool aligned, bool zeros_eight, TensorType type,
                         const Int4EncodeStats& st, ImportErrorTally& e) {
  if (!aligned) {
    e.spanning = std::max(e.spanning, st.max_abs_error);
    if (e.spanning_layers++ == 0) e.spanning_example = l.name.gguf_name;
  }
  if (type == TensorType::Q4_1) e.q4_1_offset = std::max(e.q4_1_offset, st.max_abs_error);
  if (type == TensorType::Q4_0 && !zeros_eight) {
    e.q4_0_zeros = std::max(e.q4_0_zeros, st.max_abs_error);
    ++e.q4_0_zero_layers;
  }
}

void add_import_warnings(const ImportContext& c, const ImportErrorTally& e, CheckpointImportResult& r) {
  const std::string_view t = gguf::tensor_type_name(r.type);
  if (e.spanning_layers > 0) {
    r.warnings.push_back(fmt::format(
        "{} of {} matrices (e.g. {}) have 32-column blocks whose columns belong to different groups (act-order "
        "g_idx, or groups not a multiple of 32 columns): those blocks were dequantized and re-rounded to {} by "
        "the reference quantizer, not kept exact; max abs error {:.3g}",
        e.spanning_layers, c.layers.size(), e.spanning_example, t, e.spanning));
  }
  if (r.type == TensorType::Q4_1) {
    r.warnings.push_back(fmt::format(
        "Q4_1 is the nearest, not an exact, form: its offset -scale*zero is rounded to fp16; max abs error {:.3g}",
        e.q4_1_offset));
  }
  if (e.q4_0_zero_layers > 0) {
    r.warnings.push_back(fmt::format(
        "Q4_0 holds only zero points of 8: in {} matrices, blocks with other zeros were re-rounded by the reference "
        "quantizer; max abs error {:.3g} (Q5_0 would keep them exact)",
        e.q4_0_zero_layers, e.q4_0_zeros));
  }
}

void write_import_output(const ImportContext& c, const ImportSurvey& s, CheckpointImportResult& r,
                         const std::function<void(const std::string&)>& log) {
  ThreadPool pool(c.options.num_threads);
  gguf::GgufWriter w(c.base.alignment());
  set_import_metadata(c, r, w);
  std::map<std::string, size_t> weight_of, bias_of;
  for (size_t i = 0; i < c.layers.size(); ++i) {
    weight_of[c.layers[i].name.gguf_name] = i;
    if (c.layers[i].bias != nullptr) bias_of[c.layers[i].name.gguf_bias] = i;
  }
  ImportErrorTally errors;
  for (const gguf::TensorInfo& t : c.base.tensors()) {
    const std::vector<int64_t> dims(t.dims, t.dims + t.num_dims);
    if (auto it = weight_of.find(t.name); it != weight_of.end()) {
      const ImportLayer& l = c.layers[it->second];
      Int4EncodeStats st;
      w.add_tensor(t.name, r.type, dims, encode_int4_matrix(unpack_import_layer(c, l), r.type, pool, st));
      tally_import_errors(l, s.aligned[it->second], s.zeros_eight[it->second], r.type, st, errors);
      r.num_blocks += st.num_blocks;
      r.requantized_blocks += st.requantized_blocks;
      r.max_abs_error = std::max(r.max_abs_error, st.max_abs_error);
      ++r.num_matrices;
    } else if (auto b = bias_of.find(t.name); b != bias_of.end()) {
      w.add_tensor(t.name, TensorType::F32, dims, import_bias_bytes(c.layers[b->second]));
      ++r.num_biases;
    } else {
      w.add_tensor(t.name, t.type, dims, std::vector<uint8_t>(t.data, t.data + t.num_bytes));
    }
  }
  add_import_warnings(c, errors, r);
  if (log) log(fmt::format("writing {}", c.options.output_path));
  w.write(c.options.output_path);
}

}  // namespace

std::string checkpoint_import_type_choices() { return "auto|Q4_0|Q4_1|Q5_0|Q8_0"; }

CheckpointImportResult import_quantized_checkpoint(const CheckpointImportOptions& options,
                                                   const std::function<void(const std::string&)>& log) {
  const ImportContext c = open_import_context(options);
  CheckpointImportResult r;
  r.config = c.config;
  if (log) {
    log(fmt::format("{} checkpoint ({}, group size {}{}): {} 4-bit layers; base {} ({})",
                    checkpoint_method_name(c.config.method), c.config.format, c.config.group_size,
                    c.config.desc_act ? ", act-order" : "", c.layers.size(), options.base_path, c.arch));
  }
  const ImportSurvey s = survey_import_layers(c);
  choose_import_type(c, s, r);
  write_import_output(c, s, r, log);
  return r;
}

}  // namespace tokenmill::quant
