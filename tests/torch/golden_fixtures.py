"""Read reftrain's golden files with nothing but json and numpy, as a GPU test harness would.

Usage: python3 tests/torch/golden_fixtures.py [--kernels DIR] [--run DIR]

--kernels DIR (from `reftrain golden kernels`): every file of manifest.json exists and holds, per
  case, exactly the tensors its bindings name, with the manifest's dtypes; then most kernels are
  recomputed here in numpy float32 (BLAS matmuls, numpy's exp/tanh: another implementation, as a
  GPU is) and checked against the fixture with the manifest's tolerance. Prints the share of each
  tolerance used.
--run DIR (from `reftrain golden run`): the mega-buffer layout is consistent (aligned, decayed
  tensors first, no overlap), batches are consecutive token windows, the trace's lr are the
  config's, and step 1's loss recomputed from the debug state's logits matches the trace.
Exits 1 on any failure. Imports json, struct, sys, os, argparse and numpy only.
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np

DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "U16": "<u2", "U8": "u1"}
BINDING_DTYPES = {"f32": "F32", "f16": "F16", "bf16": "BF16", "i32": "I32", "u8 (u32 words)": "U8"}
failures = []


def check(ok, msg):
    print(("ok   " if ok else "FAIL ") + msg)
    if not ok:
        failures.append(msg)


def load(path):
    """(tensors by name, dtype names by tensor, metadata): 8-byte length, JSON header, raw data."""
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = buf[8 + n:]
    tensors, dtypes = {}, {}
    for name, e in header.items():
        begin, end = e["data_offsets"]
        if e["dtype"] == "BF16":  # numpy has no bf16: its values as float32 (the top 16 bits)
            bits = np.frombuffer(data[begin:end], dtype="<u2").astype(np.uint32) << 16
            tensors[name] = bits.view(np.float32).reshape(e["shape"])
        else:
            tensors[name] = np.frombuffer(data[begin:end], dtype=DTYPES[e["dtype"]]).reshape(e["shape"])
        dtypes[name] = e["dtype"]
    return tensors, dtypes, meta


# ---- the metrics of docs/golden-format.md --------------------------------------------------------

def ordered(a):
    """Float bit patterns as integers that order like the values."""
    bits = a.view({2: np.uint16, 4: np.uint32}[a.dtype.itemsize]).astype(np.int64)
    sign = 1 << (8 * a.dtype.itemsize - 1)
    mag = bits & (sign - 1)
    return np.where(bits & sign, -mag, mag)


def used(ref, got, tol):
    """The largest share of the tolerance `tol` (a manifest entry) that `got` uses."""
    r, x = ref.astype(np.float64).ravel(), got.astype(np.float64).ravel()
    with np.errstate(invalid="ignore"):
        d = np.abs(x - r)
    d[(np.isnan(r) & np.isnan(x)) | (r == x)] = 0
    d[np.isnan(d)] = np.inf
    share = 0.0
    if "rtol" in tol or "atol" in tol:
        limit = tol.get("atol", 0) + tol.get("rtol", 0) * np.abs(np.where(np.isfinite(r), r, 0))
        with np.errstate(divide="ignore", invalid="ignore"):
            share = max(share, float(np.max(np.where(d == 0, 0, d / limit), initial=0)))
    if "max_nmse" in tol:
        den = float(np.sum(r[np.isfinite(r)] ** 2))
        num = float(np.sum(d ** 2))
        nmse = 0.0 if num == 0 else (num / den if den > 0 else np.inf)
        share = max(share, nmse / tol["max_nmse"] if tol["max_nmse"] > 0 else (0 if nmse == 0 else np.inf))
    if "max_ulp" in tol:
        ulp = float(np.max(np.abs(ordered(got.ravel()) - ordered(ref.ravel())), initial=0))
        share = max(share, ulp / tol["max_ulp"] if tol["max_ulp"] > 0 else (0 if ulp == 0 else np.inf))
    return share


# ---- numpy float32 versions of the kernels ---------------------------------------------------------

F = np.float32


def layernorm(t, p):
    x, w, b = t["x"], t["w"], t["b"]
    mean = x.mean(-1, dtype=F)
    rstd = F(1) / np.sqrt(((x - mean[:, None]) ** 2).mean(-1, dtype=F) + F(1e-5))
    return {"out": (x - mean[:, None]) * rstd[:, None] * w + b, "mean": mean, "rstd": rstd}


def layernorm_backward(t, p):
    x, w, dout = t["x"], t["w"], t["dout"]
    n = (x - t["mean"][:, None]) * t["rstd"][:, None]
    dn = dout * w
    dx = (dn - dn.mean(-1, keepdims=True) - n * (dn * n).mean(-1, keepdims=True)) * t["rstd"][:, None]
    return {"dx": t["dx_in"] + dx, "dw": t["dw_in"] + (dout * n).sum(0), "db": t["db_in"] + dout.sum(0)}


def rmsnorm(t, p):
    x = t["x"]
    rstd = F(1) / np.sqrt((x * x).mean(-1, dtype=F) + F(1e-5))
    return {"out": x * rstd[:, None] * t["w"], "rstd": rstd}


def rmsnorm_backward(t, p):
    x, dout = t["x"], t["dout"]
    n = x * t["rstd"][:, None]
    dn = dout * t["w"]
    dx = (dn - n * (dn * n).mean(-1, keepdims=True)) * t["rstd"][:, None]
    return {"dx": t["dx_in"] + dx, "dw": t["dw_in"] + (dout * n).sum(0)}


def rope_cos_sin(p):
    hs, T = p["hs"], p["T"]
    f = p["theta"] ** (-2.0 * np.arange(hs // 2) / hs)
    a = np.arange(T)[:, None] * f[None, :]
    return np.cos(a).astype(F), np.sin(a).astype(F)  # [T, hs/2]


def rotate(x, p, sign):
    B, T, NH, hs = p["B"], p["T"], p["NH"], p["hs"]
    c, s = rope_cos_sin(p)
    h = x.reshape(B, T, NH, hs)
    x1, x2 = h[..., :hs // 2], h[..., hs // 2:]
    c, s = c[None, :, None, :], sign * s[None, :, None, :]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], -1).reshape(x.shape)


def attention(t, p):
    B, T, C, NH, hs = p["B"], p["T"], p["C"], p["NH"], p["hs"]
    q, k, v = (t["qkv"][..., i * C:(i + 1) * C].reshape(B, T, NH, hs).transpose(0, 2, 1, 3) for i in range(3))
    s = (q @ k.transpose(0, 1, 3, 2)) * F(1 / np.sqrt(hs))
    s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    att = (e / e.sum(-1, keepdims=True)).astype(F)
    return {"out": (att @ v).transpose(0, 2, 1, 3).reshape(B, T, C), "att": att}


def attention_backward(t, p):
    B, T, C, NH, hs = p["B"], p["T"], p["C"], p["NH"], p["hs"]
    q, k, v = (t["qkv"][..., i * C:(i + 1) * C].reshape(B, T, NH, hs).transpose(0, 2, 1, 3) for i in range(3))
    att, dy = t["att"], t["dout"].reshape(B, T, NH, hs).transpose(0, 2, 1, 3)
    dp = dy @ v.transpose(0, 1, 3, 2)
    ds = att * (dp - (att * dp).sum(-1, keepdims=True)) * F(1 / np.sqrt(hs))
    parts = [ds @ k, ds.transpose(0, 1, 3, 2) @ q, att.transpose(0, 1, 3, 2) @ dy]
    d = np.concatenate([x.transpose(0, 2, 1, 3).reshape(B, T, C) for x in parts], -1)
    return {"dqkv": t["dqkv_in"] + d}


def crossentropy(t, p):
    V, z, x = p["V"], F(p["z"]), t["logits"][:, :p["V"]]
    m = x.max(-1, keepdims=True)
    lse = m + np.log(np.exp(x - m).sum(-1, keepdims=True))
    prob = np.exp(x - lse)
    onehot = np.eye(V, dtype=F)[t["targets"]]
    loss = (lse[:, 0] - x[np.arange(len(x)), t["targets"]]) + z * lse[:, 0] ** 2
    d = np.zeros_like(t["logits"])
    d[:, :V] = (prob - onehot) * F(p["dloss"]) + F(2) * z * lse * prob * F(p["dloss"])
    return {"losses": loss, "dlogits": d}


def gelu_parts(x):
    u = F(np.sqrt(2 / np.pi)) * (x + F(0.044715) * x ** 3)
    return u, np.tanh(u)


def gelu_backward(t, p):
    x = t["x"]
    _, th = gelu_parts(x)
    g = F(0.5) * (F(1) + th) + F(0.5) * x * (F(1) - th * th) * F(np.sqrt(2 / np.pi)) * (F(1) + F(3 * 0.044715) * x * x)
    return {"dx": t["dx_in"] + t["dout"] * g}


def gelu_erf_cdf(x):
    """Φ(x) = ½(1 + erf(x/√2)) in float32, erf from Python's math (numpy has none)."""
    return (0.5 * (1.0 + np.vectorize(math.erf)(x.astype(np.float64) / math.sqrt(2)))).astype(F)


