"""Figures of whole training steps for bench/run_all.sh: one JSON record per measurement, and
the summary table built from them. Standard library only (it runs under any python3).

Usage:
  step_report.py peak BENCH.json
      The FLOP/s (all threads together) of bench_peak's BM_fma_peak in a Google Benchmark
      --benchmark_format=json file.
  step_report.py record --trace TRACE --preset P --threads N --run LABEL [--torch-json FILE]
                        [--peak FLOPS] [--skipped REASON] [--repeat K]
      One JSON line: the step's ms (the median `ms` of the trace's steps 2..N, or the
      median_ms of torch_step.py's output when --torch-json is given), tokens per step and
      model FLOPs per step (from the trace's run line), and the peak at this thread count;
      K numbers the run when a measurement is repeated (bench/run_all.sh REPEATS).
  step_report.py table RESULTS.jsonl
      The summary table (markdown) and the thread-scaling table. Repeated runs of one (preset,
      threads, run) are one row: the median of their ms, and each run's ms listed.

Model FLOPs of one training step (forward + backward; the optimizer's few FLOPs per parameter
are not counted), with B·T tokens, L layers, C channels, NH heads of hs = C/NH, vocab Vp (all
padded columns are computed) and FFN width F:
  matmuls    6 · N_mm · B·T           N_mm = weights read by a matrix product:
                                        gpt2:  L·12·C² + Vp·C  (qkv 3C², proj C², fc and fc-proj 8C²;
                                               lm_head tied to wte, counted once)
                                        llama: L·(4·C² + 3·C·F) + Vp·C (untied lm_head)
             (forward Y = X·Wᵀ is 2 FLOPs per weight per token; backward-data and
             backward-weight are 2 each.) Biases, norms and embedding lookups are not matmuls.
  attention  6 · L · B · C · T·(T+1)   causal: row t has t+1 scores; per head and score, forward
                                       Q·Kᵀ and P·V are 2·hs FLOPs each, backward dP, dV, dQ, dK
                                       are 2·hs each: 12·hs per score, × NH heads = 12·C, × the
                                       T·(T+1)/2 scores of a sequence.
"""
import argparse
import json
import statistics
import sys
from collections import OrderedDict


def fail(msg):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(1)


def read_trace(path):
    """(run line, [ms of each step]) of a reftrain trace."""
    try:
        with open(path) as f:
            lines = [json.loads(line) for line in f if line.strip()]
    except (OSError, ValueError) as e:
        fail(f"cannot read trace {path}: {e}")
    if not lines or lines[0].get("type") != "run":
        fail(f"{path} has no run line first; pass the --trace file of a `reftrain train` run")
    return lines[0], [r["ms"] for r in lines if r.get("type") == "step"]


def matmul_weights(m):
    """N_mm: the weights a forward reads through a matrix product (see the module doc)."""
    L, C, Vp = m["layers"], m["channels"], m["padded_vocab"]
    if m["arch"] == "gpt2":
        return L * 12 * C * C + Vp * C
    if m["arch"] == "llama":
        return L * (4 * C * C + 3 * C * m["ffn"]["width"]) + Vp * C
    fail(f"unknown model family {m['arch']!r}")


def matmul_flops(m, B, T):
    """Forward + backward FLOPs of the weight products: 6 per weight per token."""
    return 6 * matmul_weights(m) * B * T


def attention_flops(m, B, T, scores_per_seq):
    """Forward + backward FLOPs of Q·Kᵀ and P·V: 12·C per score (see the module doc)."""
    return 12 * m["layers"] * B * m["channels"] * scores_per_seq


