// The WebGPU test (CTest label `webgpu`): node tests/webgpu/check.mjs REFTRAIN_BIN WORK_DIR
//  1. for each arch, `reftrain golden kernels`, every fixture through its twin, every linear
//     fixture in each of the three matmul forms, both attention fixtures in the fused form: every
//     case's verdict from the harness (judge.mjs) must be ok, and `reftrain compare` on the
//     written results must exit 0 and agree with the harness (`--subset` for the fused form,
//     whose forward writes no att; the test checks it wrote everything else); a fixture without
//     a twin fails;
//  2. a twin with a planted bug (residual_forward off by one at the last element) must fail in
//     the harness and make compare exit 1;
//     the bf16 twins' outputs must be the fixtures' bits (0 ulps), but for the attention's f32
//     probabilities (WGSL's exp is not the C library's) and adamw_update_bf16's f32 step (held to
//     its fixture's tolerances), whose bf16 mirror must be the rounding of its own new weights;
//  3. the f16 cast's checklist on the GPU: saturation, exact 1.0, subnormals, ties to even;
//  4. the packaged command (bin/reftrain-webgpu.mjs) as a backend drives it: `--without f16`
//     passes every f32 and bf16 case and reports every f16 one not run; `--cases` picks cases; `--repeat
//     3` fails a kernel whose bits change between runs that one run passes; a kernel that adds
//     into an output fails unless its entry asks for it zeroed (`zero`); bad registry entries
//     (unknown field or kernel, a binding the manifest lacks, a wrong access, a WGSL declaration
//     unlike the registry's) fail in one line naming the kernel and the field or binding; the
//     package installed into another project (`npm install --offline PATH`) runs from there.
// Any failure, including no WebGPU adapter, exits 1 with the reason.
import { spawnSync } from 'node:child_process';
import { fail, finish, last, run } from './check_util.mjs';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { openDevice } from './gpu.mjs';
import { runFixtures } from './kernels.mjs';
import { makeRegistry, linearProducts } from './registry.mjs';
import { readSafetensors } from './safetensors.mjs';
import { runCase } from './runner.mjs';
import { bf16Bits } from './replay/numbers.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const [reftrain, work] = process.argv.slice(2);
if (!reftrain || !work) { console.error('usage: check.mjs REFTRAIN_BIN WORK_DIR'); process.exit(2); }

// The registries the test runs, each on the fixtures its forms change: the naive products and
// the materialised attention on every fixture, then every linear fixture in the two other
// matmul forms, then both attention fixtures in the fused form.
const variants = [
  { name: 'naive', forms: {}, only: null },
  { name: 'tiled', forms: { linear: 'tiled' }, only: Object.keys(linearProducts) },
  { name: 'reg4x4', forms: { linear: 'reg4x4' }, only: Object.keys(linearProducts) },
  { name: 'fused', forms: { attention: 'fused' }, only: ['attention_forward', 'attention_backward'] },
];

// The fused forward keeps no att: its result must hold every tensor of the fixture but att
// (checked here, since `compare --subset` would not notice a missing out).
function checkFusedNames(arch, fix, out) {
  const want = Object.keys(readSafetensors(join(fix, 'attention_forward.safetensors')).tensors).filter((n) => !n.endsWith('.att'));
  const got = Object.keys(readSafetensors(join(out, 'attention_forward.safetensors')).tensors);
  if (want.sort().join() !== got.sort().join()) fail(`${arch}/fused: attention_forward wrote ${got}, expected ${want}`);
}

// The harness's verdict must agree with `reftrain compare`'s on the same files: every row ok
// exactly when compare exits 0.
function agree(what, rows, fix, out, subset) {
  const failed = rows.filter((r) => r.verdict !== 'ok');
  for (const r of failed) fail(`${what}: ${r.kernel}/${r.case} ${r.verdict}: ${r.why}`);
  const cmp = run(reftrain, ['compare', fix, out, '--quiet', ...(subset ? ['--subset'] : [])]);
  const verdict = cmp.stdout.trim().split('\n').filter((l) => /within tolerance|past|not within|first/.test(l)).pop();
  console.log(`${what}: ${rows.length} cases, ${rows.length - failed.length} ok; compare exit ${cmp.status}: ${verdict}`);
  if (cmp.status !== 0) fail(`${what}: reftrain compare exit ${cmp.status}\n${cmp.stdout}${cmp.stderr}`);
  if ((cmp.status === 0) !== (failed.length === 0)) fail(`${what}: the harness and reftrain compare disagree`);
}

