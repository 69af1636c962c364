"""Times PyTorch training steps of the model a reftrain trace describes, on the CPU.

Usage: python3 bench/torch_step.py TRACE.jsonl [--threads N] [--steps 11]
                                   [--mode stock|tuned|autocast] [--attention materialised|sdpa]
                                   [--adamw auto|fused|foreach|forloop] [--profile FILE] [--deps DIR]

The model and batch are the trace's: its first line gives the family (gpt2 or llama), the shape
(L, NH, C, F, V, Vp, maxT), B, T, the optimizer's hyper-parameters, the clip threshold and the
z-loss. The forward is the oracle's own code (tests/torch/gpt2_mirror.py, llama_mirror.py:
materialised causal attention, tanh GELU / SwiGLU, RoPE, all Vp logit columns), in float32 on
random tokens. One timed step = forward + loss + backward + global-norm clipping (the norm
alone when the trace's clip is 0: reftrain computes it either way) + torch.optim.AdamW (weight
decay on the matrices and embeddings, as reftrain) + zero_grad. AdamW is PyTorch's fastest CPU
implementation it offers: fused=True where the installed version has a fused CPU kernel
(PyTorch >= 2.4), else foreach=True (`--adamw` picks one). Prints one JSON line with the median
ms of steps 2..N (step 1 warms up), every step's ms, and what ran: torch version, BLAS
library loaded, AdamW.

Threads: torch.set_num_threads(N) and OMP_NUM_THREADS=N, set before torch is loaded (the
script re-executes itself once with the environment it needs).

Modes:
  stock  PyTorch as installed (Debian's python3-torch 1.13 with OpenBLAS's pthread build, or a
         pip torch 2.x with MKL/oneDNN).
  tuned  What an expert does to Debian's torch: OpenBLAS's OpenMP build (Debian's
         libopenblas0-openmp, fetched once with `apt-get download` and unpacked with `dpkg -x`
         into DIR/openblas-openmp, DIR = --deps, default the repo's git-ignored .deps/) first
         on LD_LIBRARY_PATH, so OpenBLAS and torch share one OpenMP thread pool instead of
         spinning against each other, and GLIBC_TUNABLES=glibc.malloc.mmap_max=0:
         glibc.malloc.trim_threshold=17179869184 so that freed activations stay in the heap
         instead of being unmapped and page-faulted back every step. Debian-specific: where
         there is no apt-get/dpkg, or the torch does not load libopenblas.so.0 (pip's MKL
         builds), it says so on stderr and exits with status 3 (unavailable here).
  autocast  stock, with the forward and the loss under torch.autocast('cpu', dtype=torch.bfloat16)
         (the backward runs outside it, as PyTorch recommends): the matrix products in bf16
         (AMX or AVX-512-BF16 where the CPU has them), fp32 master weights and optimizer. Not the
         same arithmetic as reftrain's fp32 step: it shows what a bf16 mode could gain.
Attention: materialised (default; the oracle's: the T×T probabilities, as reftrain's
materialised kernel and its bf16 mode) or sdpa (F.scaled_dot_product_attention(is_causal=True),
PyTorch's fused kernel: what a PyTorch user runs, the fair peer of reftrain's fused attention at
long T).
Profile: `--profile FILE` runs steps 2..N under torch.profiler (CPU) and writes FILE, a table of
ms per step by kind of work (the linear products, attention, GELU, LayerNorm, the optimizer, ...,
the same groups as `reftrain train --profile`'s kernels), then every op's self time: the per-op
profile to set beside reftrain's on the same step. The profiler's bookkeeping slows the steps
(the JSON line says "profiled"), so compare shares and the unprofiled medians, not these ms.
Exit status: 0 timed; 1 bad trace; 2 usage; 3 the mode is unavailable on this machine.
"""
import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "torch"))

TUNABLES = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184"
OPENBLAS_OMP_LIB = os.path.join("openblas-openmp", "usr", "lib", "x86_64-linux-gnu", "openblas-openmp")
REEXEC_MARK = "REFTRAIN_TORCH_STEP_ENV"
UNAVAILABLE = 3


class Unavailable(Exception):
    """The requested mode cannot run on this machine (exit status 3)."""


def fail(msg, status=1):
    print(f"error: {msg}", file=sys.stderr)
    sys.exit(status)


def openblas_openmp_dir(deps):
    """The lib dir of Debian's libopenblas0-openmp under `deps`, fetched and unpacked if absent."""
    lib = os.path.join(deps, OPENBLAS_OMP_LIB)
    if os.path.exists(os.path.join(lib, "libopenblas.so.0")):
        return lib
    if not (shutil.which("apt-get") and shutil.which("dpkg")):
        raise Unavailable("the tuned mode needs Debian's libopenblas0-openmp and this machine has "
                          "no apt-get/dpkg (the tuned mode is Debian-specific)")
    with tempfile.TemporaryDirectory() as tmp:
        got = subprocess.run(["apt-get", "download", "libopenblas0-openmp"], cwd=tmp,
                             capture_output=True, text=True)
        debs = glob.glob(os.path.join(tmp, "libopenblas0-openmp_*.deb"))
        if got.returncode != 0 or not debs:
            raise Unavailable("`apt-get download libopenblas0-openmp` failed: "
                              + (got.stderr.strip().splitlines() or ["no .deb"])[-1])
        os.makedirs(deps, exist_ok=True)
        subprocess.run(["dpkg", "-x", debs[0], os.path.join(deps, "openblas-openmp")], check=True)
    if not os.path.exists(os.path.join(lib, "libopenblas.so.0")):
        raise Unavailable(f"libopenblas0-openmp unpacked, but {lib}/libopenblas.so.0 is missing")
    return lib


