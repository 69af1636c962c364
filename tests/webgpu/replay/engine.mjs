// The replay's dispatch recorder: persistent buffers, views of them (a byte range, bound as a
// sub-range), uniforms, and a list of operations (kernel dispatches, buffer clears, copies to
// host) built once and encoded again every step. Kernels are the fixture twins of registry.mjs
// plus the replay's own (replay.wgsl), each bound in its fixture's binding order.
import { readFileSync } from 'node:fs';
import { twinSource } from '../runner.mjs';

const U = () => GPUBufferUsage;

export const view = (buffer, offset = 0, size = buffer.size) => ({ buffer, offset, size });

export class Engine {
  // `align`: bind sub-ranges only at multiples of this many bytes (default: the device's
  // minStorageBufferOffsetAlignment; a larger one exercises the staged copies).
  constructor(device, registry, align = 0) {
    this.device = device;
    this.registry = registry;
    this.align = Math.max(align, device.limits.minStorageBufferOffsetAlignment);
    this.modules = new Map();
    this.pipelines = new Map();
    this.uniforms = new Map();
    this.zeros = new Map();
    this.staged = [];  // misaligned views: [scratch, source view, writable]
  }

  // A storage buffer of `bytes` bytes (zeroed), or holding `data` (a typed array).
  storage(bytes, data = null) {
    const size = Math.max(16, Math.ceil((data ? data.byteLength : bytes) / 16) * 16);
    const buffer = this.device.createBuffer({
      size, usage: U().STORAGE | U().COPY_SRC | U().COPY_DST, mappedAtCreation: Boolean(data),
    });
    if (data) {
      new Uint8Array(buffer.getMappedRange()).set(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
      buffer.unmap();
    }
    return buffer;
  }

  // A uniform holding one scalar (cached by value) or a vec4<f32> the host rewrites per step.
  scalar(type, value) {
    const key = `${type}:${value}`;
    if (!this.uniforms.has(key)) {
      const b = this.device.createBuffer({ size: 16, usage: U().UNIFORM | U().COPY_DST });
      this.device.queue.writeBuffer(b, 0, type === 'f32' ? new Float32Array([value]) : new Uint32Array([value]));
      this.uniforms.set(key, { ...view(b, 0, 4), uniform: true });
    }
    return this.uniforms.get(key);
  }

  vec4() {
    return { ...view(this.device.createBuffer({ size: 16, usage: U().UNIFORM | U().COPY_DST }), 0, 16), uniform: true };
  }

  // A read-only view of `bytes` zero bytes (the bias of a bias-free matmul), shared.
  zeroView(bytes) {
    if (!this.zeros.has(bytes)) this.zeros.set(bytes, { ...view(this.storage(bytes), 0, bytes), scratch: true });
    return this.zeros.get(bytes);
  }

  pipeline(twin) {
    const key = twin;  // one pipeline per registry entry
    if (!this.pipelines.has(key)) {
      const code = twin.source ?? twinSource(twin);
      if (!this.modules.has(code)) this.modules.set(code, this.device.createShaderModule({ code }));
      const module = this.modules.get(code);
      this.pipelines.set(key, this.device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: twin.entry } }));
    }
    return this.pipelines.get(key);
  }

  // A binding where the view lies when its offset is aligned; otherwise a scratch copy that the
  // step copies in before and back after the dispatch (the device's offset alignment may be 256).
  resource(v, writable) {
    if (v.offset % this.align === 0) return { buffer: v.buffer, offset: v.offset, size: v.size };
    const scratch = this.storage(v.size);
    this.staged.push([scratch, v, writable]);
    return { buffer: scratch, offset: 0, size: v.size, stage: [scratch, v, writable] };
  }

  // One dispatch of fixture kernel `name`: views and uniforms in the fixture's binding order,
  // `params` the sizes its registry entry's dispatch reads. `tag` names the call.
  kernel(name, bindings, params, tag = name) {
    const twin = this.registry[name];
    if (!twin) throw new Error(`replay: no kernel ${name}`);
    const pipeline = this.pipeline(twin);
    const entries = bindings.map((v, binding) => ({ binding, resource: this.resource(v, true) }));
    const stages = entries.map((e) => e.resource.stage).filter(Boolean);
    for (const e of entries) delete e.resource.stage;
    const group = this.device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries });
    return { op: 'dispatch', name, tag, bindings, pipeline, group, groups: twin.dispatch(params), stages };
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
        if (o.stages.length) endPass();
        for (const [s, v] of o.stages) enc.copyBufferToBuffer(v.buffer, v.offset, s, 0, v.size);
        pass ??= enc.beginComputePass();
        pass.setPipeline(o.pipeline);
        pass.setBindGroup(0, o.group);
        const [x, y = 1, z = 1] = o.groups;
        pass.dispatchWorkgroups(x, y, z);
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

export const replayWgsl = new URL('../kernels/replay.wgsl', import.meta.url).pathname;
export const replaySource = () => readFileSync(replayWgsl, 'utf8');
