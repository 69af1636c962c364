// llama's step as engine operations, mirroring core/model/llama.cpp call for call (q, k, v and
// their RoPE'd forms are shared by the layers; pack_qkv / unpack_qkv are replay.wgsl's).
import { attentionBwd, attentionFwd, linearBwd, linearFwd, lossOp, sharedActs } from './model.mjs';

const P = (l, rest) => `model.layers.${l}.${rest}`;

function layerActs(R) {
  const { N, C, F, B, NH, T } = R;
  const a = (n) => R.act(n);
  return {
    rms1: a(N * C), rms1_rstd: a(N), qkv: a(N * 3 * C), att: a(B * NH * T * T), atty: a(N * C),
    attproj: a(N * C), res2: a(N * C), rms2: a(N * C), rms2_rstd: a(N), gate: a(N * F), up: a(N * F),
    swi: a(N * F), down: a(N * C), res3: a(N * C),
  };
}

const rope = (R, name, out, x, tag) => R.E.kernel(name,
  [out, x, R.u(R.B), R.u(R.T), R.u(R.NH), R.u(R.C / R.NH), R.f(Math.fround(R.theta))],
  { B: R.B, T: R.T, NH: R.NH, hs: R.C / R.NH }, `${tag}.${name}`);

function layerForward(R, l, a, x, Q) {
  const { E, N, C, F, u } = R;
  const tag = `h${l}`;
  const rms = (out, rstd, inp, w) => E.kernel('rmsnorm_forward', [out, rstd, inp, R.w(P(l, w)), u(N), u(C)], { N, C },
                                               `${tag}.rmsnorm_forward`);
  const res = (out, p, q) => E.kernel('residual_forward', [out, p, q, u(N * C)], { n: N * C }, `${tag}.residual_forward`);
  return [
    rms(a.rms1, a.rms1_rstd, x, 'input_layernorm.weight'),
    ...linearFwd(R, Q.q, a.rms1, P(l, 'self_attn.q_proj.weight'), null, N, C, C, tag),
    ...linearFwd(R, Q.k, a.rms1, P(l, 'self_attn.k_proj.weight'), null, N, C, C, tag),
    ...linearFwd(R, Q.v, a.rms1, P(l, 'self_attn.v_proj.weight'), null, N, C, C, tag),
    rope(R, 'rope_forward', Q.qr, Q.q, tag),
    rope(R, 'rope_forward', Q.kr, Q.k, tag),
    E.kernel('pack_qkv', [a.qkv, Q.qr, Q.kr, Q.v, u(N), u(C)], { N, C }, `${tag}.pack_qkv`),
    ...attentionFwd(R, a.atty, a.att, a.qkv, tag),
    ...linearFwd(R, a.attproj, a.atty, P(l, 'self_attn.o_proj.weight'), null, N, C, C, tag),
    res(a.res2, x, a.attproj),
    rms(a.rms2, a.rms2_rstd, a.res2, 'post_attention_layernorm.weight'),
    ...linearFwd(R, a.gate, a.rms2, P(l, 'mlp.gate_proj.weight'), null, N, C, F, tag),
    ...linearFwd(R, a.up, a.rms2, P(l, 'mlp.up_proj.weight'), null, N, C, F, tag),
    E.kernel('swiglu_forward', [a.swi, a.gate, a.up, u(N * F)], { n: N * F }, `${tag}.swiglu_forward`),
    ...linearFwd(R, a.down, a.swi, P(l, 'mlp.down_proj.weight'), null, N, F, C, tag),
    res(a.res3, a.res2, a.down),
  ];
}

