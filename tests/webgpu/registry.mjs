// The WGSL twins the fixture runner uses: fixture name → {file, entry, dispatch, ...} (the
// fields are described in runner.mjs). A backend tests its own kernels by passing its own
// registry (or a copy of this one with entries replaced) to runFixtures, or with
// `kernels.mjs --registry FILE.mjs`, whose default export is such an object; docs/webgpu.md
// shows how.
const groups = (n, per = 256) => {
  const g = Math.ceil(n / per);
  return g <= 65535 ? [g, 1] : [65535, Math.ceil(g / 65535)];
};

// One thread per element on the groups() grid, whose index prelude/elementwise.wgsl computes.
const elementwisePrelude = 'prelude/elementwise.wgsl';
const elementwise = (file, entry, count = 'n') => ({ file, prelude: elementwisePrelude, entry, dispatch: (p) => groups(p[count]) });
// The optimizer's: the element-wise grid, then the AdamW element the variants share.
const optimizer = (file, entry, count = 'n') => ({ ...elementwise(file, entry, count), prelude: [elementwisePrelude, 'prelude/optimizer.wgsl'] });

const rows = (file, entry, count, per = 64) => ({ file, entry, dispatch: (p) => [Math.ceil(count(p) / per)] });
const grid16 = (file, entry, cols, rows_, per = 16) => ({
  file, entry, dispatch: (p) => [Math.ceil(cols(p) / per), Math.ceil(rows_(p) / per)],
});

// The linear products' three forms, each a template (the file's `//#template` section, see
// source.mjs) written once per product after the family's prelude (prelude/linear.wgsl: the
// bindings and each product's operands): naive (one thread per output), 16×16
// workgroup-shared tiles, 4×4 register blocks (64×64 outputs per workgroup).
export const linearForms = {
  naive: { file: 'linear.wgsl', block: 16 },
  tiled: { file: 'linear_tiled.wgsl', block: 16 },
  reg4x4: { file: 'linear_reg4x4.wgsl', block: 64 },
};

// Each product: its prefix in the prelude and its output grid [columns, rows].
export const linearProducts = {
  linear_forward: { prefix: 'lf', grid: [(p) => p.O, (p) => p.N] },
  linear_forward_f16: { prefix: 'lh', grid: [(p) => p.O, (p) => p.N] },
  linear_backward_data: { prefix: 'bd', grid: [(p) => p.K, (p) => p.N] },
  linear_backward_data_f16: { prefix: 'bh', grid: [(p) => p.K, (p) => p.N] },
  linear_backward_weight: { prefix: 'bw', grid: [(p) => p.K, (p) => p.O] },
};

// The template's substitutions: one entry point per product, the f32 products in one module and
// the two that read the f16 mirror in another (prelude/linear_f16.wgsl), so that the f32 ones
// compile on an adapter without shader-f16.
const isF16 = (name) => name.endsWith('_f16');
export const linearTemplate = (f16) => Object.entries(linearProducts).filter(([name]) => isF16(name) === f16)
  .map(([ENTRY, { prefix }]) => ({ ENTRY, X: prefix }));

export function linearTwin(form, name) {
  const f = linearForms[form];
  const f16 = isF16(name);
  return { ...grid16(f.file, name, ...linearProducts[name].grid, f.block),
           prelude: f16 ? 'prelude/linear_f16.wgsl' : 'prelude/linear.wgsl', template: linearTemplate(f16) };
}

// The attention twins' two forms: materialised (the probabilities written to att, as the
// reference does) and fused (online softmax, only the logsumexp kept; attention_fused.wgsl). The
// fused forward binds no att, so its result lacks att and is judged with `compare --subset`; its
// backward runs the fused forward first (on the fixture's qkv) for the out and lse it reads.
// Both forms follow the family's prelude (prelude/attention.wgsl: the bindings they share). lse
// takes att's binding number (1 forward, 3 backward), so that the uniforms are bound at the same
// numbers in both forms, and the fused backward's out comes last.
const attentionPrelude = 'prelude/attention.wgsl';
const attentionRows = (p) => [Math.ceil((p.B * p.NH * p.T) / 64)];
const fusedForward = { entry: 'attention_forward_fused', bindings: ['out', 'lse', 'qkv', 'B', 'T', 'C', 'NH'], dispatch: attentionRows };
export const attentionForms = {
  materialised: {
    attention_forward: { ...rows('attention.wgsl', 'attention_forward', (p) => p.B * p.NH * p.T), prelude: attentionPrelude },
    attention_backward: { ...rows('attention.wgsl', 'attention_backward', (p) => p.B * p.NH * p.T), prelude: attentionPrelude },
  },
  fused: {
    attention_forward: { file: 'attention_fused.wgsl', prelude: attentionPrelude, ...fusedForward, scratch: { lse: (p) => p.B * p.NH * p.T } },
    attention_backward: {
      file: 'attention_fused.wgsl',
      prelude: attentionPrelude,
      passes: [fusedForward, {
        entry: 'attention_backward_fused', bindings: ['dqkv', 'dout', 'qkv', 'lse', 'B', 'T', 'C', 'NH', 'out'],
        dispatch: attentionRows, reads: ['out', 'lse'],
      }],
      scratch: { out: (p) => p.B * p.T * p.C, lse: (p) => p.B * p.NH * p.T },
    },
  },
};

