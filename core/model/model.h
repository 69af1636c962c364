// Model: what the trainer needs from a model family (gpt2, llama). The parameters live in one
// fp32 mega-buffer `w` described by a ParamLayout, with gradients `g` in the same layout and,
// in mixed precision, the fp16 mirror `w16` (in bf16 precision, a bf16 mirror). Activations live
// in an arena each family sizes at construction for (B, T); nothing allocates inside a step.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "core/model/kernel_profile.h"
#include "core/model/model_config.h"
#include "core/model/param_layout.h"
#include "ops/bf16.h"
#include "ops/cast.h"
#include "ops/kernel_dump.h"
#include "ops/matmul.h"
#include "ops/matmul_bf16.h"
#include "optim/kernel_table.h"
#include "optim/optimizer.h"
#include "simd/aligned_buffer.h"

namespace reftrain {

class Model {
 public:
  virtual ~Model() = default;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelConfig& config() const { return cfg_; }
  const ParamLayout& layout() const { return layout_; }
  Precision precision() const { return precision_; }
  AttentionKind attention() const { return kt_.attention; }
  MatmulKind matmul() const { return matmul_.kind(); }
  Kernels kernels() const { return kt_.column; }
  float* weights() { return w_.data(); }
  const float* weights() const { return w_.data(); }
  float* grads() { return g_.data(); }
  // The fp16 mirror of the weights (mixed precision), null in fp32 and bf16. The optimizer
  // writes it (adamw_update_f16); nothing else may.
  const f16* mirror() const { return w16_.data(); }
  f16* mirror() { return w16_.data(); }
  // The mirror the optimizer writes, whichever the precision has: the fp16 one, the bf16 one
  // (adamw_update_bf16), or none. Decoding's packed copies of the bf16 weights are dropped, since
  // the caller may change them.
  WeightMirror weight_mirror() {
    if (b16_.weights_mm) b16_.weights_mm->forget_weights();
    const Bf16Rounding rounding = precision_ == Precision::kBf16Pure    ? Bf16Rounding::kStochastic
                                  : precision_ == Precision::kBf16Kahan ? Bf16Rounding::kKahan
                                                                        : Bf16Rounding::kNone;
    return {w16_.data(), wb16_.data(), rounding, noise_seed_};
  }

  // Every tensor as its ParamInit says, drawing element i of the mega-buffer from
  // CounterRng(seed, kInit).normal(i); then refreshes the mirror (passing `lost` on). bf16-pure's
  // optimizer steps key their rounding noise by the same seed (stochastic_seed).
  void init_weights(uint64_t seed, bf16* lost = nullptr);
  // w16 = f16(clamp(w, ±65504)) (round-to-nearest-even), in mixed precision; the bf16 mirror
  // bf16(w) (cast_f32_to_bf16) in bf16 precision; in bf16-pure and bf16-kahan the same, and then
  // w = f32(mirror): the weights become bf16 values (round to nearest even); there, `lost` (the
  // whole mega-buffer's length) gets what that rounding lost, bf16(w − f32(bf16(w))), from which
  // bf16-kahan's compensation starts. Call after every change of the weights that did not write
  // the mirror itself (an optimizer step writes it).
  void refresh_mirror(bf16* lost = nullptr);

  // Forward over B×T tokens (≤ the construction sizes): the embedding, every layer, the final
  // norm and the lm_head. With targets, returns the mean loss (cross-entropy + z·mean(lse²)) and
  // keeps dlogits for backward(); without, fills logits only.
  float forward(const int32_t* inputs, const int32_t* targets, int B, int T);
  // Accumulates (+=) the gradient of the last forward's loss into grads(): the same pieces in
  // reverse order.
  void backward();
  // Logits [B,T,Vp] of the last forward.
  virtual const float* logits() const = 0;

