// reftrain-webgpu kernels FIXTURE_DIR [--registry FILE.mjs] [--only a,b] [--cases c,kernel:c]
//                         [--repeat N] [--out OUT_DIR] [--json FILE] [--require f16 | --without f16]
//                         [--linear naive|tiled|reg4x4] [--attention materialised|fused]
//                         [--adapter NAME] [--driver lavapipe|system]
//
// Runs every fixture of a `reftrain golden kernels` directory through its kernel in a registry
// (default: reftrain's own WGSL twins, registry.mjs) on WebGPU and prints one row per case —
// kernel, case, verdict, NMSE, time — judged by the manifest's tolerances (judge.mjs, the rules
// of `reftrain compare`). A case is `not run` when the registry has no kernel for it, declines
// it (its `when`), or needs shader-f16 on an adapter without it; --require f16 makes the last a
// failure, --without f16 opens the device without shader-f16 as if the adapter lacked it. --repeat N runs each case N times and fails it if any bit of its result changes
// between runs; the time is the median, from submit to done. --out writes each result as
// OUT_DIR/<fixture>.safetensors (for `reftrain compare FIXTURE_DIR OUT_DIR`), --json the rows.
// Exit status: 0 when no case failed, 1 when one did (or a kernel did not compile or run),
// 2 on bad usage.
import { parseOptions, run } from './cli.mjs';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { checkTwin, needsF16 } from './bind.mjs';
import { kernelTable } from './kernel_table.mjs';
import { readSafetensors, writeSafetensors } from './safetensors.mjs';
import { runFixture, selectedCases } from './runner.mjs';
import { makeRegistry } from './registry.mjs';

export const usage = 'usage: reftrain-webgpu kernels FIXTURE_DIR [--registry FILE.mjs] [--only a,b] [--cases c,kernel:c] ' +
  '[--repeat N] [--out OUT_DIR] [--json FILE] [--require f16 | --without f16] [--linear naive|tiled|reg4x4] ' +
  '[--attention materialised|fused] [--adapter NAME] [--driver lavapipe|system]';

const list = (v) => v.split(',').filter((x) => x);

export function parseArgs(argv) {
  const a = parseOptions(argv, {
    usage, positional: 'dir',
    defaults: { out: null, json: null, registry: null, only: null, cases: null, repeat: 1, linear: 'naive', attention: 'materialised', adapter: null },
    options: { '--out': ['out'], '--json': ['json'], '--registry': ['registry'], '--only': ['only', list], '--cases': ['cases', list],
               '--repeat': ['repeat', Number], '--linear': ['linear'], '--attention': ['attention'], '--adapter': ['adapter'] },
  });
  if (!Number.isInteger(a.repeat) || a.repeat < 1) throw Object.assign(new Error(`--repeat takes a whole number >= 1, not ${a.repeat}`), { usage: true });
  return a;
}

// The fixtures' manifest, with a one-line error for a directory that is not one.
export function readManifest(dir) {
  let text;
  try {
    text = readFileSync(join(dir, 'manifest.json'), 'utf8');
  } catch {
    throw new Error(`${dir} has no manifest.json: not a \`reftrain golden kernels\` directory`);
  }
  const m = JSON.parse(text);
  if (m.format !== 'reftrain-golden-kernels') throw new Error(`${dir}/manifest.json is not a reftrain kernel fixture manifest`);
  return m;
}

// Loads a registry module (its default export), or reftrain's twins in the given forms.
// A backend's entries are checked up front (bind.mjs), each named after a kernel reftrain has.
export async function loadRegistry({ registry, linear = 'naive', attention = 'materialised' }) {
  if (!registry) return makeRegistry({ linear, attention });
  const mod = await import(pathToFileURL(resolve(registry)).href);
  if (!mod.default || typeof mod.default !== 'object') throw new Error(`${registry}: its default export is not a registry object`);
  for (const [name, twin] of Object.entries(mod.default)) {
    if (!kernelTable().has(name)) throw new Error(`registry entry ${name}: no such kernel (kernels.json lists ${[...kernelTable().keys()].join(', ')})`);
    checkTwin(name, twin);
  }
  return mod.default;
}

