"""Times PyTorch training steps of the model a reftrain trace describes, on the CPU.

Usage: /usr/bin/python3 bench/torch_step.py TRACE.jsonl [--threads N] [--steps 11]

Reads the model shape (L, NH, C, V, Vp, maxT) and B, T from the trace's first line, builds the
same gpt2 model in float32 with tests/torch/gpt2_mirror.py's forward (manual causal attention,
tanh GELU, tied lm_head), and times forward + backward + torch.optim.AdamW per step on random
tokens. Prints one JSON line with the median ms of steps 2..N (step 1 warms up), as
bench/step_bench.sh reads it.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "torch"))
from gpt2_mirror import forward_loss, param_shapes  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=11)
    a = ap.parse_args()
    with open(a.trace) as f:
        run = json.loads(f.readline())
    cfg, B, T = run["model"], run["train"]["batch"], run["train"]["seq"]
    if cfg["arch"] != "gpt2":
        sys.exit(f"torch_step.py mirrors the gpt2 family only; the trace is {cfg['arch']}")
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    params = {n: (torch.randn(s) * 0.02 if len(s) > 1 else torch.ones(s)).requires_grad_()
              for n, s in param_shapes(cfg)}
    opt = torch.optim.AdamW(params.values(), lr=1e-3, weight_decay=0.1, foreach=False)
    times = []
    for _ in range(a.steps):
        idx = torch.randint(0, cfg["vocab"], (B, T))
        tgt = torch.randint(0, cfg["vocab"], (B, T))
        t0 = time.perf_counter()
        loss = forward_loss(params, cfg, idx, tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params.values(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=False)
        times.append((time.perf_counter() - t0) * 1000.0)
    print(json.dumps({"torch": torch.__version__, "threads": a.threads,
                      "median_ms": statistics.median(times[1:]), "loss": loss.item()}))


if __name__ == "__main__":
    main()
