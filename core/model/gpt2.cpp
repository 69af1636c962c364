#include "core/model/gpt2.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/base/rng.h"
#include "ops/linear.h"

namespace reftrain {

namespace {

std::string gpt2_layer_name(int l, const char* rest) {
  return "transformer.h." + std::to_string(l) + "." + rest;
}

}  // namespace

template <typename A>
void carve_gpt2_activations(A& a, ArenaCarver& arena, const ModelConfig& cfg,
                            AttentionKind attention, int B, int T) {
  const size_t BT = size_t(B) * T, C = cfg.channels, Vp = cfg.padded_vocab;
  const size_t att = attention_state_floats(cfg, attention, B, T);  // lse or probabilities
  a.encoded = arena.take(BT * C);
  a.layers.resize(cfg.layers);
  for (auto& l : a.layers) {
    l.ln1 = arena.take(BT * C), l.ln1_mean = arena.take(BT), l.ln1_rstd = arena.take(BT);
    l.qkv = arena.take(BT * 3 * C), l.att = arena.take(att), l.atty = arena.take(BT * C);
    l.attproj = arena.take(BT * C), l.res2 = arena.take(BT * C);
    l.ln2 = arena.take(BT * C), l.ln2_mean = arena.take(BT), l.ln2_rstd = arena.take(BT);
    l.fch = arena.take(BT * 4 * C), l.fch_gelu = arena.take(BT * 4 * C);
    l.fcproj = arena.take(BT * C), l.res3 = arena.take(BT * C);
  }
  a.lnf = arena.take(BT * C), a.lnf_mean = arena.take(BT), a.lnf_rstd = arena.take(BT);
  a.logits = arena.take(BT * Vp), a.losses = arena.take(BT);
  a.dres = arena.take(BT * C), a.dres2 = arena.take(BT * C), a.dbranch = arena.take(BT * C);
  a.dln = arena.take(BT * C), a.datty = arena.take(BT * C), a.dqkv = arena.take(BT * 3 * C);
  a.dfch = arena.take(BT * 4 * C), a.dfch_gelu = arena.take(BT * 4 * C);
  a.dp = arena.take(attention_scratch_floats(cfg, attention, B, T));
  a.dlogits = arena.take(BT * Vp);
}

ParamLayout gpt2_param_layout(const ModelConfig& cfg) {
  const int C = cfg.channels;
  std::vector<ParamTensor> t;
  auto add = [&t](std::string name, std::vector<int> shape) {
    const bool decay = shape.size() >= 2;  // matrices and embeddings; not norms or biases
    const bool is_weight = name.compare(name.size() - 7, 7, ".weight") == 0;
    ParamInit init = is_weight ? ParamInit::kOnes : ParamInit::kZeros;
    if (decay) {
      const bool residual = name.find("c_proj.weight") != std::string::npos;
      init = residual ? ParamInit::kNormalResidual : ParamInit::kNormal;
    }
    t.push_back({std::move(name), std::move(shape), 0, 0, decay, init, -1});
  };
  add("transformer.wte.weight", {cfg.padded_vocab, C});
  t.back().init_rows = cfg.vocab;  // padding rows V..Vp-1 stay 0
  add("transformer.wpe.weight", {cfg.max_seq, C});
  for (int l = 0; l < cfg.layers; ++l) {
    add(gpt2_layer_name(l, "ln_1.weight"), {C});
    add(gpt2_layer_name(l, "ln_1.bias"), {C});
    add(gpt2_layer_name(l, "attn.c_attn.weight"), {3 * C, C});
    add(gpt2_layer_name(l, "attn.c_attn.bias"), {3 * C});
    add(gpt2_layer_name(l, "attn.c_proj.weight"), {C, C});
    add(gpt2_layer_name(l, "attn.c_proj.bias"), {C});
    add(gpt2_layer_name(l, "ln_2.weight"), {C});
    add(gpt2_layer_name(l, "ln_2.bias"), {C});
    add(gpt2_layer_name(l, "mlp.c_fc.weight"), {4 * C, C});
    add(gpt2_layer_name(l, "mlp.c_fc.bias"), {4 * C});
    add(gpt2_layer_name(l, "mlp.c_proj.weight"), {C, 4 * C});
    add(gpt2_layer_name(l, "mlp.c_proj.bias"), {C});
  }
  add("transformer.ln_f.weight", {C});
  add("transformer.ln_f.bias", {C});
  return ParamLayout(std::move(t));
}

Gpt2Tensors gpt2_tensors(const ParamLayout& layout, int layers, float* base) {
  auto at = [&](const std::string& name) { return base + layout.get(name).offset; };
  Gpt2Tensors t;
  t.wte = at("transformer.wte.weight");
  t.wpe = at("transformer.wpe.weight");
  for (int l = 0; l < layers; ++l) {
    Gpt2Tensors::Layer y;
    y.ln1w = at(gpt2_layer_name(l, "ln_1.weight")), y.ln1b = at(gpt2_layer_name(l, "ln_1.bias"));
    y.qkvw = at(gpt2_layer_name(l, "attn.c_attn.weight")),
    y.qkvb = at(gpt2_layer_name(l, "attn.c_attn.bias"));
    y.attprojw = at(gpt2_layer_name(l, "attn.c_proj.weight"));
    y.attprojb = at(gpt2_layer_name(l, "attn.c_proj.bias"));
    y.ln2w = at(gpt2_layer_name(l, "ln_2.weight")), y.ln2b = at(gpt2_layer_name(l, "ln_2.bias"));
    y.fcw = at(gpt2_layer_name(l, "mlp.c_fc.weight")),
    y.fcb = at(gpt2_layer_name(l, "mlp.c_fc.bias"));
    y.fcprojw = at(gpt2_layer_name(l, "mlp.c_proj.weight"));
    y.fcprojb = at(gpt2_layer_name(l, "mlp.c_proj.bias"));
    t.layers.push_back(y);
  }
  t.lnfw = at("transformer.ln_f.weight");
  t.lnfb = at("transformer.ln_f.bias");
  return t;
}

size_t Gpt2::activation_floats(const ModelConfig& cfg, int B, int T, AttentionKind attention) {
  Acts counting;
  ArenaCarver arena(nullptr);
  carve_gpt2_activations(counting, arena, cfg, attention, B, T);
  return arena.used();
}

Gpt2::Gpt2(const ModelConfig& cfg, const ModelOptions& o)
    : Model(cfg, gpt2_param_layout(cfg), o),
      arena_(activation_floats(cfg, o.batch, o.seq, o.attention)) {
  wt_ = gpt2_tensors(layout_, cfg.layers, w_.data());
  gt_ = gpt2_tensors(layout_, cfg.layers, g_.data());
  ArenaCarver arena(arena_.data());
  carve_gpt2_activations(act_, arena, cfg, o.attention, o.batch, o.seq);
}

void Gpt2::layernorm_fwd(float* out, float* mean, float* rstd, const float* x, const float* w,
                         const float* b, int N) const {
  const int C = cfg_.channels;
  traced("layernorm_forward", {out, mean, rstd, x, w, b}, {{"N", size_t(N)}, {"C", size_t(C)}},
         [&] { kt_.layernorm_forward(out, mean, rstd, x, w, b, N, C); });
}

void Gpt2::layernorm_bwd(float* dx, float* dw, float* db, const float* dout, const float* x,
                         const float* w, const float* mean, const float* rstd, int N) const {
  const int C = cfg_.channels;
  traced("layernorm_backward", {dx, dw, db, dout, x, w, mean, rstd},
         {{"N", size_t(N)}, {"C", size_t(C)}},
         [&] { kt_.layernorm_backward(dx, dw, db, dout, x, w, mean, rstd, N, C); });
}

void Gpt2::gelu_fwd(float* out, const float* x, size_t n) const {
  if (cfg_.activation == Activation::kGeluErf) {
    traced("gelu_erf_forward", {out, x}, {{"n", n}}, [&] { kt_.gelu_erf_forward(out, x, n); });
  } else {
    traced("gelu_forward", {out, x}, {{"n", n}}, [&] { kt_.gelu_forward(out, x, n); });
  }
}

// Writes dx (Grad::kFresh).
void Gpt2::gelu_bwd(float* dx, const float* x, const float* dout, size_t n) const {
  fresh_for_dump(dx, n);
  if (cfg_.activation == Activation::kGeluErf) {
    traced("gelu_erf_backward", {dx, x, dout}, {{"n", n}},
           [&] { kt_.gelu_erf_backward(dx, x, dout, n, false); });
  } else {
    traced("gelu_backward", {dx, x, dout}, {{"n", n}},
           [&] { kt_.gelu_backward(dx, x, dout, n, false); });
  }
}

// x = wte[tok] + wpe[t]
const float* Gpt2::embedding_forward(const int32_t* inputs, int B, int T) {
  const int C = cfg_.channels;
  traced("embed_forward", {act_.encoded, inputs, wt_.wte, wt_.wpe},
         {{"B", size_t(B)},
          {"T", size_t(T)},
          {"C", size_t(C)},
          {"Vp", size_t(cfg_.padded_vocab)},
          {"maxT", size_t(cfg_.max_seq)}},
         [&] { kt_.embed_forward(act_.encoded, inputs, wt_.wte, wt_.wpe, B, T, C); });
  return act_.encoded;
}

void Gpt2::embedding_backward(const float* dres, const int32_t* inputs, int B, int T) {
  const int C = cfg_.channels;
  traced("embed_backward", {gt_.wte, gt_.wpe, dres, inputs},
         {{"B", size_t(B)},
          {"T", size_t(T)},
          {"C", size_t(C)},
          {"Vp", size_t(cfg_.padded_vocab)},
          {"maxT", size_t(cfg_.max_seq)}},
         [&] { kt_.embed_backward(gt_.wte, gt_.wpe, dres, inputs, B, T, C); });
}

// x += attn(LN1(x));  x += Wproj·gelu(Wfc·LN2(x) + bfc) + bproj
const float* Gpt2::layer_forward(int l, const float* res_in, int B, int T) {
  const Gpt2Tensors::Layer& w = wt_.layers[l];
  const LayerActs& a = act_.layers[l];
  const int N = B * T, C = cfg_.channels;
  const size_t NC = size_t(N) * C;
  layernorm_fwd(a.ln1, a.ln1_mean, a.ln1_rstd, res_in, w.ln1w, w.ln1b, N);
  linear_fwd(a.qkv, a.ln1, w.qkvw, w.qkvb, N, C, 3 * C);
  attention_fwd(a.atty, a.att, a.qkv, B, T);
  linear_fwd(a.attproj, a.atty, w.attprojw, w.attprojb, N, C, C);
  residual_fwd(a.res2, res_in, a.attproj, NC);
  layernorm_fwd(a.ln2, a.ln2_mean, a.ln2_rstd, a.res2, w.ln2w, w.ln2b, N);
  linear_fwd(a.fch, a.ln2, w.fcw, w.fcb, N, C, 4 * C);
  gelu_fwd(a.fch_gelu, a.fch, NC * 4);
  linear_fwd(a.fcproj, a.fch_gelu, w.fcprojw, w.fcprojb, N, 4 * C, C);
  residual_fwd(a.res3, a.res2, a.fcproj, NC);
  return a.res3;
}

// Position pos alone: x = wte[token] + wpe[pos] (embed_forward of one token, handed the
// position table from row pos on).
const float* Gpt2::embedding_decode(int32_t token, int pos) {
  float* x = act_.encoded + size_t(pos) * cfg_.channels;
  kt_.embed_forward(x, &token, wt_.wte, wt_.wpe + size_t(pos) * cfg_.channels, 1, 1, cfg_.channels);
  return x;
}

// layer_forward's steps on row pos only; the attention reads the cached k, v of rows 0..pos-1.
const float* Gpt2::layer_decode(int l, const float* x, int pos) {
  const Gpt2Tensors::Layer& w = wt_.layers[l];
  const LayerActs& a = act_.layers[l];
  const int C = cfg_.channels;
  const size_t r = size_t(pos) * C;  // row pos of a [T, C] activation
  layernorm_fwd(a.ln1 + r, a.ln1_mean + pos, a.ln1_rstd + pos, x, w.ln1w, w.ln1b, 1);
  linear_fwd(a.qkv + 3 * r, a.ln1 + r, w.qkvw, w.qkvb, 1, C, 3 * C);
  attention_decode_fwd(a.atty + r, a.att, a.qkv, l, pos);
  linear_fwd(a.attproj + r, a.atty + r, w.attprojw, w.attprojb, 1, C, C);
  residual_fwd(a.res2 + r, x, a.attproj + r, C);
  layernorm_fwd(a.ln2 + r, a.ln2_mean + pos, a.ln2_rstd + pos, a.res2 + r, w.ln2w, w.ln2b, 1);
  linear_fwd(a.fch + 4 * r, a.ln2 + r, w.fcw, w.fcb, 1, C, 4 * C);
  gelu_fwd(a.fch_gelu + 4 * r, a.fch + 4 * r, 4 * size_t(C));
  linear_fwd(a.fcproj + r, a.fch_gelu + 4 * r, w.fcprojw, w.fcprojb, 1, 4 * C, C);
  residual_fwd(a.res3 + r, a.res2 + r, a.fcproj + r, C);
  return a.res3 + r;
}

// Each residual add's backward routes the gradient unchanged to the skip path and the branch.
void Gpt2::layer_backward(int l, float* dres, int B, int T) {
  const Gpt2Tensors::Layer& w = wt_.layers[l];
  const Gpt2Tensors::Layer& g = gt_.layers[l];
  const LayerActs& a = act_.layers[l];
  const float* res_in = layer_input(l);
  const int N = B * T, C = cfg_.channels;
  const size_t NC = size_t(N) * C;
  // MLP half: res3 = res2 + fcproj(gelu(fc(LN2(res2)))). Every input gradient below is written
  // by its first kernel (Grad::kFresh), the residual's included; layernorm adds into dres2.
  residual_bwd(act_.dres2, act_.dbranch, dres, NC);
  linear_bwd(act_.dfch_gelu, g.fcprojw, g.fcprojb, act_.dbranch, a.fch_gelu, w.fcprojw, N, 4 * C, C,
             Grad::kFresh);
  gelu_bwd(act_.dfch, a.fch, act_.dfch_gelu, NC * 4);
  linear_bwd(act_.dln, g.fcw, g.fcb, act_.dfch, a.ln2, w.fcw, N, C, 4 * C, Grad::kFresh);
  layernorm_bwd(act_.dres2, g.ln2w, g.ln2b, act_.dln, a.res2, w.ln2w, a.ln2_mean, a.ln2_rstd, N);
  // Attention half: res2 = res_in + attproj(attn(qkv(LN1(res_in)))).
  residual_bwd(dres, act_.dbranch, act_.dres2, NC);
  linear_bwd(act_.datty, g.attprojw, g.attprojb, act_.dbranch, a.atty, w.attprojw, N, C, C,
             Grad::kFresh);
  attention_bwd(act_.dqkv, act_.dp, act_.datty, a.qkv, a.atty, a.att, B, T);
  linear_bwd(act_.dln, g.qkvw, g.qkvb, act_.dqkv, a.ln1, w.qkvw, N, C, 3 * C, Grad::kFresh);
  layernorm_bwd(dres, g.ln1w, g.ln1b, act_.dln, res_in, w.ln1w, a.ln1_mean, a.ln1_rstd, N);
}

// logits = LNf(x)·wteᵀ (the lm_head is the token embedding)
float Gpt2::head_forward(const float* res, const int32_t* targets, int N) {
  const int C = cfg_.channels;
  layernorm_fwd(act_.lnf, act_.lnf_mean, act_.lnf_rstd, res, wt_.lnfw, wt_.lnfb, N);
  linear_fwd(act_.logits, act_.lnf, wt_.wte, nullptr, N, C, cfg_.padded_vocab);
  if (!targets) return 0.0f;
  return mean_loss(act_.losses, act_.dlogits, act_.logits, targets, N);
}

float* Gpt2::head_backward(int N) {
  const int C = cfg_.channels;
  const size_t NC = size_t(N) * C;
  linear_bwd(act_.dln, gt_.wte, nullptr, act_.dlogits, act_.lnf, wt_.wte, N, C, cfg_.padded_vocab,
             Grad::kFresh);
  zero(act_.dres, NC);
  layernorm_bwd(act_.dres, gt_.lnfw, gt_.lnfb, act_.dln, layer_input(cfg_.layers), wt_.lnfw,
                act_.lnf_mean, act_.lnf_rstd, N);
  return act_.dres;
}

}  // namespace reftrain
