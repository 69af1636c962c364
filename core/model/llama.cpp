#include "core/model/llama.h"

#include <algorithm>
#include <string>

namespace reftrain {

namespace {

std::string llama_layer_name(int l, const char* rest) {
  return "model.layers." + std::to_string(l) + "." + rest;
}

}  // namespace

template <typename A>
void carve_llama_activations(A& a, ArenaCarver& arena, const ModelConfig& cfg,
                             AttentionKind attention, int B, int T) {
  const size_t N = size_t(B) * T, C = cfg.channels, F = cfg.ffn, Vp = cfg.padded_vocab;
  const size_t att = attention_state_floats(cfg, attention, B, T);  // lse or probabilities
  a.encoded = arena.take(N * C);
  a.layers.resize(cfg.layers);
  for (auto& l : a.layers) {
    l.rms1 = arena.take(N * C), l.rms1_rstd = arena.take(N), l.qkv = arena.take(N * 3 * C);
    l.att = arena.take(att), l.atty = arena.take(N * C), l.attproj = arena.take(N * C);
    l.res2 = arena.take(N * C), l.rms2 = arena.take(N * C), l.rms2_rstd = arena.take(N);
    l.gate = arena.take(N * F), l.up = arena.take(N * F), l.swi = arena.take(N * F);
    l.down = arena.take(N * C), l.res3 = arena.take(N * C);
  }
  a.rmsf = arena.take(N * C), a.rmsf_rstd = arena.take(N);
  a.logits = arena.take(N * Vp), a.losses = arena.take(N);
  a.q = arena.take(N * C), a.k = arena.take(N * C), a.v = arena.take(N * C);
  a.qr = arena.take(N * C), a.kr = arena.take(N * C);
  a.dres = arena.take(N * C), a.dres2 = arena.take(N * C), a.dbranch = arena.take(N * C);
  a.dln = arena.take(N * C), a.datty = arena.take(N * C), a.dqkv = arena.take(N * 3 * C);
  a.dgate = arena.take(N * F), a.dup = arena.take(N * F), a.dswi = arena.take(N * F);
  a.dp = arena.take(attention_scratch_floats(cfg, attention, B, T));
  a.dlogits = arena.take(N * Vp);
}

ParamLayout llama_param_layout(const ModelConfig& cfg) {
  const int C = cfg.channels, F = cfg.ffn;
  std::vector<ParamTensor> t;
  auto add = [&t](std::string name, std::vector<int> shape, ParamInit init) {
    const bool decay = shape.size() >= 2;  // matrices and embeddings; not norms
    t.push_back({std::move(name), std::move(shape), 0, 0, decay, init, -1});
  };
  add("model.embed_tokens.weight", {cfg.padded_vocab, C}, ParamInit::kNormal);
  t.back().init_rows = cfg.vocab;
  for (int l = 0; l < cfg.layers; ++l) {
    add(llama_layer_name(l, "input_layernorm.weight"), {C}, ParamInit::kOnes);
    add(llama_layer_name(l, "self_attn.q_proj.weight"), {C, C}, ParamInit::kNormal);
    add(llama_layer_name(l, "self_attn.k_proj.weight"), {C, C}, ParamInit::kNormal);
    add(llama_layer_name(l, "self_attn.v_proj.weight"), {C, C}, ParamInit::kNormal);
    add(llama_layer_name(l, "self_attn.o_proj.weight"), {C, C}, ParamInit::kNormalResidual);
    add(llama_layer_name(l, "post_attention_layernorm.weight"), {C}, ParamInit::kOnes);
    add(llama_layer_name(l, "mlp.gate_proj.weight"), {F, C}, ParamInit::kNormal);
    add(llama_layer_name(l, "mlp.up_proj.weight"), {F, C}, ParamInit::kNormal);
    add(llama_layer_name(l, "mlp.down_proj.weight"), {C, F}, ParamInit::kNormalResidual);
  }
  add("model.norm.weight", {C}, ParamInit::kOnes);
  add("lm_head.weight", {cfg.padded_vocab, C}, ParamInit::kNormal);
  t.back().init_rows = cfg.vocab;
  return ParamLayout(std::move(t));
}

LlamaTensors llama_tensors(const ParamLayout& layout, int layers, float* base) {
  auto at = [&](const std::string& name) { return base + layout.get(name).offset; };
  LlamaTensors t;
  t.emb = at("model.embed_tokens.weight");
  for (int l = 0; l < layers; ++l) {
    LlamaTensors::Layer y;
    y.rms1w = at(llama_layer_name(l, "input_layernorm.weight"));
    y.wq = at(llama_layer_name(l, "self_attn.q_proj.weight"));
    y.wk = at(llama_layer_name(l, "self_attn.k_proj.weight"));
    y.wv = at(llama_layer_name(l, "self_attn.v_proj.weight"));
    y.wo = at(llama_layer_name(l, "self_attn.o_proj.weight"));
    y.rms2w = at(llama_layer_name(l, "post_attention_layernorm.weight"));
    y.wgate = at(llama_layer_name(l, "mlp.gate_proj.weight"));
    y.wup = at(llama_layer_name(l, "mlp.up_proj.weight"));
    y.wdown = at(llama_layer_name(l, "mlp.down_proj.weight"));
    t.layers.push_back(y);
  }
  t.rmsfw = at("model.norm.weight");
  t.head = at("lm_head.weight");
  return t;
}

size_t Llama::activation_floats(const ModelConfig& cfg, int B, int T, AttentionKind attention) {
  Acts counting;
  ArenaCarver arena(nullptr);
  carve_llama_activations(counting, arena, cfg, attention, B, T);
  return arena.used();
}

Llama::Llama(const ModelConfig& cfg, const ModelOptions& o)
    : Model(cfg, llama_param_layout(cfg), o),
      arena_(activation_floats(cfg, o.batch, o.seq, o.attention)) {
  wt_ = llama_tensors(layout_, cfg.layers, w_.data());
  gt_ = llama_tensors(layout_, cfg.layers, g_.data());
  ArenaCarver arena(arena_.data());
  carve_llama_activations(act_, arena, cfg, o.attention, o.batch, o.seq);
}

void Llama::rmsnorm_fwd(float* out, float* rstd, const float* x, const float* w, int N) const {
  const int C = cfg_.channels;
  traced("rmsnorm_forward", {out, rstd, x, w}, {{"N", size_t(N)}, {"C", size_t(C)}},
         [&] { kt_.rmsnorm_forward(out, rstd, x, w, N, C); });
}

void Llama::rmsnorm_bwd(float* dx, float* dw, const float* dout, const float* x, const float* w,
                        const float* rstd, int N) const {
  const int C = cfg_.channels;
  traced("rmsnorm_backward", {dx, dw, dout, x, w, rstd}, {{"N", size_t(N)}, {"C", size_t(C)}},
         [&] { kt_.rmsnorm_backward(dx, dw, dout, x, w, rstd, N, C); });
}

void Llama::swiglu_fwd(float* out, const float* gate, const float* up, size_t n) const {
  traced("swiglu_forward", {out, gate, up}, {{"n", n}},
         [&] { kt_.swiglu_forward(out, gate, up, n); });
}

// Writes dgate and dup (Grad::kFresh).
void Llama::swiglu_bwd(float* dgate, float* dup, const float* dout, const float* gate,
                       const float* up, size_t n) const {
  fresh_for_dump(dgate, n), fresh_for_dump(dup, n);
  traced("swiglu_backward", {dgate, dup, dout, gate, up}, {{"n", n}},
         [&] { kt_.swiglu_backward(dgate, dup, dout, gate, up, n, false); });
}

void Llama::rope_fwd(float* out, const float* x, int B, int T, int t0) const {
  const int C = cfg_.channels, NH = cfg_.heads, hs = C / NH;
  traced("rope_forward", {out, x}, {{"B", size_t(B)}, {"T", size_t(T)}, {"C", size_t(C)}},
         [&] { kt_.rope_forward(out, x, B, T, NH, hs, cfg_.rope_theta, t0); });
}

// Writes dx (Grad::kFresh).
void Llama::rope_bwd(float* dx, const float* dout, int B, int T) const {
  const int C = cfg_.channels, NH = cfg_.heads, hs = C / NH;
  fresh_for_dump(dx, size_t(B) * T * C);
  traced("rope_backward", {dx, dout}, {{"B", size_t(B)}, {"T", size_t(T)}, {"C", size_t(C)}},
         [&] { kt_.rope_backward(dx, dout, B, T, NH, hs, cfg_.rope_theta, 0, false); });
}

void Llama::pack(float* qkv, int N) const {
  const int C = cfg_.channels;
  traced("pack_qkv", {qkv, act_.qr, act_.kr, act_.v}, {{"N", size_t(N)}, {"C", size_t(C)}},
         [&] { pack_qkv(qkv, act_.qr, act_.kr, act_.v, N, C); });
}

// dqkv into dq, dk (after RoPE) and dv: act_.qr, act_.kr, act_.v.
void Llama::unpack(const float* dqkv, int N) const {
  const int C = cfg_.channels;
  traced("unpack_qkv", {act_.qr, act_.kr, act_.v, dqkv}, {{"N", size_t(N)}, {"C", size_t(C)}},
         [&] { unpack_qkv(act_.qr, act_.kr, act_.v, dqkv, N, C); });
}

// x = emb[tok]
const float* Llama::embedding_forward(const int32_t* inputs, int B, int T) {
  const int C = cfg_.channels;
  const size_t N = size_t(B) * T;
  traced("token_embed_forward", {act_.encoded, inputs, wt_.emb},
         {{"N", N}, {"C", size_t(C)}, {"Vp", size_t(cfg_.padded_vocab)}},
         [&] { kt_.token_embed_forward(act_.encoded, inputs, wt_.emb, N, C); });
  return act_.encoded;
}

void Llama::embedding_backward(const float* dres, const int32_t* inputs, int B, int T) {
  const int C = cfg_.channels;
  const size_t N = size_t(B) * T;
  traced("token_embed_backward", {gt_.emb, dres, inputs},
         {{"N", N}, {"C", size_t(C)}, {"Vp", size_t(cfg_.padded_vocab)}},
         [&] { kt_.token_embed_backward(gt_.emb, dres, inputs, N, C); });
}

// x += Wo·attn(rope(Wq·RMS1(x)), rope(Wk·RMS1(x)), Wv·RMS1(x))
// x += Wdown·(silu(Wgate·RMS2(x)) ⊙ Wup·RMS2(x))
const float* Llama::layer_forward(int l, const float* res_in, int B, int T) {
  const LlamaTensors::Layer& w = wt_.layers[l];
  const LayerActs& a = act_.layers[l];
  const int N = B * T, C = cfg_.channels, F = cfg_.ffn;
  const size_t NC = size_t(N) * C, NF = size_t(N) * F;
  rmsnorm_fwd(a.rms1, a.rms1_rstd, res_in, w.rms1w, N);
  linear_fwd(act_.q, a.rms1, w.wq, nullptr, N, C, C);
  linear_fwd(act_.k, a.rms1, w.wk, nullptr, N, C, C);
  linear_fwd(act_.v, a.rms1, w.wv, nullptr, N, C, C);
  rope_fwd(act_.qr, act_.q, B, T);
  rope_fwd(act_.kr, act_.k, B, T);
  pack(a.qkv, N);
  attention_fwd(a.atty, a.att, a.qkv, B, T);
  linear_fwd(a.attproj, a.atty, w.wo, nullptr, N, C, C);
  residual_fwd(a.res2, res_in, a.attproj, NC);
  rmsnorm_fwd(a.rms2, a.rms2_rstd, a.res2, w.rms2w, N);
  linear_fwd(a.gate, a.rms2, w.wgate, nullptr, N, C, F);
  linear_fwd(a.up, a.rms2, w.wup, nullptr, N, C, F);
  swiglu_fwd(a.swi, a.gate, a.up, NF);
  linear_fwd(a.down, a.swi, w.wdown, nullptr, N, F, C);
  residual_fwd(a.res3, a.res2, a.down, NC);
  return a.res3;
}

const float* Llama::embedding_decode(int32_t token, int pos) {
  float* x = act_.encoded + size_t(pos) * cfg_.channels;
  kt_.token_embed_forward(x, &token, wt_.emb, 1, cfg_.channels);
  return x;
}

// layer_forward's steps on row pos only, q and k rotated at position pos; the attention reads
// the cached (rotated) k and v of rows 0..pos-1. q, k, v pass through row 0 of the shared
// scratch, then into row pos of qkv.
const float* Llama::layer_decode(int l, const float* x, int pos) {
  const LlamaTensors::Layer& w = wt_.layers[l];
  const LayerActs& a = act_.layers[l];
  const int C = cfg_.channels, F = cfg_.ffn;
  const size_t r = size_t(pos) * C, rf = size_t(pos) * F;  // row pos of [T, C] and [T, F]
  rmsnorm_fwd(a.rms1 + r, a.rms1_rstd + pos, x, w.rms1w, 1);
  linear_fwd(act_.q, a.rms1 + r, w.wq, nullptr, 1, C, C);
  linear_fwd(act_.k, a.rms1 + r, w.wk, nullptr, 1, C, C);
  linear_fwd(act_.v, a.rms1 + r, w.wv, nullptr, 1, C, C);
  rope_fwd(act_.qr, act_.q, 1, 1, pos);
  rope_fwd(act_.kr, act_.k, 1, 1, pos);
  pack(a.qkv + 3 * r, 1);
  attention_decode_fwd(a.atty + r, a.att, a.qkv, l, pos);
  linear_fwd(a.attproj + r, a.atty + r, w.wo, nullptr, 1, C, C);
  residual_fwd(a.res2 + r, x, a.attproj + r, C);
  rmsnorm_fwd(a.rms2 + r, a.rms2_rstd + pos, a.res2 + r, w.rms2w, 1);
  linear_fwd(a.gate + rf, a.rms2 + r, w.wgate, nullptr, 1, C, F);
  linear_fwd(a.up + rf, a.rms2 + r, w.wup, nullptr, 1, C, F);
  swiglu_fwd(a.swi + rf, a.gate + rf, a.up + rf, size_t(F));
  linear_fwd(a.down + r, a.swi + rf, w.wdown, nullptr, 1, F, C);
  residual_fwd(a.res3 + r, a.res2 + r, a.down + r, C);
  return a.res3 + r;
}

void Llama::layer_backward(int l, float* dres, int B, int T) {
  const LlamaTensors::Layer& w = wt_.layers[l];
  const LlamaTensors::Layer& g = gt_.layers[l];
  const LayerActs& a = act_.layers[l];
  const float* res_in = layer_input(l);
  const int N = B * T, C = cfg_.channels, F = cfg_.ffn;
  const size_t NC = size_t(N) * C, NF = size_t(N) * F;
  // MLP half: res3 = res2 + down(swiglu(gate(RMS2(res2)), up(RMS2(res2)))).
  // Each input gradient is written by its first kernel (Grad::kFresh), later ones add into it.
  residual_bwd(act_.dres2, act_.dbranch, dres, NC);
  linear_bwd(act_.dswi, g.wdown, nullptr, act_.dbranch, a.swi, w.wdown, N, F, C, Grad::kFresh);
  swiglu_bwd(act_.dgate, act_.dup, act_.dswi, a.gate, a.up, NF);
  linear_bwd(act_.dln, g.wgate, nullptr, act_.dgate, a.rms2, w.wgate, N, C, F, Grad::kFresh);
  linear_bwd(act_.dln, g.wup, nullptr, act_.dup, a.rms2, w.wup, N, C, F, Grad::kAdd);
  rmsnorm_bwd(act_.dres2, g.rms2w, act_.dln, a.res2, w.rms2w, a.rms2_rstd, N);
  // Attention half: res2 = res_in + o(attn(rope(q(x)), rope(k(x)), v(x))), x = RMS1(res_in).
  residual_bwd(dres, act_.dbranch, act_.dres2, NC);
  linear_bwd(act_.datty, g.wo, nullptr, act_.dbranch, a.atty, w.wo, N, C, C, Grad::kFresh);
  attention_bwd(act_.dqkv, act_.dp, act_.datty, a.qkv, a.atty, a.att, B, T);
  unpack(act_.dqkv, N);  // now dq, dk after RoPE, and dv
  rope_bwd(act_.q, act_.qr, B, T);
  rope_bwd(act_.k, act_.kr, B, T);
  linear_bwd(act_.dln, g.wq, nullptr, act_.q, a.rms1, w.wq, N, C, C, Grad::kFresh);
  linear_bwd(act_.dln, g.wk, nullptr, act_.k, a.rms1, w.wk, N, C, C, Grad::kAdd);
  linear_bwd(act_.dln, g.wv, nullptr, act_.v, a.rms1, w.wv, N, C, C, Grad::kAdd);
  rmsnorm_bwd(dres, g.rms1w, act_.dln, res_in, w.rms1w, a.rms1_rstd, N);
}

// logits = RMSf(x)·Wheadᵀ
float Llama::head_forward(const float* res, const int32_t* targets, int N) {
  const int C = cfg_.channels;
  rmsnorm_fwd(act_.rmsf, act_.rmsf_rstd, res, wt_.rmsfw, N);
  linear_fwd(act_.logits, act_.rmsf, wt_.head, nullptr, N, C, cfg_.padded_vocab);
  if (!targets) return 0.0f;
  return mean_loss(act_.losses, act_.dlogits, act_.logits, targets, N);
}

float* Llama::head_backward(int N) {
  const int C = cfg_.channels;
  const size_t NC = size_t(N) * C;
  linear_bwd(act_.dln, gt_.head, nullptr, act_.dlogits, act_.rmsf, wt_.head, N, C,
             cfg_.padded_vocab, Grad::kFresh);
  zero(act_.dres, NC);
  rmsnorm_bwd(act_.dres, gt_.rmsfw, act_.dln, layer_input(cfg_.layers), wt_.rmsfw, act_.rmsf_rstd,
              N);
  return act_.dres;
}

}  // namespace reftrain
