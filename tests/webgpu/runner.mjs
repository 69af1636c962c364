// Runs one golden kernel fixture through a WGSL twin on a WebGPU device and returns the tensors
// to write: the twin's outputs under the fixture's output names, and its inputs as read back
// from the GPU (so a twin that writes into an input fails the comparison too).
//
// A twin (see registry.mjs) is {source | file, entry, dispatch(params) -> [x, y, z]} and
// optionally `bindings` (tensor/scalar names in binding order; default: the manifest's order
// without scratch bindings and without the step number t, which no GPU kernel binds) and
// `uniforms` (input tensors bound as uniform buffers rather than read-only storage; scalars are
// always uniforms). A twin of several dispatches gives `passes`, a list of {entry, bindings,
// dispatch, reads}, run in order on buffers shared by name, and `scratch`, {name: params ->
// f32 count}, buffers of its own that no fixture holds (zeroed, never written to the result;
// bound read-only in the passes whose `reads` name them). A manifest output that no pass binds
// is left out of the result, so `reftrain compare --subset` judges the others.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { typedArrayFor } from './safetensors.mjs';

const kernelDir = new URL('./kernels/', import.meta.url).pathname;

export function twinSource(twin) {
  return twin.source ?? readFileSync(join(twin.dir ?? kernelDir, twin.file), 'utf8');
}

function defaultBindings(entry) {
  return entry.bindings.filter((b) => b.role !== 'scratch' && !(b.wgsl ?? '').startsWith('(not bound'));
}

function scalarBytes(b, value) {
  if (value === undefined) throw new Error(`scalar ${b.name}: not in the case's params`);
  if (b.dtype === 'f32' || b.dtype === 'f64') return new Float32Array([value]);
  if (b.dtype === 'i32') return new Int32Array([value]);
  return new Uint32Array([value]);
}

const pad4 = (n) => Math.max(4, Math.ceil(n / 4) * 4);

