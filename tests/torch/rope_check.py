"""PyTorch oracle for reftrain's RoPE kernel (rotate-half convention, as in llama_mirror.py).

Usage: /usr/bin/python3 tests/torch/rope_check.py IN.safetensors OUT.safetensors

IN:  `x` (F32 [B, T, NH*hs]) activations, heads laid out one after the other along the last
     axis; `r` (F32, same shape) a projection for the backward check; __metadata__
     `heads` = NH and `theta` (e.g. "10000.0") as plain strings (or both inside a JSON `config`).
OUT (F64): `y` = rope(x) [B, T, NH*hs]; `grad` = d(sum(y * r))/dx = rope^T(r) [B, T, NH*hs].

rope (HF): per head, inv_freq_i = theta^(-2i/hs) (i < hs/2), angle = t * inv_freq_i for
positions t = 0..T-1, cos/sin = cat(angle, angle).cos()/.sin(), y = x*cos + rotate_half(x)*sin
with rotate_half(x) = cat(-x[hs/2:], x[:hs/2]); i.e. out[i] = x[i] cos - x[i+hs/2] sin,
out[i+hs/2] = x[i+hs/2] cos + x[i] sin.  Everything in float64; the gradient comes from autograd.
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_mirror import apply_rope, rope_cos_sin  # noqa: E402
from safetensors_io import read_safetensors, write_safetensors  # noqa: E402


def rope_params(meta):
    cfg = json.loads(meta["config"]) if "config" in meta else meta
    try:
        return int(cfg["heads"]), float(cfg["theta"])
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"metadata needs `heads` and `theta`: {meta}") from None


def rope_bthc(x, heads, theta):
    """rope on x [B, T, NH*hs] (any float dtype; cos/sin in float64 cast to x.dtype)."""
    B, T, C = x.shape
    hs = C // heads
    cos, sin = rope_cos_sin(T, hs, theta, x.dtype)
    xh = x.view(B, T, heads, hs).transpose(1, 2)  # [B, NH, T, hs]
    return apply_rope(xh, cos, sin).transpose(1, 2).reshape(B, T, C)


def run(in_path, out_path):
    tensors, meta = read_safetensors(in_path)
    heads, theta = rope_params(meta)
    if "x" not in tensors or "r" not in tensors:
        raise ValueError(f"{in_path}: needs tensors `x` and `r`")
    x, r = tensors["x"], tensors["r"]
    if x.ndim != 3 or r.shape != x.shape or heads < 1 or x.shape[2] % heads or (x.shape[2] // heads) % 2:
        raise ValueError(f"x {x.shape} / r {r.shape} / heads {heads}: need x [B,T,NH*hs], hs even, r like x")
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    y = rope_bthc(xt, heads, theta)
    (y * torch.tensor(r, dtype=torch.float64)).sum().backward()
    out = {"y": y.detach().numpy().astype(np.float64), "grad": xt.grad.numpy().astype(np.float64)}
    write_safetensors(out_path, out)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("inp", metavar="IN.safetensors")
    ap.add_argument("out", metavar="OUT.safetensors")
    a = ap.parse_args()
    out = run(a.inp, a.out)
    print(f"y {list(out['y'].shape)} max|y|={np.abs(out['y']).max():.6g} max|grad|={np.abs(out['grad']).max():.6g}")


if __name__ == "__main__":
    main()