def gelu_erf_backward(t, p):
    x = t["x"]
    pdf = (np.exp(-0.5 * x.astype(np.float64) ** 2) / math.sqrt(2 * math.pi)).astype(F)
    return {"dx": t["dx_in"] + t["dout"] * (gelu_erf_cdf(x) + x * pdf)}


def sigmoid(g):
    e = np.exp(-np.abs(g))
    return np.where(g >= 0, F(1) / (F(1) + e), e / (F(1) + e))


def swiglu_backward(t, p):
    g, up, dout = t["gate"], t["up"], t["dout"]
    s = sigmoid(g)
    return {"dgate": t["dgate_in"] + dout * up * s * (F(1) + g * (F(1) - s)), "dup": t["dup_in"] + dout * g * s}


def adamw(t, p):
    w, g, m, v = t["w_in"], t["g_in"], t["m_in"], t["v_in"]
    lr, b1, b2, wd = t["hp"]
    b1t, b2t, eps, _ = t["bias"]
    clip = t["grad_stats"][1]
    with np.errstate(invalid="ignore"):
        gc = np.where(np.isfinite(g), g * clip, F(0))
    m = b1 * m + (F(1) - b1) * gc
    v = b2 * v + ((F(1) - b2) * gc) * gc
    mh = m * (F(1) / max(F(1) - b1t, F(1e-12)))
    vh = v * (F(1) / max(F(1) - b2t, F(1e-12)))
    w = w - lr * (mh / (np.sqrt(vh) + eps) + wd * w)
    return {"w": w, "g": np.zeros_like(g), "m": m, "v": v, "w16": np.clip(w, -65504, 65504).astype(np.float16)}