function upload(device, bytes, usage) {
  const buffer = device.createBuffer({ size: pad4(bytes.byteLength), usage, mappedAtCreation: true });
  new Uint8Array(buffer.getMappedRange()).set(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  buffer.unmap();
  return buffer;
}

const pipelines = new Map();  // source + entry -> {pipeline, layout}

async function pipelineFor(device, twin, entryPoint, kinds) {
  const source = twinSource(twin);
  const key = `${entryPoint}\n${kinds.join(',')}\n${source}`;
  if (pipelines.has(key)) return pipelines.get(key);
  const module = device.createShaderModule({ code: source });
  const info = await module.getCompilationInfo();
  const errors = info.messages.filter((m) => m.type === 'error');
  if (errors.length) {
    throw new Error(`${twin.file ?? 'WGSL'}: ${errors.map((m) => `${m.lineNum}:${m.linePos} ${m.message}`).join('; ')}`);
  }
  const layout = device.createBindGroupLayout({
    entries: kinds.map((type, binding) => ({ binding, visibility: GPUShaderStage.COMPUTE, buffer: { type } })),
  });
  device.pushErrorScope('validation');
  const pipeline = device.createComputePipeline({
    layout: device.createPipelineLayout({ bindGroupLayouts: [layout] }),
    compute: { module, entryPoint },
  });
  const err = await device.popErrorScope();
  if (err) throw new Error(`${entryPoint}: ${err.message}`);
  const p = { pipeline, layout };
  pipelines.set(key, p);
  return p;
}

// The twin's passes, each {entry, bindings, dispatch, reads}: `passes` when it has several, else
// its one entry point.
function passesOf(twin) {
  return twin.passes ?? [{ entry: twin.entry, bindings: twin.bindings, dispatch: twin.dispatch }];
}

// The buffer behind one binding name: a scalar (uniform), a twin's own scratch buffer (zeroed
// f32 storage, never read back), or a tensor of the fixture.
function slotFor(twin, entry, byName, caseName, fixture, name) {
  const params = entry.cases[caseName].params;
  const scratch = (twin.scratch ?? {})[name];
  if (scratch && !byName[name]) return { kind: 'storage', bytes: new Float32Array(scratch(params)), scratch: true };
  const b = byName[name];
  if (!b) throw new Error(`${entry.name}: twin binds '${name}', which the manifest does not list`);
  if (b.role === 'scalar') return { kind: 'uniform', bytes: scalarBytes(b, params[name]) };
  const src = fixture.tensors[`${caseName}.${b.role === 'inout' ? `${name}_in` : name}`];
  const ref = fixture.tensors[`${caseName}.${name}`];
  if (!ref && !src) throw new Error(`${entry.name}/${caseName}: no tensor for binding ${name}`);
  const kind = b.role === 'in' ? ((twin.uniforms ?? []).includes(name) ? 'uniform' : 'read-only-storage') : 'storage';
  const bytes = b.role === 'out' ? new Uint8Array(ref.data.byteLength) : src.data;
  return { kind, bytes, outName: `${caseName}.${name}`, like: ref ?? src };
}

// One case of a fixture: {tensors: {name: {dtype, shape, data}}} for the case's names. Every
// pass runs in one command buffer, in order, on buffers shared by name.
export async function runCase(device, twin, entry, caseName, fixture) {
  const params = entry.cases[caseName].params;
  const byName = Object.fromEntries(entry.bindings.map((b) => [b.name, b]));
  const passes = passesOf(twin).map((p) => ({ ...p, names: p.bindings ?? defaultBindings(entry).map((b) => b.name) }));
  const slots = new Map();
  for (const name of passes.flatMap((p) => p.names)) {
    if (!slots.has(name)) slots.set(name, slotFor(twin, entry, byName, caseName, fixture, name));
  }
  const U = GPUBufferUsage;
  for (const s of slots.values()) {
    s.buffer = upload(device, s.bytes, s.kind === 'uniform' ? U.UNIFORM | U.COPY_DST : U.STORAGE | U.COPY_SRC | U.COPY_DST);
  }
  const enc = device.createCommandEncoder();
  device.pushErrorScope('validation');
  for (const p of passes) {
    // A scratch buffer is read-write unless this pass only reads it.
    const kinds = p.names.map((n) => (slots.get(n).scratch && (p.reads ?? []).includes(n) ? 'read-only-storage' : slots.get(n).kind));
    const { pipeline, layout } = await pipelineFor(device, twin, p.entry, kinds);
    const group = device.createBindGroup({
      layout,
      entries: p.names.map((n, binding) => ({ binding, resource: { buffer: slots.get(n).buffer } })),
    });
    const pass = enc.beginComputePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, group);
    const [x, y = 1, z = 1] = p.dispatch(params);
    pass.dispatchWorkgroups(x, y, z);
    pass.end();
  }
  const reads = [...slots.values()].filter((s) => s.kind !== 'uniform' && !s.scratch).map((s) => {
    const staging = device.createBuffer({ size: s.buffer.size, usage: U.MAP_READ | U.COPY_DST });
    enc.copyBufferToBuffer(s.buffer, 0, staging, 0, s.buffer.size);
    return { s, staging };
  });
  device.queue.submit([enc.finish()]);
  const err = await device.popErrorScope();
  if (err) throw new Error(`${entry.name}/${caseName}: ${err.message}`);
  const out = {};
  for (const { s, staging } of reads) {
    await staging.mapAsync(GPUMapMode.READ);
    const bytes = new Uint8Array(staging.getMappedRange()).slice(0, s.like.data.byteLength);
    staging.unmap();
    staging.destroy();
    out[s.outName] = { dtype: s.like.dtype, shape: s.like.shape, data: typedArrayFor(s.like.dtype, bytes.buffer) };
  }
  for (const s of slots.values()) s.buffer.destroy();
  return out;
}

// Every case of a fixture. Inputs the twin does not bind as storage (uniform tensors, the
// before-values `<binding>_in`, the step number t) are written back as given, so that the
// result file has the fixture's tensor names; outputs never are.
export async function runFixture(device, twin, entry, fixture) {
  const outputs = new Set(entry.bindings.filter((b) => b.role === 'out' || b.role === 'inout').map((b) => b.name));
  const result = {};
  for (const caseName of Object.keys(entry.cases)) {
    Object.assign(result, await runCase(device, twin, entry, caseName, fixture));
    for (const [name, t] of Object.entries(fixture.tensors)) {
      const [c, binding] = [name.slice(0, name.indexOf('.')), name.slice(name.indexOf('.') + 1)];
      if (c === caseName && !outputs.has(binding) && !(name in result)) result[name] = t;
    }
  }
  return result;
}