// The bf16 twins keep the canonical order, so beyond the bf16 tolerance the judge applies, the
// cast's and the linear products' outputs must be the fixture's bits (0 ulps) and the
// attention's all but the f32 probabilities, where only exp differs. adamw_update_bf16's w, m, v
// come from WGSL's ÷ and √, which need not round as the CPU's do (its fixture's tolerances judge
// them); the rounding of its mirror is integer work, so the mirror must be exactly bf16 of the
// twin's own w.
const bf16Exact = /^(cast_f32_to_bf16|linear_\w+_bf16)$/;
const bf16Cases = 15;  // cast 2, linear 3 × 2, attention 2 × 2, adamw_update_bf16 3
function checkBf16Bits(arch, fix, out, rows) {
  const manifest = JSON.parse(readFileSync(join(fix, 'manifest.json'), 'utf8'));
  const outputs = Object.fromEntries(manifest.kernels.map((k) => [k.name, k.bindings.filter((b) => b.role === 'out' || b.role === 'inout').map((b) => b.name)]));
  const bf16 = rows.filter((r) => r.kernel.endsWith('_bf16'));
  if (bf16.length !== bf16Cases) fail(`${arch}: ${bf16.length} bf16 cases ran, ${bf16Cases} expected`);
  for (const r of bf16) {
    const outs = r.tensors.filter((t) => outputs[r.kernel].includes(t.name.slice(r.case.length + 1)));
    const mirror = r.kernel === 'adamw_update_bf16';
    const inexact = mirror ? [] : outs.filter((t) => t.ulp !== 0 && (bf16Exact.test(r.kernel) || !t.name.endsWith('.att')));
    console.log(`${arch} bf16 ${r.kernel}/${r.case}: ${outs.map((t) => `${t.name.slice(r.case.length + 1)} ${t.ulp} ulp, nmse ${t.nmse.toExponential(1)}`).join('; ')}`);
    if (inexact.length) fail(`${arch}: ${r.kernel}/${r.case}: ${inexact.map((t) => `${t.name} ${t.ulp} ulp`).join(', ')} (0 expected)`);
    if (mirror) checkOwnMirror(arch, out, r);
  }
}

// adamw_update_bf16's written mirror against bf16 of the w it wrote, element by element.
function checkOwnMirror(arch, out, r) {
  const t = readSafetensors(join(out, `${r.kernel}.safetensors`)).tensors;
  const w = t[`${r.case}.w`].data, wb16 = t[`${r.case}.wb16`].data;
  const bad = w.findIndex((x, i) => wb16[i] !== bf16Bits(x));
  if (w.length === 0 || w.length !== wb16.length || bad >= 0) {
    fail(`${arch}: ${r.kernel}/${r.case}: mirror element ${bad} is 0x${wb16[bad]?.toString(16)}, bf16 of the twin's ` +
         `w = ${w[bad]} is 0x${bf16Bits(w[bad]).toString(16)} (${w.length} weights, ${wb16.length} mirror elements)`);
  }
}

