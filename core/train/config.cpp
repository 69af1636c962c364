#include "core/train/config.h"

#include <cmath>
#include <stdexcept>
#include <string>

#include "core/base/error.h"
#include "optim/kernel_table.h"

namespace reftrain {

namespace {

ModelConfig gpt2_shape(int layers, int heads, int channels, int max_seq, int vocab,
                       int padded_vocab) {
  ModelConfig m;
  m.arch = Arch::kGpt2;
  m.layers = layers;
  m.heads = heads;
  m.channels = channels;
  m.max_seq = max_seq;
  m.vocab = vocab;
  m.padded_vocab = padded_vocab;
  return m;
}

// nanoGPT's character-level recipes (shakespeare_char), which `laptop` and `baby` follow:
// lr 1e-3 decaying to 1e-4, β2 0.99, warmup 100, wd 0.1, clip 1 (dropout, which reftrain does
// not have, is 0 in the laptop recipe).
TrainConfig nanogpt_char_recipe(int batch, int seq, int steps, int val_every) {
  TrainConfig t;
  t.batch = batch;
  t.seq = seq;
  t.steps = steps;
  t.lr = 1e-3f;
  t.min_lr = 1e-4f;
  t.wd = 0.1f;
  t.beta1 = 0.9f;
  t.beta2 = 0.99f;
  t.eps = 1e-8f;
  t.clip = 1.0f;
  t.warmup = 100;
  t.schedule = Schedule::kCosine;
  t.val_every = val_every;
  t.val_batches = 20;
  return t;
}

// The llama family: F a multiple of 64 near 8C/3, RoPE θ 10000, z-loss 1e-4.
ModelConfig llama_shape(int layers, int heads, int channels, int ffn, int max_seq) {
  ModelConfig m = gpt2_shape(layers, heads, channels, max_seq, 256, 256);
  m.arch = Arch::kLlama;
  m.ffn = ffn;
  return m;
}

TrainConfig with_z_loss(TrainConfig t) {
  t.z_loss = 1e-4f;
  return t;
}

std::vector<Preset> make_presets() {
  std::vector<Preset> p;
  {
    TrainConfig t = nanogpt_char_recipe(4, 32, 200, 50);
    t.lr = 3e-3f;
    t.min_lr = 3e-4f;
    t.warmup = 10;
    t.val_batches = 8;
    p.push_back({"tiny", "for tests: trains in seconds", gpt2_shape(2, 2, 32, 32, 256, 256), t});
  }
  {
    // The first run: the best validation bits per byte in ~80 s of steps on 2 threads, with the
    // auto tokenizer's 4096-token BPE on the fortunes (bench/laptop_sweep.sh; bench/RESULTS.md,
    // "Issue 31"): at that budget a shallower model that takes more steps wins.
    TrainConfig t = nanogpt_char_recipe(12, 64, 2400, 300);
    t.lr = 2e-3f, t.min_lr = 2e-4f;
    p.push_back({"laptop", "the first run: 2 minutes on 2 cores (default)",
                 gpt2_shape(2, 4, 128, 64, 256, 256), t});
  }
  p.push_back({"baby", "nanoGPT's shakespeare_char shape", gpt2_shape(6, 6, 384, 256, 256, 256),
               nanogpt_char_recipe(64, 256, 5000, 250)});
  {
    TrainConfig t = nanogpt_char_recipe(4, 32, 200, 50);
    t.lr = 3e-3f, t.min_lr = 3e-4f, t.warmup = 10, t.val_batches = 8;
    p.push_back(
        {"llama-tiny", "llama family, for tests", llama_shape(2, 2, 32, 64, 32), with_z_loss(t)});
  }
  p.push_back({"llama-laptop", "llama family, the laptop budget", llama_shape(4, 4, 128, 320, 64),
               with_z_loss(nanogpt_char_recipe(12, 64, 2000, 250))});
  p.push_back({"llama-small", "llama family, baby's size", llama_shape(6, 6, 384, 1024, 256),
               with_z_loss(nanogpt_char_recipe(64, 256, 5000, 250))});
  {
    // llm.c's train_gpt2.c CPU run: B=4, T=64, AdamW lr 1e-4, wd 0, no clipping, 40 steps.
    TrainConfig t;
    t.batch = 4;
    t.seq = 64;
    t.steps = 40;
    t.lr = 1e-4f;
    t.min_lr = 1e-4f;
    t.wd = 0.0f;
    t.clip = 0.0f;
    t.schedule = Schedule::kConstant;
    t.val_every = 10;
    t.val_batches = 5;
    p.push_back({"gpt2-124m", "GPT-2 small as llm.c (use with --init-from / --data-tokens)",
                 gpt2_shape(12, 12, 768, 1024, 50257, 50304), t});
  }
  return p;
}

}  // namespace

const std::vector<Preset>& presets() {
  static const std::vector<Preset> all = make_presets();
  return all;
}

const Preset& find_preset(const std::string& name) {
  std::string names;
  for (const Preset& p : presets()) {
    if (p.name == name) return p;
    names += (names.empty() ? "" : ", ") + p.name;
  }
  throw usage_error("unknown preset '" + name + "'; choose one of: " + names);
}

void settle_bf16_attention(TrainConfig& t, bool attention_given) {
  if (!bf16_products(t.precision)) return;
  if (attention_given && t.attention != AttentionKind::kMaterialised) {
    throw usage_error(std::string("--attention ") + enum_name(t.attention) +
                      " conflicts with --precision " + enum_name(t.precision) +
                      ", which runs the materialised attention (its products in bf16 need the "
                      "probabilities); leave --attention out");
  }
  t.attention = AttentionKind::kMaterialised;
}

ModelOptions model_options(const TrainConfig& t) {
  ModelOptions o;
  o.batch = t.batch, o.seq = t.seq, o.grad_accum = t.grad_accum, o.precision = t.precision,
  o.z_loss = t.z_loss;
  o.attention = t.attention, o.matmul = t.matmul, o.kernels = t.kernels;
  return o;
}

void validate(const ModelConfig& m, const TrainConfig& t) {
  if (m.channels % m.heads != 0) {
    throw usage_error("channels " + std::to_string(m.channels) + " not divisible by heads " +
                      std::to_string(m.heads));
  }
  if (m.arch == Arch::kLlama && (m.channels / m.heads) % 2 != 0) {
    throw usage_error("llama needs an even head size for RoPE; channels/heads is " +
                      std::to_string(m.channels / m.heads));
  }
  if (!(t.z_loss >= 0) || !std::isfinite(t.z_loss)) throw usage_error("--z-loss must be ≥ 0");
  if (t.batch < 1) throw usage_error("--batch must be at least 1");
  if (t.seq < 1) throw usage_error("--seq must be at least 1");
  if (t.grad_accum < 1 || t.grad_accum > kMaxGradAccum) {
    throw usage_error("--grad-accum must lie in [1, " + std::to_string(kMaxGradAccum) + "]");
  }
  if (t.seq > m.max_seq) {
    throw usage_error("--seq " + std::to_string(t.seq) + " is larger than the model's maximum " +
                      std::to_string(m.max_seq) + "; use --seq " + std::to_string(m.max_seq) +
                      " or less");
  }
  if (t.steps < 1) throw usage_error("--steps must be at least 1");
  if (!(t.lr > 0) || !std::isfinite(t.lr)) throw usage_error("--lr must be a positive number");
  if (!(t.min_lr >= 0) || t.min_lr > t.lr) throw usage_error("--min-lr must lie in [0, --lr]");
  if (!(t.wd >= 0) || !std::isfinite(t.wd)) throw usage_error("--wd must be ≥ 0");
  if (!(t.beta1 >= 0 && t.beta1 < 1)) throw usage_error("--beta1 must lie in [0, 1)");
  if (!(t.beta2 >= 0 && t.beta2 < 1)) throw usage_error("--beta2 must lie in [0, 1)");
  if (!(t.eps > 0)) throw usage_error("--eps must be positive");
  if (!(t.clip >= 0) || !std::isfinite(t.clip)) throw usage_error("--clip must be ≥ 0 (0 = off)");
  if (t.warmup < 0) throw usage_error("--warmup must be ≥ 0");
  if (t.val_every < 0) throw usage_error("--val-every must be ≥ 0");
  if (bf16_products(t.precision) && t.attention != AttentionKind::kMaterialised) {
    throw usage_error(std::string("--precision ") + enum_name(t.precision) +
                      " runs the materialised attention, not --attention " +
                      enum_name(t.attention));
  }
  if (bf16_only_weights(t.precision) && t.optimizer != Optimizer::kAdamW) {
    throw usage_error(std::string("--precision ") + enum_name(t.precision) +
                      " runs --optimizer adamw (its update rounds each new weight to bf16), not "
                      "--optimizer " +
                      enum_name(t.optimizer));
  }
  try {
    kernel_table(t.kernels, t.matmul, t.attention);  // the one place the column's rule lives
  } catch (const std::invalid_argument& e) {
    throw usage_error(std::string("--kernels ") + enum_name(t.kernels) + ": " + e.what());
  }
}

}  // namespace reftrain
