// The WebGPU replay test (CTest label `webgpu`): node tests/webgpu/check_replay.mjs REFTRAIN_BIN WORK_DIR
//  1. for gpt2 (tiny) and llama (llama-tiny) × fp32 and mixed × adamw and adamw8bit:
//     `reftrain golden run --steps 20`, tests/webgpu/replay.mjs on it (which checks in mixed
//     precision that the mirror is f16(clamp(w)) after every step), and `reftrain compare` must
//     exit 0, with a loss drift gate of 1e-5 in fp32 and 1e-4 in mixed (the parity gate is 0.05);
//  1b. bf16 (every product a _bf16 kernel on operands cast to bf16, the weights from a bf16
//     mirror): tiny and llama-tiny with adamw, tiny with adamw8bit, `golden run --steps 50`
//     replayed 50 steps (the replay checks after every step that the mirror is bf16(w)) and
//     `reftrain compare` with mixed's gate 1e-4; the step-1 call dumps paired call by call,
//     every linear product and cast whose inputs are reftrain's bits giving reftrain's bits (the loss gate alone could not tell a bf16 replay
//     from an fp32 one: reftrain's own bf16 and fp32 runs of these presets are 6e-5 to 1.6e-4
//     apart over 50 steps);
//  2. one combination again with every sub-range staged through scratch copies (--align 256,
//     what a device with WebGPU's default offset alignment runs) must give the same files;
//  3. planted bugs must be caught: attention_backward without the softmax's row term (compare
//     exits 1 on the step-1 gradients) and adamw_update_f16 writing the mirror before the
//     update (the replay itself exits 1, naming the mirror element), and a bf16 mirror that
//     truncates, written by adamw_update_bf16 (the bf16 adamw run) or by the cast_f32_to_bf16
//     after the 8-bit update (the bf16 adamw8bit run): the replay exits 1, naming the element;
//  4. call dumps: every combination's step-1 kernel-call dump (--dump-step 1) matches
//     reftrain's (`golden run --dump-step 1`) call by call; and bisection: `reftrain compare
//     --first-divergence` of reftrain's dump (and of a clean replay's) with the dump of a replay
//     with a planted bug must name exactly the bugged call, its inputs within tolerance — a forward bug (layernorm_forward / rmsnorm_forward
//     with eps 1e-6) and a backward one (the attention_backward above), for gpt2 and llama;
//  5. one registry drives both consumers: a registry using every field of an entry (the fused
//     two-pass attention with scratch buffers, the 4×4 register-blocked linear form, an entry
//     with its bindings in another order, one with an input bound as a uniform, one bound with the
//     layout Dawn derives from its WGSL, every buffer read_write) passes the kernel
//     fixtures (kernels.mjs, `compare --subset`) and replays gpt2 and llama within the drift gate,
//     their step-1 call dumps matching reftrain's, with the fused backward's extra dispatches.
import { fail, finish, last, run } from './check_util.mjs';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const [reftrain, work] = process.argv.slice(2);
if (!reftrain || !work) { console.error('usage: check_replay.mjs REFTRAIN_BIN WORK_DIR'); process.exit(2); }
const replay = (golden, out, extra = []) => run(process.execPath, [join(here, 'replay.mjs'), golden, '--out', out, ...extra]);

function golden(preset, precision, optimizer) {
  const dir = join(work, `golden-${preset}-${precision}-${optimizer}`);
  const steps = precision.startsWith('bf16') ? '50' : '20';
  const r = run(reftrain, ['golden', 'run', '--preset', preset, '--precision', precision, '--optimizer', optimizer,
                           '--steps', steps, '--dump-step', '1', '--out', dir]);
  if (r.status !== 0) throw new Error(`reftrain golden run ${preset} ${precision} ${optimizer}: ${r.stderr}`);
  return dir;
}

