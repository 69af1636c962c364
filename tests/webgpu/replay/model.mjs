// The forward and backward of one step as a list of engine operations, in the order of
// core/model/gpt2.cpp and llama.cpp (the same kernels, the same buffers zeroed before the same
// accumulating backward calls), every weight and gradient bound where it lies in the mega-buffers.
// In bf16 precision each product is core/model/model_bf16.cpp's: a cast_f32_to_bf16 of each
// operand as it enters, then the _bf16 kernel, the weight read from the bf16 mirror. An input
// activation is cast once, by the forward's first product that reads it, into a buffer of its
// own that the backward reads again; gradients and probabilities into shared bf16 buffers.
import { view } from './engine.mjs';

// The context every builder shares: sizes, the weight/gradient views by tensor name, scratch.
export function makeContext(E, config, layout, bufs) {
  const m = config.model, t = config.train;
  const byName = Object.fromEntries(layout.map((x) => [x.name, x]));
  const at = (name) => {
    if (!byName[name]) throw new Error(`replay: init.safetensors has no tensor ${name}`);
    return byName[name];
  };
  const sinks = new Map();
  const R = {
    // the mirror buildReplay allocated for the precision (replay.mjs) is what says which it is
    E, bufs, mixed: bufs.w16 !== null, bf16: bufs.wb !== null,
    B: t.batch, T: t.seq, C: m.channels, NH: m.heads, L: m.layers, V: m.vocab, Vp: m.padded_vocab,
    F: m.ffn?.width, theta: m.rope?.theta, z: Math.fround(config.loss.z),
    w: (n) => view(bufs.w, at(n).offset * 4, at(n).numel * 4),
    g: (n) => view(bufs.g, at(n).offset * 4, at(n).numel * 4),
    w16: (n) => view(bufs.w16, at(n).offset * 2, at(n).numel * 2),
    wb: (n) => bf16View(bufs.wb, at(n).offset * 2, at(n).numel),
    act: (floats) => view(E.storage(floats * 4), 0, floats * 4),
    u: (v) => E.scalar('u32', v),
    f: (v) => E.scalar('f32', v),
    // A writable place for a bias gradient no tensor receives (bias-free matmuls).
    sink: (O) => {
      if (!sinks.has(O)) sinks.set(O, { ...view(E.storage(O * 4), 0, O * 4), scratch: true });
      return sinks.get(O);
    },
  };
  R.N = R.B * R.T;
  // Every dimension a fixture case names, for a registry's dispatch and structs (engine.mjs).
  E.dims = { B: R.B, T: R.T, C: R.C, NH: R.NH, hs: R.C / R.NH, V: R.V, Vp: R.Vp, maxT: m.max_seq,
             eps: m.norm?.eps, ...(R.F ? { F: R.F } : {}) };
  R.tokens = view(E.storage(R.N * 4), 0, R.N * 4);
  R.targets = view(E.storage(R.N * 4), 0, R.N * 4);
  if (R.bf16) {
    // The shared bf16 operands (model_bf16.cpp's b16_.dout, .att), each as large as its largest use.
    const width = Math.max(3 * R.C, R.F ?? 4 * R.C, 4 * R.C);
    const sizes = { dout: R.N * Math.max(width, R.Vp), att: R.B * R.NH * R.T * R.T };
    const b16 = Object.fromEntries(Object.entries(sizes).map(([k, n]) => [k, E.storage(Math.ceil(n / 2) * 4)]));
    R.b16 = (role, n) => bf16View(b16[role], 0, n);
    R.kept = new Map();  // an input activation's buffer → its offset → its bf16 rounding
  }
  return R;
}

// A view of n bf16 elements (two a u32 word) from byte `offset`: whole words, `elements` n.
export const bf16View = (buffer, offset, n) => ({ ...view(buffer, offset, Math.ceil(n / 2) * 4), elements: n });

// cast_f32_to_bf16 of n floats of src into the bf16 view dst.
const castOp = (R, dst, src, n, tag) => R.E.kernel('cast_f32_to_bf16', [dst, src, R.u(n)], { n }, `${tag}.cast_f32_to_bf16`);

// cast_f32_to_bf16 of n floats of src into the shared bf16 buffer `role`; [op, the bf16 view].
function castBf16(R, role, src, n, tag) {
  const dst = R.b16(role, n);
  return [castOp(R, dst, src, n, tag), dst];
}

// The bf16 rounding of a product's input activation src [n] (model_bf16.cpp's input_bf16): the
// first product to read src casts it into a buffer of its own, a later one (q, k and v of one
// norm; the backward) reads that; [the cast ops (none or one), the bf16 view].
function inputBf16(R, src, n, tag) {
  if (!R.kept.has(src.buffer)) R.kept.set(src.buffer, new Map());
  const byOffset = R.kept.get(src.buffer);
  const kept = byOffset.get(src.offset);
  if (kept) {
    if (kept.elements !== n) throw new Error(`replay: ${tag} reads a kept bf16 input at two sizes`);
    return [[], kept];
  }
  const dst = bf16View(R.E.storage(Math.ceil(n / 2) * 4), 0, n);
  byOffset.set(src.offset, dst);
  return [[castOp(R, dst, src, n, tag)], dst];
}

