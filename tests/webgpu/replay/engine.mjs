// The replay's dispatch recorder: persistent buffers, views of them (a byte range, bound as a
// sub-range), uniforms, and a list of operations (kernel dispatches, buffer clears, copies to
// host) built once and encoded again every step. Kernels are registry entries (registry.mjs's
// twins plus the replay's own, replay.wgsl), bound and dispatched by bind.mjs exactly as the
// fixture runner binds them: a call gives its views in the kernel table's order (kernels.json),
// and the registry entry's `bindings`, `uniforms`, `passes` and `scratch` decide the rest.
import { bindGroups, declines, defaultNames, dispatch, plan } from '../bind.mjs';
import { kernelEntry } from '../kernel_table.mjs';

const U = () => GPUBufferUsage;
// Every buffer may be bound as storage or as a uniform (a registry's `uniforms` may ask for
// either), and copied from and to (staged bindings, read-backs).
const ANY = () => U().STORAGE | U().UNIFORM | U().COPY_SRC | U().COPY_DST;

export const view = (buffer, offset = 0, size = buffer.size) => ({ buffer, offset, size });

export class Engine {
  // `align`: bind sub-ranges only at multiples of this many bytes (default: the device's
  // minStorageBufferOffsetAlignment; a larger one exercises the staged copies).
  // `fallback`: the registry whose entry runs a call that `registry`'s declines (its `when`);
  // every such call is listed in `fallbacks`.
  constructor(device, registry, align = 0, fallback = null) {
    this.device = device;
    this.registry = registry;
    this.fallback = fallback;
    this.fallbacks = [];
    this.align = Math.max(align, device.limits.minStorageBufferOffsetAlignment);
    this.uniformAlign = Math.max(align, device.limits.minUniformBufferOffsetAlignment);
    this.uniforms = new Map();
    this.zeros = new Map();
    this.scratch = new Map();
    this.fills = new Map();
    this.dims = {};
  }

  // A storage buffer of `bytes` bytes (zeroed), or holding `data` (a typed array).
  storage(bytes, data = null) {
    const size = Math.max(16, Math.ceil((data ? data.byteLength : bytes) / 16) * 16);
    const buffer = this.device.createBuffer({ size, usage: ANY(), mappedAtCreation: Boolean(data) });
    if (data) {
      new Uint8Array(buffer.getMappedRange()).set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
      buffer.unmap();
    }
    return buffer;
  }

  // A uniform holding one scalar (cached by value; `value` is what a registry's dispatch and
  // scratch sizes read) or a vec4<f32> the host rewrites per step.
  scalar(type, value) {
    const key = `${type}:${value}`;
    if (!this.uniforms.has(key)) {
      const b = this.device.createBuffer({ size: 16, usage: ANY() });
      this.device.queue.writeBuffer(b, 0, type === 'f32' ? new Float32Array([value]) : new Uint32Array([value]));
      this.uniforms.set(key, { ...view(b, 0, 4), uniform: true, value });
    }
    return this.uniforms.get(key);
  }

  vec4() {
    return { ...view(this.device.createBuffer({ size: 16, usage: ANY() }), 0, 16), uniform: true };
  }

  // A read-only view of `bytes` zero bytes (the bias of a bias-free matmul), shared.
  zeroView(bytes) {
    if (!this.zeros.has(bytes)) this.zeros.set(bytes, { ...view(this.storage(bytes), 0, bytes), scratch: true });
    return this.zeros.get(bytes);
  }

  // A registry entry's scratch buffer, shared by every call with that name and size (calls run
  // one after another) and set before each call that binds it: cleared, or copied from a buffer
  // holding its fill (made once per content).
  scratchView(name, floats) {
    const key = `${name}:${floats}`;
    if (!this.scratch.has(key)) this.scratch.set(key, { ...view(this.storage(floats * 4), 0, floats * 4), scratch: true });
    return this.scratch.get(key);
  }

  fillBuffer(bytes) {
    const key = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('base64');
    if (!this.fills.has(key)) this.fills.set(key, this.storage(bytes.byteLength, bytes));
    return this.fills.get(key);
  }

  // A registry's uniform struct, packed from the call's params (bind.mjs), cached by content.
  structView(bytes) {
    const key = `struct:${Buffer.from(bytes).toString('base64')}`;
    if (!this.uniforms.has(key)) this.uniforms.set(key, { ...view(this.storage(bytes.byteLength, bytes), 0, bytes.byteLength), uniform: true });
    return this.uniforms.get(key);
  }

  // A binding where the view lies when its offset suits the binding type; otherwise a scratch
  // copy that the step copies in before and (when the kernel may write it) back after the call
  // (the device's offset alignment may be 256).
  resource(v, kind, stages) {
    if (v.offset % (kind === 'uniform' ? this.uniformAlign : this.align) === 0) return { buffer: v.buffer, offset: v.offset, size: v.size };
    const scratch = this.storage(v.size);
    stages.push([scratch, v, kind !== 'read-only-storage' && kind !== 'uniform']);  // 'auto': may be written
    return { buffer: scratch, offset: 0, size: v.size };
  }

