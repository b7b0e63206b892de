"""checkpoint.py - the project's checkpoint format, read and written, and a
minimal safetensors reader: the one Python reader of the format (parity.py,
torch_layout.py and chapters/07_transformer/reference.py import it).

The checkpoint layout is documented in chapters/07_transformer/README.md
("Checkpoints"); this file is that table in code. Written from the format,
not from common/io/checkpoint.c. parse_checkpoint needs only the standard
library (reference.py runs without numpy); the rest use numpy.
"""
import json
import math
import struct
import zlib

try:
    import numpy as np
except ImportError:      # parse_checkpoint alone works without it
    np = None

MAGIC = b"AIYNCKPT"
CONFIG_INTS = ["N", "d_model", "d_ff", "h", "d_k", "d_v", "vocab", "max_len"]


def tensor_names(cfg):
    """Every parameter tensor's name, in the file's fixed order."""
    mha = lambda p: [f"{p}.w_q", f"{p}.w_k", f"{p}.w_v", f"{p}.w_o"]
    ln = lambda p: [f"{p}.gamma", f"{p}.beta"]
    ffn = lambda p: [f"{p}.w1", f"{p}.b1", f"{p}.w2", f"{p}.b2"]
    names = ["embed"] + (["pos_embed"] if cfg.get("learned_pe") else [])
    for i in range(cfg["N"]):
        e = f"encoder.{i}"
        names += mha(e + ".self_attn") + ln(e + ".ln1") + ffn(e + ".ffn") + ln(e + ".ln2")
    if cfg["pre_ln"]:
        names += ln("encoder.ln")
    for i in range(cfg["N"]):
        d = f"decoder.{i}"
        names += (mha(d + ".self_attn") + ln(d + ".ln1") + mha(d + ".cross_attn") + ln(d + ".ln2")
                  + ffn(d + ".ffn") + ln(d + ".ln3"))
    if cfg["pre_ln"]:
        names += ln("decoder.ln")
    return names


def parse_checkpoint(path):
    """Standard library only. Returns (cfg dict, {name: (shape, flat list of
    floats)}, train_state dict or None); train_state: step, rng (2 ints),
    n, and the byte offsets of adam_m and adam_v (n float32 each, parameter
    order) in the file. Raises ValueError on anything the format forbids."""
    data = open(path, "rb").read()
    if data[:8] != MAGIC:
        raise ValueError(f"{path}: not a checkpoint (wrong magic)")
    version, size, flags = struct.unpack_from("<IQI", data, 8)
    if version != 1 or size != len(data):
        raise ValueError(f"{path}: version {version}, size {size} != {len(data)}")
    if zlib.crc32(data[:-4]) != struct.unpack_from("<I", data, len(data) - 4)[0]:
        raise ValueError(f"{path}: CRC-32 mismatch")
    cfg = dict(zip(CONFIG_INTS, struct.unpack_from("<8i", data, 24)))
    cfg["learned_pe"] = bool(flags & 2)     # Table 3 (E): a pos_embed tensor, no sinusoids
    cfg["dropout"], cfg["pre_ln"], cfg["pad_id"] = struct.unpack_from("<fii", data, 56)
    (n_tensors,) = struct.unpack_from("<I", data, 68)
    off, ts = 72, None
    if flags & 1:                           # TrainState: step, 2 rng states, n, adam m, adam v
        step, r0, r1, n = struct.unpack_from("<QQQQ", data, off)
        off += 32
        ts = {"step": step, "rng": (r0, r1), "n": n, "adam_m_at": off, "adam_v_at": off + 4 * n}
        off += 8 * n
    tensors = {}
    for _ in range(n_tensors):
        (ln,) = struct.unpack_from("<I", data, off)
        name = data[off + 4:off + 4 + ln].decode()
        off += 4 + ln
        (ndim,) = struct.unpack_from("<I", data, off)
        shape = struct.unpack_from(f"<{ndim}I", data, off + 4)
        off += 4 + 4 * ndim
        count = math.prod(shape)
        tensors[name] = (shape, list(struct.unpack_from(f"<{count}f", data, off)))
        off += 4 * count
    if list(tensors) != tensor_names(cfg):
        raise ValueError(f"{path}: tensors are not the ones the config implies")
    return cfg, tensors, ts


def read_checkpoint(path):
    """parse_checkpoint with numpy: (cfg dict, {name: float32 array},
    train_state dict or None); train_state: step, rng (2 ints), adam_m,
    adam_v (flat, parameter order)."""
    cfg, flat, raw = parse_checkpoint(path)
    tensors = {name: np.array(v, np.float32).reshape(shape) for name, (shape, v) in flat.items()}
    ts = None
    if raw is not None:
        data, n = open(path, "rb").read(), raw["n"]
        ts = {"step": raw["step"], "rng": raw["rng"],
              "adam_m": np.frombuffer(data, "<f4", n, raw["adam_m_at"]).copy(),
              "adam_v": np.frombuffer(data, "<f4", n, raw["adam_v_at"]).copy()}
    return cfg, tensors, ts


def write_checkpoint(path, cfg, tensors, ts=None):
    """The inverse of read_checkpoint (ts may be None: weights only)."""
    body = bytearray()
    body += struct.pack("<8i", *[cfg[k] for k in CONFIG_INTS])
    body += struct.pack("<fii", cfg["dropout"], cfg["pre_ln"], cfg["pad_id"])
    names = tensor_names(cfg)
    body += struct.pack("<I", len(names))
    if ts is not None:
        n = ts["adam_m"].size
        body += struct.pack("<QQQQ", ts["step"], ts["rng"][0], ts["rng"][1], n)
        body += np.asarray(ts["adam_m"], "<f4").tobytes() + np.asarray(ts["adam_v"], "<f4").tobytes()
    for name in names:
        t = np.ascontiguousarray(tensors[name], "<f4")
        body += struct.pack("<I", len(name)) + name.encode() + struct.pack("<I", t.ndim)
        body += struct.pack(f"<{t.ndim}I", *t.shape) + t.tobytes()
    size = 8 + 4 + 8 + 4 + len(body) + 4
    flags = (1 if ts is not None else 0) | (2 if cfg.get("learned_pe") else 0)
    head = MAGIC + struct.pack("<IQI", 1, size, flags)
    data = head + bytes(body)
    with open(path, "wb") as f:
        f.write(data + struct.pack("<I", zlib.crc32(data)))


def read_safetensors(path):
    """A minimal safetensors reader that checks the format's rules as it goes.
    Returns ({name: array}, metadata dict)."""
    data = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", data, 0)
    if 8 + n > len(data):
        raise ValueError(f"{path}: header length {n} runs past the end")
    header = json.loads(data[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    buf = memoryview(data)[8 + n:]
    dtypes = {"F32": "<f4", "I32": "<i4"}
    out, spans = {}, []
    for name, e in header.items():
        begin, end = e["data_offsets"]
        dt = np.dtype(dtypes[e["dtype"]])
        count = int(np.prod(e["shape"], dtype=np.int64))
        if end - begin != count * dt.itemsize or end > len(buf):
            raise ValueError(f"{path}: {name}: offsets {begin}..{end} do not hold shape {e['shape']}")
        out[name] = np.frombuffer(buf, dt, count, begin).reshape(e["shape"]).copy()
        spans.append((begin, end))
    spans.sort()
    pos = 0
    for b, e in spans:
        if b != pos:
            raise ValueError(f"{path}: a hole or an overlap at byte {pos} of the data")
        pos = e
    if pos != len(buf):
        raise ValueError(f"{path}: {len(buf) - pos} bytes after the last tensor")
    return out, meta
