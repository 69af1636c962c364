// How a registry entry (a twin, registry.mjs, or an outside backend's kernel) is bound and
// dispatched: the one implementation the fixture runner (runner.mjs) and the training replay
// (replay/engine.mjs) share, so that a registry that passes the fixtures drives the replay the
// same way. The two differ only in where a binding's buffer comes from (a fixture's tensor, or a
// view of the replay's mega-buffers). docs/webgpu.md "Registering your kernels" is the guide.
//
// A twin's fields (`entry` or `passes` is required, and `dispatch` with `entry`):
//   source | file [dir, prelude, template]   the WGSL (source.mjs)
//   entry, dispatch(params) -> [x, y, z]      one pass: its entry point and workgroup counts;
//             `params` holds every parameter of the fixture's case (manifest `params`)
//   bindings  names in @binding order: the kernel's bindings (manifest), scratch names, struct
//             names (default: the kernel's bindings in order, without scratch ones and those the
//             caller does not bind, such as the AdamW step number t)
//   access    'read_write' (every storage binding read_write), or {name: 'read'|'read_write'}:
//             how the WGSL declares a storage binding (default: role `in` read, others read_write)
//   layout    'auto': bind with the layout Dawn derives from the WGSL instead of one built from
//             roles and `access` (every name bound must then be used by the entry point)
//   uniforms  input tensors bound as uniform buffers rather than storage
//   structs   {name: [[field, type, value?], ...]}: a uniform struct packed from the case's
//             params, fields in order, each u32, i32 or f32 (4 bytes); `value` is a param name
//             (default: the field's name) or a function of the params (B·T for N, say)
//   passes    [{entry, bindings, dispatch, reads, access, source|file|prelude|template}] run in
//             order on buffers shared by name; a pass's source fields replace the twin's
//   scratch   {name: floats(params) | {floats, fill}}: buffers of the twin's own that no caller
//             holds, 4-byte words, set before every call: zero, or `fill` (a number, or a
//             function of the params returning a number or a typed array); read-only in the
//             passes whose `reads` name them
//   zero      outputs (role out) the kernel accumulates into, so needs zeroed before it runs; any
//             other output starts as NaN bytes (0xff) in the fixtures, so that a kernel that reads
//             an output it was meant only to write fails there rather than in a replay
//   when(params) -> true | false | reason: whether the twin computes the kernel for these params
//             (default: always); a fixture case it declines is reported not run, with the
//             reason, and a replay call it declines stops the replay (e.g. a loss without z-loss
//             declines z ≠ 0); the replay runs reftrain's twin for such a call and says so
// A field not listed here is refused, naming the kernel and the field. A kernel is a
// kernel-table entry {name, bindings: [{name, role, dtype}]} (kernels.json, or a fixture's
// manifest entry, which has the same fields).
import { twinSource } from './source.mjs';

const twinFields = ['source', 'file', 'dir', 'prelude', 'template', 'entry', 'dispatch', 'bindings', 'access',
                    'layout', 'uniforms', 'structs', 'passes', 'scratch', 'zero', 'when'];
const passFields = ['source', 'file', 'dir', 'prelude', 'template', 'entry', 'dispatch', 'bindings', 'reads', 'access'];
const sourceFields = ['source', 'file', 'dir', 'prelude', 'template'];

// The names bound by default, in the kernel's order: no scratch ones, none that `bound` refuses.
export function defaultNames(kernel, bound = () => true) {
  return kernel.bindings.filter((b) => b.role !== 'scratch' && bound(b)).map((b) => b.name);
}

const fail = (kernel, what) => { throw new Error(`registry entry ${kernel}: ${what}`); };

function checkFields(kernel, obj, known, where) {
  for (const k of Object.keys(obj)) {
    if (obj[k] !== undefined && !known.includes(k)) fail(kernel, `unknown field '${k}'${where} (known: ${known.join(', ')})`);
  }
}

