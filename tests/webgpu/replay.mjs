// reftrain-webgpu replay GOLDEN_DIR --out OUT_DIR [--steps N] [--dump-step K] [--align BYTES]
//                        [--registry FILE.mjs] [--require f16 | --without f16] [--adapter NAME]
// (or node tests/webgpu/replay.mjs with the same arguments)
//
// Replays a `reftrain golden run` directory from its files alone (config.json, init.safetensors,
// batches.safetensors) with the WGSL twins on WebGPU: every step's forward, loss, backward and
// optimizer as the golden run's pipeline lists them, over one weight mega-buffer (and its
// gradient, moments or 8-bit state, fp16 mirror) with every tensor bound where it lies. Writes
// OUT_DIR/trace.jsonl and OUT_DIR/debug_state.safetensors (step 1) in the golden format, so that
// `reftrain compare GOLDEN_DIR OUT_DIR` judges the replay. In mixed precision it also checks,
// after every step, that the mirror is exactly f16(clamp(w, ±65504)) of the new weights, and
// fails naming the first element that is not; in bf16 precision (every product a _bf16 kernel
// on operands cast to bf16, the weights from a bf16 mirror that adamw_update_bf16 writes, or
// after the 8-bit update a cast of the whole buffer) that the mirror is exactly bf16(w), which
// needs no shader-f16.
// A tensor whose offset the device cannot bind at (WebGPU's default alignment is 256 bytes;
// lavapipe's 16) is copied to scratch around its
// dispatch; --align 256 forces that path here. --registry FILE.mjs replaces kernels: its default
// export maps kernel names to twins as registry.mjs's do (docs/webgpu.md). --dump-step K writes
// OUT_DIR/step-K.safetensors, every kernel call of step K with its inputs and outputs
// (replay/dump.mjs): `reftrain compare` of two such dumps names the first call that diverged.
// A mixed-precision run on an adapter without shader-f16 (or --without f16) is reported not run
// (exit 0), unless --require f16. Exit: 0 replayed (or not run), 1 failed, 2 bad usage.
import { parseOptions, run } from './cli.mjs';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { makeRegistry } from './registry.mjs';
import { readSafetensors, writeSafetensors } from './safetensors.mjs';
import { Engine, view } from './replay/engine.mjs';
import { makeContext } from './replay/model.mjs';
import { buildGpt2 } from './replay/gpt2.mjs';
import { buildLlama } from './replay/llama.mjs';
import { buildOptimizer } from './replay/optimizer.mjs';
import { instrument } from './replay/dump.mjs';
import { checkTwin } from './bind.mjs';
import { kernelTable } from './kernel_table.mjs';
import { bf16Bits, f16Bits, shortest } from './replay/numbers.mjs';
import { bf16View } from './replay/model.mjs';

export const usage = 'usage: reftrain-webgpu replay GOLDEN_DIR --out OUT_DIR [--steps N] [--dump-step K] [--align BYTES] ' +
  '[--registry FILE.mjs] [--require f16 | --without f16] [--adapter NAME] [--driver lavapipe|system]';

function parseArgs(argv) {
  const a = parseOptions(argv, {
    usage, positional: 'golden',
    defaults: { out: null, steps: 0, align: 0, registry: null, dumpStep: 0, adapter: null },
    options: { '--out': ['out'], '--steps': ['steps', Number], '--align': ['align', Number], '--registry': ['registry'],
               '--dump-step': ['dumpStep', Number], '--adapter': ['adapter'] },
  });
  const bad = (what) => Object.assign(new Error(what), { usage: true });
  if (!a.out) throw bad(usage);
  if (!(Number.isInteger(a.steps) && a.steps >= 0)) throw bad(`--steps takes a whole number, not ${a.steps}`);
  return a;
}

// The replay's registry: the fixture twins plus the q/k/v packing of replay.wgsl.
function replayRegistry() {
  const r = makeRegistry();
  const each = (p) => [Math.ceil((p.N * p.C) / 256)];
  r.pack_qkv = { file: 'replay.wgsl', entry: 'pack_qkv', dispatch: each };
  r.unpack_qkv = { file: 'replay.wgsl', entry: 'unpack_qkv', dispatch: each };
  return r;
}

function loadGolden(dir) {
  let text;
  try {
    text = readFileSync(join(dir, 'config.json'), 'utf8');
  } catch {
    throw new Error(`${dir} has no config.json: not a \`reftrain golden run\` directory`);
  }
  const config = JSON.parse(text);
  if (config.format !== 'reftrain-golden-run') throw new Error(`${dir}/config.json is not a reftrain golden run`);
  const init = readSafetensors(join(dir, 'init.safetensors'));
  const layout = JSON.parse(init.metadata.layout);
  const mega = JSON.parse(init.metadata.mega_buffer);
  const w = new Float32Array(mega.floats);
  for (const t of layout) w.set(init.tensors[t.name].data, t.offset);
  // bf16-kahan: the compensation the weights start with (what rounding the drawn ones lost)
  let kahan = null;
  if (config.train.precision === 'bf16-kahan') {
    kahan = new Uint16Array(Math.ceil(mega.floats / 2) * 2);
    for (const t of layout) {
      const c = init.tensors[`optimizer.kahan.${t.name}`];
      if (!c) throw new Error(`${dir}/init.safetensors lacks optimizer.kahan.${t.name}, bf16-kahan's initial compensation`);
      kahan.set(c.data, t.offset);
    }
  }
  const batches = readSafetensors(join(dir, 'batches.safetensors')).tensors;
  return { config, layout, mega, w, kahan, inputs: batches.inputs, targets: batches.targets };
}

