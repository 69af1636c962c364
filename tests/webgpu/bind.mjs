// How a registry entry (a twin, registry.mjs) is bound and dispatched: the one implementation the
// fixture runner (runner.mjs) and the training replay (replay/engine.mjs) share, so that a
// registry that passes kernels.mjs drives replay.mjs the same way. The two differ only in where
// a binding's buffer comes from (a fixture's tensor, or a view of the replay's mega-buffers).
//
// A twin's fields, all optional but one of `entry`/`passes`:
//   bindings  names in binding order (default: the kernel's bindings in order, without scratch
//             ones and those the caller does not bind, such as the AdamW step number t)
//   uniforms  input tensors bound as uniform buffers rather than read-only storage (scalars
//             are always uniforms)
//   passes    [{entry, bindings, dispatch, reads}] run in order on buffers shared by name
//   scratch   {name: params -> f32 count}: buffers of the twin's own that no caller holds,
//             zeroed before the twin runs; bound read-only in the passes whose `reads` name them
// A kernel is a kernel-table entry {name, bindings: [{name, role, dtype}]} (kernels.json, or a
// fixture's manifest entry, which has the same fields).
import { twinSource } from './source.mjs';

// The names bound by default, in the kernel's order: no scratch ones, none that `bound` refuses.
export function defaultNames(kernel, bound = () => true) {
  return kernel.bindings.filter((b) => b.role !== 'scratch' && bound(b)).map((b) => b.name);
}

// The twin's passes, each {entry, names, dispatch, reads}: `passes` when it has several, else its
// one entry point.
export function passesOf(twin, defaults) {
  const passes = twin.passes ?? [{ entry: twin.entry, bindings: twin.bindings, dispatch: twin.dispatch }];
  return passes.map((p) => ({ entry: p.entry, names: p.bindings ?? defaults, dispatch: p.dispatch, reads: p.reads ?? [] }));
}

// What each name the passes bind stands for: {name: {binding} | {scratch: f32 count}}. A scratch
// name that is also one of the kernel's bindings means the kernel's tensor.
export function slotsOf(twin, kernel, passes, params) {
  const byName = Object.fromEntries(kernel.bindings.map((b) => [b.name, b]));
  const slots = new Map();
  for (const name of passes.flatMap((p) => p.names)) {
    if (slots.has(name)) continue;
    const scratch = (twin.scratch ?? {})[name];
    if (byName[name]) slots.set(name, { binding: byName[name] });
    else if (scratch) slots.set(name, { scratch: scratch(params) });
    else throw new Error(`${kernel.name}: twin binds '${name}', which the kernel does not list`);
  }
  return slots;
}

// The buffer binding type of a slot in a pass: 'uniform', 'read-only-storage' or 'storage'.
export function kindOf(twin, name, slot, pass) {
  if (slot.scratch !== undefined) return pass.reads.includes(name) ? 'read-only-storage' : 'storage';
  const role = slot.binding.role;
  if (role === 'scalar') return 'uniform';
  if (role === 'in') return (twin.uniforms ?? []).includes(name) ? 'uniform' : 'read-only-storage';
  return 'storage';
}

// The workgroup counts of a pass, always three.
export function groupsOf(pass, params) {
  const [x, y = 1, z = 1] = pass.dispatch(params);
  return [x, y, z];
}

// Shader modules and pipelines, per device: one module per source text, one pipeline per
// (source, entry point, binding types). The layout is explicit (from the binding types), so a
// shader that declares a binding other than the registry says fails here, not silently.
const caches = new WeakMap();

export function moduleFor(device, twin) {
  if (!caches.has(device)) caches.set(device, { modules: new Map(), pipelines: new Map() });
  const { modules } = caches.get(device);
  const code = twinSource(twin);
  if (!modules.has(code)) modules.set(code, device.createShaderModule({ code }));
  return { code, module: modules.get(code) };
}

export function pipelineFor(device, twin, entryPoint, kinds) {
  const { code, module } = moduleFor(device, twin);
  const { pipelines } = caches.get(device);
  const key = `${entryPoint}\n${kinds.join(',')}\n${code}`;
  if (!pipelines.has(key)) {
    const layout = device.createBindGroupLayout({
      entries: kinds.map((type, binding) => ({ binding, visibility: GPUShaderStage.COMPUTE, buffer: { type } })),
    });
    const pipeline = device.createComputePipeline({
      layout: device.createPipelineLayout({ bindGroupLayouts: [layout] }),
      compute: { module, entryPoint },
    });
    pipelines.set(key, { pipeline, layout });
  }
  return pipelines.get(key);
}

// The twin's plan for one call: {slots, passes: [{entry, names, kinds, groups, pipeline,
// layout}]}. `resource(name, slot, kind)` -> a GPUBufferBinding resource, called once per name
// and binding type; the caller makes the bind groups' buffers (see bindGroups).
export function plan(device, twin, kernel, defaults, params) {
  const passes = passesOf(twin, defaults);
  const slots = slotsOf(twin, kernel, passes, params);
  for (const p of passes) {
    p.kinds = p.names.map((n) => kindOf(twin, n, slots.get(n), p));
    p.groups = groupsOf(p, params);
    Object.assign(p, pipelineFor(device, twin, p.entry, p.kinds));
  }
  return { slots, passes };
}

// One bind group per pass, binding i the pass's i-th name.
export function bindGroups(device, passes, resource) {
  for (const p of passes) {
    p.group = device.createBindGroup({
      layout: p.layout,
      entries: p.names.map((n, binding) => ({ binding, resource: resource(n, p.kinds[binding]) })),
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
