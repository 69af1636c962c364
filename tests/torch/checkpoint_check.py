"""Reads a reftrain checkpoint with numpy alone, checks it against docs/checkpoints.md, and
computes its model's loss on a batch with the PyTorch mirror (float64).

Usage: /usr/bin/python3 tests/torch/checkpoint_check.py CKPT.safetensors BATCH.safetensors

BATCH holds `inputs` and `targets` (I32 [B, T]).  The checkpoint is parsed raw, as any numpy user
would: 8-byte little-endian header length, JSON header, np.frombuffer at each tensor's offsets.
Checked: the metadata keys and format version; every weight of the config (gpt2_mirror /
llama_mirror `param_shapes`: the nanoGPT / Hugging Face names, nn.Linear [out, in]) is F32 with
its shape; the optimizer state is there (adamw: optimizer.m.<name>, optimizer.v.<name> shaped as
the weight, v >= 0; adamw8bit: optimizer.{m,v}_codes U8 [layout total], optimizer.{m,v}_scales F32
[one per 256-element block of the wd range, then of the no-wd range], scales >= 0); the tensors
tile the data section without gaps.  The moments are read back as docs/checkpoints.md says
(adamw8bit: element i of the mega-buffer has code byte i and the scale of its block, m = int8
code * scale, v = (uint8 code * scale)^2, in float32).  Prints one JSON line {"loss", "step",
"updates", "tensors", "m_abs_sum", "v_sum"} (the sums exact, by math.fsum, over every weight's
moments); exits 1 with a message on the first violation.
"""
import json
import math
import os
import struct
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt2_mirror as gm  # noqa: E402
import llama_mirror as lm  # noqa: E402
from safetensors_io import read_safetensors  # noqa: E402

DTYPES = {"F32": "<f4", "U8": "u1", "I32": "<i4"}
META_KEYS = ["format", "format_version", "step", "updates", "config", "init", "data", "rng",
             "schedule", "optimizer", "layout", "checkpointing", "run"]


def fail(msg):
    print(f"checkpoint_check: {msg}", file=sys.stderr)
    sys.exit(1)


def read_raw(path):
    """(tensors name -> (dtype, array), metadata) straight from the bytes."""
    buf = open(path, "rb").read()
    (n,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8:8 + n])
    meta = header.pop("__metadata__")
    data = buf[8 + n:]
    spans = sorted((e["data_offsets"][0], e["data_offsets"][1]) for e in header.values())
    pos = 0
    for begin, end in spans:
        if begin != pos:
            fail(f"data section has a gap or overlap at byte {pos}")
        pos = end
    if pos != len(data):
        fail(f"tensors cover {pos} of {len(data)} data bytes")
    tensors = {}
    for name, e in header.items():
        begin, end = e["data_offsets"]
        arr = np.frombuffer(data[begin:end], dtype=DTYPES[e["dtype"]]).reshape(e["shape"])
        tensors[name] = (e["dtype"], arr)
    return tensors, meta


def expect(tensors, name, dtype, shape):
    if name not in tensors:
        fail(f"missing tensor {name}")
    got_dtype, arr = tensors[name]
    if got_dtype != dtype or list(arr.shape) != list(shape):
        fail(f"{name} is {got_dtype} {list(arr.shape)}, expected {dtype} {list(shape)}")
    return arr


def moments(tensors, shapes, train, layout):
    """{name: (m, v)} as float32 arrays, from fp32 tensors or from 8-bit codes and scales."""
    if train["optimizer"] == "adamw":
        return {name: (expect(tensors, "optimizer.m." + name, "F32", shape),
                       expect(tensors, "optimizer.v." + name, "F32", shape)) for name, shape in shapes}
    total, wd_end = layout["total"], layout["wd_end"]
    wd_blocks = math.ceil(wd_end / 256)
    blocks = wd_blocks + math.ceil((total - wd_end) / 256)
    codes = {k: expect(tensors, f"optimizer.{k}_codes", "U8", [total]) for k in ("m", "v")}
    scales = {k: expect(tensors, f"optimizer.{k}_scales", "F32", [blocks]) for k in ("m", "v")}
    out = {}
    for name, shape in shapes:
        i = layout["offsets"][name] + np.arange(int(np.prod(shape)))
        block = np.where(i < wd_end, i // 256, wd_blocks + (i - wd_end) // 256)
        m = codes["m"][i].view(np.int8).astype(np.float32) * scales["m"][block]
        r = codes["v"][i].astype(np.float32) * scales["v"][block]
        out[name] = (m.reshape(shape), (r * r).reshape(shape))
    return out


def main():
    ckpt, batch = sys.argv[1], sys.argv[2]
    tensors, meta = read_raw(ckpt)
    missing = [k for k in META_KEYS if k not in meta]
    if missing or meta["format"] != "reftrain-checkpoint" or meta["format_version"] != "1":
        fail(f"metadata: missing {missing}, format {meta.get('format')} {meta.get('format_version')}")
    config = json.loads(meta["config"])
    model, train = config["model"], config["train"]
    mirror = lm if model["arch"] == "llama" else gm
    shapes = mirror.param_shapes(model)
    params = {name: torch.tensor(expect(tensors, name, "F32", shape), dtype=torch.float64)
              for name, shape in shapes}
    mv = moments(tensors, shapes, train, json.loads(meta["layout"]))
    if any((v < 0).any() for _, v in mv.values()):
        fail("a second moment is negative")
    b, _ = read_safetensors(batch)
    idx = torch.tensor(b["inputs"].astype(np.int64))
    tgt = torch.tensor(b["targets"].astype(np.int64))
    cfg = dict(model, z_loss=train["z_loss"])
    with torch.no_grad():
        loss = mirror.forward_loss(params, cfg, idx, tgt, precision=train["precision"])
    print(json.dumps({"loss": float(loss), "step": int(meta["step"]),
                      "updates": int(meta["updates"]), "tensors": len(tensors),
                      "m_abs_sum": math.fsum(float(x) for m, _ in mv.values() for x in np.abs(m).ravel()),
                      "v_sum": math.fsum(float(x) for _, v in mv.values() for x in v.ravel())}))


if __name__ == "__main__":
    main()