  // Text generation with a KV cache (B = 1). Row t of every layer's qkv activation holds the
  // q, k and v of position t, so after a forward over positions 0..n-1 the keys and values of
  // every earlier position are in place (L·2·T·C floats of the arena, no extra memory), and the
  // next token needs one position's forward: each kernel on that row alone, its attention
  // (attention_decode) reading the cached rows. The row's logits are then the same bits as the
  // last row of a forward over all the positions (each kernel computes a row the same way
  // whatever the number of rows; not so for the eigen matmul, which sums in its own order).
  //
  // prefill: forward(tokens, nullptr, 1, n), which fills the cache (1 ≤ n ≤ seq()); returns the
  // logits of position n-1 [Vp].
  const float* prefill(const int32_t* tokens, int n);
  // The forward of `token` at position cached() (< seq()) against the cache, which it extends
  // by that position; returns its logits [Vp]. Throws std::logic_error when the cache is full or
  // the last forward was not a prefill or a decode (a programming error).
  const float* decode(int32_t token);
  // Positions in the cache: 0 after any forward other than prefill.
  int cached() const { return cached_; }
  // Bytes decoding keeps packed now, its weights, keys and values (bf16 precision;
  // bf16_decode_weight_bytes once it has decoded a full window), 0 when none.
  size_t decode_weight_bytes() const { return b16_.weights_mm ? b16_.weights_mm->kept_bytes() : 0; }
  // Bytes of the bf16 engines' workspaces now (what bf16_workspace_bytes estimates), 0 when none.
  size_t engine_workspace_bytes() const {
    return b16_.mm ? b16_.mm->workspace_bytes() + b16_.weights_mm->workspace_bytes() : 0;
  }
  // T of the construction: the longest forward, and the cache's capacity.
  int seq() const { return seq_; }
  // Records every kernel call of the following forward() and backward() into `dump` (null:
  // off), layer by layer as `embed`, `h<l>`, `head` (ops/kernel_dump.h).
  void set_dump(KernelDump* dump) { dump_ = dump; }
  // Adds the wall time of every kernel call of the following forward() and backward() calls
  // to `profile` (null: off), each under its kernel name (and shape, for the products).
  void set_profile(KernelProfile* profile) { profile_ = profile; }

 protected:
  // Throws std::invalid_argument when options.kernels is kReference with another matmul than
  // naive or another attention than materialised (kernel_table).
  Model(const ModelConfig& cfg, ParamLayout layout, const ModelOptions& options);

  // A family's pieces of forward() and backward(), each forward beside its backward in the
  // family's file. The residual stream enters a layer as `res_in` and leaves as its output.
  virtual const float* embedding_forward(const int32_t* inputs, int B, int T) = 0;
  virtual const float* layer_forward(int l, const float* res_in, int B, int T) = 0;
  // Final norm and lm_head into logits(); with targets, the loss and dlogits (mean_loss).
  virtual float head_forward(const float* res, const int32_t* targets, int N) = 0;
  // From dlogits back through the lm_head and the final norm: the gradient of the last
  // layer's output, in a buffer the layers' backward then carries down the stack.
  virtual float* head_backward(int N) = 0;
  // On entry dres holds the gradient of layer l's output; on return, of its input.
  virtual void layer_backward(int l, float* dres, int B, int T) = 0;
  virtual void embedding_backward(const float* dres, const int32_t* inputs, int B, int T) = 0;
  // The same pieces for one position `pos` of a B = 1 sequence (decode): each writes row pos of
  // the activations layer_forward writes, the attention reading rows 0..pos of qkv. Return row
  // pos of the residual stream.
  virtual const float* embedding_decode(int32_t token, int pos) = 0;
  virtual const float* layer_decode(int l, const float* res_in, int pos) = 0;

  // p[0..n) = 0: the backward's scratch before a kernel accumulates into it.
  void zero(float* p, size_t n) const;
  // What a backward kernel does with the input gradient it writes. kAdd: adds into what the
  // buffer holds. kFresh: the buffer's first writer in this part of the backward, so it holds
  // nothing of this step; the kernel starts each output from +0 instead of reading it, the bits of
  // zeroing the buffer and adding, without that pass over memory (about 2 % of a 1-thread baby
  // step, 6 % with AMX: bench/RESULTS.md, issue 32).
  enum class Grad { kFresh, kAdd };
  // Before a kFresh kernel's call: a dump records what the kernel's record reads (an in-out
  // binding's value before the call: zeros), so it gets them; nothing otherwise.
  void fresh_for_dump(float* p, size_t n) const;
  // Runs one call of kernel `kernel` (its record's name), recorded in the dump and timed in the
  // profile when they are set: `tensors` are its non-scalar bindings in the record's order (null
  // where the call binds none), `dims` the sizes its shapes name (ops/kernel_dump.h).
  template <typename F>
  void traced(const char* kernel, std::initializer_list<KernelDump::Ptr> tensors,
              std::initializer_list<Dim> dims, F&& run) const {
    traced_as(kernel, kernel, tensors, dims, run);
  }
  // The same under another name in the profile (a product's shape).
  template <typename F>
  void traced_as(std::string_view profile_name, const char* kernel,
                 std::initializer_list<KernelDump::Ptr> tensors, std::initializer_list<Dim> dims,
                 F&& run) const {
    ProfileScope timer(profile_, profile_name);
    dump_call(dump_, tag_, kernel, tensors, dims, run);
  }
  // The profile's name of a product: kernel, then N×K->O (rows, inputs, outputs); empty when
  // there is no profile.
  static std::string product_name(const KernelProfile* profile, const char* kernel, int N, int K,
                                  int O);
  // out = a + b, and its backward da = db = dout, over n elements: the first writer of both
  // (Grad::kFresh, as are the families' activation and attention backwards).
  void residual_fwd(float* out, const float* a, const float* b, size_t n) const;
  void residual_bwd(float* da, float* db, const float* dout, size_t n) const;

