#!/usr/bin/env python3
"""The parity record of docs/parity.md: golden runs, their PyTorch replays, the drift table.

  python3 scripts/parity.py golden --reftrain build/reftrain --out build/parity/golden
      tiny and llama-tiny, fp32 and mixed, 50 and 500 steps (8 golden run directories)
  python3 scripts/parity.py replay --golden build/parity/golden --out DIR [--device cuda]
                                   [--tf32 on|off] [--dtype float32|float64]
      tests/torch/replay.py on every golden directory, into DIR/<name> (needs torch, numpy);
      --device webgpu runs tests/webgpu/replay.mjs instead (node, Dawn; docs/webgpu.md)
  python3 scripts/parity.py report --reftrain build/reftrain --golden build/parity/golden
                                   --replay DIR [DIR ...]
      `reftrain compare --json` of every replay against its golden run, as a markdown table

The replay step is the only one that needs the GPU: it reads the golden files alone, so the
golden directory can be copied to a machine without a reftrain build.
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNS = [(p, prec, steps) for steps in (50, 500) for p in ("tiny", "llama-tiny") for prec in ("fp32", "mixed")]


def name(preset, precision, steps):
    return f"{preset}-{precision}-{steps}"


def golden(a):
    for p, prec, steps in RUNS:
        out = os.path.join(a.out, name(p, prec, steps))
        subprocess.run([a.reftrain, "golden", "run", "--preset", p, "--precision", prec,
                        "--steps", str(steps), "--out", out], check=True)


def replay(a):
    script = os.path.join(ROOT, "tests", "torch", "replay.py")
    for p, prec, steps in RUNS:
        n = name(p, prec, steps)
        src, out = os.path.join(a.golden, n), os.path.join(a.out, n)
        if a.device == "webgpu":
            subprocess.run(["node", os.path.join(ROOT, "tests", "webgpu", "replay.mjs"), src, "--out", out], check=True)
            continue
        subprocess.run([sys.executable, script, src, "--out", out,
                        "--device", a.device, "--tf32", a.tf32, "--dtype", a.dtype], check=True)


def label(run):
    """The replay column: what ran it, from the first line of its trace."""
    if run.get("producer") == "tests/webgpu/replay.mjs":
        return f"WebGPU {run['device']}"  # the adapter's own description
    return f"{run['device_name']} {run['dtype']} tf32 {run['tf32']}, torch {run['torch']}"


def compare(reftrain, golden_dir, replay_dir):
    r = subprocess.run([reftrain, "compare", "--json", golden_dir, replay_dir], capture_output=True, text=True)
    if r.returncode == 2:
        raise SystemExit(f"reftrain compare {golden_dir} {replay_dir}: {r.stderr.strip()}")
    files = {os.path.basename(f["a"]): f for f in json.loads(r.stdout)["files"]}
    return files["trace.jsonl"], files["debug_state.safetensors"]


def drift_columns(trace):
    rows = trace["rows"]
    d = [x["drift"] for x in rows]
    first_50 = max(d[:50])
    over_1pct = next((x["step"] for x in rows if x["drift"] > 0.01), None)
    last = rows[-50:]
    mean_a, mean_b = (sum(x[k] for x in last) / len(last) for k in ("loss_a", "loss_b"))
    return [f"{first_50:.1e}", f"{d[49]:.1e}" if len(d) >= 50 else "-",
            f"{max(d):.1e} (step {trace['max_drift_step']})", f"{d[-1]:.1e}",
            "never" if over_1pct is None else str(over_1pct), f"{abs(mean_b / mean_a - 1):.1e}"]


def report(a):
    print("| replay | run | max drift, steps 1-50 | drift at step 50 | max drift, all steps | "
          "drift at the last step | first step past 1 % | mean loss of the last 50 steps: rel. diff | "
          "debug state: worst NMSE (tensor) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for rdir in a.replay:
        for p, prec, steps in RUNS:
            n = name(p, prec, steps)
            trace, debug = compare(a.reftrain, os.path.join(a.golden, n), os.path.join(rdir, n))
            with open(os.path.join(rdir, n, "trace.jsonl")) as f:
                run = json.loads(f.readline())
            worst = max(debug["rows"], key=lambda x: x["nmse"] or 0)
            print(f"| {label(run)} | {n} | " + " | ".join(drift_columns(trace)) +
                  f" | {worst['nmse']:.1e} ({worst['tensor']}) |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("golden")
    g.add_argument("--reftrain", required=True)
    g.add_argument("--out", required=True)
    r = sub.add_parser("replay")
    r.add_argument("--golden", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--device", default="cpu", help="cpu, cuda[:N] (PyTorch) or webgpu")
    r.add_argument("--tf32", choices=["on", "off"], default="off")
    r.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    t = sub.add_parser("report")
    t.add_argument("--reftrain", required=True)
    t.add_argument("--golden", required=True)
    t.add_argument("--replay", required=True, nargs="+")
    a = ap.parse_args()
    {"golden": golden, "replay": replay, "report": report}[a.cmd](a)


if __name__ == "__main__":
    main()
