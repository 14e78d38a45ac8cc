"""A fast reader of GGUF key/values (gguf.GGUFReader takes ~20 s on the 128k-token Llama 3 vocabulary, this well
under a second): llama.cpp's vocabulary files hold no tensors, and a scripted model's header is read the same way
(harness.scripted.hf_form)."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_NUMPY = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "?", 10: "<u8", 11: "<i8", 12: "<f8"}


def read_gguf_kv(path: Path) -> dict[str, tuple[int, int | None, object]]:
    """key -> (value type, array element type or None, value). String arrays become lists of str."""
    return read_gguf_header(path)[0]


def read_gguf_header(path: Path) -> tuple:
    """(key/values as read_gguf_kv gives them, number of tensors, the file's bytes, offset past the key/values)."""
    buf = memoryview(Path(path).read_bytes())
    if bytes(buf[:4]) != b"GGUF":
        raise ValueError(f"{path}: not a GGUF file")
    version, n_tensors, n_kv = struct.unpack_from("<IQQ", buf, 4)
    if version < 2:
        raise ValueError(f"{path}: GGUF version {version} is not supported")
    pos = 24

    def string() -> str:
        nonlocal pos
        (n,) = struct.unpack_from("<Q", buf, pos)
        s = bytes(buf[pos + 8:pos + 8 + n]).decode("utf-8")
        pos += 8 + n
        return s

    def scalar(t: int):
        nonlocal pos
        if t == 8:
            return string()
        fmt = _SCALARS[t]
        (v,) = struct.unpack_from(fmt, buf, pos)
        pos += struct.calcsize(fmt)
        return v

    out: dict[str, tuple[int, int | None, object]] = {}
    for _ in range(n_kv):
        key = string()
        (vtype,) = struct.unpack_from("<I", buf, pos)
        pos += 4
        if vtype != 9:
            out[key] = (vtype, None, scalar(vtype))
            continue
        etype, count = struct.unpack_from("<IQ", buf, pos)
        pos += 12
        if etype == 8:
            out[key] = (vtype, etype, [string() for _ in range(count)])
        else:
            dt = np.dtype(_NUMPY[etype])
            arr = np.frombuffer(buf, dtype=dt, count=count, offset=pos).copy()
            pos += dt.itemsize * count
            out[key] = (vtype, etype, arr)
    return out, n_tensors, buf, pos
