// An outside WebGPU backend in llm.c's conventions, plugged into reftrain's fixtures and training
// replay by this file alone: the WGSL beside it is written as a GPU engineer porting llm.c's
// kernels would write it (llm.c's kernel set, signatures and argument names, every storage
// buffer read_write, the sizes in one uniform `struct Params` bound last, B and T where reftrain
// has N rows), and nothing in it knows about reftrain. This registry is the whole adapter: for
// each reftrain fixture it says which llm.c kernel computes it, which fixture tensor each llm.c
// argument is, how Params is packed from the fixture's params, and which llm.c arguments the
// fixture lacks (scratch buffers). It imports nothing from reftrain, as an outside backend would
// not; the fields are those of tests/webgpu/bind.mjs (docs/webgpu.md, "Registering your kernels").
//
//   node tests/webgpu/kernels.mjs FIXTURES --out OUT --registry tests/webgpu/examples/llmc/registry.mjs
//   node tests/webgpu/replay.mjs GOLDEN_RUN --out OUT --registry tests/webgpu/examples/llmc/registry.mjs
//
// Kernels this file does not name (llama's rmsnorm, rope, swiglu, token embedding; the f16
// products; the casts and the optimizer) are not llm.c's: reftrain's own twins run them.

// The WGSL files live beside this file.
const dir = new URL('.', import.meta.url).pathname;

// Every llm.c kernel here runs @workgroup_size(256) over a 1-D grid, one thread per unit of work,
// as llm.c launches them (ceil_div(n, block_size) blocks). WebGPU allows 65535 workgroups per
// dimension, which these naive grids exceed at GPT-2 124M sizes: say so rather than fail in Dawn.
const threads = (n) => {
  const groups = Math.ceil(n / 256);
  if (groups > 65535) throw new Error(`llm.c example: ${n} threads need ${groups} workgroups of 256, past WebGPU's 65535`);
  return [groups];
};

// Params fields. llm.c counts rows as B·T; a reftrain fixture of row-wise kernels has N rows:
// packed as B = N, T = 1 (the kernels only ever use the product B·T). In the replay N = B·T of
// the run, so the packing holds there too.
const u32 = (field, value) => [field, 'u32', value];
const rowsAsBT = [u32('B', (p) => p.N), u32('T', () => 1)];

// The conventions every entry shares: the WGSL's directory, every storage binding read_write
// (llm.c's WGSL ports declare no read-only buffers), and one uniform struct named `params`.
const llmc = (file, fields, rest) => ({ dir, file, access: 'read_write', structs: { params: fields }, ...rest });

// matmul_backward(dinp, dweight, dbias, dout, inp, weight): llm.c computes the three gradients
// of a linear layer in one call; reftrain splits them into two fixtures. One entry serves both:
// each fixture binds the tensors it has, and the llm.c arguments it lacks are scratch (a scratch
// name that is also one of the fixture's bindings means the fixture's tensor, bind.mjs).
//   linear_backward_data   (dinp, dout, w):        dweight, dbias, inp are scratch; inp = 0, so
//                                                  the dweight/dbias it also computes are 0 and
//                                                  dropped
//   linear_backward_weight (dw, db, dout, inp):    dinp and weight are scratch; weight = 0, so
//                                                  the dinp it also computes is 0 and dropped
// Params: fixture N = B·T packed as B = N, T = 1; C = K (input width); OC = O (output width).
const matmulBackward = llmc('matmul_backward.wgsl', [...rowsAsBT, u32('C', 'K'), u32('OC', 'O')], {
  entry: 'matmul_backward_kernel',
  // llm.c's argument order; dw/db are reftrain's names for dweight/dbias, w for weight.
  bindings: ['dinp', 'dw', 'db', 'dout', 'inp', 'w', 'params'],
  dispatch: (p) => threads(p.N * p.K + p.O * p.K),
  scratch: { dinp: (p) => p.N * p.K, dw: (p) => p.O * p.K, db: (p) => p.O, inp: (p) => p.N * p.K, w: (p) => p.O * p.K },
});