function checkAccess(kernel, access, where) {
  if (access === undefined || access === 'read_write') return;
  if (typeof access !== 'object') fail(kernel, `${where}access must be 'read_write' or {binding: 'read'|'read_write'}`);
  for (const [n, a] of Object.entries(access)) {
    if (a !== 'read' && a !== 'read_write') fail(kernel, `${where}access of '${n}' is '${a}', not 'read' or 'read_write'`);
  }
}

// The fields of a twin and of its passes, checked once per twin object.
const checked = new WeakSet();
export function checkTwin(kernel, twin) {
  if (checked.has(twin)) return;
  if (!twin || typeof twin !== 'object') fail(kernel, 'is not an object');
  checkFields(kernel, twin, twinFields, '');
  if (!twin.passes && !twin.entry) fail(kernel, "needs 'entry' (and 'dispatch') or 'passes'");
  for (const [i, p] of (twin.passes ?? [twin]).entries()) {
    const where = twin.passes ? ` in passes[${i}]` : '';
    if (twin.passes) checkFields(kernel, p, passFields, where);
    if (typeof p.entry !== 'string') fail(kernel, `'entry'${where} must be a string`);
    if (typeof p.dispatch !== 'function') fail(kernel, `'dispatch'${where} must be a function of the params`);
    checkAccess(kernel, p.access, twin.passes ? `passes[${i}].` : '');
  }
  checkAccess(kernel, twin.access, '');
  if (twin.layout !== undefined && twin.layout !== 'auto') fail(kernel, `layout is '${twin.layout}'; the only value is 'auto'`);
  if (twin.when !== undefined && typeof twin.when !== 'function') fail(kernel, "'when' must be a function of the params");
  if (twin.zero !== undefined && !Array.isArray(twin.zero)) fail(kernel, "'zero' must be a list of output names");
  for (const [name, fields] of Object.entries(twin.structs ?? {})) {
    if (!Array.isArray(fields)) fail(kernel, `structs.${name} must be a list of [field, type, value?]`);
    for (const [f, type] of fields) {
      if (!['u32', 'i32', 'f32'].includes(type)) fail(kernel, `structs.${name}.${f} has type '${type}', not u32, i32 or f32`);
    }
  }
  checked.add(twin);
}

// The twin's passes, each {entry, names, dispatch, reads, access, src}: `passes` when it has
// several, else its one entry point. `src` holds the pass's source fields: the twin's, or the
// pass's own when it names a `file` or `source` (with the twin's `dir` unless it has its own).
export function passesOf(twin, defaults) {
  const passes = twin.passes ?? [{ entry: twin.entry, bindings: twin.bindings, dispatch: twin.dispatch }];
  const base = Object.fromEntries(sourceFields.map((f) => [f, twin[f]]));
  return passes.map((p) => {
    const own = p.file !== undefined || p.source !== undefined;
    const src = own ? { ...Object.fromEntries(sourceFields.map((f) => [f, p[f]])), dir: p.dir ?? twin.dir } : base;
    return { entry: p.entry, names: p.bindings ?? twin.bindings ?? defaults, dispatch: p.dispatch, reads: p.reads ?? [],
             access: p.access ?? twin.access, src };
  });
}

// A scratch entry as {floats, fill}: fill null means zero.
function scratchOf(kernel, name, spec, params) {
  const s = typeof spec === 'function' ? { floats: spec } : spec;
  const floats = typeof s.floats === 'function' ? s.floats(params) : s.floats;
  if (!(floats > 0)) fail(kernel, `scratch '${name}' has ${floats} words for these params`);
  if (s.fill === undefined || s.fill === 0) return { scratch: floats, fill: null };
  const v = typeof s.fill === 'function' ? s.fill(params) : s.fill;
  const fill = ArrayBuffer.isView(v) ? v : new Float32Array(floats).fill(v);
  if (fill.byteLength !== floats * 4) fail(kernel, `scratch '${name}' fill has ${fill.byteLength} bytes, not ${floats * 4}`);
  return { scratch: floats, fill };
}