  // A linear layer's products (ops/linear.h) with the model's matmul variant. The two that read
  // the weight (forward, backward-data) read w16 in mixed precision, widened to f32 as the
  // product packs it; w otherwise. `w` points into w_.
  void linear_fwd(float* out, const float* inp, const float* w, const float* b, int N, int K,
                  int O) const;
  // `grad` says whether dinp is written fresh or added into.
  void linear_bwd(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                  const float* w, int N, int K, int O, Grad grad) const;
  // The f16 mirror of the weight tensor at w (same offset in the mirror); null in an fp32 run,
  // which has no mirror.
  const f16* mirror_of(const float* w) const;
  // bf16 precision's products (core/model/model_bf16.cpp): each operand rounded to bf16 as it
  // enters (a cast_f32_to_bf16 call), the weight read from the bf16 mirror, ops/linear_bf16.h
  // and ops/attention_bf16.h. The attention is the materialised one (att: the probabilities).
  void linear_fwd_bf16(float* out, const float* inp, const float* w, const float* b, int N, int K,
                       int O) const;
  void linear_bwd_bf16(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                       const float* w, int N, int K, int O, Grad grad) const;
  void attention_fwd_bf16(float* out, float* att, const float* qkv, int B, int T) const;
  void attention_bwd_bf16(float* dqkv, const float* dout, const float* qkv, const float* att, int B,
                          int T) const;
  // Extends layer l's bf16 rounding of the cache (`kept`, see Bf16Work) by the rows it lacks, then
  // runs the decode row on it.
  void attention_decode_bf16_fwd(float* out, const float* qkv, int l, int pos) const;
  // src [n] rounded to bf16 into dst (one cast_f32_to_bf16 call); returns dst.
  const bf16* to_bf16(bf16* dst, const float* src, size_t n) const;
  // The bf16 rounding of a product's input activation src [n]. In a forward with targets it is
  // cast once, by the first product that reads src, into `kept`, where the backward's products
  // read it again; otherwise it is cast into the shared `in`.
  const bf16* input_bf16(const float* src, size_t n) const;
  // Causal self-attention with the model's kernel. att is what the backward needs of the
  // forward: lse [B,NH,T] (fused) or the probabilities [B,NH,T,T] (materialised, which also
  // uses dp [B,NH,T] as scratch; the fused kernel ignores it). out is the forward's output. The
  // backward writes dqkv (Grad::kFresh).
  void attention_fwd(float* out, float* att, const float* qkv, int B, int T) const;
  void attention_bwd(float* dqkv, float* dp, const float* dout, const float* qkv, const float* out,
                     const float* att, int B, int T) const;
  // Row pos of layer l's attention over qkv rows 0..pos (B = 1) into out [C]: attention_decode or
  // attention_decode_fast as the model's kernel; att: the layer's saved-state buffer, as scratch.
  void attention_decode_fwd(float* out, float* att, const float* qkv, int l, int pos) const;

  // Cross-entropy (+ z-loss) of every position with dlogits fused (scaled by 1/(K·N), K the
  // micro-batches a step accumulates: ModelOptions::grad_accum), and the mean
  // of the per-position losses summed in position order.
  float mean_loss(float* losses, float* dlogits, const float* logits, const int32_t* targets,
                  int N) const;

  // What backward() needs to know about the last forward: its sizes and tokens, and whether it
  // had targets (so dlogits exist).
  struct LastForward {
    int B = 0, T = 0;
    const int32_t* inputs = nullptr;
    bool has_targets = false;
  };
  // Throws std::logic_error when the last forward had no targets (a programming error).
  void require_targets(const char* who) const;