// adamw_update_bf16_sr (bf16-pure) and adamw_update_bf16_kahan (bf16-kahan) leave weights that
// are bf16 values: the twin's w must be the widening of the mirror it wrote, bit for bit, in each
// of the fixture's 3 cases. And its mirror must be the fixture's but for the rare element whose
// new w lies an f32 ulp from reftrain's (WGSL's ÷ and √) and so across a rounding boundary (for
// the stochastic rounding, 1 noise value in 2^16): at most 1 in 1024. The fixture's 1-ulp
// tolerance alone would pass a wrong noise, which moves a third of the weights by one bf16 step.
function checkBf16Weights(arch, fix, out, rows, kernel, precision) {
  const ran = rows.filter((r) => r.kernel === kernel);
  if (ran.length !== 3) fail(`${arch}: ${ran.length} ${kernel} cases ran, 3 expected`);
  for (const r of ran) {
    const t = readSafetensors(join(out, `${r.kernel}.safetensors`)).tensors;
    const w = t[`${r.case}.w`].data, wb16 = t[`${r.case}.wb16`].data;
    const bits = new Uint32Array(w.buffer, w.byteOffset, w.length);
    const bad = bits.findIndex((u, i) => u !== wb16[i] * 65536);
    if (w.length === 0 || w.length !== wb16.length || bad >= 0) {
      fail(`${arch}: ${r.kernel}/${r.case}: w[${bad}] = ${w[bad]} is not the widening of its mirror 0x${wb16[bad]?.toString(16)}`);
    }
    const want = readSafetensors(join(fix, `${r.kernel}.safetensors`)).tensors[`${r.case}.wb16`].data;
    const differ = wb16.filter((x, i) => x !== want[i]).length;
    if (want.length !== wb16.length || differ > Math.ceil(wb16.length / 1024)) {
      fail(`${arch}: ${r.kernel}/${r.case}: ${differ} of ${wb16.length} bf16 weights differ from the fixture's`);
    }
    console.log(`${arch} ${precision} ${r.kernel}/${r.case}: w is the widening of its mirror; ${differ} of ${w.length} differ from the fixture's`);
  }
}

async function checkArch(device, arch) {
  const fix = join(work, arch, 'fixtures');
  rmSync(join(work, arch), { recursive: true, force: true });
  const gen = run(reftrain, ['golden', 'kernels', '--arch', arch, '--out', fix]);
  if (gen.status !== 0) return fail(`${arch}: reftrain golden kernels: ${gen.stderr}`);
  for (const v of variants) {
    const out = join(work, arch, `out-${v.name}`);
    // Every fixture has a twin in every form: a new fixture without one is a `not run` row,
    // which fails here until it has one.
    const rows = await runFixtures(device, fix, makeRegistry(v.forms), { only: v.only, out });
    if (v.name === 'fused' && rows.some((r) => r.kernel === 'attention_forward')) checkFusedNames(arch, fix, out);
    // A form that runs only some fixtures (v.only) is compared on those: compare --subset, with
    // the count of what ran checked, since --subset does not notice a file not written.
    agree(`${arch} ${v.name}`, rows, fix, out, Boolean(v.only));
    if (v.name === 'naive') checkBf16Bits(arch, fix, out, rows);
    if (v.name === 'naive') {
      checkBf16Weights(arch, fix, out, rows, 'adamw_update_bf16_sr', 'bf16-pure');
      checkBf16Weights(arch, fix, out, rows, 'adamw_update_bf16_kahan', 'bf16-kahan');
    }
    const ran = new Set(rows.map((r) => r.kernel));
    if (v.only && ran.size !== v.only.filter((n) => existsSync(join(fix, `${n}.safetensors`))).length) {
      fail(`${arch}/${v.name}: ran ${[...ran].join(' ')} of ${v.only.join(' ')}`);
    }
  }
}

// residual_forward with a planted nondeterminism: element 0 scaled by 1 + noise·1e-6, far within
// the tolerance, its bits different whenever the noise is.
const noisySource = `
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<uniform> n: u32;
@group(0) @binding(4) var<storage, read_write> noise: array<f32>;
@compute @workgroup_size(256)
fn residual_forward(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= n) { return; }
  out[i] = (a[i] + b[i]) * select(1.0, 1.0 + noise[0] * 1e-6, i == 0u);
}`;

// residual_forward adding into its output, as a kernel whose caller zeroes the output would.
const accumulatingSource = noisySource.replace('@group(0) @binding(4) var<storage, read_write> noise: array<f32>;\n', '')
  .replace('out[i] = (a[i] + b[i]) * select(1.0, 1.0 + noise[0] * 1e-6, i == 0u);', 'out[i] += a[i] + b[i];');

