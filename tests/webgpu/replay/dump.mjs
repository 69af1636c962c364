// A kernel-call dump of one step: every dispatch in execution order, its storage bindings read
// back around it — inputs before, outputs after, an accumulated (inout) binding both, as
// `<binding>_in` and `<binding>` — named `NNNN.<layer>.<kernel>.<binding>`. The names sort in
// execution order, so `reftrain compare` of two dumps names as its first tensor past tolerance
// an output of the first call that diverged (its inputs, outputs of earlier calls, passed).

// Binding names in the fixture's order; `:o` an output, `:io` read and written, else an input.
const sig = {
  embed_forward: 'out:o tokens wte wpe B T C', embed_backward: 'dwte:io dwpe:io dout tokens B T C',
  token_embed_forward: 'out:o tokens wte N C', token_embed_backward: 'dwte:io dout tokens N C',
  layernorm_forward: 'out:o mean:o rstd:o x w b N C', layernorm_backward: 'dx:io dw:io db:io dout x w mean rstd N C',
  rmsnorm_forward: 'out:o rstd:o x w N C', rmsnorm_backward: 'dx:io dw:io dout x w rstd N C',
  linear_forward: 'out:o inp w b N K O', linear_forward_f16: 'out:o inp w16 b N K O',
  linear_backward_data: 'dinp:io dout w N K O', linear_backward_data_f16: 'dinp:io dout w16 N K O',
  linear_backward_weight: 'dw:io db:io dout inp N K O',
  rope_forward: 'out:o x B T NH hs theta', rope_backward: 'dx:io dout B T NH hs theta',
  attention_forward: 'out:o att:o qkv B T C NH', attention_backward: 'dqkv:io dout qkv att B T C NH',
  gelu_forward: 'out:o x n', gelu_backward: 'dx:io x dout n',
  swiglu_forward: 'out:o gate up n', swiglu_backward: 'dgate:io dup:io dout gate up n',
  crossentropy_forward_backward: 'losses:o dlogits:o logits targets N V Vp dloss z',
  residual_forward: 'out:o a b n', residual_backward: 'da:io db:io dout n',
  cast_f32_to_f16: 'src dst:o n', reduce_norm_sq: 'data result:o n', finalize_grad_stats: 'norm_sq grad_stats:o max_norm',
  adamw_update: 'w:io g:io m:io v:io grad_stats size hp bias',
  adamw_update_f16: 'w:io g:io m:io v:io grad_stats size hp bias w16:o',
  adamw_8bit_update: 'w:io g:io m_packed:io v_packed:io m_scale:io v_scale:io grad_stats size hp bias',
  pack_qkv: 'qkv:o q k v N C', unpack_qkv: 'dq:o dk:o dv:o dqkv N C',
};

const dtypes = { tokens: 'I32', targets: 'I32', w16: 'F16', dst: 'F16', m_packed: 'U8', v_packed: 'U8' };
const bytesOf = { F32: 4, I32: 4, F16: 2, U8: 1 };

// What `reftrain compare` applies to each tensor of the dump (kept in its metadata), as
// reftrain's own dump does: NMSE 1e-9 for f32 and f16 (the f32 kernels' criterion; a call's
// inputs already differ by rounding, so the cast fixture's one f16 ulp per element would blame
// the mirror for weights one ulp apart), one code for the 8-bit state.
function tolerance(dtype) {
  if (dtype === 'U8') return { max_ulp: 1, why: 'one 8-bit code, as the adamw_8bit_update fixture' };
  return { max_nmse: 1e-9, why: 'NMSE 1e-9, as the f32 kernel fixtures' };
}

// {ops, finish(read) -> {tensors, metadata}}: `ops` with the read-backs interleaved.
export function instrument(E, ops, step) {
  const out = [], reads = [], calls = [], outputs = {};
  for (const o of ops) {
    if (o.op !== 'dispatch') { out.push(o); continue; }
    if (!sig[o.name]) throw new Error(`dump: no signature for ${o.name}`);
    const call = `${String(calls.length).padStart(4, '0')}.${o.tag}`;
    const names = sig[o.name].split(' ');
    const before = [], after = [];
    o.bindings.forEach((v, i) => {
      const [binding, role = 'i'] = names[i].split(':');
      if (v.uniform || v.scratch) return;
      const dtype = dtypes[binding] ?? 'F32';
      const add = (list, suffix) => {
        const r = E.readback(v);
        list.push(r);
        reads.push({ name: `${call}.${binding}${suffix}`, dtype, r });
      };
      if (role !== 'o') add(before, role === 'io' ? '_in' : '');
      if (role !== 'i') add(after, ''), (outputs[call] ??= []).push(binding);
    });
    calls.push(call);
    outputs[call] ??= [];
    out.push(...before, o, ...after);
  }
  const finish = async () => {
    const tensors = {}, tolerances = {};
    for (const { name, dtype, r } of reads) {
      const bytes = await E.read(r);
      const n = Math.floor(bytes.byteLength / bytesOf[dtype]);
      const data = { F32: Float32Array, I32: Int32Array, F16: Uint16Array, U8: Uint8Array }[dtype];
      tensors[name] = { dtype, shape: [n], data: new data(bytes, 0, n) };
      if (dtype !== 'I32') tolerances[name] = tolerance(dtype);
    }
    return { tensors, metadata: { format: 'reftrain-kernel-dump', step: String(step), calls: JSON.stringify(calls),
                                  outputs: JSON.stringify(outputs),
                                  tolerances: JSON.stringify(tolerances), producer: 'tests/webgpu/replay.mjs' } };
  };
  return { ops: out, finish };
}