def reexec_with_env(a):
    """Start this script again with the thread count (and the tuned mode's loader and malloc
    settings) in its environment: the loader and libgomp read them once, at start-up."""
    if os.environ.get(REEXEC_MARK) == "1":
        return
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    env[REEXEC_MARK] = "1"
    if a.mode == "tuned":
        lib = openblas_openmp_dir(a.deps)
        env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
        env["GLIBC_TUNABLES"] = TUNABLES
    os.execve(sys.executable, [sys.executable, os.path.abspath(__file__)] + sys.argv[1:], env)


def loaded_blas():
    """Paths of the BLAS libraries this process has mapped (OpenBLAS, reference BLAS, MKL)."""
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if line.rstrip().endswith(".so") or ".so." in line}
    keys = ("openblas", "libblas", "mkl")
    return sorted(p for p in paths if any(k in os.path.basename(p) for k in keys))


def blas_info(torch):
    """The BLAS torch was built against, as its build configuration states it (e.g. open, mkl)."""
    found = re.search(r"BLAS_INFO=([^,\s]+)", torch.__config__.show())
    return found.group(1) if found else "unknown"


def read_run(path):
    """The trace's run line as (mirror module, mirror cfg, B, T, optimizer dict, clip)."""
    try:
        with open(path) as f:
            run = json.loads(f.readline())
        m, t, o = run["model"], run["train"], run["optimizer"]
        cfg = {k: m[k] for k in ("arch", "layers", "heads", "channels", "vocab", "padded_vocab", "max_seq")}
        if t["precision"] != "fp32":
            fail(f"{path}: precision {t['precision']}; torch_step.py times fp32 steps only")
        if m["arch"] == "gpt2":
            import gpt2_mirror as mirror
        elif m["arch"] == "llama":
            import llama_mirror as mirror
            cfg.update(ffn=m["ffn"]["width"], rope_theta=m["rope"]["theta"], z_loss=t["z_loss"])
        else:
            fail(f"{path}: unknown model family {m['arch']!r}")
        return mirror, cfg, t["batch"], t["seq"], o
    except (OSError, ValueError, KeyError, TypeError) as e:
        fail(f"{path} is not a reftrain trace with a run line ({type(e).__name__}: {e}); "
             "pass the --trace file of a `reftrain train` run")


def make_adamw(torch, params, o, which):
    """torch.optim.AdamW over `params` with reftrain's decay groups; returns (optimizer, name)."""
    decay = [p for p in params.values() if p.dim() > 1]
    rest = [p for p in params.values() if p.dim() <= 1]
    groups = [{"params": decay, "weight_decay": o["wd"]}, {"params": rest, "weight_decay": 0.0}]
    kw = dict(lr=1e-4, betas=(o["beta1"], o["beta2"]), eps=o["eps"])
    order = {"auto": ["fused", "foreach"], "fused": ["fused"], "foreach": ["foreach"], "forloop": ["forloop"]}
    for name in order[which]:
        flag = {"fused": dict(fused=True), "foreach": dict(foreach=True), "forloop": dict(foreach=False)}[name]
        try:
            opt = torch.optim.AdamW(groups, **kw, **flag)
            if name == "fused":  # versions before the CPU kernel refuse at the first step
                for p in params.values():
                    p.grad = torch.zeros_like(p)
                opt.step()
            return opt, name
        except (TypeError, RuntimeError, ValueError) as e:
            if which != "auto":
                raise Unavailable(f"AdamW({name}=True) is not available in torch {torch.__version__}: {e}")
    raise AssertionError("unreachable: foreach AdamW exists in every supported torch")


def grad_norm_and_clip(torch, params, clip):
    """reftrain's step: the global gradient norm, and scaling to `clip` when clip > 0."""
    if clip > 0:
        return torch.nn.utils.clip_grad_norm_(params, clip)
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in params]))


