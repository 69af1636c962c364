// The WebGPU device for the tests: Dawn's Node bindings on the lavapipe driver that
// scripts/install-webgpu.sh unpacks into .deps/webgpu/, or on the machine's own Vulkan driver (a
// real GPU's, e.g. NVIDIA's ICD) when REFTRAIN_WEBGPU_SYSTEM_DRIVER is set (`--driver system`).
// Entry points call openDevice(); nothing needs to be set in the environment beforehand.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const deps = join(repo, '.deps', 'webgpu');
const icd = join(deps, 'lvp_icd.json');
const libDir = join(deps, 'driver', 'usr', 'lib', 'x86_64-linux-gnu');

// The Vulkan loader reads the driver list, and the dynamic linker the library path, once at
// process start, so a process without them re-runs itself with them set.
function ensureDriverEnv() {
  if (process.env.REFTRAIN_WEBGPU_SYSTEM_DRIVER) return;  // use whatever Vulkan driver is installed
  if (!existsSync(icd)) {
    throw new Error(`lavapipe not found at ${icd}: run scripts/install-deps.sh (or scripts/install-webgpu.sh), ` +
                    'or pass --driver system for the machine\'s own Vulkan driver (a GPU\'s)');
  }
  const ld = (process.env.LD_LIBRARY_PATH ?? '').split(':');
  if (process.env.VK_DRIVER_FILES === icd && ld[0] === libDir) return;
  const env = { ...process.env, VK_ICD_FILENAMES: icd, VK_DRIVER_FILES: icd,
                LD_LIBRARY_PATH: [libDir, ...ld.filter((p) => p)].join(':') };
  const r = spawnSync(process.execPath, [...process.execArgv, ...process.argv.slice(1)],
                      { stdio: 'inherit', env });
  if (r.error) throw r.error;
  process.exit(r.status ?? 1);
}

// Dawn frees its instance when the object create() returns is garbage-collected, and the next
// event processing then crashes at a random moment: it lives here for the whole process.
let dawn = null;
const listing = [];

// Dawn's node binding lists its adapters only in the error for an adapter name it does not
// know: the list, one "backend: 'vulkan', name: '...'" line per adapter.
export async function listAdapters() {
  ensureDriverEnv();
  const { create } = await import('webgpu');
  try {
    listing.push(create(['adapter=\u0001 no such adapter']));
    await listing.at(-1).requestAdapter();
  } catch (e) {
    const lines = String(e.message).split('\n').filter((l) => l.includes('backend:'));
    return lines.map((l) => l.replace(/^\s*\*\s*/, ''));
  }
  return [];
}

// `f16`: 'if-available' (request shader-f16 when the adapter has it), true (fail without it)
// or false. `adapter`: a name (or part of one) from listAdapters(), as Dawn's `adapter=` option.
// `limits`: names of adapter limits to request at the adapter's own value (e.g. the replay's
// minStorageBufferOffsetAlignment, to bind the mega-buffer's tensors where they lie).
// Returns {device, adapter, description, f16}: f16 whether the device has shader-f16.
export async function openDevice({ f16 = 'if-available', adapter: name = null, limits = [] } = {}) {
  ensureDriverEnv();
  const { create, globals } = await import('webgpu');
  Object.assign(globalThis, globals);
  // Dawn quantizes timestamps by default (a browser's defence against timing attacks).
  dawn = create([...(name ? [`adapter=${name}`] : []), 'disable-dawn-features=timestamp_quantization']);
  const adapter = await dawn.requestAdapter();
  if (!adapter) {
    throw new Error('WebGPU: requestAdapter() returned null — Dawn found no usable Vulkan driver ' +
                    `(VK_DRIVER_FILES=${process.env.VK_DRIVER_FILES}); Debian 12's own lavapipe is refused, ` +
                    'the one scripts/install-webgpu.sh unpacks is accepted');
  }
  const hasF16 = adapter.features.has('shader-f16');
  if (f16 === true && !hasF16) throw new Error('WebGPU adapter lacks shader-f16, which --require f16 asks for');
  // timestamp-query where the adapter has it: the harness times each case's pass on the GPU.
  const features = [...(hasF16 && f16 !== false ? ['shader-f16'] : []),
                    ...(adapter.features.has('timestamp-query') ? ['timestamp-query'] : [])];
  const device = await adapter.requestDevice({
    requiredFeatures: features,
    requiredLimits: { maxStorageBuffersPerShaderStage: adapter.limits.maxStorageBuffersPerShaderStage,
                      maxComputeWorkgroupStorageSize: adapter.limits.maxComputeWorkgroupStorageSize,
                      maxComputeInvocationsPerWorkgroup: adapter.limits.maxComputeInvocationsPerWorkgroup,
                      maxStorageBufferBindingSize: adapter.limits.maxStorageBufferBindingSize,
                      maxBufferSize: adapter.limits.maxBufferSize,
                      ...Object.fromEntries(limits.map((k) => [k, adapter.limits[k]])) },
  });
  // Errors outside an error scope: reported, and the process fails at exit.
  device.addEventListener?.('uncapturederror', (e) => {
    console.error(`WebGPU uncaptured error: ${e.error.message}`);
    process.exitCode = 1;
  });
  const info = adapter.info ?? {};
  const description = `${info.vendor ?? ''} ${info.architecture ?? ''} ${info.device ?? ''} ${info.description ?? ''}`
    .replace(/\s+/g, ' ').trim();
  return { device, adapter, description, f16: features.includes('shader-f16') };
}
