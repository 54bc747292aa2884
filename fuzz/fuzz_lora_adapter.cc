// libFuzzer target for LoRA adapter files (src/model/lora_adapter.h): the
// input is an adapter GGUF, bound to a tiny synthetic llama built once in
// memory (written to a memfd, since models load from paths).
//
// Contract: tokenmill::Error is the only clean rejection. An adapter that
// binds must have, for every delta it holds, A's columns equal to the base
// matrix's input width, B's rows equal to the base view's rows and A's rows
// equal to B's columns; a forward pass with it must then run (its values
// may be anything, NaN included). Anything else aborts.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "model/lora_adapter.h"
#include "model/model.h"
#include "model/single_sequence.h"
#include "model/synth.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace {

using namespace tokenmill::model;

void require(bool ok) {
  if (!ok) std::abort();  // bound, but breaks the contract
}

Model& base_model() {
  static std::unique_ptr<Model> model = [] {
    SynthOptions o;
    o.arch = SynthArch::kLlama;
    o.preset = "tiny";
    o.format = *parse_weight_format("F32");
    o.num_threads = 1;
    const std::vector<uint8_t> bytes = build_synth_model(o, nullptr).to_bytes();
    const int fd = memfd_create("fuzz_lora_base", MFD_CLOEXEC);
    require(fd >= 0 && write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
    return Model::load("/proc/self/fd/" + std::to_string(fd));
  }();
  return *model;
}

void check_pair(const LoraPair& p, const tokenmill::kernels::WeightView& base) {
  if (!p.present()) return;
  require(p.a.cols == base.cols && p.b.rows == base.rows && p.a.rows == p.b.cols && p.a.rows >= 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Model& m = base_model();
  std::shared_ptr<const LoraAdapter> adapter;
  try {
    adapter = LoraAdapter::bind(tokenmill::gguf::GgufFile::parse({data, size}, "fuzz.gguf"), m, "fuzz");
  } catch (const tokenmill::Error&) {
    return 0;
  }
  const ModelWeights& w = m.weights();
  for (int64_t l = 0; l < m.config().n_layer; ++l) {
    const LayerWeights& lw = w.layers[static_cast<size_t>(l)];
    check_pair(adapter->pair(l, LoraSlot::kQ), lw.wq);
    check_pair(adapter->pair(l, LoraSlot::kK), lw.wk);
    check_pair(adapter->pair(l, LoraSlot::kV), lw.wv);
    check_pair(adapter->pair(l, LoraSlot::kO), lw.wo);
    check_pair(adapter->pair(l, LoraSlot::kGate), lw.w_gate);
    check_pair(adapter->pair(l, LoraSlot::kUp), lw.w_up);
    check_pair(adapter->pair(l, LoraSlot::kDown), lw.w_down);
  }
  check_pair(adapter->output(), w.output);
  require(adapter->num_adapted() >= 1 && adapter->identity().size() == 5 + 32);
  static tokenmill::ThreadPool pool(1);
  SingleSequence seq(m, 4, tokenmill::kv::KvDtype::F32);
  seq.set_adapter(adapter.get());
  std::vector<float> logits;
  const int32_t tokens[] = {1, 7, 42};
  seq.forward(tokens, true, logits, pool);
  require(logits.size() == 3 * static_cast<size_t>(m.config().n_vocab));
  return 0;
}
