// Runs one golden kernel fixture through a WGSL twin on a WebGPU device and returns the tensors
// to write: the twin's outputs under the fixture's output names, and its inputs as read back
// from the GPU (so a twin that writes into an input fails the comparison too).
//
// A twin (see registry.mjs) is {source | file [, prelude, template], entry, dispatch(params) ->
// [x, y, z]} with the optional fields bind.mjs describes (`bindings`, `uniforms`, `passes`,
// `scratch`); bind.mjs binds and dispatches it, as it does for the training replay. Here the
// default binding order is the manifest's without scratch bindings and without the step number
// t, which no GPU kernel binds. A manifest output that no pass binds is left out of the result,
// so `reftrain compare --subset` judges the others.
import { typedArrayFor } from './safetensors.mjs';
import { bindGroups, declines, defaultNames, dispatch, explainError, moduleFor, passesOf, plan } from './bind.mjs';
import { judgeCase } from './judge.mjs';
import { twinSource } from './source.mjs';

export { twinSource };

// The manifest's bindings a GPU kernel binds by default: its `wgsl` says "(not bound ...)" for
// the AdamW step number t, which the host turns into bias.
const boundOnGpu = (b) => !(b.wgsl ?? '').startsWith('(not bound');

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

// A twin's WGSL must compile: its errors, with line numbers, fail the fixture.
const compiled = new WeakSet();
async function checkCompiles(device, twin) {
  for (const { src } of passesOf(twin, [])) {
    const { module } = moduleFor(device, src);
    if (compiled.has(module)) continue;
    const errors = (await module.getCompilationInfo()).messages.filter((m) => m.type === 'error');
    if (errors.length) {
      throw new Error(`${src.file ?? 'WGSL'}: ${errors.map((m) => `${m.lineNum}:${m.linePos} ${m.message}`).join('; ')}`);
    }
    compiled.add(module);
  }
}

// The bytes behind one slot (bind.mjs): a scratch buffer (zeroed or filled, never read back), a
// uniform struct packed from the params, a scalar from the case's params, or a tensor of the
// fixture (an `inout` holding `<name>_in`; an `out` NaN bytes, or zeroed when the twin's `zero`
// names it).
function slotBytes(twin, entry, caseName, fixture, params, name, slot) {
  if (slot.scratch !== undefined) return { bytes: slot.fill ?? new Float32Array(slot.scratch), scratch: true };
  if (slot.struct) return { bytes: slot.struct, scalar: true };
  const b = slot.binding;
  if (b.role === 'scalar') return { bytes: scalarBytes(b, params[name]), scalar: true };
  const src = fixture.tensors[`${caseName}.${b.role === 'inout' ? `${name}_in` : name}`];
  const ref = fixture.tensors[`${caseName}.${name}`];
  if (!ref && !src) throw new Error(`${entry.name}/${caseName}: no tensor for binding ${name}`);
  const bytes = b.role === 'out' ? new Uint8Array(ref.data.byteLength).fill((twin.zero ?? []).includes(name) ? 0 : 0xff) : src.data;
  return { bytes, outName: `${caseName}.${name}`, like: ref ?? src };
}