// Every selected fixture through its kernel: {rows, written: [files]}. `f16`: whether the
// device has shader-f16. A kernel that fails to compile or run is a FAIL row per case.
export async function runFixtures(device, dir, registry, { only = null, cases = null, repeat = 1, out = null, f16 = true } = {}) {
  const manifest = readManifest(dir);
  if (out) mkdirSync(out, { recursive: true });
  const rows = [];
  for (const entry of manifest.kernels) {
    if (only && !only.includes(entry.name)) continue;
    const names = selectedCases(entry, cases);
    const skip = (why) => rows.push(...names.map((c) => ({ kernel: entry.name, case: c, verdict: 'not run', why })));
    const twin = registry[entry.name];
    if (!twin) { skip('no kernel in the registry'); continue; }
    try {
      if (!f16 && needsF16(twin)) { skip('the adapter lacks shader-f16'); continue; }
      const fixture = readSafetensors(join(dir, entry.file));
      const r = await runFixture(device, twin, entry, fixture, { cases, repeat });
      rows.push(...r.rows);
      if (out && Object.keys(r.result).length) {
        const what = `${twin.file ?? 'source'}:${(twin.passes ?? [twin]).map((p) => p.entry).join('+')}`;
        writeSafetensors(join(out, entry.file), r.result, { twin: what });
      }
    } catch (e) {
      rows.push(...names.filter((c) => !rows.some((r) => r.kernel === entry.name && r.case === c))
        .map((c) => ({ kernel: entry.name, case: c, verdict: 'FAIL', why: e.message })));
    }
  }
  return rows;
}

const fmt = (x, f) => (x === undefined ? '-' : f(x));
// As C's %.2e: two exponent digits.
const sci = (x) => x.toExponential(2).replace(/e([+-])(\d)$/, 'e$10$2');

// The rows as a table (test-backend-ops style), with a summary line.
export function table(rows) {
  const lines = [`${'kernel'.padEnd(30)} ${'case'.padEnd(10)} ${'verdict'.padEnd(8)} ${'nmse'.padStart(9)} ${'time'.padStart(10)}  why`];
  for (const r of rows) {
    lines.push(`${r.kernel.padEnd(30)} ${r.case.padEnd(10)} ${r.verdict.padEnd(8)} ${fmt(r.nmse, sci).padStart(9)} ` +
               `${fmt(r.ms, (x) => `${x.toFixed(3)} ms`).padStart(10)}  ${r.why ?? ''}`);
  }
  const count = (v) => rows.filter((r) => r.verdict === v).length;
  const reasons = {};
  for (const r of rows.filter((x) => x.verdict === 'not run')) reasons[r.why] = (reasons[r.why] ?? 0) + 1;
  const why = Object.entries(reasons).map(([k, n]) => `${n} ${k}`).join('; ');
  lines.push(`${rows.length} cases: ${count('ok')} ok, ${count('FAIL')} FAIL, ${count('not run')} not run${why ? ` (${why})` : ''}`);
  return lines.join('\n');
}

export async function main(argv, openDevice) {
  const a = parseArgs(argv);
  readManifest(a.dir);  // a wrong directory is an error before the device opens
  const registry = await loadRegistry(a);
  const { device, description, f16 } = await openDevice({ f16: a.f16, adapter: a.adapter });
  const rows = await runFixtures(device, a.dir, registry, { only: a.only, cases: a.cases, repeat: a.repeat, out: a.out, f16 });
  console.log(`device: ${description}${f16 ? '' : ' (no shader-f16)'}`);
  console.log(table(rows));
  if (a.json) {
    writeFileSync(a.json, `${JSON.stringify({ format: 'reftrain-webgpu-kernels', device: description, f16, fixtures: resolve(a.dir),
                                              registry: a.registry ?? `reftrain (linear ${a.linear}, attention ${a.attention})`,
                                              repeat: a.repeat, rows }, null, 1)}\n`);
  }
  device.destroy();
  return rows.some((r) => r.verdict === 'FAIL') ? 1 : 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await run('kernels', process.argv.slice(2), main, usage);
}