# PyTorch's ops by the reftrain kernel that does the same work (first match wins). bmm is the
# materialised attention's two products; mm/addmm are the linear layers'.
OP_GROUPS = [
    ("loss", r"log_softmax|nll_loss|cross_entropy"),
    ("linear products", r"^aten::(mm|addmm|linear|matmul)$"),
    ("attention", r"bmm|softmax|scaled_dot_product|flash_attention|masked_fill|tril|where|bitwise_not"),
    ("gelu / swiglu", r"gelu|silu|sigmoid|tanh"),
    ("layernorm / rmsnorm", r"layer_norm|rms_norm|rsqrt|pow|mean"),
    ("embed", r"embedding|index_put|index_select"),
    ("bias gradients", r"^aten::sum$"),
    ("optimizer and clip", r"adam|foreach|norm|clamp|_fused|lerp|addcdiv|addcmul|sqrt"),
    ("add (residual, gradient sums)", r"^aten::add_?$"),
    ("mul, div (scales, chain rule)", r"^aten::(mul|div)_?$"),
    ("copies and layout", r"copy|clone|contiguous|^aten::cat$|stack|split|view|reshape|transpose|permute|^aten::t$|expand|select|slice"),
    ("fill and allocate", r"fill|zero|empty|zeros|ones|resize"),
]


def op_group(name):
    for group, pattern in OP_GROUPS:
        if re.search(pattern, name):
            return group
    return "other"


def write_profile(prof, steps, path):
    """The profiler's self CPU time per op, in ms per profiled step, grouped as OP_GROUPS."""
    rows = [(e.key, e.count / steps, e.self_cpu_time_total / 1000.0 / steps) for e in prof.key_averages()]
    rows = [r for r in rows if r[2] > 0]
    total = sum(r[2] for r in rows)
    groups = {}
    for name, _, ms in rows:
        groups[op_group(name)] = groups.get(op_group(name), 0.0) + ms
    with open(path, "w") as f:
        f.write(f"torch.profiler, {steps} steps: {total:.3f} ms/step of self CPU time\n")
        f.write(f"{'group':40s} {'ms/step':>10s} {'share':>7s}\n")
        for group, ms in sorted(groups.items(), key=lambda g: -g[1]):
            f.write(f"{group:40s} {ms:10.3f} {100 * ms / total:6.1f}%\n")
        f.write(f"\n{'op':40s} {'calls':>7s} {'ms/step':>10s} {'share':>7s}  group\n")
        for name, calls, ms in sorted(rows, key=lambda r: -r[2]):
            f.write(f"{name[:40]:40s} {calls:7.1f} {ms:10.3f} {100 * ms / total:6.1f}%  {op_group(name)}\n")


def time_steps(a):
    import torch

    blas = loaded_blas()
    if a.mode == "tuned" and not any("openblas-openmp" in p for p in blas):
        raise Unavailable(f"torch {torch.__version__} does not load libopenblas.so.0 (loaded BLAS: "
                          f"{blas or 'none'}), so OpenBLAS's OpenMP build changes nothing here")
    if a.attention == "sdpa" and not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        raise Unavailable(f"torch {torch.__version__} has no scaled_dot_product_attention (PyTorch >= 2.0)")
    mirror, cfg, B, T, o = read_run(a.trace)
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    params = {n: (torch.randn(s) * 0.02 if len(s) > 1 else torch.ones(s)).requires_grad_()
              for n, s in mirror.param_shapes(cfg)}
    opt, adamw = make_adamw(torch, params, o, a.adamw)
    bf16 = a.mode == "autocast"
    times = []

    def step():
        idx = torch.randint(0, cfg["vocab"], (B, T))
        tgt = torch.randint(0, cfg["vocab"], (B, T))
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = mirror.forward_loss(params, cfg, idx, tgt, attention=a.attention)
        loss.backward()
        grad_norm_and_clip(torch, list(params.values()), o["clip"])
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append((time.perf_counter() - t0) * 1000.0)
        return loss

    loss = step()  # the warm-up, never profiled
    if a.profile:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            for _ in range(a.steps - 1):
                loss = step()
        write_profile(prof, a.steps - 1, a.profile)
    else:
        for _ in range(a.steps - 1):
            loss = step()
    return {"torch": torch.__version__, "mode": a.mode, "attention": a.attention, "threads": a.threads, "arch": cfg["arch"],
            "batch": B, "seq": T, "adamw": adamw, "blas_info": blas_info(torch), "blas": blas, "steps": a.steps,
            "median_ms": statistics.median(times[1:]), "ms": [round(t, 3) for t in times],
            "loss": loss.item(), "profiled": bool(a.profile)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace", help="a reftrain --trace file (its first line sets model and batch)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=11, help="timed steps; the median skips the first")
    ap.add_argument("--mode", choices=["stock", "tuned", "autocast"], default="stock")
    ap.add_argument("--attention", choices=["materialised", "sdpa"], default="materialised")
    ap.add_argument("--adamw", choices=["auto", "fused", "foreach", "forloop"], default="auto")
    ap.add_argument("--profile", metavar="FILE", help="profile steps 2..N with torch.profiler; write the table to FILE")
    ap.add_argument("--deps", default=os.path.join(REPO, ".deps"), help="where tuned's OpenBLAS is unpacked")
    a = ap.parse_args()
    if a.threads < 1 or a.steps < 2:
        ap.error("--threads must be >= 1 and --steps >= 2 (step 1 is a warm-up)")
    try:
        reexec_with_env(a)
        print(json.dumps(time_steps(a)))
    except Unavailable as e:
        print(f"unavailable: {e}", file=sys.stderr)
        sys.exit(UNAVAILABLE)


if __name__ == "__main__":
    main()