// Two timestamps around a compute pass: {writes (for beginComputePass), resolve(encoder),
// ms() -> the pass's GPU time in milliseconds, once the submit is done}.
function timestamps(device) {
  const querySet = device.createQuerySet({ type: 'timestamp', count: 2 });
  const resolved = device.createBuffer({ size: 16, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
  const read = device.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  return {
    writes: { querySet, beginningOfPassWriteIndex: 0, endOfPassWriteIndex: 1 },
    resolve: (enc) => {
      enc.resolveQuerySet(querySet, 0, 2, resolved, 0);
      enc.copyBufferToBuffer(resolved, 0, read, 0, 16);
    },
    ms: async () => {
      await read.mapAsync(GPUMapMode.READ);
      const [t0, t1] = new BigUint64Array(read.getMappedRange().slice(0));
      read.unmap();
      for (const b of [querySet, resolved, read]) b.destroy();
      return Number(t1 - t0) / 1e6;
    },
  };
}

// One case of a fixture: {tensors: {name: {dtype, shape, data}}} for the case's names. Every
// pass runs in one command buffer, in order, on buffers shared by name.
export async function runCase(device, twin, entry, caseName, fixture) {
  const params = entry.cases[caseName].params;
  await checkCompiles(device, twin);
  device.pushErrorScope('validation');
  let planned, thrown;
  try {
    planned = plan(device, twin, entry, defaultNames(entry, boundOnGpu), params);
  } catch (e) {
    thrown = e;
  }
  const perr = await device.popErrorScope();
  if (thrown) throw thrown;
  const dawnError = (e) => new Error(`${entry.name}/${caseName}: ${explainError(planned.passes, planned.slots, e.message)}`);
  if (perr) throw dawnError(perr);
  const { slots, passes } = planned;
  const U = GPUBufferUsage;
  const bufs = new Map();
  for (const [name, slot] of slots) {
    const s = slotBytes(twin, entry, caseName, fixture, params, name, slot);
    // Every buffer may be bound as storage or uniform (a twin's `uniforms` decides).
    s.buffer = upload(device, s.bytes, U.STORAGE | U.UNIFORM | U.COPY_SRC | U.COPY_DST);
    bufs.set(name, s);
  }
  // The passes alone in one submit; the read-backs in another. Timed by the GPU's timestamps
  // around the compute pass where the device has timestamp-query, else from submit to done.
  device.pushErrorScope('validation');
  bindGroups(device, passes, (name) => ({ buffer: bufs.get(name).buffer }));
  const enc = device.createCommandEncoder();
  const stamps = device.features.has('timestamp-query') ? timestamps(device) : null;
  const pass = enc.beginComputePass(stamps ? { timestampWrites: stamps.writes } : {});
  dispatch(pass, passes);
  pass.end();
  if (stamps) stamps.resolve(enc);
  const start = performance.now();
  device.queue.submit([enc.finish()]);
  await device.queue.onSubmittedWorkDone();
  const ms = stamps ? await stamps.ms() : performance.now() - start;
  // Read back every tensor the twin bound (not scalars, structs or scratch).
  const copy = device.createCommandEncoder();
  const reads = [...bufs.values()].filter((s) => !s.scalar && !s.scratch).map((s) => {
    const staging = device.createBuffer({ size: s.buffer.size, usage: U.MAP_READ | U.COPY_DST });
    copy.copyBufferToBuffer(s.buffer, 0, staging, 0, s.buffer.size);
    return { s, staging };
  });
  device.queue.submit([copy.finish()]);
  const err = await device.popErrorScope();
  if (err) throw dawnError(err);
  const tensors = {};
  for (const { s, staging } of reads) {
    await staging.mapAsync(GPUMapMode.READ);
    const bytes = new Uint8Array(staging.getMappedRange()).slice(0, s.like.data.byteLength);
    staging.unmap();
    staging.destroy();
    tensors[s.outName] = { dtype: s.like.dtype, shape: s.like.shape, data: typedArrayFor(s.like.dtype, bytes.buffer) };
  }
  for (const s of bufs.values()) s.buffer.destroy();
  return { tensors, ms };
}

// The first tensor element whose bits differ between two runs of a case, or null.
function firstChange(a, b) {
  for (const [name, t] of Object.entries(a)) {
    const x = new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    const y = new Uint8Array(b[name].data.buffer, b[name].data.byteOffset, b[name].data.byteLength);
    const i = x.findIndex((v, k) => v !== y[k]);
    if (i >= 0) return `${name} element ${Math.floor(i / t.data.BYTES_PER_ELEMENT)}`;
  }
  return null;
}

// One case run `repeat` times: {tensors, ms (the median), changed (null, or the first element
// whose bits changed between runs: a nondeterministic kernel)}.
export async function runRepeated(device, twin, entry, caseName, fixture, repeat = 1) {
  const first = await runCase(device, twin, entry, caseName, fixture);
  const times = [first.ms];
  let changed = null;
  for (let k = 1; k < repeat; k++) {
    const again = await runCase(device, twin, entry, caseName, fixture);
    times.push(again.ms);
    const c = firstChange(first.tensors, again.tensors);
    if (c && !changed) changed = `run ${k + 1} changed ${c}`;
  }
  times.sort((x, y) => x - y);
  return { tensors: first.tensors, ms: times[Math.floor(times.length / 2)], changed };
}

// The cases of a fixture that `cases` selects: names, or `kernel:case` for one kernel's case
// (null: every case).
export function selectedCases(entry, cases) {
  const all = Object.keys(entry.cases);
  if (!cases) return all;
  return all.filter((c) => cases.includes(c) || cases.includes(`${entry.name}:${c}`));
}

// Every selected case of a fixture, judged: {result (the tensors to write: the twin's, plus the
// inputs it does not bind as storage written back as given, so that the file has the fixture's
// names), rows: [{kernel, case, verdict ('ok' | 'FAIL' | 'not run'), why, nmse, ms, tensors}]}.
export async function runFixture(device, twin, entry, fixture, { cases = null, repeat = 1 } = {}) {
  const outputs = new Set(entry.bindings.filter((b) => b.role === 'out' || b.role === 'inout').map((b) => b.name));
  const result = {}, rows = [];
  for (const caseName of selectedCases(entry, cases)) {
    const row = { kernel: entry.name, case: caseName };
    rows.push(row);
    const no = declines(twin, entry.cases[caseName].params);
    if (no) { Object.assign(row, { verdict: 'not run', why: `the registry declines it: ${no}` }); continue; }
    const r = await runRepeated(device, twin, entry, caseName, fixture, repeat);
    const j = judgeCase(entry, caseName, fixture, r.tensors);
    const bad = j.rows.find((t) => !t.pass);
    Object.assign(row, { verdict: j.pass && !r.changed ? 'ok' : 'FAIL', nmse: j.nmse, ms: r.ms, tensors: j.rows,
                         why: r.changed ? `nondeterministic: ${r.changed}` : bad ? `${bad.name} past tolerance (nmse ${bad.nmse.toExponential(2)}, ${(100 * bad.used).toFixed(0)}% of it used, worst element ${bad.worst})` : '' });
    Object.assign(result, r.tensors);
    for (const [name, t] of Object.entries(fixture.tensors)) {
      const [c, binding] = [name.slice(0, name.indexOf('.')), name.slice(name.indexOf('.') + 1)];
      if (c === caseName && !outputs.has(binding) && !(name in result)) result[name] = t;
    }
  }
  return { result, rows };
}
