"""Write llm.c-format files from independent code (test fixtures for reftrain).

Usage:
  /usr/bin/python3 tests/torch/llmc_files.py checkpoint IN.safetensors OUT.bin
      GPT-2 checkpoint: 256 little-endian int32 header [20240326, 3, maxT, V, L, NH, C, Vp, 0...],
      then float32 params in llm.c order: wte [Vp,C], wpe [maxT,C], ln1w [L,C], ln1b [L,C],
      qkvw [L,3C,C], qkvb [L,3C], attprojw [L,C,C], attprojb [L,C], ln2w [L,C], ln2b [L,C],
      fcw [L,4C,C], fcb [L,4C], fcprojw [L,C,4C], fcprojb [L,C], lnfw [C], lnfb [C]
      (per-layer blocks stack the nanoGPT tensors in layer order, same [out,in] layout).
      IN holds the nanoGPT-named params and a `config` metadata JSON (see gpt2_mirror.py).
  /usr/bin/python3 tests/torch/llmc_files.py tokens OUT.bin --count N --vocab V --seed S
      Token file: 256 int32 header [20240520, 1, N, 0...], then N uint16 tokens from
      numpy.random.default_rng(S).integers(0, V, size=N).
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_io import read_safetensors  # noqa: E402

LAYER_ORDER = ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
               "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
               "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"]


def header(*vals):
    h = np.zeros(256, dtype="<i4")
    h[:len(vals)] = vals
    return h


def write_checkpoint(in_path, out_path):
    t, meta = read_safetensors(in_path)
    cfg = json.loads(meta["config"])
    L, NH, C, V, Vp, maxT = (cfg[k] for k in ("layers", "heads", "channels", "vocab", "padded_vocab", "max_seq"))
    blocks = [t["transformer.wte.weight"], t["transformer.wpe.weight"]]
    blocks += [np.stack([t[f"transformer.h.{l}.{s}"] for l in range(L)]) for s in LAYER_ORDER]
    blocks += [t["transformer.ln_f.weight"], t["transformer.ln_f.bias"]]
    want = Vp * C + maxT * C + L * (12 * C * C + 13 * C) + 2 * C
    got = sum(b.size for b in blocks)
    if got != want or blocks[0].shape != (Vp, C) or blocks[1].shape != (maxT, C):
        raise ValueError(f"parameter sizes ({got}) do not match config {cfg} ({want})")
    with open(out_path, "wb") as f:
        f.write(header(20240326, 3, maxT, V, L, NH, C, Vp).tobytes())
        for b in blocks:
            f.write(np.ascontiguousarray(b, dtype="<f4").tobytes())


def write_tokens(out_path, count, vocab, seed):
    if not 0 < vocab <= 65536:
        raise ValueError(f"vocab {vocab} does not fit uint16")
    toks = np.random.default_rng(seed).integers(0, vocab, size=count).astype("<u2")
    with open(out_path, "wb") as f:
        f.write(header(20240520, 1, count).tobytes())
        f.write(toks.tobytes())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("checkpoint")
    c.add_argument("inp", metavar="IN.safetensors")
    c.add_argument("out", metavar="OUT.bin")
    k = sub.add_parser("tokens")
    k.add_argument("out", metavar="OUT.bin")
    k.add_argument("--count", type=int, required=True)
    k.add_argument("--vocab", type=int, required=True)
    k.add_argument("--seed", type=int, required=True)
    a = ap.parse_args()
    if a.cmd == "checkpoint":
        write_checkpoint(a.inp, a.out)
    else:
        write_tokens(a.out, a.count, a.vocab, a.seed)


if __name__ == "__main__":
    main()