// linear_forward(_f16, _bf16): the f16 mirror in mixed precision, in bf16 the cast of inp and
// the bf16 mirror, the master otherwise. A list of operations.
function linearFwd(R, out, inp, wname, bias, N, K, O, tag) {
  const b = bias ?? R.E.zeroView(O * 4);
  if (R.bf16) {
    const [cast, inp16] = inputBf16(R, inp, N * K, tag);
    return [...cast, R.E.kernel('linear_forward_bf16', [out, inp16, R.wb(wname), b, R.u(N), R.u(K), R.u(O)], { N, K, O },
                             `${tag}.linear_forward_bf16`)];
  }
  const [name, w] = R.mixed ? ['linear_forward_f16', R.w16(wname)] : ['linear_forward', R.w(wname)];
  return [R.E.kernel(name, [out, inp, w, b, R.u(N), R.u(K), R.u(O)], { N, K, O }, `${tag}.${name}`)];
}

// linear_backward: dinp += dout·W (through the mirror in mixed), dW += doutᵀ·inp, db += Σ dout.
// In bf16: cast dout, backward-data through the bf16 mirror, backward-weight (f32 dout for db,
// both bf16 operands for dW, inp's the forward's rounding), as model_bf16.cpp orders them.
function linearBwd(R, dinp, wname, bname, dout, inp, N, K, O, tag) {
  const [name, w] = R.mixed ? ['linear_backward_data_f16', R.w16(wname)] : ['linear_backward_data', R.w(wname)];
  const db = bname ? R.g(bname) : R.sink(O);
  if (R.bf16) {
    const [castD, dout16] = castBf16(R, 'dout', dout, N * O, tag);
    const [castI, inp16] = inputBf16(R, inp, N * K, tag);
    return [
      castD,
      R.E.kernel('linear_backward_data_bf16', [dinp, dout16, R.wb(wname), R.u(N), R.u(K), R.u(O)], { N, K, O },
                 `${tag}.linear_backward_data_bf16`),
      ...castI,
      R.E.kernel('linear_backward_weight_bf16', [R.g(wname), db, dout, dout16, inp16, R.u(N), R.u(K), R.u(O)], { N, K, O },
                 `${tag}.linear_backward_weight_bf16`),
    ];
  }
  return [
    R.E.kernel(name, [dinp, dout, w, R.u(N), R.u(K), R.u(O)], { N, K, O }, `${tag}.${name}`),
    R.E.kernel('linear_backward_weight', [R.g(wname), db, dout, inp, R.u(N), R.u(K), R.u(O)], { N, K, O },
               `${tag}.linear_backward_weight`),
  ];
}

// Buffers of the backward shared by every layer, and the head's.
function sharedActs(R, width) {
  const { N, C, Vp } = R;
  return {
    encoded: R.act(N * C), normf: R.act(N * C), normf_mean: R.act(N), normf_rstd: R.act(N),
    logits: R.act(N * Vp), losses: R.act(N), dlogits: R.act(N * Vp),
    dres: R.act(N * C), dres2: R.act(N * C), dbranch: R.act(N * C), dln: R.act(N * C),
    datty: R.act(N * C), dqkv: R.act(N * 3 * C), dh1: R.act(N * width), dh2: R.act(N * width),
    dh3: R.act(N * width),
  };
}

// crossentropy_forward_backward with dloss = 1/N: the per-position losses and dlogits.
function lossOp(R, S) {
  const { N, V, Vp } = R;
  return R.E.kernel('crossentropy_forward_backward',
                    [S.losses, S.dlogits, S.logits, R.targets, R.u(N), R.u(V), R.u(Vp), R.f(Math.fround(1 / N)), R.f(R.z)],
                    { N }, 'head.crossentropy_forward_backward');
}

// The materialised attention: attention_forward (att the [B,NH,T,T] probabilities), in bf16 the
// cast of qkv and attention_forward_bf16 (which writes att and its bf16 rounding att16).
function attentionFwd(R, out, att, qkv, tag) {
  const { B, T, C, NH, u } = R;
  const dims = [u(B), u(T), u(C), u(NH)];
  if (!R.bf16) return [R.E.kernel('attention_forward', [out, att, qkv, ...dims], { B, T, C, NH }, `${tag}.attention_forward`)];
  const [cast, qkv16] = inputBf16(R, qkv, R.N * 3 * C, tag);
  return [...cast, R.E.kernel('attention_forward_bf16', [out, att, R.b16('att', B * NH * T * T), qkv16, ...dims], { B, T, C, NH },
                           `${tag}.attention_forward_bf16`)];
}

// attention_backward (dqkv += …), in bf16 the casts of dout and att (qkv's rounding the
// forward's), then attention_backward_bf16 (its dp and ds16 scratch the registry's).
function attentionBwd(R, dqkv, dout, qkv, att, tag) {
  const { B, T, C, NH, u } = R;
  const dims = [u(B), u(T), u(C), u(NH)];
  if (!R.bf16) return [R.E.kernel('attention_backward', [dqkv, dout, qkv, att, ...dims], { B, T, C, NH }, `${tag}.attention_backward`)];
  const [castQ, qkv16] = inputBf16(R, qkv, R.N * 3 * C, tag);
  const [castD, dout16] = castBf16(R, 'dout', dout, R.N * C, tag);
  const [castA, att16] = castBf16(R, 'att', att, B * NH * T * T, tag);
  return [...castQ, castD, castA, R.E.kernel('attention_backward_bf16', [dqkv, dout16, qkv16, att, att16, ...dims], { B, T, C, NH },
                                          `${tag}.attention_backward_bf16`)];
}

export { attentionBwd, attentionFwd, linearBwd, linearFwd, lossOp, sharedActs };
