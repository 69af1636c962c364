"""Checks bench/step_report.py's FLOP formula against PyTorch's own count.

Usage: /usr/bin/python3 tests/torch/flop_check.py

For small gpt2 and llama models (odd sizes, V < Vp), runs the mirror's forward + backward
(tests/torch/gpt2_mirror.py, llama_mirror.py) under torch.profiler(with_flops=True) and sums the
FLOPs PyTorch attributes to its matrix products: aten::mm and aten::addmm (the weight products,
forward and both backward products) and aten::bmm (attention's Q·Kᵀ, P·V and their backward).
The mirror materialises the full T×T score matrix, so its attention count equals the formula's
with T² scores per sequence instead of the causal T·(T+1)/2 that reftrain's figures use.
Both counts are exact integers; the check is equality. Prints one line per model; exit status
1 on any mismatch.
"""
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
import gpt2_mirror  # noqa: E402
import llama_mirror  # noqa: E402
import step_report  # noqa: E402

WEIGHT_PRODUCTS = ("aten::mm", "aten::addmm")
ATTENTION_PRODUCTS = ("aten::bmm",)


def profiled_flops(mirror, cfg, B, T):
    """(weight-product FLOPs, attention-product FLOPs) of one forward + backward, as counted
    by PyTorch's profiler."""
    torch.manual_seed(0)
    params = {n: (torch.randn(s) * 0.02).requires_grad_() for n, s in mirror.param_shapes(cfg)}
    idx = torch.randint(0, cfg["vocab"], (B, T))
    tgt = torch.randint(0, cfg["vocab"], (B, T))
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_flops=True) as prof:
        mirror.forward_loss(params, cfg, idx, tgt).backward()
    events = [e for e in prof.events() if e.flops]
    weights = sum(e.flops for e in events if e.name in WEIGHT_PRODUCTS)
    attention = sum(e.flops for e in events if e.name in ATTENTION_PRODUCTS)
    return weights, attention


def check(name, mirror, cfg, model, B, T):
    got_w, got_a = profiled_flops(mirror, cfg, B, T)
    want_w = step_report.matmul_flops(model, B, T)
    want_a = step_report.attention_flops(model, B, T, T * T)
    ok = got_w == want_w and got_a == want_a
    print(f"{name} B{B} T{T}: weight products profiler {got_w} formula {want_w}; "
          f"attention profiler {got_a} formula {want_a}: {'ok' if ok else 'MISMATCH'}")
    return ok


def main():
    gpt2 = {"arch": "gpt2", "layers": 2, "heads": 3, "channels": 24, "vocab": 61,
            "padded_vocab": 64, "max_seq": 16}
    llama = {"arch": "llama", "layers": 3, "heads": 2, "channels": 20, "ffn": 56, "vocab": 50,
             "padded_vocab": 64, "max_seq": 16, "rope_theta": 10000.0, "z_loss": 1e-4}
    llama_model = dict(llama, ffn={"kind": "swiglu", "width": llama["ffn"]})
    ok = all([check("gpt2", gpt2_mirror, gpt2, gpt2, 3, 7),
              check("gpt2", gpt2_mirror, gpt2, gpt2, 2, 16),
              check("llama", llama_mirror, llama, llama_model, 3, 9)])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
