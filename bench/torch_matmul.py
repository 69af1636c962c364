"""Times PyTorch's CPU matrix products (MKL/oneDNN in pip builds, OpenBLAS in Debian's) on the
linear-layer shapes of bench/bench_matmul.cpp, to set beside its `blocked` rows in one run.

Usage: python3 bench/torch_matmul.py [--threads 1] [--filter REGEX] [--reps 20]

For each shape (M rows, K inputs, O outputs) and product, the same operands and layouts as
bench_matmul's:
  fwd         out[M,O] = inp[M,K] · w[O,K]ᵀ        torch.mm(inp, w.t(), out=out)
  bwd_data    dinp[M,K] += dout[M,O] · w[O,K]      dinp.addmm_(dout, w)
  bwd_weight  dw[O,K] += dout[M,O]ᵀ · inp[M,K]     dw.addmm_(dout.t(), inp)
in float32, after two warm-up calls; prints one line per product: its bench_matmul name, the
median ms of --reps calls and GFLOP/s (2·M·K·O per product).
"""
import argparse
import os
import re
import statistics
import sys
import time

SHAPES = [("cube256", 256, 256, 256), ("cube512", 512, 512, 512), ("cube1024", 1024, 1024, 1024),
          ("cube2048", 2048, 2048, 2048), ("baby_qkv", 2048, 384, 1152),
          ("baby_attproj", 2048, 384, 384), ("baby_fc", 2048, 384, 1536),
          ("baby_fcproj", 2048, 1536, 384), ("baby_lmhead", 2048, 384, 4096),
          ("gpt2_qkv", 256, 768, 2304), ("gpt2_attproj", 256, 768, 768), ("gpt2_fc", 256, 768, 3072),
          ("gpt2_fcproj", 256, 3072, 768), ("gpt2_lmhead", 256, 768, 50304)]


def products(torch, M, K, O):
    g = torch.Generator().manual_seed(1)
    inp, w = torch.randn(M, K, generator=g), torch.randn(O, K, generator=g)
    dout, out = torch.randn(M, O, generator=g), torch.empty(M, O)
    dinp, dw = torch.zeros(M, K), torch.zeros(O, K)
    return {"fwd": lambda: torch.mm(inp, w.t(), out=out),
            "bwd_data": lambda: dinp.addmm_(dout, w),
            "bwd_weight": lambda: dw.addmm_(dout.t(), inp)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--filter", default="", help="a regex on the names, e.g. 'baby_(fc|qkv)'")
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    if a.threads < 1 or a.reps < 1:
        ap.error("--threads and --reps must be >= 1")
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    import torch
    torch.set_num_threads(a.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads", file=sys.stderr)
    for name, M, K, O in SHAPES:
        for product, run in products(torch, M, K, O).items():
            label = f"torch/{product}/{name}/M{M}_K{K}_O{O}/threads:{a.threads}"
            if not re.search(a.filter, label):
                continue
            run(), run()
            ms = []
            for _ in range(a.reps):
                t0 = time.perf_counter()
                run()
                ms.append((time.perf_counter() - t0) * 1000.0)
            med = statistics.median(ms)
            print(f"{label} {med:.3f} ms {2.0 * M * K * O / med / 1e6:.1f} GFLOP/s", flush=True)


if __name__ == "__main__":
    main()