function checkCombination(preset, precision, optimizer) {
  const name = `${preset} ${precision} ${optimizer}`;
  const dir = golden(preset, precision, optimizer);
  const out = join(work, `replay-${preset}-${precision}-${optimizer}`);
  const r = replay(dir, out);
  if (r.status !== 0) return fail(`${name}: replay exit ${r.status}\n${r.stdout}${r.stderr}`);
  // bf16 is held to mixed's gate, for mixed's reason: it rounds f32 values (activations,
  // gradients, weights) that the GPU computes a few ulps apart from reftrain (WGSL's tanh and
  // exp are not glibc's), and a value on a rounding boundary then rounds one bf16 ulp (2^-8)
  // the other way; the products carry that on (docs/webgpu.md, "A training replay").
  const gate = precision === 'fp32' ? '1e-5' : '1e-4';
  const cmp = run(reftrain, ['compare', dir, out, '--max-drift', gate, '--quiet']);
  const ms = (/([\d.]+) ms\/step/.exec(r.stdout) ?? [])[1];
  console.log(`${name}: ${ms} ms/step; compare exit ${cmp.status}: ` +
              `${last(cmp.stdout, /max drift/)}; ${last(cmp.stdout, /tensors within/)}`);
  if (cmp.status !== 0) fail(`${name}: compare exit ${cmp.status} (drift gate ${gate})\n${cmp.stdout}${cmp.stderr}`);
  // Step 1's kernel calls, one by one, against reftrain's: the replay's dump holds everything
  // the golden one does (and the probabilities `att`, which the fused CPU attention keeps not).
  const dump = join(work, `dump-${preset}-${precision}-${optimizer}`);
  const d = replay(dir, dump, ['--steps', '1', '--dump-step', '1']);
  const dc = run(reftrain, ['compare', join(dump, 'step-1.safetensors'), join(dir, 'step-1.safetensors'), '--subset', '--quiet']);
  console.log(`${name}: step-1 call dump against reftrain's: replay exit ${d.status}, compare exit ${dc.status}: ` +
              `${last(dc.stdout, /tensors within/)}`);
  if (precision.startsWith('bf16')) return checkBf16Dump(name, dump, dir, d.status);
  if (d.status !== 0 || dc.status !== 0) fail(`${name}: call dump differs from reftrain's\n${dc.stdout}${d.stderr}`);
}

// A bf16 step-1 dump pairs with reftrain's call for call (compare exits 2 on any name one lacks),
// and every tensor of every bf16 call (the casts and the products) is within the bf16
// tolerance; the f32 calls downstream of a cast that rounded one element the other way are
// reported, not judged (see the gate above).
function checkBf16Dump(name, dump, dir, replayStatus) {
  const dc = run(reftrain, ['compare', join(dump, 'step-1.safetensors'), join(dir, 'step-1.safetensors'), '--subset', '--json']);
  if (replayStatus !== 0 || dc.status > 1) return fail(`${name}: call dump: replay exit ${replayStatus}, compare exit ${dc.status}\n${dc.stderr}`);
  const rows = JSON.parse(dc.stdout).rows;
  const bf16 = rows.filter((r) => /_bf16\.[^.]+$/.test(r.tensor));
  const bad = [];
  const f32Apart = rows.filter((r) => !r.pass && !/_bf16\.[^.]+$/.test(r.tensor)).length;
  // The linear products and the casts are exact twins: every such call whose inputs are
  // reftrain's bits must give reftrain's bits (an fp32 product, another order or another
  // rounding would not), and some must (step 1 starts from the same weights and batch). The
  // attention's are not held so: its softmax runs WGSL's exp.
  const ulp = new Map(rows.map((r) => [r.tensor, r.ulp]));
  const records = new Map(JSON.parse(readFileSync(join(here, 'kernels.json'), 'utf8')).kernels.map((k) => [k.name, k]));
  let exact = 0;
  for (const call of new Set(bf16.map((r) => r.tensor.replace(/\.[^.]+$/, '')))) {
    const k = records.get(call.split('.').pop());
    if (k.name.startsWith('attention_')) continue;
    const named = (b, suffix) => `${call}.${b.name}${suffix}`;
    const inputs = k.bindings.flatMap((b) => b.role === 'in' ? [named(b, '')] : b.role === 'inout' ? [named(b, '_in')] : []);
    const outputs = k.bindings.flatMap((b) => b.role === 'out' || b.role === 'inout' ? [named(b, '')] : []);
    if (!inputs.every((t) => !ulp.has(t) || ulp.get(t) === 0)) continue;
    exact++;
    const apart = outputs.filter((t) => ulp.has(t) && ulp.get(t) !== 0);
    if (apart.length) bad.push(`${apart.join(', ')} (its inputs are reftrain's bits)`);
  }
  console.log(`${name}: step-1 dump: ${bf16.length} tensors of bf16 calls, ${bad.length} wrong; ${exact} calls on ` +
              `reftrain's input bits gave its output bits; ${f32Apart} of ${rows.length - bf16.length} f32 tensors past NMSE 1e-9`);
  if (bf16.length === 0 || exact === 0 || bad.length) fail(`${name}: bf16 calls: ${bad.slice(0, 5).join('; ')} (${exact} on exact inputs)`);
}

