// What the WebGPU CTest scripts (check*.mjs) share: a failure list, running a program, picking a
// line out of its output, and the exit.
import { spawnSync } from 'node:child_process';

const failures = [];

export function fail(what) {
  failures.push(what);
  console.log(`FAIL ${what}`);
}

// A program's {status, stdout, stderr}; throws when it cannot start.
export function run(cmd, args) {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  if (r.error) throw r.error;
  return r;
}

// The last line of `text` that matches `re` ('' when none does).
export const last = (text, re) => text.split('\n').filter((l) => re.test(l)).pop() ?? '';

// Prints the verdict and exits: 1 with the count of failures, 0 with `passed`.
export function finish(passed) {
  console.log(failures.length ? `${failures.length} failure(s)` : passed);
  process.exit(failures.length ? 1 : 0);
}
