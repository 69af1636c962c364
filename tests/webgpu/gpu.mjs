// The WebGPU device for the tests: Dawn's Node bindings on the lavapipe driver that
// scripts/install-webgpu.sh unpacks into .deps/webgpu/. Entry points call openDevice(); nothing
// needs to be set in the environment beforehand.
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
    throw new Error(`lavapipe not found at ${icd}: run scripts/install-deps.sh (or scripts/install-webgpu.sh)`);
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

// `limits`: names of adapter limits to request at the adapter's own value (e.g. the replay's
// minStorageBufferOffsetAlignment, to bind the mega-buffer's tensors where they lie).
export async function openDevice({ features = ['shader-f16'], limits = [] } = {}) {
  ensureDriverEnv();
  const { create, globals } = await import('webgpu');
  Object.assign(globalThis, globals);
  dawn = create([]);
  const adapter = await dawn.requestAdapter();
  if (!adapter) {
    throw new Error('WebGPU: requestAdapter() returned null — Dawn found no usable Vulkan driver ' +
                    `(VK_DRIVER_FILES=${process.env.VK_DRIVER_FILES}); Debian 12's own lavapipe is refused, ` +
                    'the one scripts/install-webgpu.sh unpacks is accepted');
  }
  const missing = features.filter((f) => !adapter.features.has(f));
  if (missing.length) throw new Error(`WebGPU adapter lacks required features: ${missing.join(', ')}`);
  const device = await adapter.requestDevice({
    requiredFeatures: features,
    requiredLimits: { maxStorageBuffersPerShaderStage: adapter.limits.maxStorageBuffersPerShaderStage,
                      maxComputeWorkgroupStorageSize: adapter.limits.maxComputeWorkgroupStorageSize,
                      maxComputeInvocationsPerWorkgroup: adapter.limits.maxComputeInvocationsPerWorkgroup,
                      ...Object.fromEntries(limits.map((k) => [k, adapter.limits[k]])) },
  });
  // Errors outside an error scope: reported, and the process fails at exit.
  device.addEventListener?.('uncapturederror', (e) => {
    console.error(`WebGPU uncaptured error: ${e.error.message}`);
    process.exitCode = 1;
  });
  const info = adapter.info ?? {};
  return { device, adapter, description: `${info.vendor ?? ''} ${info.architecture ?? ''} ${info.device ?? ''} ${info.description ?? ''}`.trim() };
}
