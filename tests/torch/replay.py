"""Replay a reftrain golden run directory in PyTorch: a GPU backend's parity test in ~200 lines.

Usage: python3 tests/torch/replay.py GOLDEN_DIR --out DIR [--steps N] [--device cpu|cuda]
                                     [--tf32 on|off] [--dtype float32|float64]

Reads only the golden files (docs/golden-format.md): config.json (shapes, optimizer, the lr of
every step), init.safetensors (initial weights by name; the mega-buffer layout with the decay
flag of each tensor in its metadata) and batches.safetensors (inputs and targets of every step).
Runs the steps with the model code of gpt2_mirror.py / llama_mirror.py (PyTorch's own layer_norm,
gelu, silu, cross_entropy, autograd) and AdamW written out from the GPU kernel's formulas (not
torch.optim):
    norm_sq = sum g^2 over finite g (float64);  grad_norm = f32(sqrt(norm_sq))
    clip = min(1, max_norm / max(grad_norm, 1e-6))            (1 when max_norm is 0)
    g' = isfinite(g) ? g*clip : 0;  m = b1*m + (1-b1)*g';  v = b2*v + ((1-b2)*g')*g'
    m_hat = m * (1/max(1 - b1^t, 1e-12));  v_hat = v * (1/max(1 - b2^t, 1e-12))
    w = w - lr*(m_hat/(sqrt(v_hat) + eps) + wd*w)              (wd = 0 outside the decay range)
with b^t = pow in double rounded to the run's dtype and every constant an f32 as the config gives
it. Mixed precision: every matmul weight is read through an fp16 rounding of the master
(straight-through gradient), as gpt2_mirror.py --precision mixed; a bf16 run's products go through
gpt2_mirror.Bf16Matmul, as gpt2_mirror.py --precision bf16. The loss is mean cross-entropy over the
first V of Vp logits + z*mean(lse^2).

Writes DIR/trace.jsonl (the golden trace's format: loss, z_loss, grad_norm, clip, lr per step)
and DIR/debug_state.safetensors (step 1's inputs, targets, logits, loss and every gradient), so
`reftrain compare GOLDEN_DIR DIR` checks both.
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gpt2_mirror as gm  # noqa: E402
import llama_mirror as lm  # noqa: E402
from safetensors_io import read_safetensors, write_safetensors  # noqa: E402


def f32(x):
    """A config number as the f32 it stands for (the config writes the shortest decimal)."""
    return float(np.float32(x))


def set_tf32(on):
    """TF32 for CUDA matmuls and convolutions; returns what the backend reports."""
    mode = "tf32" if on else "ieee"
    if hasattr(torch.backends.cuda.matmul, "fp32_precision"):  # PyTorch >= 2.9
        torch.backends.cuda.matmul.fp32_precision = mode
        torch.backends.cudnn.conv.fp32_precision = mode
        return torch.backends.cuda.matmul.fp32_precision
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on
    return "tf32" if torch.backends.cuda.matmul.allow_tf32 else "ieee"


def load_golden(d, dtype, device):
    """config, {name: leaf tensor}, set of decayed names, inputs [S,B,T], targets [S,B,T]."""
    with open(os.path.join(d, "config.json")) as f:
        config = json.load(f)
    if config.get("format") != "reftrain-golden-run":
        raise ValueError(f"{d}/config.json is not a reftrain golden run")
    if config["optimizer"]["name"] != "adamw":
        raise ValueError(f"{d}: replay.py replays adamw runs only, not {config['optimizer']['name']}")
    weights, meta = read_safetensors(os.path.join(d, "init.safetensors"))
    layout = json.loads(meta["layout"])
    params = {t["name"]: torch.tensor(weights[t["name"]], dtype=dtype, device=device, requires_grad=True)
              for t in layout}
    decay = {t["name"] for t in layout if t["decay"]}
    batches, _ = read_safetensors(os.path.join(d, "batches.safetensors"))
    inputs = torch.tensor(batches["inputs"].astype(np.int64), device=device)
    targets = torch.tensor(batches["targets"].astype(np.int64), device=device)
    return config, params, decay, inputs, targets


def model_cfg(config):
    m = config["model"]
    cfg = {k: m[k] for k in ("arch", "layers", "heads", "channels", "max_seq", "vocab", "padded_vocab")}
    if m["arch"] == "llama":
        cfg["ffn"], cfg["rope_theta"] = m["ffn"]["width"], m["rope"]["theta"]
    return cfg


def loss_and_logits(params, cfg, z, idx, tgt, precision):
    """(loss, z-loss part, logits [B,T,Vp]): mean CE over the first V logits + z*mean(lse^2)."""
    fwd = lm.forward_logits if cfg["arch"] == "llama" else gm.forward_logits
    logits = fwd(params, cfg, idx, precision)
    B, T = idx.shape
    V = cfg["vocab"]
    flat = logits[..., :V].reshape(B * T, V)
    loss = F.cross_entropy(flat, tgt.reshape(B * T))
    z_part = z * torch.logsumexp(flat, dim=-1).pow(2).mean() if z else torch.zeros((), dtype=loss.dtype, device=loss.device)
    return loss + z_part, float(z_part), logits


class AdamW:
    """Seed 004's AdamW over the parameters, with clipping by the global norm."""

    def __init__(self, params, decay, opt, dtype):
        self.params, self.decay, self.dtype = params, decay, dtype
        self.b1, self.b2, self.eps = f32(opt["beta1"]), f32(opt["beta2"]), f32(opt["eps"])
        self.wd, self.max_norm = f32(opt["wd"]), f32(opt["clip"])
        self.state = {n: (torch.zeros_like(w), torch.zeros_like(w)) for n, w in params.items()}

    def scalar(self, x, like):
        return torch.tensor(x, dtype=self.dtype, device=like.device)

    @torch.no_grad()
    def step(self, lr, t):
        norm_sq = 0.0
        for w in self.params.values():  # layout order, each tensor's sum in float64
            g = w.grad.double()
            norm_sq += float(torch.where(torch.isfinite(g), g * g, torch.zeros_like(g)).sum())
        grad_norm = f32(math.sqrt(norm_sq))
        clip = 1.0
        if self.max_norm > 0:
            clip = min(1.0, f32(np.float32(self.max_norm) / np.float32(max(grad_norm, f32(1e-6)))))
        one = np.float32(1)
        b1_corr = f32(one / max(one - np.float32(self.b1 ** t), np.float32(1e-12)))
        b2_corr = f32(one / max(one - np.float32(self.b2 ** t), np.float32(1e-12)))
        if self.dtype == torch.float64:  # the exact formulas, no f32 rounding of the constants
            b1_corr, b2_corr = 1 / max(1 - self.b1 ** t, 1e-12), 1 / max(1 - self.b2 ** t, 1e-12)
        for name, w in self.params.items():
            m, v = self.state[name]
            s = lambda x: self.scalar(x, w)  # noqa: E731
            g = torch.where(torch.isfinite(w.grad), w.grad * s(clip), torch.zeros_like(w))
            m.copy_(s(self.b1) * m + s(f32(one - np.float32(self.b1))) * g)
            v.copy_(s(self.b2) * v + (s(f32(one - np.float32(self.b2))) * g) * g)
            wd = self.wd if name in self.decay else 0.0
            step = (m * s(b1_corr)) / (torch.sqrt(v * s(b2_corr)) + s(self.eps)) + s(wd) * w
            w.sub_(s(lr) * step)
        return grad_norm, clip


