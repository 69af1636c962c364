// gpt2's step as engine operations, mirroring core/model/gpt2.cpp call for call.
import { attentionBwd, attentionFwd, linearBwd, linearFwd, lossOp, sharedActs } from './model.mjs';

const P = (l, rest) => `transformer.h.${l}.${rest}`;

function layerActs(R) {
  const { N, C, B, NH, T } = R;
  const a = (n) => R.act(n);
  return {
    ln1: a(N * C), ln1_mean: a(N), ln1_rstd: a(N), qkv: a(N * 3 * C), att: a(B * NH * T * T),
    atty: a(N * C), attproj: a(N * C), res2: a(N * C), ln2: a(N * C), ln2_mean: a(N), ln2_rstd: a(N),
    fch: a(N * 4 * C), fch_gelu: a(N * 4 * C), fcproj: a(N * C), res3: a(N * C),
  };
}

function layerForward(R, l, a, x) {
  const { E, N, C, u } = R;
  const tag = `h${l}`;
  const ln = (out, mean, rstd, inp, w) => E.kernel('layernorm_forward',
    [out, mean, rstd, inp, R.w(P(l, `${w}.weight`)), R.w(P(l, `${w}.bias`)), u(N), u(C)], { N, C }, `${tag}.layernorm_forward`);
  const res = (out, p, q) => E.kernel('residual_forward', [out, p, q, u(N * C)], { n: N * C }, `${tag}.residual_forward`);
  return [
    ln(a.ln1, a.ln1_mean, a.ln1_rstd, x, 'ln_1'),
    ...linearFwd(R, a.qkv, a.ln1, P(l, 'attn.c_attn.weight'), R.w(P(l, 'attn.c_attn.bias')), N, C, 3 * C, tag),
    ...attentionFwd(R, a.atty, a.att, a.qkv, tag),
    ...linearFwd(R, a.attproj, a.atty, P(l, 'attn.c_proj.weight'), R.w(P(l, 'attn.c_proj.bias')), N, C, C, tag),
    res(a.res2, x, a.attproj),
    ln(a.ln2, a.ln2_mean, a.ln2_rstd, a.res2, 'ln_2'),
    ...linearFwd(R, a.fch, a.ln2, P(l, 'mlp.c_fc.weight'), R.w(P(l, 'mlp.c_fc.bias')), N, C, 4 * C, tag),
    E.kernel('gelu_forward', [a.fch_gelu, a.fch, u(N * 4 * C)], { n: N * 4 * C }, `${tag}.gelu_forward`),
    ...linearFwd(R, a.fcproj, a.fch_gelu, P(l, 'mlp.c_proj.weight'), R.w(P(l, 'mlp.c_proj.bias')), N, 4 * C, C, tag),
    res(a.res3, a.res2, a.fcproj),
  ];
}

function layerBackward(R, l, a, x, S) {
  const { E, N, C, u } = R;
  const tag = `h${l}`;
  const resb = (da, db, dout) => E.kernel('residual_backward', [da, db, dout, u(N * C)], { n: N * C }, `${tag}.residual_backward`);
  const lnb = (dx, w, dout, inp, mean, rstd) => E.kernel('layernorm_backward',
    [dx, R.g(P(l, `${w}.weight`)), R.g(P(l, `${w}.bias`)), dout, inp, R.w(P(l, `${w}.weight`)), mean, rstd, u(N), u(C)],
    { N, C }, `${tag}.layernorm_backward`);
  const [dfch_gelu, dfch] = [S.dh1, S.dh2];
  return [
    E.clear(S.dres2), E.clear(S.dbranch), resb(S.dres2, S.dbranch, S.dres),
    E.clear(dfch_gelu), E.clear(dfch), E.clear(S.dln),
    ...linearBwd(R, dfch_gelu, P(l, 'mlp.c_proj.weight'), P(l, 'mlp.c_proj.bias'), S.dbranch, a.fch_gelu, N, 4 * C, C, tag),
    E.kernel('gelu_backward', [dfch, a.fch, dfch_gelu, u(N * 4 * C)], { n: N * 4 * C }, `${tag}.gelu_backward`),
    ...linearBwd(R, S.dln, P(l, 'mlp.c_fc.weight'), P(l, 'mlp.c_fc.bias'), dfch, a.ln2, N, C, 4 * C, tag),
    lnb(S.dres2, 'ln_2', S.dln, a.res2, a.ln2_mean, a.ln2_rstd),
    E.clear(S.dres), E.clear(S.dbranch), resb(S.dres, S.dbranch, S.dres2),
    E.clear(S.datty), E.clear(S.dqkv), E.clear(S.dln),
    ...linearBwd(R, S.datty, P(l, 'attn.c_proj.weight'), P(l, 'attn.c_proj.bias'), S.dbranch, a.atty, N, C, C, tag),
    ...attentionBwd(R, S.dqkv, S.datty, a.qkv, a.att, tag),
    ...linearBwd(R, S.dln, P(l, 'attn.c_attn.weight'), P(l, 'attn.c_attn.bias'), S.dqkv, a.ln1, N, C, 3 * C, tag),
    lnb(S.dres, 'ln_1', S.dln, x, a.ln1_mean, a.ln1_rstd),
  ];
}

// {S, forward, backward}: the shared buffers and the two operation lists.
export function buildGpt2(R) {
  const { E, N, C, B, T, Vp, u } = R;
  const S = sharedActs(R, 4 * C);
  const layers = Array.from({ length: R.L }, () => layerActs(R));
  const inputOf = (l) => (l === 0 ? S.encoded : layers[l - 1].res3);
  const forward = [E.kernel('embed_forward', [S.encoded, R.tokens, R.w('transformer.wte.weight'), R.w('transformer.wpe.weight'),
                                               u(B), u(T), u(C)], { B, T, C }, 'embed.embed_forward')];
  layers.forEach((a, l) => forward.push(...layerForward(R, l, a, inputOf(l))));
  const xf = inputOf(R.L);
  forward.push(
    E.kernel('layernorm_forward', [S.normf, S.normf_mean, S.normf_rstd, xf, R.w('transformer.ln_f.weight'),
                                   R.w('transformer.ln_f.bias'), u(N), u(C)], { N, C }, 'head.layernorm_forward'),
    ...linearFwd(R, S.logits, S.normf, 'transformer.wte.weight', null, N, C, Vp, 'head'),
    lossOp(R, S));
  const backward = [
    E.clear(S.dln),
    ...linearBwd(R, S.dln, 'transformer.wte.weight', null, S.dlogits, S.normf, N, C, Vp, 'head'),
    E.clear(S.dres),
    E.kernel('layernorm_backward', [S.dres, R.g('transformer.ln_f.weight'), R.g('transformer.ln_f.bias'), S.dln, xf,
                                    R.w('transformer.ln_f.weight'), S.normf_mean, S.normf_rstd, u(N), u(C)],
             { N, C }, 'head.layernorm_backward'),
  ];
  for (let l = R.L - 1; l >= 0; l--) backward.push(...layerBackward(R, l, layers[l], inputOf(l), S));
  backward.push(E.kernel('embed_backward', [R.g('transformer.wte.weight'), R.g('transformer.wpe.weight'), S.dres, R.tokens,
                                            u(B), u(T), u(C)], { Vp, C }, 'embed.embed_backward'));
  return { S, forward, backward };
}