// Everything one step needs on the device, built once.
function buildReplay(E, g) {
  const total = g.mega.floats;
  const precision = g.config.train.precision;
  if (!['fp32', 'mixed', 'bf16', 'bf16-pure', 'bf16-kahan'].includes(precision)) throw new Error(`replay: precision ${precision} is not replayed`);
  // bf16-pure and bf16-kahan compute as bf16 does; only their updates differ (replay/optimizer.mjs)
  const mixed = precision === 'mixed', bf16 = precision.startsWith('bf16');
  const bufs = { w: E.storage(total * 4, g.w), g: E.storage(total * 4), w16: mixed ? E.storage(total * 2) : null,
                 wb: bf16 ? E.storage(Math.ceil(total / 2) * 4) : null };
  const R = makeContext(E, g.config, g.layout, bufs);
  const model = g.config.model.arch === 'llama' ? buildLlama(R) : buildGpt2(R);
  const opt = buildOptimizer(R, g.config, g.mega.wd_end, total, g.kahan);
  const cast = mixed ? [E.kernel('cast_f32_to_f16', [view(bufs.w, 0, total * 4), view(bufs.w16, 0, Math.ceil(total / 2) * 4),
                                                     R.u(total)], { n: total }, 'init.cast_f32_to_f16')]
    : bf16 ? [E.kernel('cast_f32_to_bf16', [bf16View(bufs.wb, 0, total), view(bufs.w, 0, total * 4), R.u(total)], { n: total },
                       'init.cast_f32_to_bf16')]
    : [];
  return { R, model, opt, bufs, total, mixed, bf16, cast };
}

const f32s = (bytes) => new Float32Array(bytes);

// z·mean(lse²) over the first V logits of each row, in double (the golden trace's z_loss).
function zPart(logits, R) {
  if (R.z === 0) return 0;
  let sum = 0;
  for (let i = 0; i < R.N; i++) {
    const x = logits.subarray(i * R.Vp, i * R.Vp + R.V);
    let m = x[0], s = 0;
    for (let j = 1; j < R.V; j++) m = Math.max(m, x[j]);
    for (let j = 0; j < R.V; j++) s += Math.exp(x[j] - m);
    const lse = m + Math.log(s);
    sum += lse * lse;
  }
  return (R.z * sum) / R.N;
}

// The mirror against the host's rounding of the new weights: f16(clamp(w)) or bf16(w).
function checkMirror(w, mirror, step, bf16) {
  const [round, what] = bf16 ? [bf16Bits, 'bf16(w)'] : [f16Bits, 'f16(clamp(w))'];
  for (let i = 0; i < w.length; i++) {
    if (mirror[i] !== round(w[i])) {
      throw new Error(`step ${step}: mirror element ${i} is ${bf16 ? 'bf16' : 'f16'} bits 0x${mirror[i].toString(16)}, ` +
                      `${what} of w = ${w[i]} is 0x${round(w[i]).toString(16)}`);
    }
  }
}

// One step: upload the batch, run forward → backward → optimizer, read back what the trace
// (and at step 1 the debug state, in mixed precision the mirror check) needs.
async function runStep(E, P, g, k, a) {
  const { R, model, opt, bufs, total } = P;
  const q = E.device.queue;
  q.writeBuffer(R.tokens.buffer, 0, g.inputs.data, k * R.N, R.N);
  q.writeBuffer(R.targets.buffer, 0, g.targets.data, k * R.N, R.N);
  const lr = Math.fround(g.config.schedule.lrs[k]);
  opt.setStep(k + 1, lr);
  const logits = E.readback(model.S.logits);
  const grads = k === 0 ? [E.readback(view(bufs.g, 0, total * 4))] : [];
  const losses = E.readback(model.S.losses), stats = E.readback(opt.stats);
  const m16 = P.mixed ? bufs.w16 : P.bf16 ? bufs.wb : null;
  const mirror = m16 ? [E.readback(view(bufs.w, 0, total * 4)), E.readback(view(m16, 0, Math.ceil(total / 2) * 4))] : [];
  const ops = [...model.forward, logits, ...model.backward, ...grads, ...opt.ops, losses, stats, ...mirror];
  const dump = k + 1 === a.dumpStep ? instrument(E, ops, k + 1) : null;
  E.device.queue.submit([E.encode(dump ? dump.ops : ops)]);
  if (dump) {
    const { tensors, metadata } = await dump.finish();
    writeSafetensors(join(a.out, `step-${k + 1}.safetensors`), tensors, metadata);
  }
  const lossRows = f32s(await E.read(losses));
  let sum = 0;
  for (let i = 0; i < R.N; i++) sum += lossRows[i];
  const [gradNorm, clip] = f32s(await E.read(stats));
  const out = { loss: Math.fround(sum / R.N), logits: f32s(await E.read(logits)), gradNorm, clip, lr };
  out.z = zPart(out.logits, R);
  if (k === 0) out.grads = f32s(await E.read(grads[0]));
  if (m16) checkMirror(f32s(await E.read(mirror[0])).subarray(0, total), new Uint16Array(await E.read(mirror[1])), k + 1, P.bf16);
  return out;
}