// A twin with the kind of bug a real kernel has: an off-by-one index at the edge, on one element
// of the 512 or 1237 (NMSE ~1e-3, far past 1e-9).
const plantedSource = `
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<uniform> n: u32;
@compute @workgroup_size(256)
fn residual_forward(@builtin(global_invocation_id) gid: vec3<u32>) {
  let i = gid.x;
  if (i >= n) { return; }
  // The planted bug: the last element reads b one past its own index (an off-by-one edge).
  out[i] = a[i] + b[select(i, i - 1u, i == n - 1u)];
}`;

async function checkPlantedBug(device) {
  const fix = join(work, 'gpt2', 'fixtures');
  const out = join(work, 'planted');
  rmSync(out, { recursive: true, force: true });
  const registry = { residual_forward: { ...makeRegistry().residual_forward, source: plantedSource, file: undefined } };
  const rows = await runFixtures(device, fix, registry, { only: ['residual_forward'], out });
  const verdicts = rows.map((r) => r.verdict).join(' ');
  const cmp = run(reftrain, ['compare', fix, out, '--quiet', '--subset']);
  console.log(`planted bug (residual_forward, last element off by one): harness ${verdicts}, compare exit ${cmp.status} (FAIL FAIL, 1 expected)`);
  if (verdicts !== 'FAIL FAIL') fail(`planted bug: the harness said ${verdicts}: ${rows.map((r) => r.why).join('; ')}`);
  if (cmp.status !== 1) fail(`planted bug: compare exit ${cmp.status}, expected 1\n${cmp.stdout}${cmp.stderr}`);
}

// f32 → f16 bits for the checklist, by hand: [input, expected f16 bits, what]
const checklist = [
  [1000, 0x63d0, '1000 → 1000'],
  [1e6, 0x7bff, '1e6 → 65504 (saturates)'],
  [-1e6, 0xfbff, '−1e6 → −65504'],
  [65520, 0x7bff, '65520 → 65504, not Inf'],
  [1.0, 0x3c00, 'f16(1.0) exact'],
  [2 ** -24, 0x0001, '2⁻²⁴ → smallest subnormal'],
  [3 * 2 ** -24, 0x0003, '3·2⁻²⁴ → subnormal 3'],
  [2 ** -25, 0x0000, '2⁻²⁵ → 0 (tie to even)'],
  [3 * 2 ** -25, 0x0002, '1.5·2⁻²⁴ → 2·2⁻²⁴ (tie to even)'],
  [1 + 2 ** -11, 0x3c00, '1 + 2⁻¹¹ → 1 (tie to even)'],
  [1 + 3 * 2 ** -11, 0x3c02, '1 + 3·2⁻¹¹ → 1 + 2⁻⁹ (tie to even)'],
  [-0, 0x8000, '−0 → −0'],
];

async function checkCast(device) {
  const n = checklist.length;
  const entry = {
    name: 'cast_f32_to_f16',
    bindings: [{ name: 'src', role: 'in', dtype: 'f32' }, { name: 'dst', role: 'out', dtype: 'f16' }, { name: 'n', role: 'scalar', dtype: 'u32' }],
    cases: { list: { params: { n } } },
  };
  const fixture = { tensors: {
    'list.src': { dtype: 'F32', shape: [n], data: new Float32Array(checklist.map((c) => c[0])) },
    'list.dst': { dtype: 'F16', shape: [n], data: new Uint16Array(n) },
  } };
  const { tensors } = await runCase(device, makeRegistry().cast_f32_to_f16, entry, 'list', fixture);
  const got = tensors['list.dst'].data;
  checklist.forEach(([x, want, what], i) => {
    const ok = got[i] === want;
    console.log(`cast ${ok ? 'ok  ' : 'FAIL'} ${what}: 0x${got[i].toString(16).padStart(4, '0')}`);
    if (!ok) fail(`cast checklist: ${what}: got 0x${got[i].toString(16)}, want 0x${want.toString(16)}`);
  });
}

// The packaged command, driven as a backend project drives it: through a registry file only.
const bin = join(here, 'bin', 'reftrain-webgpu.mjs');
const harness = (args) => run(process.execPath, [bin, ...args]);

// A registry file: reftrain's twins, with `entries` (JavaScript source of an object) in place.
function registryFile(name, entries) {
  const path = join(work, `${name}.mjs`);
  writeFileSync(path, `import { makeRegistry } from ${JSON.stringify(pathToFileURL(join(here, 'registry.mjs')).href)};
const r = makeRegistry();
export default { ${entries} };
`);
  return path;
}

