// node tests/webgpu/kernels.mjs FIXTURE_DIR --out OUT_DIR [--registry FILE.mjs] [--only a,b]
//                                [--linear naive|tiled|reg4x4] [--attention materialised|fused]
//
// Runs every fixture of a `reftrain golden kernels` directory through its WGSL twin on WebGPU
// (Dawn on lavapipe, see gpu.mjs) and writes each result as OUT_DIR/<fixture>.safetensors with
// the fixture's tensor names, so that `reftrain compare FIXTURE_DIR OUT_DIR` judges it by the
// manifest's tolerances. Fixtures without a twin are listed, and written nowhere.
// Exit status: 0 when every twin ran, 1 when one failed to compile or run, 2 on bad usage.
import { mkdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { openDevice } from './gpu.mjs';
import { readSafetensors, writeSafetensors } from './safetensors.mjs';
import { runFixture } from './runner.mjs';
import { makeRegistry } from './registry.mjs';

function parseArgs(argv) {
  const a = { dir: null, out: null, registry: null, only: null, linear: 'naive', attention: 'materialised' };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    if (k === '--out') a.out = argv[++i];
    else if (k === '--registry') a.registry = argv[++i];
    else if (k === '--only') a.only = argv[++i].split(',');
    else if (k === '--linear') a.linear = argv[++i];
    else if (k === '--attention') a.attention = argv[++i];
    else if (!k.startsWith('--') && !a.dir) a.dir = k;
    else throw new Error(`unknown argument ${k}`);
  }
  if (!a.dir || !a.out) throw new Error('usage: kernels.mjs FIXTURE_DIR --out OUT_DIR [--registry FILE.mjs] [--only a,b] [--linear naive|tiled|reg4x4] [--attention materialised|fused]');
  return a;
}

// {ran: [names], failed: [{name, error}], missing: [names]}
export async function runFixtures(device, dir, out, registry, only = null) {
  const manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8'));
  mkdirSync(out, { recursive: true });
  const report = { ran: [], failed: [], missing: [] };
  for (const entry of manifest.kernels) {
    if (only && !only.includes(entry.name)) continue;
    const twin = registry[entry.name];
    if (!twin) { report.missing.push(entry.name); continue; }
    try {
      const fixture = readSafetensors(join(dir, entry.file));
      const tensors = await runFixture(device, twin, entry, fixture);
      writeSafetensors(join(out, entry.file), tensors, { twin: `${twin.file ?? 'source'}:${(twin.passes ?? [twin]).map((p) => p.entry).join('+')}` });
      report.ran.push(entry.name);
    } catch (e) {
      report.failed.push({ name: entry.name, error: e.message });
    }
  }
  return report;
}

async function main() {
  let args;
  try { args = parseArgs(process.argv.slice(2)); } catch (e) { console.error(e.message); process.exit(2); }
  const registry = args.registry
    ? (await import(pathToFileURL(resolve(args.registry)).href)).default : makeRegistry({ linear: args.linear, attention: args.attention });
  const { device, description } = await openDevice();
  const report = await runFixtures(device, args.dir, args.out, registry, args.only);
  console.log(`device: ${description}`);
  console.log(`ran ${report.ran.length}: ${report.ran.join(' ')}`);
  for (const f of report.failed) console.log(`FAILED ${f.name}: ${f.error}`);
  console.log(`no twin (${report.missing.length}): ${report.missing.join(' ') || '-'}`);
  device.destroy();
  process.exit(report.failed.length ? 1 : 0);
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) await main();