def grad_stats(norm_sq, max_norm):
    norm = np.sqrt(F(norm_sq))
    return np.array([norm, min(F(1), F(max_norm) / max(norm, F(1e-6)))], F)


ORACLES = {
    "embed_forward": lambda t, p: {"out": t["wte"][t["tokens"]] + t["wpe"][:p["T"]]},
    "token_embed_forward": lambda t, p: {"out": t["wte"][t["tokens"]]},
    "layernorm_forward": layernorm,
    "layernorm_backward": layernorm_backward,
    "rmsnorm_forward": rmsnorm,
    "rmsnorm_backward": rmsnorm_backward,
    "linear_forward": lambda t, p: {"out": t["inp"] @ t["w"].T + t["b"]},
    "linear_forward_f16": lambda t, p: {"out": t["inp"] @ t["w16"].astype(F).T + t["b"]},
    "linear_backward_data": lambda t, p: {"dinp": t["dinp_in"] + t["dout"] @ t["w"]},
    "linear_backward_data_f16": lambda t, p: {"dinp": t["dinp_in"] + t["dout"] @ t["w16"].astype(F)},
    "linear_backward_weight": lambda t, p: {"dw": t["dw_in"] + t["dout"].T @ t["inp"],
                                            "db": t["db_in"] + t["dout"].sum(0)},
    # The bf16 products: BLAS float32 on the bf16 values (exact products, another order).
    "linear_forward_bf16": lambda t, p: {"out": t["inp16"] @ t["w16"].T + t["b"]},
    "linear_backward_data_bf16": lambda t, p: {"dinp": t["dinp_in"] + t["dout16"] @ t["w16"]},
    "linear_backward_weight_bf16": lambda t, p: {"dw": t["dw_in"] + t["dout16"].T @ t["inp16"],
                                                 "db": t["db_in"] + t["dout"].sum(0)},
    "rope_forward": lambda t, p: {"out": rotate(t["x"], p, F(1))},
    "rope_backward": lambda t, p: {"dx": t["dx_in"] + rotate(t["dout"], p, F(-1))},
    "attention_forward": attention,
    "attention_backward": attention_backward,
    "gelu_forward": lambda t, p: {"out": F(0.5) * t["x"] * (F(1) + gelu_parts(t["x"])[1])},
    "gelu_backward": gelu_backward,
    "gelu_erf_forward": lambda t, p: {"out": t["x"] * gelu_erf_cdf(t["x"])},
    "gelu_erf_backward": gelu_erf_backward,
    "swiglu_forward": lambda t, p: {"out": t["gate"] * sigmoid(t["gate"]) * t["up"]},
    "swiglu_backward": swiglu_backward,
    "crossentropy_forward_backward": crossentropy,
    "residual_forward": lambda t, p: {"out": t["a"] + t["b"]},
    "residual_backward": lambda t, p: {"da": t["da_in"] + t["dout"], "db": t["db_in"] + t["dout"]},
    "cast_f32_to_f16": lambda t, p: {"dst": np.clip(t["src"], -65504, 65504).astype(np.float16)},
    "cast_f16_to_f32": lambda t, p: {"dst": t["src"].astype(F)},
    "reduce_norm_sq": lambda t, p: {"result": np.array(
        [np.sum(np.where(np.isfinite(t["data"]), t["data"], 0).astype(np.float64) ** 2)], F)},
    "finalize_grad_stats": lambda t, p: {"grad_stats": grad_stats(t["norm_sq"][0], p["max_norm"])},
    "adamw_update": adamw,
    "adamw_update_f16": adamw,
}