  // One call of kernel `name`: `bindings` the views and uniforms in the kernel table's order
  // (kernels.json, without scratch bindings; null where the replay binds nothing: the AdamW step
  // number t), `params` sizes beyond the call's scalars. A registry's dispatch, scratch sizes
  // and structs see the run's dimensions (`dims`: B, T, C, NH, hs, V, Vp, maxT, F, eps), the
  // call's scalars and `params`, so every parameter a fixture case of the kernel has. The
  // registry entry binds them by name. `tag` names the call.
  kernel(name, bindings, params = {}, tag = name) {
    let twin = this.registry[name];
    if (!twin) throw new Error(`replay: no kernel ${name}`);
    const kernel = kernelEntry(name);
    const names = defaultNames(kernel);
    if (bindings.length !== names.length) throw new Error(`replay: ${tag} gives ${bindings.length} bindings, ${name} has ${names.length}: ${names}`);
    const views = Object.fromEntries(names.map((n, i) => [n, bindings[i]]));
    const scalars = Object.fromEntries(names.filter((n) => views[n]?.value !== undefined).map((n) => [n, views[n].value]));
    const all = { ...this.dims, ...scalars, ...params };
    const no = declines(twin, all);
    if (no) {
      if (!this.fallback?.[name] || declines(this.fallback[name], all)) throw new Error(`replay: ${tag}: the registry's ${name} cannot compute this call: ${no}`);
      this.fallbacks.push({ tag, name, why: no });
      twin = this.fallback[name];
    }
    const { slots, passes } = plan(this.device, twin, kernel, names.filter((n) => views[n]), all);
    const bound = {}, clears = [], fills = [];
    for (const [n, slot] of slots) {
      if ((twin.zero ?? []).includes(n) && views[n]) clears.push(views[n]);
      if (slot.struct) bound[n] = this.structView(slot.struct);
      else if (slot.scratch !== undefined && slot.fill) fills.push([this.fillBuffer(slot.fill), bound[n] = this.scratchView(n, slot.scratch)]);
      else if (slot.scratch !== undefined) clears.push(bound[n] = this.scratchView(n, slot.scratch));
      else if (views[n]) bound[n] = views[n];
      else throw new Error(`replay: ${tag}: the registry binds ${n}, which the replay does not bind`);
    }
    const stages = [], resources = new Map();
    bindGroups(this.device, passes, (n, kind) => {
      const key = `${n}:${kind}`;
      if (!resources.has(key)) resources.set(key, this.resource(bound[n], kind, stages));
      return resources.get(key);
    });
    return { op: 'dispatch', name, tag, views, passes, stages, clears, fills };
  }

  clear(v) {
    return { op: 'clear', v };
  }

  // Copies a view into a mappable buffer; `read()` after the submit resolves its bytes.
  readback(v) {
    const staging = this.device.createBuffer({ size: v.size, usage: U().MAP_READ | U().COPY_DST });
    return { op: 'read', v, staging };
  }

  // Encodes the operations in order: dispatches share compute passes, clears and copies break
  // them. Returns the command buffer.
  encode(ops) {
    const enc = this.device.createCommandEncoder();
    let pass = null;
    const endPass = () => { if (pass) pass.end(); pass = null; };
    for (const o of ops) {
      if (o.op === 'dispatch') {
        if (o.stages.length || o.clears.length || o.fills.length) endPass();
        for (const v of o.clears) enc.clearBuffer(v.buffer, v.offset, v.size);
        for (const [f, v] of o.fills) enc.copyBufferToBuffer(f, 0, v.buffer, v.offset, v.size);
        for (const [s, v] of o.stages) enc.copyBufferToBuffer(v.buffer, v.offset, s, 0, v.size);
        pass ??= enc.beginComputePass();
        dispatch(pass, o.passes);
        if (o.stages.length) endPass();
        for (const [s, v, w] of o.stages) if (w) enc.copyBufferToBuffer(s, 0, v.buffer, v.offset, v.size);
      } else if (o.op === 'clear') {
        endPass();
        enc.clearBuffer(o.v.buffer, o.v.offset, o.v.size);
      } else if (o.op === 'read') {
        endPass();
        enc.copyBufferToBuffer(o.v.buffer, o.v.offset, o.staging, 0, o.v.size);
      }
    }
    endPass();
    return enc.finish();
  }

  async read(o) {
    await o.staging.mapAsync(GPUMapMode.READ);
    const bytes = new Uint8Array(o.staging.getMappedRange()).slice();
    o.staging.unmap();
    return bytes.buffer;
  }
}