// The bf16 twins (issue 29): every bf16 tensor two to a u32 word, element 2i in word i's low
// half (a fixture's BF16 bytes as they are); prelude/bf16.wgsl converts and rounds with integer
// operations, so no shader-f16 is needed. The products sum in the canonical bf16 order
// (ops/matmul_bf16.h). The linear products: one thread per output, each product a template
// instance (X its prefix in linear_bf16.wgsl).
const bf16Prelude = 'prelude/bf16.wgsl';
export const linearBf16Products = {
  linear_forward_bf16: { prefix: 'lf', grid: [(p) => p.O, (p) => p.N] },
  linear_backward_data_bf16: { prefix: 'bd', grid: [(p) => p.K, (p) => p.N] },
  linear_backward_weight_bf16: { prefix: 'bw', grid: [(p) => p.K, (p) => p.O] },
};
const linearBf16Template = Object.entries(linearBf16Products).map(([ENTRY, { prefix }]) => ({ ENTRY, X: prefix }));
const linearBf16 = (name) => ({ ...grid16('linear_bf16.wgsl', name, ...linearBf16Products[name].grid), prelude: bf16Prelude, template: linearBf16Template });

// The bf16 attention in three passes a direction (attention_bf16.wgsl): the rows' f32 softmax
// (or score gradient), the rounding of the [B,NH,T,T] probabilities (or score gradients) to
// bf16 one word a thread, then the products into the outputs one element a thread. Every pass
// binds B, T, C, NH first. The backward's dp and ds16 are the twin's own scratch, for every
// head at once (the CPU reuses one [T,T] pair per head).
const attTT = (p) => p.B * p.NH * p.T * p.T;
const attentionDims = ['B', 'T', 'C', 'NH'];
const attentionBf16Source = { file: 'attention_bf16.wgsl', prelude: [elementwisePrelude, bf16Prelude],
                              template: ['s', 'pv', 'dp', 'dq', 'dk', 'dv'].map((X) => ({ X })) };
const roundBf16 = (f32, bf16) => ({ entry: 'attention_round_bf16', bindings: [...attentionDims, f32, bf16], dispatch: (p) => groups(Math.ceil(attTT(p) / 2)) });
export const attentionBf16 = {
  attention_forward_bf16: {
    ...attentionBf16Source,
    passes: [
      { entry: 'attention_forward_bf16', bindings: [...attentionDims, 'att', 'qkv16'], dispatch: attentionRows },
      roundBf16('att', 'att16'),
      { entry: 'attention_forward_bf16_out', bindings: [...attentionDims, 'out', 'att16', 'qkv16'], dispatch: (p) => groups(p.B * p.T * p.C) },
    ],
  },
  attention_backward_bf16: {
    ...attentionBf16Source,
    passes: [
      { entry: 'attention_backward_bf16', bindings: [...attentionDims, 'dp_all', 'dout16', 'qkv16', 'att'], dispatch: attentionRows },
      roundBf16('dp_all', 'ds16_all'),
      { entry: 'attention_backward_bf16_dqkv', bindings: [...attentionDims, 'dqkv', 'ds16_all', 'qkv16', 'att16', 'dout16'],
        dispatch: (p) => groups(p.B * p.T * 3 * p.C) },
    ],
    scratch: { dp_all: attTT, ds16_all: (p) => Math.ceil(attTT(p) / 2) },
  },
};

// reduce_norm_sq in two passes (optimizer.wgsl): G workgroups' partial sums into scratch, then
// one workgroup sums them in a fixed order. G is at most 1024 (each covers a grid-stride share).
const normGroups = (p) => Math.min(1024, Math.max(1, Math.ceil(p.n / 256)));
const normSq = {
  file: 'optimizer.wgsl', prelude: [elementwisePrelude, 'prelude/optimizer.wgsl'],
  passes: [
    { entry: 'reduce_norm_sq', bindings: ['data', 'partial', 'n'], dispatch: (p) => [normGroups(p)] },
    { entry: 'reduce_norm_sq_final', bindings: ['partial', 'result', 'groups'], dispatch: () => [1], reads: ['partial'] },
  ],
  scratch: { partial: normGroups },
  structs: { groups: [['G', 'u32', normGroups]] },
};