def check_kernel(d, k):
    tensors, dtypes, meta = load(os.path.join(d, k["file"]))
    check(meta.get("kernel") == k["name"], f"{k['file']}: metadata names kernel {meta.get('kernel')}")
    expected = set()
    for case, info in k["cases"].items():
        for b in k["bindings"]:
            names = {"in": [b["name"]], "out": [b["name"]], "inout": [b["name"] + "_in", b["name"]]}.get(b["role"], [])
            for n in names:
                full = f"{case}.{n}"
                expected.add(full)
                ok = full in tensors and dtypes[full] == BINDING_DTYPES[b["dtype"]] \
                    and list(tensors[full].shape) == info["tensors"][n]["shape"]
                if not ok:
                    check(False, f"{k['name']}: tensor {full} missing or not {b['dtype']} {info['tensors'].get(n)}")
    check(expected == set(tensors), f"{k['name']}: {len(tensors)} tensors, exactly those of its bindings")
    oracle = ORACLES.get(k["name"])
    if oracle is None:
        return None
    worst = 0.0
    for case, info in k["cases"].items():
        t = {n[len(case) + 1:]: a for n, a in tensors.items() if n.startswith(case + ".")}
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            mine = oracle(t, info["params"])
        for out, tol in k["tolerances"].items():
            if out not in mine:
                continue
            share = used(t[out], np.asarray(mine[out]).astype(t[out].dtype), tol)
            worst = max(worst, share)
            if share > 1:
                check(False, f"{k['name']} {case}.{out}: numpy float32 uses {100 * share:.3g}% of {tol}")
    return worst