  LastForward last_;
  int seq_;                // T of the construction
  int cached_ = 0;         // positions in the KV cache (decode)
  bool decoding_ = false;  // inside decode(), not a forward
  KernelDump* dump_ = nullptr;
  KernelProfile* profile_ = nullptr;
  std::string tag_;  // the dump's name of the part running: embed, h<l>, head
  ModelConfig cfg_;
  ParamLayout layout_;
  Precision precision_;
  KernelTable kt_;  // every kernel this model calls, with its attention and matmul variants
  float z_loss_;
  int grad_accum_;
  AlignedBuffer<float> w_, g_;
  AlignedBuffer<f16> w16_;
  Matmul matmul_;  // the variant and its packing workspace, sized at construction
  // bf16 precision only (empty otherwise): the weights' bf16 mirror, the product engine on the
  // kernel column's path, and the bf16 copies of a product's operands: `in` [B·T, widest input
  // of a product] (an activation, or qkv, in a forward without targets), `dout` [B·T, widest
  // output] (a gradient), `att` [B,NH,T,T] (the probabilities), `ds` and `dp` [threads,T,T] (the
  // attention backward's scratch, one [T,T] per thread; the decode's row), and `kept`
  // [bf16_kept_inputs] the input roundings a training step's backward reads again (input_bf16),
  // each at `kept_at` (its f32 source, offset and length), cleared by every forward. A forward
  // without targets keeps nothing there, so decoding holds in `kept` each layer's bf16 rounding
  // of its qkv cache ([layers, seq, 3C], which fits: kept has room for 6C per token and layer),
  // its first `kv_rows[l]` rows cast (reset by every forward): a token casts only its own row.
  // `weights_mm` runs decoding's products and keeps each weight and each head's keys and values
  // in that cache packed from one token to the next (MatmulBf16::keep_weights: a token packs only
  // its own key and value), until a forward or a change of the weights.
  AlignedBuffer<bf16> wb16_;
  uint32_t noise_seed_ = 0;  // bf16-pure's rounding noise: stochastic_seed(init_weights' seed)
  struct KeptInput {
    const float* src;
    size_t offset, n;
  };
  struct Bf16Work {
    std::unique_ptr<MatmulBf16> mm, weights_mm;
    AlignedBuffer<bf16> in, dout, att, ds, kept;
    AlignedBuffer<float> dp;
    std::vector<KeptInput> kept_at;
    std::vector<int> kv_rows;
  };
  mutable Bf16Work b16_;
};

ParamLayout param_layout(const ModelConfig& cfg);
// The standard deviation init_weights draws a kNormal or kNormalResidual tensor from in a model
// of `layers` layers: 0.02, and 0.02/sqrt(2·layers) for the projections that write into the
// residual stream. A function of its own so that docs/training.md can print it
// (`reftrain explain init`) instead of quoting it.
double init_std(ParamInit init, int layers);
// Floats of one layer's saved attention state (att) and of the attention backward's scratch
// (dp) for `kind` at (B, T).
size_t attention_state_floats(const ModelConfig& cfg, AttentionKind kind, int B, int T);
size_t attention_scratch_floats(const ModelConfig& cfg, AttentionKind kind, int B, int T);
// Floats of activation arena a model of `cfg` needs at (B, T).
size_t activation_floats(const ModelConfig& cfg, int B, int T,
                         AttentionKind attention = AttentionKind::kFused);
// Bytes of the bf16 operand copies (and the attention's scratch) a model of `cfg` allocates at
// (B, T) in bf16 precision, besides its bf16 mirror (0 in the other precisions).
size_t bf16_operand_bytes(const ModelConfig& cfg, Precision precision, int B, int T);
// Bytes of what decoding keeps packed (MatmulBf16::keep_weights) in bf16 precision on the kernel
// column's path: every product weight of the layers and the lm_head, and each head's keys and
// values at a full window of T; 0 in the other precisions and on the reference. A run holds them
// from its first sampled token on.
size_t bf16_decode_weight_bytes(const ModelConfig& cfg, Precision precision, Kernels kernels,
                                int T);
// Bytes of the bf16 engines' workspaces (MatmulBf16::workspace: the packed and widened panels)
// after a training step at (B, T) and decoding on the kernel column's path: the step's engine,
// its single-thread engines for the attention's heads, and decoding's; 0 in the other precisions.
size_t bf16_workspace_bytes(const ModelConfig& cfg, Precision precision, Kernels kernels, int B,
                            int T);
// Bytes of the matmul workspace a model of `cfg` allocates for products of `rows` rows (B·T),
// per thread for the current omp_get_max_threads(); for eigen, with what Eigen allocates.
size_t matmul_workspace_bytes(const ModelConfig& cfg, Precision precision, MatmulKind matmul,
                              int rows);
// A model of cfg.arch's family, sized and configured by `options`.
std::unique_ptr<Model> make_model(const ModelConfig& cfg, const ModelOptions& options);

}  // namespace reftrain
