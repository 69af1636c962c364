// The llama family (the llm.istanbul WebGPU trainer's model): x = emb[tok]; per layer
// x += Wo·attn(rope(Wq·RMS1(x)), rope(Wk·RMS1(x)), Wv·RMS1(x)),
// x += Wdown·(silu(Wgate·RMS2(x)) ⊙ Wup·RMS2(x)); logits = RMSf(x)·Wheadᵀ (untied), no biases.
// RMSNorm eps 1e-5; RoPE θ = rope_theta, rotate-half pairing (i, i + hs/2), positions 0..T-1.
#pragma once

#include <cstdint>
#include <vector>

#include "core/model/model.h"

namespace reftrain {

// Views of one mega-buffer (weights or gradients) by tensor, in Hugging Face's llama naming.
struct LlamaTensors {
  struct Layer {
    float* rms1w;                // model.layers.{l}.input_layernorm.weight          [C]
    float *wq, *wk, *wv, *wo;    // model.layers.{l}.self_attn.{q,k,v,o}_proj.weight [C,C]
    float* rms2w;                // model.layers.{l}.post_attention_layernorm.weight [C]
    float *wgate, *wup, *wdown;  // model.layers.{l}.mlp.{gate,up}_proj.weight [F,C], down [C,F]
  };
  float* emb;  // model.embed_tokens.weight [Vp,C]
  std::vector<Layer> layers;
  float* rmsfw;  // model.norm.weight [C]
  float* head;   // lm_head.weight [Vp,C]
};

ParamLayout llama_param_layout(const ModelConfig& cfg);
LlamaTensors llama_tensors(const ParamLayout& layout, int layers, float* base);

class Llama : public Model {
 public:
  Llama(const ModelConfig& cfg, const ModelOptions& options);

  static size_t activation_floats(const ModelConfig& cfg, int B, int T, AttentionKind attention);

  const float* logits() const override { return act_.logits; }

 private:
  struct LayerActs {
    // qkv: rotated q, k, and v; att: the attention's saved state (lse, or the probabilities)
    float *rms1, *rms1_rstd, *qkv, *att, *atty, *attproj, *res2;
    float *rms2, *rms2_rstd, *gate, *up, *swi, *down, *res3;
  };
  struct Acts {
    float* encoded;
    std::vector<LayerActs> layers;
    float *rmsf, *rmsf_rstd, *logits, *losses;
    // q, k, v before packing (forward) and their gradients (backward), [N,C] each, shared by
    // every layer: q and k are q, k before RoPE, qr and kr after.
    float *q, *k, *v, *qr, *kr;
    // Backward scratch, reused by every layer.
    float *dres, *dres2, *dbranch, *dln, *datty, *dqkv, *dgate, *dup, *dswi, *dp, *dlogits;
  };
  template <typename A>
  friend void carve_llama_activations(A& a, ArenaCarver& arena, const ModelConfig& cfg,
                                      AttentionKind attention, int B, int T);
  const float* embedding_forward(const int32_t* inputs, int B, int T) override;
  void embedding_backward(const float* dres, const int32_t* inputs, int B, int T) override;
  const float* layer_forward(int l, const float* res_in, int B, int T) override;
  const float* embedding_decode(int32_t token, int pos) override;
  const float* layer_decode(int l, const float* res_in, int pos) override;
  void layer_backward(int l, float* dres, int B, int T) override;
  float head_forward(const float* res, const int32_t* targets, int N) override;
  float* head_backward(int N) override;
  // The residual stream entering layer l: the embedding's output or layer l-1's.
  const float* layer_input(int l) const { return l > 0 ? act_.layers[l - 1].res3 : act_.encoded; }
  // The family's own kernels over N = B·T rows of C channels (or n elements), traced
  // (Model::traced); pack/unpack move q, k, v into and out of attention's [N, 3C] layout.
  void rmsnorm_fwd(float* out, float* rstd, const float* x, const float* w, int N) const;
  void rmsnorm_bwd(float* dx, float* dw, const float* dout, const float* x, const float* w,
                   const float* rstd, int N) const;
  void swiglu_fwd(float* out, const float* gate, const float* up, size_t n) const;
  void swiglu_bwd(float* dgate, float* dup, const float* dout, const float* gate, const float* up,
                  size_t n) const;
  // t0: the position of the first row (decode rotates one row at its position).
  void rope_fwd(float* out, const float* x, int B, int T, int t0 = 0) const;
  void rope_bwd(float* dx, const float* dout, int B, int T) const;
  void pack(float* qkv, int N) const;
  void unpack(const float* dqkv, int N) const;

  AlignedBuffer<float> arena_;
  LlamaTensors wt_, gt_;
  Acts act_;
};

}  // namespace reftrain
