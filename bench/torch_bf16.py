"""PyTorch's CPU bf16 autocast on the linear shapes of bench/bench_bf16.cpp: one layer's forward
and backward (input and weight fp32, autocast casting them to bf16 as a training step does; the
backward computes the input and weight gradients), the median of 7 runs after 2 warm-ups, and the
same in fp32. Then the layer's three products alone as torch.mm on bf16 tensors (oneDNN's AMX or
AVX512-BF16 kernels, no casts), beside bench_bf16's per-product line.

Usage: python3 bench/torch_bf16.py THREADS...
"""
import statistics
import sys
import time

import torch

SHAPES = [("baby_qkv", 2048, 384, 1152), ("baby_fc", 2048, 384, 1536),
          ("baby_fcproj", 2048, 1536, 384), ("gpt2_qkv", 4096, 768, 2304),
          ("gpt2_fc", 4096, 768, 3072), ("gpt2_fcproj", 4096, 3072, 768)]


def median_ms(f):
    for _ in range(2):
        f()
    t = []
    for _ in range(7):
        t0 = time.perf_counter()
        f()
        t.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(t)


def layer_ms(x, w, b, dout, autocast):
    def step():
        x.grad = w.grad = b.grad = None
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            y = torch.nn.functional.linear(x, w, b)
        y.backward(dout.to(y.dtype))
    return median_ms(step)


def products_ms(x, w, dout):
    x, w, dout = (v.detach().to(torch.bfloat16) for v in (x, w, dout))
    return (median_ms(lambda: torch.mm(x, w.t())), median_ms(lambda: torch.mm(dout, w)),
            median_ms(lambda: torch.mm(dout.t(), x)))


def main():
    print(f"torch {torch.__version__}")
    for threads in [int(a) for a in sys.argv[1:]] or [torch.get_num_threads()]:
        torch.set_num_threads(threads)
        for name, n, k, o in SHAPES:
            g = torch.Generator().manual_seed(1)
            x = torch.randn(n, k, generator=g, requires_grad=True)
            w = torch.randn(o, k, generator=g, requires_grad=True)
            b = torch.randn(o, generator=g, requires_grad=True)
            dout = torch.randn(n, o, generator=g)
            f32 = layer_ms(x, w, b, dout, False)
            bf = layer_ms(x, w, b, dout, True)
            print(f"{name:14s} threads {threads:2d}  torch fp32 {f32:8.2f} ms  torch autocast bf16 {bf:8.2f} ms")
            gflop = 2.0 * n * k * o / 1e9
            f, d, wt = products_ms(x, w, dout)
            print(f"{name:14s} threads {threads:2d}  torch bf16 mm products: fwd {f:.2f} ms "
                  f"({gflop / f * 1e3:.0f} GFLOP/s)  bwd_data {d:.2f} ({gflop / d * 1e3:.0f})  "
                  f"bwd_weight {wt:.2f} ({gflop / wt * 1e3:.0f})")


if __name__ == "__main__":
    main()