// A uniform struct's bytes from the params: one 4-byte word per field, padded to 16 bytes.
export function structBytes(kernel, name, fields, params) {
  const words = new ArrayBuffer(Math.max(16, Math.ceil((fields.length * 4) / 16) * 16));
  const view = new DataView(words);
  fields.forEach(([field, type, value = field], i) => {
    const v = typeof value === 'function' ? value(params) : params[value];
    if (typeof v !== 'number' || Number.isNaN(v)) fail(kernel, `structs.${name}.${field}: no value (param '${typeof value === 'function' ? 'function' : value}' of ${Object.keys(params).join(', ')})`);
    if (type === 'f32') view.setFloat32(i * 4, v, true);
    else if (type === 'i32') view.setInt32(i * 4, v, true);
    else view.setUint32(i * 4, v, true);
  });
  return new Uint8Array(words);
}

// What each name the passes bind stands for: {binding} (the kernel's tensor or scalar),
// {scratch: words, fill} or {struct: bytes}. A scratch name that is also one of the kernel's
// bindings means the kernel's tensor.
export function slotsOf(twin, kernel, passes, params) {
  const byName = Object.fromEntries(kernel.bindings.map((b) => [b.name, b]));
  const slots = new Map();
  for (const name of passes.flatMap((p) => p.names)) {
    if (slots.has(name)) continue;
    const scratch = (twin.scratch ?? {})[name];
    const struct = (twin.structs ?? {})[name];
    if (byName[name]) slots.set(name, { binding: byName[name] });
    else if (struct) slots.set(name, { struct: structBytes(kernel.name, name, struct, params) });
    else if (scratch) slots.set(name, scratchOf(kernel.name, name, scratch, params));
    else {
      fail(kernel.name, `binds '${name}', which is neither a binding of the kernel (${kernel.bindings.map((b) => b.name).join(', ')}) ` +
                        'nor one of its scratch or structs');
    }
  }
  return slots;
}

// The access a pass declares for a storage name: its own, the twin's, or the default.
function accessOf(pass, name, fallback) {
  const a = pass.access;
  if (a === 'read_write') return 'read_write';
  return a?.[name] ?? fallback;
}

// The buffer binding type of a slot in a pass: 'uniform', 'read-only-storage' or 'storage'.
export function kindOf(twin, name, slot, pass, kernel) {
  if (slot.struct) return 'uniform';
  if (slot.scratch !== undefined) return accessOf(pass, name, pass.reads.includes(name) ? 'read' : 'read_write') === 'read' ? 'read-only-storage' : 'storage';
  const role = slot.binding.role;
  if (role === 'scalar') return 'uniform';
  if (role === 'in' && (twin.uniforms ?? []).includes(name)) return 'uniform';
  const access = accessOf(pass, name, role === 'in' ? 'read' : 'read_write');
  if (access === 'read' && role !== 'in') fail(kernel, `access of '${name}' is 'read', but the kernel writes it (role ${role})`);
  return access === 'read' ? 'read-only-storage' : 'storage';
}

// Why the twin declines these params (its `when`), or null when it computes them.
export function declines(twin, params) {
  if (!twin.when) return null;
  const r = twin.when(params);
  if (r === true) return null;
  return typeof r === 'string' ? r : `its when() declines ${JSON.stringify(params)}`;
}

// The workgroup counts of a pass, always three.
export function groupsOf(pass, params) {
  const [x, y = 1, z = 1] = pass.dispatch(params);
  return [x, y, z];
}

// Whether a pass's WGSL enables f16 (and so needs the shader-f16 feature).
export const needsF16 = (twin) => passesOf(twin, []).some((p) => /^\s*enable\s[^;]*\bf16\b/m.test(twinSource(p.src)));

// Shader modules and pipelines, per device: one module per source text, one pipeline per
// (source, entry point, binding types). With the default (explicit) layout a shader that
// declares a binding other than the registry says fails here, not silently.
const caches = new WeakMap();

