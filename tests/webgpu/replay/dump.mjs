// A kernel-call dump of one step: every dispatch in execution order, its storage bindings read
// back around it — inputs before, outputs after, an accumulated (inout) binding both, as
// `<binding>_in` and `<binding>` — named `NNNN.<layer>.<kernel>.<binding>`. The names sort in
// execution order, so `reftrain compare` of two dumps names as its first tensor past tolerance
// an output of the first call that diverged (its inputs, outputs of earlier calls, passed).

// Each binding's role and dtype come from the kernel table (kernels.json): `in` read before the
// call, `out` after, `inout` both; uniforms (scalars, the optimizer's hp and bias) and the
// replay's zero and sink buffers are not recorded.
import { kernelEntry, safetensorsDtype } from '../kernel_table.mjs';

const bytesOf = { F32: 4, I32: 4, F16: 2, BF16: 2, U8: 1 };

// What `reftrain compare` applies to each tensor of the dump (kept in its metadata), as
// reftrain's own dump does: NMSE 1e-9 for f32 and f16 (the f32 kernels' criterion; a call's
// inputs already differ by rounding, so the cast fixture's one f16 ulp per element would blame
// the mirror for weights one ulp apart), one code for the 8-bit state, and for every tensor of a
// bf16 call (a kernel named *_bf16) and every BF16 tensor the bf16 kernels' tolerance
// (core/golden/compare.cpp's bf16_tolerance).
function tolerance(dtype, kernel) {
  if (dtype === 'BF16' || kernel.endsWith('_bf16')) {
    return { rtol: 1.6e-2, atol: 1e-5,
             why: "a bf16 kernel: PyTorch assert_close's bf16 default; twins that sum in the canonical order " +
                  'reproduce the products bit for bit, and a probability that the GPU\'s exp rounds to the ' +
                  'neighbouring bf16 moves an output by ~2^-8 of its term' };
  }
  if (dtype === 'U8') return { max_ulp: 1, why: 'one 8-bit code, as the adamw_8bit_update fixture' };
  return { max_nmse: 1e-9, why: 'NMSE 1e-9, as the f32 kernel fixtures' };
}

// {ops, finish(read) -> {tensors, metadata}}: `ops` with the read-backs interleaved.
export function instrument(E, ops, step) {
  const out = [], reads = [], calls = [], outputs = {};
  for (const o of ops) {
    if (o.op !== 'dispatch') { out.push(o); continue; }
    const call = `${String(calls.length).padStart(4, '0')}.${o.tag}`;
    const before = [], after = [];
    for (const b of kernelEntry(o.name).bindings) {
      const v = o.views[b.name];
      if (!v || v.uniform || v.scratch || b.role === 'scalar' || b.role === 'scratch') continue;
      const dtype = safetensorsDtype(b);
      const add = (list, suffix) => {
        const r = E.readback(v);
        list.push(r);
        reads.push({ name: `${call}.${b.name}${suffix}`, dtype, kernel: o.name, r, elements: v.elements });
      };
      if (b.role !== 'out') add(before, b.role === 'inout' ? '_in' : '');
      if (b.role !== 'in') add(after, ''), (outputs[call] ??= []).push(b.name);
    }
    calls.push(call);
    outputs[call] ??= [];
    out.push(...before, o, ...after);
  }
  const finish = async () => {
    const tensors = {}, tolerances = {};
    for (const { name, dtype, kernel, r, elements } of reads) {
      const bytes = await E.read(r);
      // A view of bf16 elements spans whole u32 words: `elements` says how many it holds.
      const n = elements ?? Math.floor(bytes.byteLength / bytesOf[dtype]);
      const data = { F32: Float32Array, I32: Int32Array, F16: Uint16Array, BF16: Uint16Array, U8: Uint8Array }[dtype];
      tensors[name] = { dtype, shape: [n], data: new data(bytes, 0, n) };
      if (dtype !== 'I32') tolerances[name] = tolerance(dtype, kernel);
    }
    return { tensors, metadata: { format: 'reftrain-kernel-dump', step: String(step), calls: JSON.stringify(calls),
                                  outputs: JSON.stringify(outputs),
                                  tolerances: JSON.stringify(tolerances), producer: 'tests/webgpu/replay.mjs' } };
  };
  return { ops: out, finish };
}
