// reftrain-webgpu bench [SIZES...] (or node tests/webgpu/bench_linear.mjs SIZES...): times the
// three linear_forward forms (registry.mjs linearForms) at N = K = O = s on the WebGPU device,
// best of 5 dispatches after a warm-up, each measured from submit to onSubmittedWorkDone.
// Prints a markdown table. Every other kernel's time: `reftrain-webgpu kernels --repeat N` on
// the fixtures of `reftrain golden kernels --scale large`.
import { run } from './cli.mjs';
import { pathToFileURL } from 'node:url';
import { linearForms, linearTwin } from './registry.mjs';
import { twinSource } from './runner.mjs';

export const usage = 'usage: reftrain-webgpu bench [SIZES...] [--adapter NAME] [--driver lavapipe|system]';

let device;
let U;

function buffer(bytes, usage) {
  const b = device.createBuffer({ size: bytes.byteLength, usage, mappedAtCreation: true });
  new Uint8Array(b.getMappedRange()).set(new Uint8Array(bytes.buffer));
  b.unmap();
  return b;
}

async function time(form, s) {
  const twin = linearTwin(form, 'linear_forward');
  const module = device.createShaderModule({ code: twinSource(twin) });
  const pipeline = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: twin.entry } });
  const rnd = (n) => Float32Array.from({ length: n }, () => Math.random() - 0.5);
  const bufs = [buffer(new Float32Array(s * s), U.STORAGE), buffer(rnd(s * s), U.STORAGE), buffer(rnd(s * s), U.STORAGE),
                buffer(rnd(s), U.STORAGE), ...[s, s, s].map((v) => buffer(new Uint32Array([v, 0, 0, 0]), U.UNIFORM))];
  const group = device.createBindGroup({
    layout: pipeline.getBindGroupLayout(0), entries: bufs.map((buffer, binding) => ({ binding, resource: { buffer } })),
  });
  const [x, y] = twin.dispatch({ N: s, K: s, O: s });
  let best = Infinity;
  for (let rep = 0; rep < 6; rep++) {
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, group);
    pass.dispatchWorkgroups(x, y);
    pass.end();
    const t0 = performance.now();
    device.queue.submit([enc.finish()]);
    await device.queue.onSubmittedWorkDone();
    if (rep > 0) best = Math.min(best, performance.now() - t0);
  }
  bufs.forEach((b) => b.destroy());
  return best;
}

export async function main(argv, openDevice) {
  const i = argv.indexOf('--adapter');
  const adapter = i >= 0 ? argv[i + 1] : null;
  const rest = i >= 0 ? [...argv.slice(0, i), ...argv.slice(i + 2)] : argv;
  const sizes = rest.map(Number);
  if (sizes.some((x) => !(Number.isInteger(x) && x > 0))) throw Object.assign(new Error(usage), { usage: true });
  if (!sizes.length) sizes.push(256, 512, 1024);
  const opened = await openDevice({ adapter });
  device = opened.device;
  U = GPUBufferUsage;
  console.log(`device: ${opened.description}\n`);
  console.log(`| N = K = O | ${Object.keys(linearForms).map((f) => `${f} ms (GFLOP/s)`).join(' | ')} |`);
  console.log(`|---|${Object.keys(linearForms).map(() => '---').join('|')}|`);
  for (const s of sizes) {
    const cells = [];
    for (const form of Object.keys(linearForms)) {
      const ms = await time(form, s);
      cells.push(`${ms.toFixed(1)} (${(2 * s ** 3 / ms / 1e6).toFixed(1)})`);
    }
    console.log(`| ${s} | ${cells.join(' | ')} |`);
  }
  device.destroy();
  return 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await run('bench', process.argv.slice(2), main, usage);
}