def number(x):
    """x as the shortest decimal of its f32 (a JSON number)."""
    return float(np.format_float_scientific(np.float32(x), unique=True))


def debug_state(params, idx, tgt, logits, loss):
    out = {"inputs": idx.cpu().numpy().astype(np.int32), "targets": tgt.cpu().numpy().astype(np.int32),
           "logits": logits.detach().float().cpu().numpy(), "loss": np.array([loss], dtype=np.float32)}
    out.update({"grad." + n: w.grad.detach().float().cpu().numpy() for n, w in params.items()})
    return out


def replay(a):
    dtype, device = getattr(torch, a.dtype), torch.device(a.device)
    tf32 = set_tf32(a.tf32 == "on") if device.type == "cuda" else "n/a"
    config, params, decay, inputs, targets = load_golden(a.golden, dtype, device)
    cfg, z = model_cfg(config), f32(config["loss"]["z"])
    precision = config["train"]["precision"]
    lrs = config["schedule"]["lrs"]
    steps = min(a.steps or len(lrs), len(lrs), inputs.shape[0])
    opt = AdamW(params, decay, config["optimizer"], dtype)
    os.makedirs(a.out, exist_ok=True)
    run = {"type": "run", "format": "reftrain-golden-trace", "producer": "tests/torch/replay.py",
           "golden": os.path.abspath(a.golden), "preset": config["preset"], "steps": steps,
           "device": str(device), "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
           "tf32": tf32, "dtype": a.dtype, "torch": torch.__version__}
    with open(os.path.join(a.out, "trace.jsonl"), "w") as trace:
        trace.write(json.dumps(run) + "\n")
        for k in range(steps):
            for w in params.values():
                w.grad = None
            loss, z_part, logits = loss_and_logits(params, cfg, z, inputs[k], targets[k], precision)
            loss.backward()
            if k == 0:
                write_safetensors(os.path.join(a.out, "debug_state.safetensors"),
                                  debug_state(params, inputs[0], targets[0], logits, float(loss)),
                                  {"format": "reftrain-golden-debug-state", "step": "1",
                                   "producer": "tests/torch/replay.py"})
            grad_norm, clip = opt.step(f32(lrs[k]), k + 1)
            trace.write(json.dumps({"type": "step", "step": k + 1, "loss": number(loss.item()),
                                    "z_loss": number(z_part), "grad_norm": number(grad_norm),
                                    "clip": number(clip), "lr": number(lrs[k])}) + "\n")
    return steps


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("golden", metavar="GOLDEN_DIR")
    ap.add_argument("--out", required=True, help="directory for trace.jsonl and debug_state.safetensors")
    ap.add_argument("--steps", type=int, default=0, help="replay the first N steps (default: all)")
    ap.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    ap.add_argument("--tf32", choices=["on", "off"], default="off", help="TF32 matmuls on CUDA")
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    a = ap.parse_args()
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit("error: --device cuda but torch.cuda.is_available() is False")
    try:
        steps = replay(a)
    except (ValueError, KeyError, OSError) as e:
        sys.exit(f"error: {e}")
    print(f"replayed {steps} steps of {a.golden} on {a.device} ({a.dtype}, tf32 {a.tf32}) -> {a.out}")


if __name__ == "__main__":
    main()
