#!/usr/bin/env node
// reftrain-webgpu: the WebGPU harness as one command, for a backend project that installs this
// package from a reftrain checkout (`npm install PATH/tests/webgpu`) and points it at its own
// registry (docs/webgpu.md):
//   reftrain-webgpu kernels FIXTURE_DIR [--registry FILE.mjs] ...        every fixture, judged
//   reftrain-webgpu replay GOLDEN_DIR --out DIR [--registry FILE.mjs] ...  a training replay
//   reftrain-webgpu bench [SIZES...]                                    the linear forms, timed
//   reftrain-webgpu adapters                                            what Dawn sees
// Before or after the command's arguments, --driver lavapipe (the software Vulkan driver that
// scripts/install-webgpu.sh unpacks; the default) or --driver system (the machine's own Vulkan
// driver: a real GPU's, e.g. NVIDIA's ICD). `reftrain-webgpu COMMAND --help` lists its options.
// Exit: 0 passed, 1 failed, 2 bad usage.
import { run } from '../cli.mjs';
import { listAdapters } from '../gpu.mjs';

const commands = {
  kernels: () => import('../kernels.mjs'),
  replay: () => import('../replay.mjs'),
  bench: () => import('../bench_linear.mjs'),
  adapters: async () => ({
    usage: 'usage: reftrain-webgpu adapters [--driver lavapipe|system]: the adapters Dawn sees (pick one with --adapter NAME)',
    main: async () => {
      for (const line of await listAdapters()) console.log(line);
      return 0;
    },
  }),
};

const [name, ...argv] = process.argv.slice(2);
if (!commands[name]) {
  console.error(`reftrain-webgpu: ${name ? `no command ${name}` : 'no command'}; usage: reftrain-webgpu kernels|replay|bench|adapters ARGS... (COMMAND --help)`);
  process.exit(2);
}
const { main, usage } = await commands[name]();
await run(name, argv, main, usage);
