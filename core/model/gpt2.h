// The gpt2 family (llm.c's GPT-2): x = wte[tok] + wpe[t]; per layer x += attn(LN1(x)),
// x += Wproj·gelu(Wfc·LN2(x) + bfc) + bproj; logits = LNf(x)·wteᵀ (tied).
// Forward and backward use only ops/ kernels; each layer's forward and backward sit side by side.
#pragma once

#include <cstdint>
#include <vector>

#include "core/model/model.h"
#include "core/model/model_config.h"
#include "core/model/param_layout.h"
#include "simd/aligned_buffer.h"

namespace reftrain {

// Views of one mega-buffer (weights or gradients) by tensor, in nanoGPT's naming.
struct Gpt2Tensors {
  struct Layer {
    float *ln1w, *ln1b;          // transformer.h.{l}.ln_1.{weight,bias}         [C]
    float *qkvw, *qkvb;          // transformer.h.{l}.attn.c_attn.{weight,bias}  [3C,C], [3C]
    float *attprojw, *attprojb;  // transformer.h.{l}.attn.c_proj.{weight,bias}  [C,C], [C]
    float *ln2w, *ln2b;          // transformer.h.{l}.ln_2.{weight,bias}         [C]
    float *fcw, *fcb;            // transformer.h.{l}.mlp.c_fc.{weight,bias}     [4C,C], [4C]
    float *fcprojw, *fcprojb;    // transformer.h.{l}.mlp.c_proj.{weight,bias}   [C,4C], [C]
  };
  float* wte;  // transformer.wte.weight [Vp,C], also the lm_head
  float* wpe;  // transformer.wpe.weight [maxT,C]
  std::vector<Layer> layers;
  float *lnfw, *lnfb;  // transformer.ln_f.{weight,bias} [C]
};

ParamLayout gpt2_param_layout(const ModelConfig& cfg);
Gpt2Tensors gpt2_tensors(const ParamLayout& layout, int layers, float* base);

class Gpt2 : public Model {
 public:
  // Sizes the arena for batches up to B×T; allocates w and g (zeroed), and w16 when mixed.
  Gpt2(const ModelConfig& cfg, const ModelOptions& options);

  // Floats of activation arena that a forward + backward at (B, T) needs.
  static size_t activation_floats(const ModelConfig& cfg, int B, int T, AttentionKind attention);

  const float* logits() const override { return act_.logits; }

 private:
  struct LayerActs {
    // att: the attention's saved state (lse, or the probabilities)
    float *ln1, *ln1_mean, *ln1_rstd, *qkv, *att, *atty, *attproj, *res2;
    float *ln2, *ln2_mean, *ln2_rstd, *fch, *fch_gelu, *fcproj, *res3;
  };
  struct Acts {
    float* encoded;
    std::vector<LayerActs> layers;
    float *lnf, *lnf_mean, *lnf_rstd, *logits, *losses;
    // Backward scratch, reused by every layer.
    float *dres, *dres2, *dbranch, *dln, *datty, *dqkv, *dfch, *dfch_gelu, *dp, *dlogits;
  };
  template <typename A>
  friend void carve_gpt2_activations(A& a, ArenaCarver& arena, const ModelConfig& cfg,
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
  // The family's own kernels over N rows of C channels (or n elements), traced (Model::traced).
  void layernorm_fwd(float* out, float* mean, float* rstd, const float* x, const float* w,
                     const float* b, int N) const;
  void layernorm_bwd(float* dx, float* dw, float* db, const float* dout, const float* x,
                     const float* w, const float* mean, const float* rstd, int N) const;
  void gelu_fwd(float* out, const float* x, size_t n) const;
  void gelu_bwd(float* dx, const float* x, const float* dout, size_t n) const;

  AlignedBuffer<float> arena_;
  Gpt2Tensors wt_, gt_;
  Acts act_;
};

}  // namespace reftrain
