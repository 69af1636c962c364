#include "core/llmc.h"

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/error.h"

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

}  // namespace

ModelConfig read_llmc_config(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw input_error("checkpoint " + path + " does not exist");
  if (std::filesystem::is_directory(path, ec)) {
    throw input_error("checkpoint " + path + " is a directory");
  }
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw input_error("checkpoint " + path + " cannot be opened");
  const uint64_t size = uint64_t(in.tellg());
  in.seekg(0);
  int32_t h[256];
  if (size < kHeaderBytes || !in.read(reinterpret_cast<char*>(h), kHeaderBytes)) {
    throw input_error("checkpoint " + path + " is shorter than llm.c's 1024-byte header");
  }
  if (h[0] != kMagic) {
    throw input_error("checkpoint " + path + " has magic " + std::to_string(h[0]) +
                      ", expected llm.c's 20240326 (is it a GPT-2 checkpoint from llm.c?)");
  }
  if (h[1] != kVersionFp32) {
    throw input_error("checkpoint " + path + " has version " + std::to_string(h[1]) +
                      ", only version 3 (fp32) is supported");
  }
  ModelConfig cfg;
  cfg.arch = Arch::kGpt2;
  cfg.max_seq = h[2], cfg.vocab = h[3], cfg.layers = h[4], cfg.heads = h[5];
  cfg.channels = h[6], cfg.padded_vocab = h[7];
  const bool sane = cfg.max_seq > 0 && cfg.max_seq <= 1 << 20 && cfg.vocab > 0 &&
                    cfg.vocab <= 1 << 20 && cfg.layers > 0 && cfg.layers <= 1024 && cfg.heads > 0 &&
                    cfg.channels > 0 && cfg.channels <= 1 << 16 && cfg.channels % cfg.heads == 0 &&
                    cfg.padded_vocab >= cfg.vocab && cfg.padded_vocab <= 1 << 20;
  if (!sane)
    throw input_error("checkpoint " + path + " has an impossible model shape in its header");
  const uint64_t C = uint64_t(cfg.channels), L = uint64_t(cfg.layers);
  const uint64_t n = uint64_t(cfg.padded_vocab) * C + uint64_t(cfg.max_seq) * C +
                     L * (12 * C * C + 13 * C) + 2 * C;
  if (size != kHeaderBytes + n * sizeof(float)) {
    throw input_error("checkpoint " + path + " has " + std::to_string(size) +
                      " bytes, its header implies " + std::to_string(kHeaderBytes + n * 4));
  }
  return cfg;
}

void load_llmc_weights(const std::string& path, const ModelConfig& cfg, const ParamLayout& layout,
                       float* w) {
  std::ifstream in(path, std::ios::binary);
  in.seekg(kHeaderBytes);
  auto read_into = [&](const std::string& name) {
    const ParamTensor& t = layout.get(name);
    float* dst = w + t.offset;
    if (!in.read(reinterpret_cast<char*>(dst), std::streamsize(t.numel * sizeof(float)))) {
      throw input_error("checkpoint " + path + " ended early while reading " + name);
    }
    for (size_t i = 0; i < t.numel; ++i) {
      if (!std::isfinite(dst[i])) {
        throw input_error("checkpoint " + path + " has a non-finite weight in " + name +
                          " (element " + std::to_string(i) + ")");
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