function checkStaged() {
  const dir = join(work, 'golden-llama-tiny-mixed-adamw8bit');
  const [a, b] = [join(work, 'replay-llama-tiny-mixed-adamw8bit'), join(work, 'staged')];
  const r = replay(dir, b, ['--align', '256']);
  if (r.status !== 0) return fail(`staged copies: replay exit ${r.status}\n${r.stderr}`);
  for (const f of ['trace.jsonl', 'debug_state.safetensors']) {
    const same = readFileSync(join(a, f)).equals(readFileSync(join(b, f)));
    console.log(`staged copies (--align 256): ${f} ${same ? 'identical' : 'DIFFERS'}`);
    if (!same) fail(`staged copies: ${f} differs from the sub-range bindings' replay`);
  }
}

// A registry module replacing one kernel with a text substitution of its twin's source (as
// assembled: prelude, file, templates).
function plant(file, kernel, edits) {
  const path = join(work, file);
  writeFileSync(path, `import { makeRegistry } from ${JSON.stringify(join(here, 'registry.mjs'))};
import { twinSource } from ${JSON.stringify(join(here, 'source.mjs'))};
let source = twinSource(makeRegistry().${kernel});
for (const [from, to] of ${JSON.stringify(edits)}) {
  if (!source.includes(from)) throw new Error('planted bug: no ' + from);
  source = source.replace(from, to);
}
export default { ${kernel}: { ...makeRegistry().${kernel}, file: undefined, source } };
`);
  return path;
}

function checkPlanted() {
  const attn = plant('planted_attention.mjs', 'attention_backward',
                     [['(dp_of(x, s, u) - dot_s)', 'dp_of(x, s, u)']]);
  const dir = join(work, 'golden-tiny-fp32-adamw');
  const out = join(work, 'planted-attention');
  const r = replay(dir, out, ['--registry', attn, '--steps', '2']);
  const cmp = run(reftrain, ['compare', dir, out, '--steps', '2', '--quiet']);
  console.log(`planted attention_backward without the row term: replay exit ${r.status}, compare exit ${cmp.status} (1 expected)`);
  if (r.status !== 0 || cmp.status !== 1) fail(`planted attention bug: replay ${r.status}, compare ${cmp.status}\n${cmp.stdout}`);

  const mirror = plant('planted_mirror.mjs', 'adamw_update_f16', [
    ['  let s = adamw_element(w_mp[i],', '  dst_w16[i] = f16(clamp(w_mp[i], -65504.0, 65504.0));\n  let s = adamw_element(w_mp[i],'],
    ['  dst_w16[i] = f16(clamp(s.w, -65504.0, 65504.0));', '']]);
  const m = replay(join(work, 'golden-tiny-mixed-adamw'), join(work, 'planted-mirror'), ['--registry', mirror, '--steps', '2']);
  const said = last(m.stderr, /mirror element/);
  console.log(`planted stale mirror: replay exit ${m.status} (1 expected): ${said.slice(0, 120)}`);
  if (m.status !== 1 || !said) fail(`planted stale mirror: replay exit ${m.status}\n${m.stderr}`);

  // A bf16 mirror truncated rather than rounded, by the kernel that writes it in each bf16 run:
  // the bf16 mirror check must name an element. (The edit is in prelude/bf16.wgsl's rounding,
  // part of both twins' source.)
  const truncate = [['let r = (u + 0x7FFFu + ((u >> 16u) & 1u)) >> 16u;', 'let r = u >> 16u;']];
  for (const [kernel, optimizer] of [['adamw_update_bf16', 'adamw'], ['cast_f32_to_bf16', 'adamw8bit']]) {
    const trunc = plant(`planted_${kernel}.mjs`, kernel, truncate);
    const b = replay(join(work, `golden-tiny-bf16-${optimizer}`), join(work, `planted-${kernel}`), ['--registry', trunc, '--steps', '2']);
    const saidB = last(b.stderr, /mirror element .* bf16 bits/);
    console.log(`planted truncating ${kernel} (bf16 ${optimizer}): replay exit ${b.status} (1 expected): ${saidB.slice(0, 120)}`);
    if (b.status !== 1 || !saidB) fail(`planted truncating ${kernel}: replay exit ${b.status}\n${b.stderr}`);
  }
}

