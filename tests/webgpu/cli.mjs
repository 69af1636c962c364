// How every harness command starts and ends (bin/reftrain-webgpu.mjs, and kernels.mjs,
// replay.mjs and bench_linear.mjs run as scripts): --driver taken out of the arguments, the
// command's main(argv, openDevice) run, its status the exit status; an error is one line, exit 2
// for bad usage and 1 for anything else.
import { openDevice } from './gpu.mjs';

// --driver is the harness's, not a command's: it picks the Vulkan driver gpu.mjs loads.
function takeDriver(argv) {
  const i = argv.indexOf('--driver');
  if (i < 0) return argv;
  const d = argv[i + 1];
  if (d === 'system') process.env.REFTRAIN_WEBGPU_SYSTEM_DRIVER = '1';
  else if (d === 'lavapipe') delete process.env.REFTRAIN_WEBGPU_SYSTEM_DRIVER;
  else throw Object.assign(new Error(`--driver takes lavapipe or system, not ${d ?? 'nothing'}`), { usage: true });
  return [...argv.slice(0, i), ...argv.slice(i + 2)];
}

// `main` is a function of (argv, openDevice) returning the exit status; `usage` its help text.
export async function run(name, argv, main, usage) {
  try {
    const args = takeDriver(argv);
    if (args.includes('--help')) {
      console.log(usage);
      process.exit(0);
    }
    process.exit(await main(args, openDevice));
  } catch (e) {
    console.error(`reftrain-webgpu ${name}: ${e.message}`);
    process.exit(e.usage ? 2 : 1);
  }
}

// A command's arguments: `options` maps a flag to [key, convert] (convert: String by default);
// `--require f16` / `--without f16` set `f16` to true / false; the one argument without a flag
// goes to `positional`. Errors carry `usage`, so run() exits 2.
export function parseOptions(argv, { usage, options, positional, defaults }) {
  const a = { ...defaults, f16: 'if-available', [positional]: null };
  const bad = (what) => Object.assign(new Error(what), { usage: true });
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const value = () => {
      if (++i >= argv.length) throw bad(`${k} needs a value; ${usage}`);
      return argv[i];
    };
    if (options[k]) {
      const [key, convert = String] = options[k];
      a[key] = convert(value());
    } else if (k === '--require' || k === '--without') {
      if (value() !== 'f16') throw bad(`${k} takes f16, not ${argv[i]}`);
      a.f16 = k === '--require';
    } else if (!k.startsWith('--') && a[positional] === null) a[positional] = k;
    else throw bad(`unknown argument ${k}; ${usage}`);
  }
  if (a[positional] === null) throw bad(usage);
  return a;
}
