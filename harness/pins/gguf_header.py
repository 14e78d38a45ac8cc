"""Read the chat template and bos/eos tokens from a GGUF file's metadata, without loading the model.

The `gguf` package's GGUFReader builds a numpy view per vocabulary entry, which takes tens of seconds on a
262k-token vocabulary; this reads the same key/value section sequentially (GGUF v2/v3, little-endian) and stops
before the tensors, so it takes well under a second and also works on the first piece of a split file.
tests/pins/test_sources.py checks it against GGUFReader.
"""

from __future__ import annotations

import struct
from pathlib import Path

from harness.core.errors import HarnessError

_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
_WANTED = {"tokenizer.chat_template", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
           "tokenizer.ggml.tokens"}


class _Reader:
    def __init__(self, f, path):
        self.f, self.path = f, path

    def take(self, n: int) -> bytes:
        data = self.f.read(n)
        if len(data) != n:
            raise HarnessError(f"{self.path}: GGUF metadata ends early (truncated file?)")
        return data

    def unpack(self, fmt: str):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self, keep=True) -> bytes | None:
        n = self.unpack("<Q")
        if keep:
            return self.take(n)
        self.f.seek(n, 1)
        return None

    def value(self, vtype: int, keep: bool):
        if vtype in _SCALAR:
            return self.unpack(_SCALAR[vtype])
        if vtype == _STRING:
            return self.string(keep)
        if vtype == _ARRAY:
            item_type, count = self.unpack("<I"), self.unpack("<Q")
            if item_type in _SCALAR and not keep:
                self.f.seek(struct.calcsize(_SCALAR[item_type]) * count, 1)
                return None
            items = [self.value(item_type, keep) for _ in range(count)]
            return items if keep else None
        raise HarnessError(f"{self.path}: unknown GGUF value type {vtype}")


def read_gguf_metadata(path: Path | str) -> dict:
    """{"chat_template": bytes or None, "bos_token": str or None, "eos_token": str or None}."""
    path = Path(path)
    found = {}
    with open(path, "rb") as f:
        r = _Reader(f, path)
        if r.take(4) != b"GGUF":
            raise HarnessError(f"{path}: not a GGUF file")
        version = r.unpack("<I")
        if version not in (2, 3):
            raise HarnessError(f"{path}: GGUF version {version} is not supported (big-endian or too old?)")
        r.unpack("<Q")                                   # tensor count: tensors are not read
        for _ in range(r.unpack("<Q")):
            key = r.string().decode("utf-8", "replace")
            value = r.value(r.unpack("<I"), keep=key in _WANTED)
            if key in _WANTED:
                found[key] = value
    tokens = found.get("tokenizer.ggml.tokens") or []

    def token(key):
        idx = found.get(key)
        return tokens[idx].decode("utf-8") if isinstance(idx, int) and 0 <= idx < len(tokens) else None

    return {"chat_template": found.get("tokenizer.chat_template"),
            "bos_token": token("tokenizer.ggml.bos_token_id"), "eos_token": token("tokenizer.ggml.eos_token_id")}


def is_gguf(path: Path | str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"GGUF"
    except OSError:
        return False


def embedded_template(path: Path | str) -> tuple:
    """(template text, bos token, eos token) of a GGUF, read from its header as `pin-template` reads it."""
    meta = read_gguf_metadata(path)
    if meta["chat_template"] is None:
        raise HarnessError(f"{path}: the GGUF carries no tokenizer.chat_template")
    try:
        text = meta["chat_template"].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HarnessError(f"{path}: the GGUF's chat template is not UTF-8: {exc}") from None
    return text, meta["bos_token"], meta["eos_token"]