export function makeRegistry({ linear = 'naive', attention = 'materialised' } = {}) {
  if (!linearForms[linear]) throw new Error(`no linear form ${linear}: ${Object.keys(linearForms)}`);
  if (!attentionForms[attention]) throw new Error(`no attention form ${attention}: ${Object.keys(attentionForms)}`);
  const linearTwins = Object.fromEntries(Object.keys(linearProducts).map((name) => [name, linearTwin(linear, name)]));
  return {
    embed_forward: { file: 'embed.wgsl', entry: 'embed_forward', dispatch: (p) => groups(p.B * p.T * p.C) },
    embed_backward: { file: 'embed.wgsl', entry: 'embed_backward', dispatch: (p) => groups(p.Vp * p.C) },
    token_embed_forward: { file: 'embed.wgsl', entry: 'token_embed_forward', dispatch: (p) => groups(p.N * p.C) },
    token_embed_backward: { file: 'embed.wgsl', entry: 'token_embed_backward', dispatch: (p) => groups(p.Vp * p.C) },
    layernorm_forward: rows('norm.wgsl', 'layernorm_forward', (p) => p.N),
    layernorm_backward: rows('norm.wgsl', 'layernorm_backward', (p) => Math.max(p.N, p.C)),
    rmsnorm_forward: rows('norm.wgsl', 'rmsnorm_forward', (p) => p.N),
    rmsnorm_backward: rows('norm.wgsl', 'rmsnorm_backward', (p) => Math.max(p.N, p.C)),
    ...linearTwins,
    rope_forward: { file: 'rope.wgsl', entry: 'rope_forward', dispatch: (p) => groups(p.B * p.T * p.NH * p.hs / 2) },
    rope_backward: { file: 'rope.wgsl', entry: 'rope_backward', dispatch: (p) => groups(p.B * p.T * p.NH * p.hs / 2) },
    ...attentionForms[attention],
    crossentropy_forward_backward: rows('loss.wgsl', 'crossentropy_forward_backward', (p) => p.N),
    cast_f32_to_f16: elementwise('cast.wgsl', 'cast_f32_to_f16'),
    cast_f16_to_f32: elementwise('cast.wgsl', 'cast_f16_to_f32'),
    cast_f32_to_bf16: { ...elementwise('bf16.wgsl', 'cast_f32_to_bf16'), prelude: [elementwisePrelude, bf16Prelude], dispatch: (p) => groups(Math.ceil(p.n / 2)) },
    ...Object.fromEntries(Object.keys(linearBf16Products).map((name) => [name, linearBf16(name)])),
    ...attentionBf16,
    residual_forward: elementwise('residual.wgsl', 'residual_forward'),
    residual_backward: elementwise('residual.wgsl', 'residual_backward'),
    gelu_forward: elementwise('activation.wgsl', 'gelu_forward'),
    gelu_backward: elementwise('activation.wgsl', 'gelu_backward'),
    gelu_erf_forward: elementwise('activation.wgsl', 'gelu_erf_forward'),
    gelu_erf_backward: elementwise('activation.wgsl', 'gelu_erf_backward'),
    swiglu_forward: elementwise('activation.wgsl', 'swiglu_forward'),
    swiglu_backward: elementwise('activation.wgsl', 'swiglu_backward'),
    reduce_norm_sq: normSq,
    finalize_grad_stats: { ...optimizer('optimizer.wgsl', 'finalize_grad_stats'), dispatch: () => [1] },
    adamw_update: { ...optimizer('optimizer.wgsl', 'adamw_update', 'size'), uniforms: ['hp', 'bias'] },
    adamw_update_f16: { ...optimizer('optimizer_f16.wgsl', 'adamw_update_f16', 'size'), uniforms: ['hp', 'bias'] },
    // One thread per word of the bf16 mirror: two elements each (optimizer_bf16.wgsl).
    adamw_update_bf16: { ...optimizer('optimizer_bf16.wgsl', 'adamw_update_bf16', 'size'), prelude: [elementwisePrelude, 'prelude/optimizer.wgsl', bf16Prelude],
                         uniforms: ['hp', 'bias'], dispatch: (p) => groups(Math.ceil(p.size / 2)) },
    // bf16-pure's stochastically rounded update: likewise one thread per word.
    adamw_update_bf16_sr: { ...optimizer('optimizer_bf16_sr.wgsl', 'adamw_update_bf16_sr', 'size'), uniforms: ['hp', 'bias'],
                            dispatch: (p) => groups(Math.ceil(p.size / 2)) },
    // bf16-kahan's compensated update: one thread per word of the mirror and of the compensation.
    adamw_update_bf16_kahan: { ...optimizer('optimizer_bf16_kahan.wgsl', 'adamw_update_bf16_kahan', 'size'),
                               prelude: [elementwisePrelude, 'prelude/optimizer.wgsl', bf16Prelude],
                               uniforms: ['hp', 'bias'], dispatch: (p) => groups(Math.ceil(p.size / 2)) },
    adamw_8bit_update: { ...optimizer('optimizer.wgsl', 'adamw_8bit_update', 'size'), uniforms: ['hp', 'bias'] },
  };
}

export default makeRegistry();