// `reftrain compare --first-divergence` of a reference dump (reftrain's, or a clean replay's)
// and the dump of a replay with a planted bug must name the first call of the planted kernel,
// with its inputs within tolerance.
function bisect(goldenDir, reference, registry, kernel, what) {
  const out = join(work, `bisect-${what}`);
  const r = replay(goldenDir, out, ['--registry', registry, '--steps', '1', '--dump-step', '1']);
  if (r.status !== 0) return fail(`bisect ${what}: replay exit ${r.status}\n${r.stderr}`);
  const a = join(reference, 'step-1.safetensors');
  const cmp = run(reftrain, ['compare', '--first-divergence', a, join(out, 'step-1.safetensors'), '--json']);
  const j = JSON.parse(cmp.stdout || '{}');
  const head = readFileSync(a).subarray(8, 8 + Number(readFileSync(a).readBigUInt64LE(0))).toString();
  const want = JSON.parse(JSON.parse(head).__metadata__.calls).find((c) => c.endsWith(`.${kernel}`));
  console.log(`bisect ${what}: compare --first-divergence exit ${cmp.status}: call ${j.call}, inputs within ` +
              `${j.inputs_within} (want ${want})`);
  if (cmp.status !== 1 || j.call !== want || j.inputs_within !== true) fail(`bisect ${what}: ${cmp.stdout}${cmp.stderr}`);
}

function checkBisection() {
  const eps = plant('planted_layernorm.mjs', 'layernorm_forward', [['const EPS: f32 = 1e-5;', 'const EPS: f32 = 1e-6;']]);
  const rms = plant('planted_rmsnorm.mjs', 'rmsnorm_forward', [['const EPS: f32 = 1e-5;', 'const EPS: f32 = 1e-6;']]);
  const attn = join(work, 'planted_attention.mjs');
  for (const [preset, norm, bug] of [['tiny', 'layernorm_forward', eps], ['llama-tiny', 'rmsnorm_forward', rms]]) {
    const dir = join(work, `golden-${preset}-fp32-adamw`);
    const clean = join(work, `bisect-${preset}-clean`);
    const r = replay(dir, clean, ['--steps', '1', '--dump-step', '1']);
    if (r.status !== 0) { fail(`bisect ${preset}: clean replay exit ${r.status}\n${r.stderr}`); continue; }
    bisect(dir, clean, bug, norm, `${preset}-${norm}-eps`);
    bisect(dir, dir, bug, norm, `${preset}-${norm}-eps-vs-reftrain`);
    bisect(dir, clean, attn, 'attention_backward', `${preset}-attention_backward-row-term`);
    bisect(dir, dir, attn, 'attention_backward', `${preset}-attention_backward-row-term-vs-reftrain`);
  }
}

// A registry module using every field bind.mjs honours (see the header, check 5); the llm.c
// example (check_llmc.mjs) uses the rest: access, structs, a file per pass, scratch fills, when.
function formsRegistry() {
  const path = join(work, 'registry_forms.mjs');
  writeFileSync(path, `import { makeRegistry } from ${JSON.stringify(join(here, 'registry.mjs'))};
import { twinSource } from ${JSON.stringify(join(here, 'source.mjs'))};
// The twin's assembled source (prelude and file) with the edits made.
const edit = (twin, edits) => {
  let source = twinSource(twin);
  for (const [from, to] of edits) {
    if (!source.includes(from)) throw new Error('registry_forms: no ' + from);
    source = source.replace(from, to);
  }
  return source;
};
const r = makeRegistry({ linear: 'reg4x4', attention: 'fused' });
// residual_forward bound as (n, a, b, out) rather than the fixture's (out, a, b, n).
r.residual_forward = { ...r.residual_forward, file: undefined, bindings: ['n', 'a', 'b', 'out'], source: edit(r.residual_forward, [
  ['@binding(0) var<storage, read_write> res_out', '@binding(3) var<storage, read_write> res_out'],
  ['@binding(3) var<uniform> res_n', '@binding(0) var<uniform> res_n']]) };
// finalize_grad_stats reading norm_sq from a uniform.
r.finalize_grad_stats = { ...r.finalize_grad_stats, file: undefined, uniforms: ['norm_sq'], source: edit(r.finalize_grad_stats, [
  ['var<storage, read> fg_norm_sq: array<f32>', 'var<uniform> fg_norm_sq: f32'],
  ['sqrt(fg_norm_sq[0])', 'sqrt(fg_norm_sq)']]) };
// gelu_forward with the layout Dawn derives from its WGSL, every binding declared read_write.
r.gelu_forward = { ...r.gelu_forward, layout: 'auto', file: undefined, source: edit(r.gelu_forward, [
  ['var<storage, read> gelu_x', 'var<storage, read_write> gelu_x']]) };
export default r;
`);
  return path;
}

