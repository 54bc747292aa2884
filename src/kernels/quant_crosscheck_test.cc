// Cross-check against an independent decoder: the PyPI `gguf` package's
// numpy dequantizers (run through quant_crosscheck.py in a subprocess).
// Random bytes catch layout mistakes our own hand-built blocks would share;
// decoding our quantizers' output proves they write valid GGUF blocks.
// Skips when python3 (or $TOKENMILL_PYTHON) cannot import gguf.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "gguf/tensor_type.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "util/fp16.h"
#include "util/test_dependency.h"

namespace tokenmill::kernels {
namespace {

namespace fs = std::filesystem;
using gguf::TensorType;

constexpr TensorType kAllTypes[] = {
    TensorType::F32,  TensorType::F16,  TensorType::BF16, TensorType::Q4_0, TensorType::Q4_1,
    TensorType::Q5_0, TensorType::Q5_1, TensorType::Q8_0, TensorType::Q8_1, TensorType::Q2_K,
    TensorType::Q3_K, TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K, TensorType::Q8_K,
};

// Intermediate types that no GGUF file stores; gguf may not decode them
// (gguf 0.19 has no Q8_1/Q8_K dequantizer). Hand-built tests cover them.
bool intermediate_only(TensorType t) { return t == TensorType::Q8_1 || t == TensorType::Q8_K; }

std::string type_name(TensorType t) { return std::string(gguf::tensor_type_name(t)); }

struct CrosscheckCase {
  TensorType type;
  int64_t n;  // elements
  std::vector<uint8_t> bytes;
};

// Runs the Python decoder over the cases; fills decoded[i] (empty when gguf
// declines the type). Returns false with *why set when gguf or numpy cannot
// be imported, and false with a test failure added (and *why empty) when
// anything else goes wrong.
bool run_gguf_decoder(const std::vector<CrosscheckCase>& cases, std::vector<std::vector<float>>* decoded,
                      std::string* why) {
  const fs::path script = fs::path(__FILE__).parent_path() / "quant_crosscheck.py";
  if (!fs::exists(script)) {
    ADD_FAILURE() << "decoder script not found at " << script.string();
    return false;
  }
  char dir_template[] = "/tmp/tm_quant_xcheck_XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) {
    ADD_FAILURE() << "cannot create a temporary directory";
    return false;
  }
  std::string command;
  const char* python = std::getenv("TOKENMILL_PYTHON");
  command = std::string(python != nullptr && python[0] ? python : "python3") + " '" + script.string() + "' " + dir;
  for (const CrosscheckCase& c : cases) {
    std::ofstream(fs::path(dir) / (type_name(c.type) + ".bin"), std::ios::binary)
        .write(reinterpret_cast<const char*>(c.bytes.data()), static_cast<std::streamsize>(c.bytes.size()));
    command += " " + type_name(c.type);
  }
  command += " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  char buf[512];
  while (pipe != nullptr && std::fgets(buf, sizeof(buf), pipe) != nullptr) output += buf;
  const int status = pipe != nullptr ? pclose(pipe) : -1;
  const int code = (status != -1 && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
  decoded->assign(cases.size(), {});
  for (size_t i = 0; i < cases.size() && code == 0; ++i) {
    std::ifstream in(fs::path(dir) / (type_name(cases[i].type) + ".f32"), std::ios::binary);
    if (!in) continue;
    (*decoded)[i].resize(cases[i].n);
    in.read(reinterpret_cast<char*>((*decoded)[i].data()), static_cast<std::streamsize>(cases[i].n * sizeof(float)));
    if (in.gcount() != static_cast<std::streamsize>(cases[i].n * sizeof(float))) (*decoded)[i].clear();
  }
  fs::remove_all(dir);
  if (code == 3) {  // the script's code for "numpy or gguf cannot be imported"
    *why = "the PyPI packages gguf and numpy (the independent decoder): " + output;
    return false;
  }
  // Any other failure of the decoder is a failure of this test, not a skip:
  // a broken script or a crash must not pass as "no decoder here".
  if (code != 0) {
    ADD_FAILURE() << "the gguf decoder script failed (exit " << code << "): " << output;
    return false;
  }
  if (!output.empty()) std::printf("%s", output.c_str());
  return true;
}

// Compares our decoding with gguf's. Tolerance: 1e-6 of the largest
// magnitude in the element's block, enough for the two decoders' different
// float association order (a few ulps), far below any layout mistake.
void compare_with_gguf(const std::vector<CrosscheckCase>& cases) {
  std::vector<std::vector<float>> theirs;
  std::string why;
  if (!run_gguf_decoder(cases, &theirs, &why)) {
    if (why.empty()) return;  // the decoder failed: already reported as a failure
    TM_MISSING_DEPENDENCY(why);
  }
  for (size_t c = 0; c < cases.size(); ++c) {
    const CrosscheckCase& k = cases[c];
    if (theirs[c].empty()) {
      EXPECT_TRUE(intermediate_only(k.type)) << "gguf could not decode " << type_name(k.type);
      continue;
    }
    std::vector<float> ours(k.n);
    dequantize_row_ref(k.type, k.bytes.data(), ours.data(), k.n);
    const int64_t bs = gguf::tensor_type_info(k.type).block_size;
    int failures = 0;
    for (int64_t b = 0; b < k.n / bs && failures < 5; ++b) {
      float block_max = 0.0f;
      for (int64_t i = b * bs; i < (b + 1) * bs; ++i) block_max = std::fmax(block_max, std::fabs(ours[i]));
      for (int64_t i = b * bs; i < (b + 1) * bs && failures < 5; ++i) {
        const bool ok = ours[i] == theirs[c][i] || std::fabs(ours[i] - theirs[c][i]) <= 1e-6f * block_max;
        if (!ok) ++failures;
        EXPECT_TRUE(ok) << type_name(k.type) << " element " << i << ": ours " << ours[i] << ", gguf " << theirs[c][i];
      }
    }
  }
}

void put_half(uint8_t* p, float v) {
  const uint16_t h = fp32_to_fp16(v);
  std::memcpy(p, &h, 2);
}

// Random bytes for n elements of the type, with every fp16/fp32 scale field
// replaced by a finite value in [-2, 2] and float payloads kept finite.
CrosscheckCase random_case(TensorType type, int64_t num_blocks, std::mt19937& rng) {
  const auto& info = gguf::tensor_type_info(type);
  const int64_t bpb = info.bytes_per_block;
  CrosscheckCase c{type, num_blocks * info.block_size, std::vector<uint8_t>(num_blocks * bpb)};
  for (auto& byte : c.bytes) byte = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> scale(-2.0f, 2.0f);
  for (int64_t b = 0; b < num_blocks; ++b) {
    uint8_t* p = c.bytes.data() + b * bpb;
    switch (type) {
      case TensorType::F32: {
        const float v = std::ldexp(scale(rng), static_cast<int>(rng() % 40) - 20);
        std::memcpy(p, &v, 4);
        break;
      }
      case TensorType::F16: p[1] &= 0xfb; break;   // exponent != 31: finite (subnormals kept)
      case TensorType::BF16: p[1] &= 0xbf; break;  // exponent != 255
      case TensorType::Q4_1:
      case TensorType::Q5_1:
      case TensorType::Q8_1: put_half(p + 2, scale(rng)); [[fallthrough]];
      case TensorType::Q4_0:
      case TensorType::Q5_0:
      case TensorType::Q8_0: put_half(p, scale(rng)); break;
      case TensorType::Q2_K:
        put_half(p + offsetof(BlockQ2_K, d), scale(rng));
        put_half(p + offsetof(BlockQ2_K, dmin), scale(rng));
        break;
      case TensorType::Q3_K: put_half(p + offsetof(BlockQ3_K, d), scale(rng)); break;
      case TensorType::Q4_K:
      case TensorType::Q5_K:
        put_half(p, scale(rng));
        put_half(p + 2, scale(rng));
        break;
      case TensorType::Q6_K: put_half(p + offsetof(BlockQ6_K, d), scale(rng)); break;
      case TensorType::Q8_K: {
        const float d = scale(rng);
        std::memcpy(p, &d, 4);
        break;
      }
    }
  }
  return c;
}

TEST(QuantCrosscheck, RandomBlocksDecodeLikeGguf) {
  std::mt19937 rng(42);
  std::vector<CrosscheckCase> cases;
  for (TensorType t : kAllTypes) cases.push_back(random_case(t, t == TensorType::F32 ? 512 : 64, rng));
  compare_with_gguf(cases);
}

TEST(QuantCrosscheck, OurEncodingsDecodeLikeGguf) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  const int64_t n = 256 * 16;
  std::vector<float> x(n), importance(n);
  for (auto& v : x) v = dist(rng);
  for (auto& v : importance) v = std::exp(dist(rng) * 40.0f);  // spread over ~e^{+-4}
  std::vector<CrosscheckCase> cases;
  for (TensorType t : kAllTypes) {
    CrosscheckCase c{t, n, std::vector<uint8_t>(gguf::row_bytes(t, n))};
    quantize_row_ref(t, x.data(), c.bytes.data(), n, importance.data());
    cases.push_back(std::move(c));
  }
  compare_with_gguf(cases);
}

}  // namespace
}  // namespace tokenmill::kernels