export default {
  // encoder_forward(out, inp, wte, wpe): llm.c's inp is the fixture's tokens. B, T, C as they are.
  embed_forward: llmc('encoder_forward.wgsl', [u32('B'), u32('T'), u32('C')], {
    entry: 'encoder_forward_kernel',
    bindings: ['out', 'tokens', 'wte', 'wpe', 'params'],
    dispatch: (p) => threads(p.B * p.T * p.C),
  }),

  // encoder_backward(dwte, dwpe, dout, inp): accumulates, as the fixture's inout dwte/dwpe do.
  // One thread per channel.
  embed_backward: llmc('encoder_backward.wgsl', [u32('B'), u32('T'), u32('C')], {
    entry: 'encoder_backward_kernel',
    bindings: ['dwte', 'dwpe', 'dout', 'tokens', 'params'],
    dispatch: (p) => threads(p.C),
  }),

  // layernorm_forward(out, mean, rstd, inp, weight, bias) = fixture (out, mean, rstd, x, w, b).
  // Fixture N rows packed as B = N, T = 1.
  layernorm_forward: llmc('layernorm_forward.wgsl', [...rowsAsBT, u32('C')], {
    entry: 'layernorm_forward_kernel',
    bindings: ['out', 'mean', 'rstd', 'x', 'w', 'b', 'params'],
    dispatch: (p) => threads(p.N),
  }),

  // layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd)
  //   = fixture (dx, dw, db, dout, x, w, mean, rstd), all three gradients accumulated (+=).
  // One dispatch of max(N, C) threads: rows for dinp, columns for dweight and dbias.
  layernorm_backward: llmc('layernorm_backward.wgsl', [...rowsAsBT, u32('C')], {
    entry: 'layernorm_backward_kernel',
    bindings: ['dx', 'dw', 'db', 'dout', 'x', 'w', 'mean', 'rstd', 'params'],
    dispatch: (p) => threads(Math.max(p.N, p.C)),
  }),

  // matmul_forward(out, inp, weight, bias) = fixture (out, inp, w, b). Params: B = N, T = 1,
  // C = K, OC = O. A 16×16 grid: x over OC, y over B·T.
  linear_forward: llmc('matmul_forward.wgsl', [...rowsAsBT, u32('C', 'K'), u32('OC', 'O')], {
    entry: 'matmul_forward_kernel',
    bindings: ['out', 'inp', 'w', 'b', 'params'],
    dispatch: (p) => [Math.ceil(p.O / 16), Math.ceil(p.N / 16)],
  }),

  // Both backward products: llm.c's one matmul_backward (above).
  linear_backward_data: matmulBackward,
  linear_backward_weight: matmulBackward,

  // attention_forward(out, preatt, att, inp): llm.c's inp is the fixture's qkv [B, T, 3C] (the
  // same q | k | v layout); preatt [B, NH, T, T], the scores before the softmax, is llm.c's own
  // buffer that reftrain does not keep: scratch. Three passes on the same bindings.
  attention_forward: llmc('attention_forward.wgsl', [u32('B'), u32('T'), u32('C'), u32('NH')], {
    bindings: ['out', 'preatt', 'att', 'qkv', 'params'],
    passes: [
      { entry: 'attention_query_key_kernel', dispatch: (p) => threads(p.B * p.NH * p.T * p.T) },
      { entry: 'attention_softmax_kernel', dispatch: (p) => threads(p.B * p.NH * p.T) },
      { entry: 'attention_value_kernel', dispatch: (p) => threads(p.B * p.T * p.C) },
    ],
    scratch: { preatt: (p) => p.B * p.NH * p.T * p.T },
  }),

  // attention_backward(dinp, dpreatt, datt, dout, inp, att) = fixture (dqkv, ·, ·, dout, qkv,
  // att), dqkv accumulated. dpreatt and datt [B, NH, T, T] are llm.c's intermediate gradients:
  // scratch. (The fixture's own dp_scratch [B, NH, T] is reftrain's and is not bound.)
  attention_backward: llmc('attention_backward.wgsl', [u32('B'), u32('T'), u32('C'), u32('NH')], {
    bindings: ['dqkv', 'dpreatt', 'datt', 'dout', 'qkv', 'att', 'params'],
    passes: [
      { entry: 'attention_datt_kernel', dispatch: (p) => threads(p.B * p.NH * p.T * p.T) },
      { entry: 'softmax_autoregressive_backward_kernel', dispatch: (p) => threads(p.B * p.NH * p.T) },
      { entry: 'attention_dquery_kernel', dispatch: (p) => threads(p.B * p.T * p.C) },
      { entry: 'attention_dkey_dvalue_kernel', dispatch: (p) => threads(p.B * p.T * p.C) },
    ],
    scratch: { dpreatt: (p) => p.B * p.NH * p.T * p.T, datt: (p) => p.B * p.NH * p.T * p.T },
  }),

  // gelu_forward(out, inp, N) = fixture (out, x); llm.c's N is the fixture's element count n.
  gelu_forward: llmc('gelu_forward.wgsl', [u32('N', 'n')], {
    entry: 'gelu_forward_kernel',
    bindings: ['out', 'x', 'params'],
    dispatch: (p) => threads(p.n),
  }),

  // gelu_backward(dinp, inp, dout, N) = fixture (dx, x, dout), dx accumulated.
  gelu_backward: llmc('gelu_backward.wgsl', [u32('N', 'n')], {
    entry: 'gelu_backward_kernel',
    bindings: ['dx', 'x', 'dout', 'params'],
    dispatch: (p) => threads(p.n),
  }),

  // residual_forward(out, inp1, inp2, N) = fixture (out, a, b).
  residual_forward: llmc('residual_forward.wgsl', [u32('N', 'n')], {
    entry: 'residual_forward_kernel',
    bindings: ['out', 'a', 'b', 'params'],
    dispatch: (p) => threads(p.n),
  }),

  // residual_backward(dinp1, dinp2, dout, N) (train_gpt2.c's) = fixture (da, db, dout), both
  // accumulated.
  residual_backward: llmc('residual_backward.wgsl', [u32('N', 'n')], {
    entry: 'residual_backward_kernel',
    bindings: ['da', 'db', 'dout', 'params'],
    dispatch: (p) => threads(p.n),
  }),

  // reftrain's fused loss (losses, dlogits from logits, targets, dloss) is llm.c's three kernels
  // in order, one WGSL file each (a pass's `file` replaces the twin's, so each pass names `dir`
  // too):
  //   softmax_forward(probs, logits)                                   probs: scratch [N, Vp]
  //   crossentropy_forward(losses, probs, targets)
  //   crossentropy_softmax_backward(dlogits, dlosses, probs, targets)  dlosses: scratch [N]
  // llm.c takes the loss's gradient per position as a buffer, dlosses; reftrain passes one
  // scalar dloss (1/(B·T) for the mean): dlosses is a scratch buffer filled with it.
  // Params: fixture N positions packed as B = N, T = 1; V and Vp as they are.
  // llm.c has no z-loss: the entry declines z ≠ 0 (the fixture's "awkward" case; a replay of a
  // run with z-loss stops at the loss, naming this reason).
  crossentropy_forward_backward: llmc(undefined, [...rowsAsBT, u32('V'), u32('Vp')], {
    passes: [
      { dir, file: 'softmax_forward.wgsl', entry: 'softmax_forward_kernel', bindings: ['probs', 'logits', 'params'],
        dispatch: (p) => threads(p.N) },
      { dir, file: 'crossentropy_forward.wgsl', entry: 'crossentropy_forward_kernel',
        bindings: ['losses', 'probs', 'targets', 'params'], dispatch: (p) => threads(p.N) },
      { dir, file: 'crossentropy_softmax_backward.wgsl', entry: 'crossentropy_softmax_backward_kernel',
        bindings: ['dlogits', 'dlosses', 'probs', 'targets', 'params'], dispatch: (p) => threads(p.N * p.Vp) },
    ],
    scratch: { probs: (p) => p.N * p.Vp, dlosses: { floats: (p) => p.N, fill: (p) => p.dloss } },
    when: (p) => p.z === 0 || `llm.c's loss has no z-loss (z = ${p.z})`,
  }),
};