def check_kernels(d):
    with open(os.path.join(d, "manifest.json")) as f:
        manifest = json.load(f)
    check(manifest["format"] == "reftrain-golden-kernels", f"{d}/manifest.json format")
    recomputed = []
    for k in manifest["kernels"]:
        worst = check_kernel(d, k)
        if worst is not None:
            recomputed.append((k["name"], worst))
    width = max(len(n) for n, _ in recomputed)
    for name, worst in recomputed:
        print(f"     {name:<{width}}  numpy float32 uses {100 * worst:9.3g}% of the tolerance")
    others = [k["name"] for k in manifest["kernels"] if k["name"] not in ORACLES]
    check(all(w <= 1 for _, w in recomputed),
          f"{len(recomputed)} kernels recomputed in numpy within tolerance (not recomputed: {others})")


def check_layout(weights, meta):
    layout, mega = json.loads(meta["layout"]), json.loads(meta["mega_buffer"])
    align, end, ok = mega["align_floats"], 0, True
    for t in layout:
        ok &= t["offset"] % align == 0 and t["offset"] >= end and t["numel"] == int(np.prod(t["shape"]))
        ok &= (t["offset"] < mega["wd_end"]) == t["decay"] and list(weights[t["name"]].shape) == t["shape"]
        end = t["offset"] + t["numel"]
    check(ok and end <= mega["floats"] and set(weights) == {t["name"] for t in layout},
          f"init: {len(layout)} tensors, {align}-float aligned, decayed first (wd_end {mega['wd_end']}), "
          f"within {mega['floats']} floats")
    return layout


def check_run(d):
    with open(os.path.join(d, "config.json")) as f:
        config = json.load(f)
    weights, _, meta = load(os.path.join(d, "init.safetensors"))
    layout = check_layout(weights, meta)
    batches, _, _ = load(os.path.join(d, "batches.safetensors"))
    S, B, T = config["train"]["steps"], config["train"]["batch"], config["train"]["seq"]
    x, y = batches["inputs"], batches["targets"]
    check(x.shape == (S, B, T) and y.shape == x.shape and np.array_equal(x[..., 1:], y[..., :-1])
          and x.max() < config["model"]["vocab"], f"batches: [{S},{B},{T}] windows, targets = inputs shifted")
    with open(os.path.join(d, "trace.jsonl")) as f:
        lines = [json.loads(line) for line in f]
    steps = [r for r in lines if r["type"] == "step"]
    check(lines[0]["type"] == "run" and [r["step"] for r in steps] == list(range(1, S + 1))
          and [F(r["lr"]) for r in steps] == [F(v) for v in config["schedule"]["lrs"]]
          and all(set(r) == {"type", "step", "loss", "z_loss", "grad_norm", "clip", "lr"} for r in steps),
          f"trace: {S} steps with loss, z_loss, grad_norm, clip and the config's lr")
    debug, _, _ = load(os.path.join(d, "debug_state.safetensors"))
    check(set(debug) == {"inputs", "targets", "logits", "loss"} | {"grad." + t["name"] for t in layout}
          and np.array_equal(debug["inputs"], x[0]) and debug["loss"][0] == F(steps[0]["loss"]),
          "debug state: step 1's batch, loss and a gradient for every tensor")
    V, z = config["model"]["vocab"], config["loss"]["z"]
    logits = debug["logits"].reshape(B * T, -1)[:, :V].astype(np.float64)
    m = logits.max(-1)
    lse = m + np.log(np.exp(logits - m[:, None]).sum(-1))
    loss = np.mean(lse - logits[np.arange(B * T), debug["targets"].ravel()]) + z * np.mean(lse ** 2)
    rel = abs(loss - float(debug["loss"][0])) / loss
    check(rel < 1e-6, f"step 1 loss from the debug state's logits: {loss:.8f}, rel diff {rel:.1e} (< 1e-6)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kernels", help="a `reftrain golden kernels` directory")
    ap.add_argument("--run", action="append", default=[], help="a `reftrain golden run` directory")
    a = ap.parse_args()
    if a.kernels:
        check_kernels(a.kernels)
    for d in a.run:
        check_run(d)
    print("GOLDEN FIXTURES " + ("PASSED" if not failures else f"FAILED ({len(failures)})"))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
