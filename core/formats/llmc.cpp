#include "core/formats/llmc.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "core/base/checked.h"
#include "core/base/error.h"
#include "core/formats/input_file.h"

namespace reftrain {

namespace {

constexpr int32_t kMagic = 20240326;
constexpr int32_t kVersionFp32 = 3;
constexpr size_t kHeaderBytes = 256 * sizeof(int32_t);

// llm.c's tensor order, as nanoGPT name suffixes; per-layer tensors are stacked over L.
struct LlmcTensor {
  const char* name;  // full name, or the suffix after "transformer.h.{l}."
  bool per_layer;
};
constexpr LlmcTensor kOrder[] = {
    {"transformer.wte.weight", false},
    {"transformer.wpe.weight", false},
    {"ln_1.weight", true},
    {"ln_1.bias", true},
    {"attn.c_attn.weight", true},
    {"attn.c_attn.bias", true},
    {"attn.c_proj.weight", true},
    {"attn.c_proj.bias", true},
    {"ln_2.weight", true},
    {"ln_2.bias", true},
    {"mlp.c_fc.weight", true},
    {"mlp.c_fc.bias", true},
    {"mlp.c_proj.weight", true},
    {"mlp.c_proj.bias", true},
    {"transformer.ln_f.weight", false},
    {"transformer.ln_f.bias", false},
};

// The header's shape, bounded so that every later product stays far from overflow.
bool plausible(const ModelConfig& c) {
  return c.max_seq > 0 && c.max_seq <= 1 << 20 && c.vocab > 0 && c.vocab <= 1 << 20 &&
         c.layers > 0 && c.layers <= 1024 && c.heads > 0 && c.channels > 0 &&
         c.channels <= 1 << 16 && c.channels % c.heads == 0 && c.padded_vocab >= c.vocab &&
         c.padded_vocab <= 1 << 20;
}

// Floats in llm.c's parameter block: Vp·C + maxT·C + L·(12·C² + 13·C) + 2·C.
CheckedSize llmc_param_count(const ModelConfig& c) {
  const CheckedSize C = uint64_t(c.channels), L = uint64_t(c.layers);
  return CheckedSize(uint64_t(c.padded_vocab)) * C + CheckedSize(uint64_t(c.max_seq)) * C +
         L * (CheckedSize(12) * C * C + CheckedSize(13) * C) + CheckedSize(2) * C;
}

ModelConfig read_header(InputFile& in) {
  int32_t h[256];
  if (in.size() < kHeaderBytes) {
    throw input_error(in.name() + " is shorter than llm.c's 1024-byte header");
  }
  in.read_at(0, h, kHeaderBytes, "the header");
  if (h[0] != kMagic) {
    throw input_error(in.name() + " has magic " + std::to_string(h[0]) +
                      ", expected llm.c's 20240326 (is it a GPT-2 checkpoint from llm.c?)");
  }
  if (h[1] != kVersionFp32) {
    throw input_error(in.name() + " has version " + std::to_string(h[1]) +
                      ", only version 3 (fp32) is supported");
  }
  ModelConfig cfg;
  cfg.arch = Arch::kGpt2;
  cfg.max_seq = h[2], cfg.vocab = h[3], cfg.layers = h[4], cfg.heads = h[5];
  cfg.channels = h[6], cfg.padded_vocab = h[7];
  if (!plausible(cfg))
    throw input_error(in.name() + " has an impossible model shape in its header");
  const CheckedSize bytes = CheckedSize(kHeaderBytes) + llmc_param_count(cfg) * sizeof(float);
  if (bytes.overflowed() || bytes.value() != in.size()) {
    throw input_error(
        in.name() + " has " + std::to_string(in.size()) + " bytes, its header implies " +
        (bytes.overflowed() ? std::string("more than 2^64") : std::to_string(bytes.value())));
  }
  return cfg;
}

bool same_llmc_shape(const ModelConfig& a, const ModelConfig& b) {
  return a.layers == b.layers && a.heads == b.heads && a.channels == b.channels &&
         a.max_seq == b.max_seq && a.vocab == b.vocab && a.padded_vocab == b.padded_vocab;
}

}  // namespace

ModelConfig read_llmc_config(const std::string& path) {
  InputFile in(path, "checkpoint");
  return read_header(in);
}

void load_llmc_weights(const std::string& path, const ModelConfig& cfg, const ParamLayout& layout,
                       float* w) {
  InputFile in(path, "checkpoint");
  // The file is read again: it must still be the checkpoint whose header gave `cfg`.
  if (!same_llmc_shape(read_header(in), cfg)) {
    throw input_error(in.name() + " no longer matches the model shape read from its header");
  }
  uint64_t offset = kHeaderBytes;
  auto read_into = [&](const std::string& name) {
    const ParamTensor& t = layout.get(name);
    float* dst = w + t.offset;
    in.read_at(offset, dst, t.numel * sizeof(float), name);
    offset += t.numel * sizeof(float);
    for (size_t i = 0; i < t.numel; ++i) {
      if (!std::isfinite(dst[i])) {
        throw input_error(in.name() + " has a non-finite weight in " + name + " (element " +
                          std::to_string(i) + ")");
      }
    }
  };
  for (const LlmcTensor& t : kOrder) {
    if (!t.per_layer) {
      read_into(t.name);
      continue;
    }
    for (int l = 0; l < cfg.layers; ++l) {
      read_into("transformer.h." + std::to_string(l) + "." + t.name);
    }
  }
}

}  // namespace reftrain
