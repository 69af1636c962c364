// The forward and backward of one step as a list of engine operations, in the order of
// core/model/gpt2.cpp and llama.cpp (the same kernels, the same buffers zeroed before the same
// accumulating backward calls), every weight and gradient bound where it lies in the mega-buffers.
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
    E, bufs, mixed: t.precision === 'mixed',
    B: t.batch, T: t.seq, C: m.channels, NH: m.heads, L: m.layers, V: m.vocab, Vp: m.padded_vocab,
    F: m.ffn?.width, theta: m.rope?.theta, z: Math.fround(config.loss.z),
    w: (n) => view(bufs.w, at(n).offset * 4, at(n).numel * 4),
    g: (n) => view(bufs.g, at(n).offset * 4, at(n).numel * 4),
    w16: (n) => view(bufs.w16, at(n).offset * 2, at(n).numel * 2),
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
  return R;
}

// linear_forward(_f16): the f16 mirror in mixed precision, the master otherwise.
function linearFwd(R, out, inp, wname, bias, N, K, O, tag) {
  const b = bias ?? R.E.zeroView(O * 4);
  const [name, w] = R.mixed ? ['linear_forward_f16', R.w16(wname)] : ['linear_forward', R.w(wname)];
  return R.E.kernel(name, [out, inp, w, b, R.u(N), R.u(K), R.u(O)], { N, K, O }, `${tag}.${name}`);
}

// linear_backward: dinp += dout·W (through the mirror in mixed), dW += doutᵀ·inp, db += Σ dout.
function linearBwd(R, dinp, wname, bname, dout, inp, N, K, O, tag) {
  const [name, w] = R.mixed ? ['linear_backward_data_f16', R.w16(wname)] : ['linear_backward_data', R.w(wname)];
  const db = bname ? R.g(bname) : R.sink(O);
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

export { linearFwd, linearBwd, sharedActs, lossOp };