export function moduleFor(device, src) {
  if (!caches.has(device)) caches.set(device, { modules: new Map(), pipelines: new Map() });
  const { modules } = caches.get(device);
  const code = twinSource(src);
  if (!modules.has(code)) modules.set(code, device.createShaderModule({ code }));
  return { code, module: modules.get(code) };
}

export function pipelineFor(device, src, entryPoint, kinds) {
  const { code, module } = moduleFor(device, src);
  const { pipelines } = caches.get(device);
  const key = `${entryPoint}\n${kinds?.join(',') ?? 'auto'}\n${code}`;
  if (!pipelines.has(key)) {
    if (!kinds) {
      const pipeline = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint } });
      pipelines.set(key, { pipeline, layout: pipeline.getBindGroupLayout(0) });
    } else {
      const layout = device.createBindGroupLayout({
        entries: kinds.map((type, binding) => ({ binding, visibility: GPUShaderStage.COMPUTE, buffer: { type } })),
      });
      const pipeline = device.createComputePipeline({
        layout: device.createPipelineLayout({ bindGroupLayouts: [layout] }),
        compute: { module, entryPoint },
      });
      pipelines.set(key, { pipeline, layout });
    }
  }
  return pipelines.get(key);
}

// A WebGPU error in one line, with the registry name and kernel binding behind each @binding it
// mentions (Dawn names bindings only by number; every binding of every pass when it mentions
// none).
export function explainError(passes, slots, message) {
  const what = (p, i) => {
    const n = p.names[i];
    const s = slots.get(n);
    const kind = s?.binding ? `the kernel's ${n} (${s.binding.role})` : s?.struct ? `struct ${n}` : `scratch ${n}`;
    return `${p.entry} @binding(${i}) is ${kind}${p.kinds ? `, bound as ${p.kinds[i]}` : ''}`;
  };
  const lines = message.trim().split('\n');
  const numbers = [...new Set([...message.matchAll(/@binding\((\d+)\)/g)].map((m) => Number(m[1])))];
  const entry = /entryPoint: "(\w+)"/.exec(message)?.[1];
  const involved = passes.filter((p) => !entry || p.entry === entry);
  const legend = involved.flatMap((p) => (numbers.length ? numbers.filter((i) => i < p.names.length) : p.names.map((_, i) => i))
    .map((i) => what(p, i)));
  const where = lines.find((l) => /@binding/.test(l))?.replace(/^\s*-\s*/, '');
  return `${lines[0]}${where ? ` (${where})` : ''} [${legend.join('; ')}]`;
}

// The twin's plan for one call: {slots, passes: [{entry, names, kinds, groups, pipeline,
// layout}]}. The caller makes the bind groups' buffers (see bindGroups).
export function plan(device, twin, kernel, defaults, params) {
  checkTwin(kernel.name, twin);
  const passes = passesOf(twin, defaults);
  const slots = slotsOf(twin, kernel, passes, params);
  for (const p of passes) {
    p.kinds = twin.layout === 'auto' ? null : p.names.map((n) => kindOf(twin, n, slots.get(n), p, kernel.name));
    p.groups = groupsOf(p, params);
    Object.assign(p, pipelineFor(device, p.src, p.entry, p.kinds));
  }
  return { slots, passes };
}

// One bind group per pass, binding i the pass's i-th name. `resource(name, kind)` -> a
// GPUBufferBinding resource (kind null under layout 'auto').
export function bindGroups(device, passes, resource) {
  for (const p of passes) {
    p.group = device.createBindGroup({
      layout: p.layout,
      entries: p.names.map((n, binding) => ({ binding, resource: resource(n, p.kinds?.[binding] ?? 'auto') })),
    });
  }
  return passes;
}

// Records the passes into an open compute pass encoder.
export function dispatch(computePass, passes) {
  for (const p of passes) {
    computePass.setPipeline(p.pipeline);
    computePass.setBindGroup(0, p.group);
    computePass.dispatchWorkgroups(...p.groups);
  }
}
