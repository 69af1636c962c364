"""Minimal safetensors reader/writer (numpy only; no `safetensors` package needed).

File format:
  8 bytes   little-endian uint64 N = header length
  N bytes   UTF-8 JSON: {"__metadata__": {str: str},
                         "<name>": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...}
            offsets are relative to the start of the data section; the writer pads the
            header with spaces so the data section starts at a multiple of 8.
  rest      raw little-endian tensor bytes.
Supported dtypes: F64 F32 F16 I64 I32 U16 U8.  The writer stores tensors in sorted name order.
"""
import json
import struct

import numpy as np

DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8",
          "I32": "<i4", "U16": "<u2", "U8": "u1"}
_CODE = {np.dtype(v): k for k, v in DTYPES.items()}


def read_safetensors(path):
    """Return (dict name -> numpy array, metadata dict[str, str])."""
    with open(path, "rb") as f:
        buf = f.read()
    if len(buf) < 8:
        raise ValueError(f"{path}: file too short for a safetensors header ({len(buf)} bytes)")
    (n,) = struct.unpack("<Q", buf[:8])
    if 8 + n > len(buf):
        raise ValueError(f"{path}: header length {n} exceeds file size {len(buf)}")
    try:
        header = json.loads(buf[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: header is not valid UTF-8 JSON: {e}") from None
    if not isinstance(header, dict):
        raise ValueError(f"{path}: header JSON is not an object")
    data = memoryview(buf)[8 + n:]
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise ValueError(f"{path}: __metadata__ must map str -> str")
    tensors = {}
    for name, info in header.items():
        try:
            dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{path}: tensor {name!r} has a malformed header entry: {info!r}") from None
        if dtype not in DTYPES:
            raise ValueError(f"{path}: tensor {name!r} has unsupported dtype {dtype!r}")
        if not all(isinstance(d, int) and d >= 0 for d in shape):
            raise ValueError(f"{path}: tensor {name!r} has invalid shape {shape!r}")
        if not (isinstance(begin, int) and isinstance(end, int) and 0 <= begin <= end <= len(data)):
            raise ValueError(f"{path}: tensor {name!r} offsets [{begin}, {end}] outside data section "
                             f"of {len(data)} bytes")
        dt = np.dtype(DTYPES[dtype])
        want = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        if end - begin != want:
            raise ValueError(f"{path}: tensor {name!r} has {end - begin} bytes, expected {want} "
                             f"for shape {shape} {dtype}")
        tensors[name] = np.frombuffer(data[begin:end], dtype=dt).reshape(shape).copy()
    return tensors, meta


def write_safetensors(path, tensors, metadata=None):
    """Write dict name -> numpy array (+ optional str->str metadata) as safetensors."""
    header, chunks, off = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name in sorted(tensors):
        a = np.asarray(tensors[name])
        dt = a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype
        if dt not in _CODE:
            raise ValueError(f"tensor {name!r}: unsupported dtype {a.dtype}")
        raw = np.ascontiguousarray(a, dtype=dt).tobytes()
        header[name] = {"dtype": _CODE[dt], "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        chunks.append(raw)
        off += len(raw)
    hb = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hb += b" " * (-(8 + len(hb)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for c in chunks:
            f.write(c)