def step_flops(run):
    """Model FLOPs of one training step of the run line's model and batch (causal attention:
    T·(T+1)/2 scores per sequence)."""
    m, t = run["model"], run["train"]
    B, T = t["batch"], t["seq"]
    return matmul_flops(m, B, T) + attention_flops(m, B, T, T * (T + 1) // 2)


def peak_flops(path):
    try:
        with open(path) as f:
            runs = json.load(f)["benchmarks"]
        return next(r["FLOPS"] for r in runs if r["name"].startswith("BM_fma_peak"))
    except (OSError, ValueError, KeyError, StopIteration) as e:
        fail(f"{path} holds no BM_fma_peak result with a FLOPS counter ({type(e).__name__}: {e})")


def record(a):
    run, ms = read_trace(a.trace)
    rec = OrderedDict(preset=a.preset, threads=a.threads, run=a.run,
                      batch=run["train"]["batch"], seq=run["train"]["seq"],
                      tokens=run["train"]["batch"] * run["train"]["seq"],
                      flops=step_flops(run), peak=a.peak, repeat=a.repeat, ms=None)
    if a.skipped:
        rec["skipped"] = a.skipped
    elif a.torch_json:
        try:
            with open(a.torch_json) as f:
                rec["ms"] = json.loads(f.read().strip().splitlines()[-1])["median_ms"]
        except (OSError, ValueError, KeyError, IndexError) as e:
            fail(f"cannot read torch_step.py's result {a.torch_json}: {e}")
    else:
        if len(ms) < 2:
            fail(f"{a.trace} has {len(ms)} steps; the median skips step 1, so it needs >= 2")
        rec["ms"] = statistics.median(ms[1:])
    print(json.dumps(rec))


def fmt_row(cells):
    return "| " + " | ".join(cells) + " |"


def merge_repeats(recs):
    """One record per (preset, threads, run): the median ms of its repeats, and their ms in
    `runs` (a skipped measurement stays as it is)."""
    merged = OrderedDict()
    for r in recs:
        key = (r["preset"], r["threads"], r["run"])
        if key not in merged:
            merged[key] = dict(r, runs=[])
        if r.get("ms"):
            merged[key]["runs"].append(r["ms"])
    for m in merged.values():
        if m["runs"]:
            m["ms"] = statistics.median(m["runs"])
    return list(merged.values())


def table(path):
    with open(path) as f:
        recs = merge_repeats([json.loads(line) for line in f if line.strip()])
    repeated = any(len(r["runs"]) > 1 for r in recs)
    cols = ["preset", "B×T", "threads", "run", "ms/step", "tokens/s", "model GFLOP/s",
            "% of peak", "÷ reftrain"] + (["runs (ms/step)"] if repeated else [])
    print(fmt_row(cols))
    print(fmt_row(["---"] * 4 + ["---:"] * 5 + (["---"] if repeated else [])))
    base = {(r["preset"], r["threads"]): r["ms"] for r in recs if r["run"] == "reftrain" and r["ms"]}
    for r in recs:
        head = [r["preset"], f"{r['batch']}×{r['seq']}", str(r["threads"]), r["run"]]
        if r.get("skipped") or not r["ms"]:
            print(fmt_row(head + [f"skipped: {r.get('skipped', 'no result')}"] + [""] * (4 + repeated)))
            continue
        rate = r["flops"] / (r["ms"] / 1000.0)
        ref = base.get((r["preset"], r["threads"]))
        runs = [", ".join(f"{ms:.1f}" for ms in r["runs"])] if repeated else []
        print(fmt_row(head + [f"{r['ms']:.1f}", f"{r['tokens'] / (r['ms'] / 1000.0):,.0f}",
                              f"{rate / 1e9:.1f}",
                              f"{100.0 * rate / r['peak']:.1f} %" if r["peak"] else "n/a",
                              f"{r['ms'] / ref:.2f}×" if ref else "n/a"] + runs))
    scaling(recs)


def scaling(recs):
    """ms at the fewest threads ÷ ms at each other thread count, per preset and run."""
    series = OrderedDict()
    for r in recs:
        if r["ms"]:
            series.setdefault((r["preset"], r["run"]), {})[r["threads"]] = r["ms"]
    rows = []
    for (preset, run), by_t in series.items():
        t0 = min(by_t)
        rows += [fmt_row([preset, run, f"{t0} → {t}", f"{by_t[t0] / by_t[t]:.2f}×"])
                 for t in sorted(by_t) if t != t0]
    if rows:
        print()
        print(fmt_row(["preset", "run", "threads", "speed-up"]))
        print(fmt_row(["---", "---", "---", "---:"]))
        print("\n".join(rows))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("peak")
    p.add_argument("bench_json")
    r = sub.add_parser("record")
    r.add_argument("--trace", required=True)
    r.add_argument("--preset", required=True)
    r.add_argument("--threads", type=int, required=True)
    r.add_argument("--run", required=True)
    r.add_argument("--torch-json")
    r.add_argument("--peak", type=float)
    r.add_argument("--skipped")
    r.add_argument("--repeat", type=int, default=1)
    t = sub.add_parser("table")
    t.add_argument("results")
    a = ap.parse_args()
    if a.cmd == "peak":
        print(peak_flops(a.bench_json))
    elif a.cmd == "record":
        record(a)
    else:
        table(a.results)


if __name__ == "__main__":
    main()
