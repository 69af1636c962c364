// A model's shape and the choices that change how it computes (precision, attention, matmul,
// reference or fast kernels), with the one name table of each choice.
#pragma once

#include "core/base/names.h"
#include "ops/attention.h"
#include "ops/kernels.h"
#include "ops/matmul.h"

namespace reftrain {

enum class Arch { kGpt2, kLlama };
// fp32: everything in fp32. mixed: the matmuls that read a weight read its fp16 mirror,
// widened to f32 at load; activations, gradients and the optimizer stay fp32. bf16: every
// product (the linear layers' three and the attention's four) takes bf16 operands (the weights'
// bf16 mirror, activations and gradients rounded to bf16 as they enter) and sums them in the
// canonical bf16 order into f32; norms, softmax, activations, loss, gradients, optimizer and
// master weights stay fp32 (docs/numerics.md, "bf16 training"). bf16-pure: bf16's products, but
// the weights are bf16 values only (no fp32 master): each step rounds every new weight to bf16
// stochastically, its noise a hash of (seed, step, element index) (optim/adamw.h's
// adamw_update_bf16_sr; docs/numerics.md, "bf16-pure weights"). bf16-kahan: the same, but each
// step rounds to nearest and keeps what the rounding lost in a bf16 compensation per weight, added
// to the next step (adamw_update_bf16_kahan).
enum class Precision { kFp32, kMixed, kBf16, kBf16Pure, kBf16Kahan };

// Whether the weights are bf16 values only, with no fp32 master (bf16-pure and bf16-kahan).
inline bool bf16_only_weights(Precision p) {
  return p == Precision::kBf16Pure || p == Precision::kBf16Kahan;
}

// Whether a precision runs the bf16 products (bf16, bf16-pure and bf16-kahan).
inline bool bf16_products(Precision p) {
  return p == Precision::kBf16 || bf16_only_weights(p);
}

// gpt2's MLP activation: the tanh GELU (GPT-2's own, Hugging Face's "gelu_new") or the exact erf
// GELU (Hugging Face's "gelu", which some GPT-2-shaped checkpoints use).
enum class Activation { kGeluTanh, kGeluErf };

struct ModelConfig {
  Arch arch = Arch::kGpt2;
  int layers = 0;        // L
  int heads = 0;         // NH
  int channels = 0;      // C
  int max_seq = 0;       // maxT: rows of the position table, the longest T a run may use
  int vocab = 0;         // V: token ids are < V
  int padded_vocab = 0;  // Vp ≥ V: rows of wte, rounded up for alignment (llm.c pads to 64·k)
  int ffn = 0;           // llama: F, the SwiGLU hidden width (gpt2 uses 4C)
  double rope_theta = 10000.0;                    // llama: RoPE base
  Activation activation = Activation::kGeluTanh;  // gpt2
};

// The MLP's hidden width F: llama's SwiGLU width, gpt2's 4C.
inline int mlp_width(const ModelConfig& m) {
  return m.arch == Arch::kLlama ? m.ffn : 4 * m.channels;
}

// Vp for a vocabulary of V: V rounded up to a multiple of 64, as llm.c pads it (GPT-2's 50257 to
// 50304); what a model built from a tokenizer or a Hugging Face file gets.
inline int padded_vocab_of(int vocab) {
  return (vocab + 63) / 64 * 64;
}

// How a model instance computes: the largest batch it is sized for and the kernels it runs.
// Kernels::kReference requires the naive matmul and the materialised attention.
struct ModelOptions {
  int batch = 1;  // B: the arena holds activations for up to B×T tokens
  int seq = 1;    // T
  Precision precision = Precision::kFp32;
  float z_loss = 0.0f;  // z in loss = CE + z·mean(lse²)
  AttentionKind attention = AttentionKind::kFused;
  MatmulKind matmul = MatmulKind::kBlocked;
  Kernels kernels = Kernels::kFast;
  // K: the step's gradient is the mean over K micro-batches of B×T, so backward() scales
  // dlogits by 1/(K·B·T) (the forward's loss stays the mean over its own B×T positions).
  int grad_accum = 1;
};

template <>
struct EnumNames<Arch> {
  static constexpr NamedValue<Arch> values[] = {{Arch::kGpt2, "gpt2"}, {Arch::kLlama, "llama"}};
};
template <>
struct EnumNames<Precision> {
  static constexpr NamedValue<Precision> values[] = {{Precision::kFp32, "fp32"},
                                                     {Precision::kMixed, "mixed"},
                                                     {Precision::kBf16, "bf16"},
                                                     {Precision::kBf16Pure, "bf16-pure"},
                                                     {Precision::kBf16Kahan, "bf16-kahan"}};
};
template <>
struct EnumNames<Activation> {
  static constexpr NamedValue<Activation> values[] = {{Activation::kGeluTanh, "gelu_tanh"},
                                                      {Activation::kGeluErf, "gelu_erf"}};
};
template <>
struct EnumNames<AttentionKind> {
  static constexpr NamedValue<AttentionKind> values[] = {
      {AttentionKind::kFused, "fused"}, {AttentionKind::kMaterialised, "materialised"}};
};
template <>
struct EnumNames<MatmulKind> {
  static constexpr NamedValue<MatmulKind> values[] = {{MatmulKind::kNaive, "naive"},
                                                      {MatmulKind::kTiled, "tiled"},
                                                      {MatmulKind::kBlocked, "blocked"},
                                                      {MatmulKind::kEigen, "eigen"}};
};
template <>
struct EnumNames<Kernels> {
  static constexpr NamedValue<Kernels> values[] = {{Kernels::kReference, "reference"},
                                                   {Kernels::kFast, "fast"}};
};

}  // namespace reftrain
