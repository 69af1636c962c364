// The WebGPU test (CTest label `webgpu`): node tests/webgpu/check.mjs REFTRAIN_BIN WORK_DIR
//  1. for each arch, `reftrain golden kernels`, every fixture through its twin, every linear
//     fixture in each of the three matmul forms, both attention fixtures in the fused form, and
//     `reftrain compare` on each result must exit 0 (`--subset` for the fused form, whose
//     forward writes no att; the test checks it wrote everything else); a fixture without a twin
//     fails;
//  2. a twin with a planted bug (residual_forward off by one at the last element) must make
//     compare exit 1;
//  3. the f16 cast's checklist on the GPU: saturation, exact 1.0, subnormals, ties to even.
// Any failure, including no WebGPU adapter, exits 1 with the reason.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { openDevice } from './gpu.mjs';
import { runFixtures } from './kernels.mjs';
import { makeRegistry, linearProducts } from './registry.mjs';
import { readSafetensors } from './safetensors.mjs';
import { runCase } from './runner.mjs';

const [reftrain, work] = process.argv.slice(2);
if (!reftrain || !work) { console.error('usage: check.mjs REFTRAIN_BIN WORK_DIR'); process.exit(2); }
const failures = [];
const fail = (what) => { failures.push(what); console.log(`FAIL ${what}`); };

function run(cmd, args) {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.error) throw r.error;
  return r;
}

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

async function checkArch(device, arch) {
  const fix = join(work, arch, 'fixtures');
  rmSync(join(work, arch), { recursive: true, force: true });
  const gen = run(reftrain, ['golden', 'kernels', '--arch', arch, '--out', fix]);
  if (gen.status !== 0) return fail(`${arch}: reftrain golden kernels: ${gen.stderr}`);
  for (const v of variants) {
    const out = join(work, arch, `out-${v.name}`);
    const report = await runFixtures(device, fix, out, makeRegistry(v.forms), v.only);
    for (const f of report.failed) fail(`${arch}/${v.name}: ${f.name} did not run: ${f.error}`);
    // A form that runs only some fixtures (v.only) is compared on those: compare --subset, with
    // the count of what ran checked below, since --subset does not notice a file not written.
    const subset = v.only ? ['--subset'] : [];
    if (v.name === 'fused' && report.ran.includes('attention_forward')) checkFusedNames(arch, fix, out);
    const cmp = run(reftrain, ['compare', fix, out, '--quiet', ...subset]);
    const verdict = cmp.stdout.trim().split('\n').filter((l) => /within tolerance|past|not within|first/.test(l)).pop();
    console.log(`${arch} ${v.name}: ${report.ran.join(' ')}; compare exit ${cmp.status}: ${verdict}`);
    if (cmp.status !== 0) fail(`${arch}/${v.name}: reftrain compare exit ${cmp.status}\n${cmp.stdout}${cmp.stderr}`);
    // Every fixture has a twin in every form: a new fixture without one fails here until it has one.
    if (report.missing.length) fail(`${arch}/${v.name}: fixtures without a twin: ${report.missing.join(' ')}`);
    if (v.only && report.ran.length !== v.only.filter((n) => existsSync(join(fix, `${n}.safetensors`))).length) {
      fail(`${arch}/${v.name}: ran ${report.ran.join(' ')} of ${v.only.join(' ')}`);
    }
  }
}

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
  const report = await runFixtures(device, fix, out, registry, ['residual_forward']);
  if (report.ran.length !== 1) return fail(`planted bug: the buggy twin did not run: ${JSON.stringify(report.failed)}`);
  const cmp = run(reftrain, ['compare', fix, out, '--quiet']);
  console.log(`planted bug (residual_forward, last element off by one): compare exit ${cmp.status} (1 expected)`);
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
  const out = await runCase(device, makeRegistry().cast_f32_to_f16, entry, 'list', fixture);
  const got = out['list.dst'].data;
  checklist.forEach(([x, want, what], i) => {
    const ok = got[i] === want;
    console.log(`cast ${ok ? 'ok  ' : 'FAIL'} ${what}: 0x${got[i].toString(16).padStart(4, '0')}`);
    if (!ok) fail(`cast checklist: ${what}: got 0x${got[i].toString(16)}, want 0x${want.toString(16)}`);
  });
}

mkdirSync(work, { recursive: true });
const { device, description } = await openDevice();
console.log(`device: ${description}`);
for (const arch of ['gpt2', 'llama']) await checkArch(device, arch);
await checkPlantedBug(device);
await checkCast(device);
device.destroy();
console.log(failures.length ? `${failures.length} failure(s)` : 'webgpu: all checks passed');
process.exit(failures.length ? 1 : 0);
