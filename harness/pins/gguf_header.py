"""Read the chat template and bos/eos tokens from a GGUF file's metadata, without loading the model.

The `gguf` package's GGUFReader builds a numpy view per vocabulary entry, which takes tens of seconds on a
262k-token vocabulary; this reads the same key/value section sequentially (GGUF v2/v3, little-endian) and stops
before the tensors, so it takes well under a second and also works on the first piece of a split file.
tests/pins/test_sources.py checks it against GGUFReader.

A header is untrusted input (pin-template reads any GGUF a user hands it): every length and count is checked
against the bytes left in the file before anything is allocated, arrays nest only a few levels, and the
values read are checked for their type, so a hostile header is one clear HarnessError.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from harness.core.errors import HarnessError

_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
_WANTED = {"tokenizer.chat_template", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
           "tokenizer.ggml.tokens"}
# The GGUF spec caps a key at 65535 bytes; real files nest arrays at most one level (none of the wanted keys do).
_MAX_KEY = 65535
_MAX_DEPTH = 4
# A value that is read (the template, a token) is held in memory: a chat template is kilobytes, a token bytes.
_MAX_KEPT = 16 << 20


class _Reader:
    def __init__(self, f, path):
        self.f, self.path = f, path
        self.size = os.fstat(f.fileno()).st_size

    def _fail(self, what: str):
        raise HarnessError(f"{self.path}: GGUF metadata {what}")

    def _room(self, n: int, what: str) -> None:
        # A declared length longer than the rest of the file is a truncated or hostile header; checking it
        # first keeps a length of 2**63 from becoming a read of that many bytes.
        if n > self.size - self.f.tell():
            self._fail(f"ends early: {what} of {n} bytes goes past the end of the file (truncated file?)")

    def take(self, n: int) -> bytes:
        self._room(n, "a value")
        return self.f.read(n)

    def unpack(self, fmt: str):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self, keep=True) -> bytes | None:
        n = self.unpack("<Q")
        self._room(n, "a string")
        if keep:
            if n > _MAX_KEPT:
                self._fail(f"holds a string of {n} bytes where a chat template or a token belongs "
                           f"(more than {_MAX_KEPT} is refused)")
            return self.f.read(n)
        self.f.seek(n, 1)
        return None

    def value(self, vtype: int, keep: bool, depth: int = 0):
        if vtype in _SCALAR:
            return self.unpack(_SCALAR[vtype])
        if vtype == _STRING:
            return self.string(keep)
        if vtype == _ARRAY:
            if depth >= _MAX_DEPTH:
                self._fail(f"nests arrays more than {_MAX_DEPTH} levels deep")
            item_type, count = self.unpack("<I"), self.unpack("<Q")
            # Every item takes at least 8 bytes (a string's length) or its scalar's size.
            self._room(count * (struct.calcsize(_SCALAR[item_type]) if item_type in _SCALAR else 8),
                       f"an array of {count} items")
            if item_type in _SCALAR and not keep:
                self.f.seek(struct.calcsize(_SCALAR[item_type]) * count, 1)
                return None
            items = [self.value(item_type, keep, depth + 1) for _ in range(count)]
            return items if keep else None
        self._fail(f"has unknown value type {vtype}")


def read_gguf_metadata(path: Path | str) -> dict:
    """{"chat_template": bytes or None, "bos_token": str or None, "eos_token": str or None}."""
    path = Path(path)
    found = {}
    with open(path, "rb") as f:
        r = _Reader(f, path)
        if r.size < 4 or r.take(4) != b"GGUF":
            raise HarnessError(f"{path}: not a GGUF file")
        version = r.unpack("<I")
        if version not in (2, 3):
            raise HarnessError(f"{path}: GGUF version {version} is not supported (big-endian or too old?)")
        r.unpack("<Q")                                   # tensor count: tensors are not read
        for _ in range(r.unpack("<Q")):
            n = r.unpack("<Q")
            if n > _MAX_KEY:
                r._fail(f"has a key of {n} bytes (the GGUF limit is {_MAX_KEY})")
            key = r.take(n).decode("utf-8", "replace")
            value = r.value(r.unpack("<I"), keep=key in _WANTED)
            if key in _WANTED:
                found[key] = value
    template = found.get("tokenizer.chat_template")
    if template is not None and not isinstance(template, bytes):
        raise HarnessError(f"{path}: tokenizer.chat_template is not a string")
    tokens = found.get("tokenizer.ggml.tokens") or []
    if not isinstance(tokens, list) or not all(isinstance(t, bytes) for t in tokens):
        raise HarnessError(f"{path}: tokenizer.ggml.tokens is not a list of strings")

    def token(key):
        idx = found.get(key)
        if idx is None:
            return None
        if type(idx) is not int:
            raise HarnessError(f"{path}: {key} is not an integer")
        if not 0 <= idx < len(tokens):
            return None
        try:
            return tokens[idx].decode("utf-8")
        except UnicodeDecodeError:
            raise HarnessError(f"{path}: {key} names token {idx}, which is not UTF-8 text") from None

    return {"chat_template": template, "bos_token": token("tokenizer.ggml.bos_token_id"),
            "eos_token": token("tokenizer.ggml.eos_token_id")}


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