function layerBackward(R, l, a, x, S, Q) {
  const { E, N, C, F, u } = R;
  const tag = `h${l}`;
  const resb = (da, db, dout) => E.kernel('residual_backward', [da, db, dout, u(N * C)], { n: N * C }, `${tag}.residual_backward`);
  const rmsb = (dx, w, dout, inp, rstd) => E.kernel('rmsnorm_backward', [dx, R.g(P(l, w)), dout, inp, R.w(P(l, w)), rstd, u(N), u(C)],
                                                    { N, C }, `${tag}.rmsnorm_backward`);
  const lin = (dinp, w, dout, inp, K, O) => linearBwd(R, dinp, P(l, w), null, dout, inp, N, K, O, tag);
  const [dswi, dgate, dup] = [S.dh1, S.dh2, S.dh3];
  return [
    E.clear(S.dres2), E.clear(S.dbranch), resb(S.dres2, S.dbranch, S.dres),
    E.clear(dswi), E.clear(dgate), E.clear(dup), E.clear(S.dln),
    ...lin(dswi, 'mlp.down_proj.weight', S.dbranch, a.swi, F, C),
    E.kernel('swiglu_backward', [dgate, dup, dswi, a.gate, a.up, u(N * F)], { n: N * F }, `${tag}.swiglu_backward`),
    ...lin(S.dln, 'mlp.gate_proj.weight', dgate, a.rms2, C, F),
    ...lin(S.dln, 'mlp.up_proj.weight', dup, a.rms2, C, F),
    rmsb(S.dres2, 'post_attention_layernorm.weight', S.dln, a.res2, a.rms2_rstd),
    E.clear(S.dres), E.clear(S.dbranch), resb(S.dres, S.dbranch, S.dres2),
    E.clear(S.datty), E.clear(S.dqkv), E.clear(S.dln),
    ...lin(S.datty, 'self_attn.o_proj.weight', S.dbranch, a.atty, C, C),
    ...attentionBwd(R, S.dqkv, S.datty, a.qkv, a.att, tag),
    E.kernel('unpack_qkv', [Q.qr, Q.kr, Q.v, S.dqkv, u(N), u(C)], { N, C }, `${tag}.unpack_qkv`),
    E.clear(Q.q), E.clear(Q.k),
    rope(R, 'rope_backward', Q.q, Q.qr, tag),
    rope(R, 'rope_backward', Q.k, Q.kr, tag),
    ...lin(S.dln, 'self_attn.q_proj.weight', Q.q, a.rms1, C, C),
    ...lin(S.dln, 'self_attn.k_proj.weight', Q.k, a.rms1, C, C),
    ...lin(S.dln, 'self_attn.v_proj.weight', Q.v, a.rms1, C, C),
    rmsb(S.dres, 'input_layernorm.weight', S.dln, x, a.rms1_rstd),
  ];
}

// {S, forward, backward}: the shared buffers and the two operation lists.
export function buildLlama(R) {
  const { E, N, C, Vp, u } = R;
  const S = sharedActs(R, R.F);
  const Q = { q: R.act(N * C), k: R.act(N * C), v: R.act(N * C), qr: R.act(N * C), kr: R.act(N * C) };
  const layers = Array.from({ length: R.L }, () => layerActs(R));
  const inputOf = (l) => (l === 0 ? S.encoded : layers[l - 1].res3);
  const forward = [E.kernel('token_embed_forward', [S.encoded, R.tokens, R.w('model.embed_tokens.weight'), u(N), u(C)],
                            { N, C }, 'embed.token_embed_forward')];
  layers.forEach((a, l) => forward.push(...layerForward(R, l, a, inputOf(l), Q)));
  const xf = inputOf(R.L);
  forward.push(
    E.kernel('rmsnorm_forward', [S.normf, S.normf_rstd, xf, R.w('model.norm.weight'), u(N), u(C)], { N, C }, 'head.rmsnorm_forward'),
    ...linearFwd(R, S.logits, S.normf, 'lm_head.weight', null, N, C, Vp, 'head'),
    lossOp(R, S));
  const backward = [
    E.clear(S.dln),
    ...linearBwd(R, S.dln, 'lm_head.weight', null, S.dlogits, S.normf, N, C, Vp, 'head'),
    E.clear(S.dres),
    E.kernel('rmsnorm_backward', [S.dres, R.g('model.norm.weight'), S.dln, xf, R.w('model.norm.weight'), S.normf_rstd, u(N), u(C)],
             { N, C }, 'head.rmsnorm_backward'),
  ];
  for (let l = R.L - 1; l >= 0; l--) backward.push(...layerBackward(R, l, layers[l], inputOf(l), S, Q));
  backward.push(E.kernel('token_embed_backward', [R.g('model.embed_tokens.weight'), S.dres, R.tokens, u(N), u(C)],
                         { Vp, C }, 'embed.token_embed_backward'));
  return { S, forward, backward };
}
