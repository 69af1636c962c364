// The outside-backend test (CTest label `webgpu`): node tests/webgpu/check_llmc.mjs REFTRAIN_BIN WORK_DIR
// The example backend in llm.c's conventions (tests/webgpu/examples/llmc: one Params struct,
// every buffer read_write, B and T for N, softmax and cross-entropy as separate passes, preatt /
// datt scratch, one matmul backward for dinp, dweight and dbias) goes through the packaged
// command exactly as another project would run it — only its registry, no edit to its WGSL:
//  1. `reftrain-webgpu kernels` on both archs' fixtures: every case of every kernel it lists ok,
//     except the cross-entropy case with z-loss, which its `when` declines (not run); every
//     kernel it does not list reported not run; `reftrain compare --subset` agrees;
//  2. `reftrain-webgpu replay` of 20-step golden runs of tiny and llama-tiny (fp32, adamw) with
//     its registry (reftrain's twins for the kernels it lacks: llama's RMSNorm, RoPE, SwiGLU,
//     the optimizer): `reftrain compare` within the fp32 drift gate (1e-5), and its step-1
//     kernel-call dump within tolerance of reftrain's, call by call (--first-divergence).
//     llama-tiny trains with z-loss, which the example's loss declines: the replay must say that
//     reftrain's twin ran the loss (and tiny, without z-loss, must not).
import { fail, finish, last, run } from './check_util.mjs';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const [reftrain, work] = process.argv.slice(2);
if (!reftrain || !work) { console.error('usage: check_llmc.mjs REFTRAIN_BIN WORK_DIR'); process.exit(2); }
const registry = join(here, 'examples', 'llmc', 'registry.mjs');
const bin = join(here, 'bin', 'reftrain-webgpu.mjs');
const harness = (args) => run(process.execPath, [bin, ...args]);

const own = Object.keys((await import(registry)).default);

function checkFixtures() {
  const fix = join(work, 'fixtures'), out = join(work, 'out'), json = join(work, 'kernels.json');
  rmSync(work, { recursive: true, force: true });
  const gen = run(reftrain, ['golden', 'kernels', '--arch', 'all', '--out', fix]);
  if (gen.status !== 0) return fail(`reftrain golden kernels: ${gen.stderr}`);
  const r = harness(['kernels', fix, '--registry', registry, '--out', out, '--json', json]);
  console.log(last(r.stdout, /cases:/));
  if (r.status !== 0 || !existsSync(json)) return fail(`kernels exit ${r.status}\n${r.stdout}${r.stderr}`);
  for (const row of JSON.parse(readFileSync(json, 'utf8')).rows) {
    const declined = row.kernel === 'crossentropy_forward_backward' && row.case === 'awkward';
    const want = !own.includes(row.kernel) || declined ? 'not run' : 'ok';
    if (row.verdict !== want) fail(`${row.kernel}/${row.case}: ${row.verdict} (want ${want}): ${row.why ?? ''}`);
    if (declined && !/z-loss|z =/.test(row.why ?? '')) fail(`crossentropy awkward is not run for another reason: ${row.why}`);
  }
  const cmp = run(reftrain, ['compare', fix, out, '--subset', '--quiet']);
  console.log(`compare --subset: exit ${cmp.status}: ${last(cmp.stdout, /within|past/)}`);
  if (cmp.status !== 0) fail(`compare --subset exit ${cmp.status}\n${cmp.stdout}${cmp.stderr}`);
}

function checkReplay(preset) {
  const golden = join(work, `golden-${preset}`), out = join(work, `replay-${preset}`);
  const g = run(reftrain, ['golden', 'run', '--preset', preset, '--steps', '20', '--dump-step', '1', '--out', golden]);
  if (g.status !== 0) return fail(`golden run ${preset}: ${g.stderr}`);
  const r = harness(['replay', golden, '--out', out, '--registry', registry, '--dump-step', '1']);
  if (r.status !== 0) return fail(`${preset}: replay exit ${r.status}\n${r.stdout}${r.stderr}`);
  const cmp = run(reftrain, ['compare', golden, out, '--max-drift', '1e-5', '--quiet']);
  const calls = run(reftrain, ['compare', '--first-divergence', join(golden, 'step-1.safetensors'), join(out, 'step-1.safetensors')]);
  console.log(`${preset} with the llm.c registry: ${last(r.stdout, /replayed/).replace(/ on .*:/, ':')}; compare exit ${cmp.status}: ` +
              `${last(cmp.stdout, /max drift/)}; step-1 calls: exit ${calls.status} ${last(calls.stdout, /diverge|within/)}`);
  if (cmp.status !== 0) fail(`${preset}: compare exit ${cmp.status}\n${cmp.stdout}${cmp.stderr}`);
  const fellBack = last(r.stdout, /reftrain's twin ran/);
  if (fellBack) console.log(`  ${fellBack}`);
  const wantFallback = preset === 'llama-tiny';
  if (Boolean(fellBack) !== wantFallback || (wantFallback && !/crossentropy_forward_backward \(llm\.c's loss has no z-loss/.test(fellBack))) {
    fail(`${preset}: ${wantFallback ? 'no' : 'an unexpected'} note of the declined loss: ${fellBack || r.stdout}`);
  }
  if (calls.status !== 0) fail(`${preset}: the step-1 call dumps diverge\n${calls.stdout}${calls.stderr}`);
}

checkFixtures();
for (const preset of ['tiny', 'llama-tiny']) checkReplay(preset);
finish('webgpu llm.c example: all checks passed');