// `registry` must make the command exit `status` with a one-line error that matches `re`.
function expectRefused(what, registry, status, re) {
  const fix = join(work, 'gpt2', 'fixtures');
  const r = harness(['kernels', fix, '--only', 'residual_forward', '--registry', registry]);
  const text = `${r.stdout}${r.stderr}`;
  const line = text.split('\n').find((l) => re.test(l));
  console.log(`bad registry (${what}): exit ${r.status}: ${line ?? text.trim().split('\n').pop()}`);
  if (r.status !== status || !line) fail(`bad registry (${what}): exit ${r.status} (want ${status}), no line matching ${re}\n${text}`);
}

function checkHarness() {
  const fix = join(work, 'gpt2', 'fixtures');
  // fp32 without shader-f16: every f32 fixture passes, every f16 one is reported not run.
  const json = join(work, 'without-f16.json');
  const r = harness(['kernels', fix, '--without', 'f16', '--json', json]);
  const rows = existsSync(json) ? JSON.parse(readFileSync(json, 'utf8')).rows : [];
  // f16 kernels: f16 a word of the name (the bf16 ones need no shader-f16 and run).
  const isF16 = (k) => /(^|_)f16(_|$)/.test(k);
  const f16 = rows.filter((x) => isF16(x.kernel));
  const bad = rows.filter((x) => (isF16(x.kernel) ? x.verdict !== 'not run' || !/shader-f16/.test(x.why) : x.verdict !== 'ok'));
  console.log(`--without f16: exit ${r.status}; ${rows.length - f16.length} f32 cases ok, ${f16.length} f16 cases not run`);
  if (r.status !== 0 || !rows.length || !f16.length || bad.length) fail(`--without f16: exit ${r.status}, wrong rows ${JSON.stringify(bad)}\n${r.stdout}${r.stderr}`);
  // --cases picks cases by name, or one kernel's case.
  const one = harness(['kernels', fix, '--only', 'crossentropy_forward_backward,residual_forward', '--cases', 'crossentropy_forward_backward:small,awkward']);
  const picked = one.stdout.split('\n').filter((l) => / ok /.test(l)).map((l) => l.split(/\s+/).slice(0, 2).join('/'));
  console.log(`--cases: ${picked.join(' ')}`);
  if (picked.join(' ') !== 'crossentropy_forward_backward/small crossentropy_forward_backward/awkward residual_forward/awkward') {
    fail(`--cases picked ${picked.join(' ')}\n${one.stdout}${one.stderr}`);
  }
  // --repeat: a kernel whose result changes between runs (here its scratch holds a new value each
  // run, as uninitialised memory may) passes one run and fails three. The value is a count, not
  // Math.random(): out[0] is scaled by 1 + noise·1e-6, and two random values in [0, 1) round to
  // the same f32 factor often enough (about 1 in 8) that three runs sometimes all agreed.
  const noisy = registryFile('noisy', `residual_forward: { ...r.residual_forward, file: undefined, prelude: undefined, source: ${JSON.stringify(noisySource)},
    bindings: ['out', 'a', 'b', 'n', 'noise'], scratch: { noise: { floats: 1, fill: (() => { let run = 0; return () => ++run; })() } } }`);
  const once = harness(['kernels', fix, '--only', 'residual_forward', '--registry', noisy]);
  const thrice = harness(['kernels', fix, '--only', 'residual_forward', '--registry', noisy, '--repeat', '3']);
  console.log(`--repeat: a nondeterministic kernel: exit ${once.status} with 1 run, ${thrice.status} with 3: ${last(thrice.stdout, /nondeterministic/).trim()}`);
  if (once.status !== 0 || thrice.status !== 1 || !/nondeterministic: run \d changed small\.out element 0/.test(thrice.stdout)) {
    fail(`--repeat: exit ${once.status} / ${thrice.status}\n${once.stdout}${thrice.stdout}${thrice.stderr}`);
  }
  // An output the kernel reads before writing (+= into `out`) fails its fixture, which fills
  // outputs with NaN bytes, unless the entry's `zero` asks for it zeroed (as the replay then does).
  const acc = "{ ...r.residual_forward, file: undefined, prelude: undefined, source: " + JSON.stringify(accumulatingSource);
  const plusEq = harness(['kernels', fix, '--only', 'residual_forward', '--registry', registryFile('accumulating', `residual_forward: ${acc} }`)]);
  const zeroed = harness(['kernels', fix, '--only', 'residual_forward', '--registry', registryFile('accumulating-zeroed', `residual_forward: ${acc}, zero: ['out'] }`)]);
  console.log(`an output accumulated into: exit ${plusEq.status}; with zero: ['out']: exit ${zeroed.status}`);
  if (plusEq.status !== 1 || zeroed.status !== 0) fail(`accumulated output: exit ${plusEq.status} / ${zeroed.status} (want 1 / 0)\n${plusEq.stdout}${zeroed.stdout}`);
  // The package installed into another project, as a backend installs it (npm's link to a
  // local folder: no registry needed), runs from there with its own registry file.
  const project = join(work, 'outside-project');
  rmSync(project, { recursive: true, force: true });
  mkdirSync(project, { recursive: true });
  writeFileSync(join(project, 'package.json'), '{"name": "my-backend", "private": true, "type": "module"}\n');
  const npm = spawnSync('npm', ['install', '--offline', '--no-audit', '--no-fund', here], { cwd: project, encoding: 'utf8' });
  const installed = join(project, 'node_modules', '.bin', 'reftrain-webgpu');
  const outside = existsSync(installed) ? spawnSync(installed, ['kernels', fix, '--only', 'residual_forward', '--registry', noisy], { cwd: project, encoding: 'utf8' }) : null;
  console.log(`npm install into another project: exit ${npm.status}; its reftrain-webgpu: exit ${outside?.status}: ${last(outside?.stdout ?? '', /cases:/)}`);
  if (npm.status !== 0 || outside?.status !== 0 || !/2 cases: 2 ok/.test(outside.stdout)) {
    fail(`the installed package: npm exit ${npm.status}\n${npm.stderr}${outside?.stdout ?? ''}${outside?.stderr ?? ''}`);
  }
  // Bad registry entries: one line naming the kernel and the field.
  expectRefused('unknown field', registryFile('bad-field', "residual_forward: { ...r.residual_forward, colour: 'red' }"), 1,
                /^reftrain-webgpu kernels: registry entry residual_forward: unknown field 'colour'/);
  expectRefused('unknown kernel', registryFile('bad-kernel', 'residual_fwd: r.residual_forward'), 1,
                /^reftrain-webgpu kernels: registry entry residual_fwd: no such kernel/);
  expectRefused('binding not in the manifest', registryFile('bad-binding', "residual_forward: { ...r.residual_forward, bindings: ['out', 'a', 'bb', 'n'] }"), 1,
                /residual_forward .*registry entry residual_forward: binds 'bb', which is neither a binding of the kernel/);
  expectRefused('wrong access', registryFile('bad-access', "residual_forward: { ...r.residual_forward, access: { out: 'read' } }"), 1,
                /registry entry residual_forward: access of 'out' is 'read', but the kernel writes it/);
  expectRefused('bad access value', registryFile('bad-access-value', "residual_forward: { ...r.residual_forward, access: { a: 'write' } }"), 1,
                /registry entry residual_forward: access of 'a' is 'write', not 'read' or 'read_write'/);
  // A WGSL binding the registry does not describe: Dawn's error, with the legend of the bindings.
  expectRefused('WGSL declares a binding read-only that the registry binds read_write',
                registryFile('bad-wgsl', "residual_forward: { ...r.residual_forward, access: 'read_write' }"), 1,
                /residual_forward\/small: .*not compatible.*\[residual_forward @binding\([12]\) is the kernel's [ab] \(in\), bound as storage\]/);
}

mkdirSync(work, { recursive: true });
const { device, description } = await openDevice();
console.log(`device: ${description}`);
for (const arch of ['gpt2', 'llama']) await checkArch(device, arch);
await checkPlantedBug(device);
await checkCast(device);
checkHarness();
device.destroy();
finish('webgpu: all checks passed');