function checkRegistry() {
  const registry = formsRegistry();
  const fix = join(work, 'fixtures');
  const gen = run(reftrain, ['golden', 'kernels', '--arch', 'all', '--out', fix]);
  if (gen.status !== 0) return fail(`golden kernels: ${gen.stderr}`);
  const out = join(work, 'fixtures-forms');
  const k = run(process.execPath, [join(here, 'kernels.mjs'), fix, '--out', out, '--registry', registry]);
  const kc = run(reftrain, ['compare', fix, out, '--subset', '--quiet']);
  console.log(`registry_forms.mjs on the kernel fixtures: kernels.mjs exit ${k.status}, compare exit ${kc.status}: ` +
              `${last(kc.stdout, /tensors within/)}`);
  if (k.status !== 0 || kc.status !== 0) fail(`registry_forms on the fixtures\n${k.stdout}${k.stderr}${kc.stdout}`);
  for (const [preset, precision, optimizer] of [['tiny', 'fp32', 'adamw'], ['llama-tiny', 'mixed', 'adamw8bit']]) {
    const name = `${preset} ${precision} ${optimizer}`;
    const dir = join(work, `golden-${preset}-${precision}-${optimizer}`);
    const dest = join(work, `forms-${preset}-${precision}-${optimizer}`);
    const dump = `${dest}-dump`;
    for (const d of [dest, dump]) rmSync(d, { recursive: true, force: true });
    const r = replay(dir, dest, ['--registry', registry]);
    const d = replay(dir, dump, ['--registry', registry, '--steps', '1', '--dump-step', '1']);
    if (r.status !== 0 || d.status !== 0) { fail(`${name} with registry_forms: replay exit ${r.status}, ${d.status}\n${r.stderr}${d.stderr}`); continue; }
    const gate = precision === 'fp32' ? '1e-5' : '1e-4';
    const cmp = run(reftrain, ['compare', dir, dest, '--max-drift', gate, '--quiet']);
    const dc = run(reftrain, ['compare', join(dump, 'step-1.safetensors'), join(dir, 'step-1.safetensors'), '--subset', '--quiet']);
    // The fused attention backward is two dispatches: one more per layer than the default's.
    const calls = (text) => Number((/: (\d+) dispatches/.exec(text) ?? [])[1]);
    const base = replay(dir, join(work, `forms-base-${preset}`), ['--steps', '1']);
    const layers = JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')).model.layers;
    console.log(`${name} with registry_forms: compare exit ${cmp.status}: ${last(cmp.stdout, /max drift/)}; call dump ` +
                `compare exit ${dc.status}; ${calls(r.stdout)} dispatches (default registry: ${calls(base.stdout)})`);
    if (cmp.status !== 0 || dc.status !== 0) fail(`${name} with registry_forms: compare ${cmp.status}, dump ${dc.status}\n${cmp.stdout}${dc.stdout}`);
    if (calls(r.stdout) !== calls(base.stdout) + layers) fail(`${name} with registry_forms: ${calls(r.stdout)} dispatches, want ${calls(base.stdout)} + ${layers}`);
  }
}

rmSync(work, { recursive: true, force: true });
mkdirSync(work, { recursive: true });
const start = Date.now();
for (const preset of ['tiny', 'llama-tiny']) {
  for (const precision of ['fp32', 'mixed']) {
    for (const optimizer of ['adamw', 'adamw8bit']) checkCombination(preset, precision, optimizer);
  }
}
for (const [preset, optimizer] of [['tiny', 'adamw'], ['llama-tiny', 'adamw'], ['tiny', 'adamw8bit']]) {
  checkCombination(preset, 'bf16', optimizer);
}
checkCombination('tiny', 'bf16-pure', 'adamw');
checkCombination('tiny', 'bf16-kahan', 'adamw');
checkStaged();
checkPlanted();
checkBisection();
checkRegistry();
console.log(`${((Date.now() - start) / 1000).toFixed(1)} s`);
finish('webgpu replay: all checks passed');