function debugState(g, R, r) {
  const bt = [R.B, R.T];
  const t = {
    inputs: { dtype: 'I32', shape: bt, data: g.inputs.data.slice(0, R.N) },
    targets: { dtype: 'I32', shape: bt, data: g.targets.data.slice(0, R.N) },
    logits: { dtype: 'F32', shape: [R.B, R.T, R.Vp], data: r.logits },
    loss: { dtype: 'F32', shape: [1], data: new Float32Array([r.loss]) },
  };
  for (const p of g.layout) t[`grad.${p.name}`] = { dtype: 'F32', shape: p.shape, data: r.grads.slice(p.offset, p.offset + p.numel) };
  return t;
}

// The replay's registry with a backend's entries in place of reftrain's twins: each checked
// (bind.mjs) and named after a kernel the replay knows, or refused naming the entry.
async function withOwn(path) {
  const base = replayRegistry();
  if (!path) return base;
  const own = (await import(pathToFileURL(resolve(path)).href)).default;
  if (!own || typeof own !== 'object') throw new Error(`${path}: its default export is not a registry object`);
  for (const [name, twin] of Object.entries(own)) {
    if (!kernelTable().has(name)) throw new Error(`registry entry ${name}: no such kernel (kernels.json lists ${[...kernelTable().keys()].join(', ')})`);
    checkTwin(name, twin);
  }
  return { ...base, ...own };
}

export async function main(argv, openDevice) {
  const a = parseArgs(argv);
  const g = loadGolden(a.golden);
  const registry = await withOwn(a.registry);
  const { device, description, f16 } = await openDevice({ f16: a.f16, adapter: a.adapter,
                                                          limits: ['minStorageBufferOffsetAlignment'] });
  if (g.config.train.precision === 'mixed' && !f16) {
    console.log(`not run: ${a.golden} is a mixed-precision run and the adapter (${description}) lacks shader-f16`);
    device.destroy();
    return 0;
  }
  const E = new Engine(device, registry, a.align, replayRegistry());
  device.pushErrorScope('validation');
  const P = buildReplay(E, g);
  if (P.cast.length) device.queue.submit([E.encode(P.cast)]);
  const err = await device.popErrorScope();
  if (err) throw new Error(`replay setup: ${err.message}`);
  const steps = Math.min(a.steps || g.config.schedule.lrs.length, g.config.schedule.lrs.length, g.inputs.shape[0]);
  mkdirSync(a.out, { recursive: true });
  const m = g.config.model, t = g.config.train;
  const lines = [JSON.stringify({ type: 'run', format: 'reftrain-golden-trace', producer: 'tests/webgpu/replay.mjs',
                                  preset: g.config.preset, arch: m.arch, precision: t.precision, optimizer: g.config.optimizer.name,
                                  steps, device: description })];
  const start = performance.now();
  for (let k = 0; k < steps; k++) {
    device.pushErrorScope('validation');
    const r = await runStep(E, P, g, k, a);
    const e = await device.popErrorScope();
    if (e) throw new Error(`step ${k + 1}: ${e.message}`);
    if (k === 0) writeSafetensors(join(a.out, 'debug_state.safetensors'), debugState(g, P.R, r),
                                  { format: 'reftrain-golden-debug-state', step: '1', producer: 'tests/webgpu/replay.mjs' });
    lines.push(`{"type":"step","step":${k + 1},"loss":${shortest(r.loss)},"z_loss":${shortest(r.z)},` +
               `"grad_norm":${shortest(r.gradNorm)},"clip":${shortest(r.clip)},"lr":${shortest(r.lr)}}`);
  }
  const ms = (performance.now() - start) / Math.max(1, steps);
  writeFileSync(join(a.out, 'trace.jsonl'), `${lines.join('\n')}\n`);
  const calls = [...P.model.forward, ...P.model.backward, ...P.opt.ops].filter((o) => o.op === 'dispatch')
    .reduce((n, o) => n + o.passes.length, 0);
  console.log(`replayed ${steps} steps of ${a.golden} (${m.arch}, ${t.precision}, ${g.config.optimizer.name}) on ${description}: ` +
              `${calls} dispatches, ${ms.toFixed(1)} ms/step -> ${a.out}`);
  // Calls the registry declined ran reftrain's twins: said, never silent.
  const declined = [...new Set(E.fallbacks.map((f) => `${f.name} (${f.why})`))];
  if (declined.length) console.log(`reftrain's twin ran the registry's declined calls (${E.fallbacks.length} a step): ${declined.join('; ')}`);
  device.destroy();
  return 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await run('replay', process.argv.slice(2), main, usage);
}
