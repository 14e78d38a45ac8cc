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

import mmap
import os
import stat
import struct
from pathlib import Path

from harness.core.errors import HarnessError

_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
_WANTED = frozenset({"tokenizer.chat_template", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                     "tokenizer.ggml.tokens"})
# The GGUF spec caps a key at 65535 bytes; real files nest arrays at most one level (none of the wanted keys do).
_MAX_KEY = 65535
_MAX_DEPTH = 4
# A value that is read (the template, a token) is held in memory: a chat template is kilobytes, a token bytes.
_MAX_KEPT = 16 << 20
# Real headers hold a few dozen keys and a few hundred thousand array items (a 262k vocabulary, its merges).
# A length check alone does not bound the work: a sparse file of terabytes reads as zeros, every zero a valid
# empty key or string, so the keys and the items read are counted too.
_MAX_KEYS = 1 << 16
_MAX_ITEMS = 1 << 23
# The key/value section is read from at most this many bytes at the start of the file.
_MAX_HEADER = 1 << 30


class _Reader:
    """The key/value section through a read-only map of at most _MAX_HEADER bytes: skipping a string is moving
    a position, not a system call, and nothing past the window is ever touched."""

    def __init__(self, f, path):
        self.path = path
        self.file_size = os.fstat(f.fileno()).st_size
        self.size = min(self.file_size, _MAX_HEADER)
        self.data = mmap.mmap(f.fileno(), self.size, access=mmap.ACCESS_READ) if self.size else b""
        self.pos = 0
        self.items = 0

    def close(self) -> None:
        if isinstance(self.data, mmap.mmap):
            self.data.close()

    def _fail(self, what: str):
        raise HarnessError(f"{self.path}: GGUF metadata {what}")

    def _room(self, n: int, what: str) -> None:
        # A declared length longer than the rest of the file is a truncated or hostile header; checking it
        # first keeps a length of 2**63 from becoming a read of that many bytes.
        if n > self.size - self.pos:
            if self.pos + n <= self.file_size:
                self._fail(f"runs past its first {_MAX_HEADER} bytes ({what} of {n} bytes); real headers take "
                           "megabytes")
            self._fail(f"ends early: {what} of {n} bytes goes past the end of the file (truncated file?)")

    def take(self, n: int) -> bytes:
        self._room(n, "a value")
        self.pos += n
        return self.data[self.pos - n:self.pos]

    def unpack(self, fmt: str):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self, keep=True) -> bytes | None:
        n = self.unpack("<Q")
        self._room(n, "a string")
        if keep:
            if n > _MAX_KEPT:
                self._fail(f"holds a string of {n} bytes where a chat template or a token belongs "
                           f"(more than {_MAX_KEPT} is refused)")
            return self.take(n)
        self.pos += n
        return None

    def skip_strings(self, count: int) -> None:
        # The hot loop of a header (a vocabulary's tokens and merges): lengths read in place.
        data, pos, size, length = self.data, self.pos, self.size, struct.Struct("<Q")
        for _ in range(count):
            if pos + 8 > size:
                self.pos = pos
                self._room(8, "a string's length")
            n = length.unpack_from(data, pos)[0]
            if n > size - pos - 8:
                self.pos = pos + 8
                self._room(n, "a string")
            pos += 8 + n
        self.pos = pos

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
            self.items += count
            if self.items > _MAX_ITEMS:
                self._fail(f"holds arrays of more than {_MAX_ITEMS} items in all (this one has {count}); real "
                           "headers hold a few hundred thousand")
            if item_type in _SCALAR and not keep:
                self.pos += struct.calcsize(_SCALAR[item_type]) * count
                return None
            if item_type == _STRING and not keep:
                self.skip_strings(count)
                return None
            items = [self.value(item_type, keep, depth + 1) for _ in range(count)]
            return items if keep else None
        self._fail(f"has unknown value type {vtype}")


def check_gguf_header(path: Path | str) -> None:
    """Walk the whole key/value section, keeping nothing: raises HarnessError naming the file and what is wrong
    with a malformed header, in bounded time and memory, before a runtime that trusts it reads it."""
    _read_kv(Path(path), frozenset())


def read_gguf_metadata(path: Path | str) -> dict:
    """{"chat_template": bytes or None, "bos_token": str or None, "eos_token": str or None}."""
    path = Path(path)
    return _tokens(path, _read_kv(path, _WANTED))


def _read_kv(path: Path, wanted: frozenset) -> dict:
    """The values of the `wanted` keys; every other value is skipped, but checked as it is walked."""
    found = {}
    with _open_regular(path) as f:
        r = _Reader(f, path)
        try:
            _walk(r, path, wanted, found)
        finally:
            r.close()
    return found


def _walk(r: _Reader, path: Path, wanted: frozenset, found: dict) -> None:
    if r.size < 4 or r.take(4) != b"GGUF":
        raise HarnessError(f"{path}: not a GGUF file")
    version = r.unpack("<I")
    if version not in (2, 3):
        raise HarnessError(f"{path}: GGUF version {version} is not supported (big-endian or too old?)")
    r.unpack("<Q")                                   # tensor count: tensors are not read
    keys = r.unpack("<Q")
    if keys > _MAX_KEYS:
        r._fail(f"claims {keys} keys (real headers hold a few dozen; more than {_MAX_KEYS} is refused)")
    for _ in range(keys):
        n = r.unpack("<Q")
        if n > _MAX_KEY:
            r._fail(f"has a key of {n} bytes (the GGUF limit is {_MAX_KEY})")
        key = r.take(n).decode("utf-8", "replace")
        value = r.value(r.unpack("<I"), keep=key in wanted)
        if key in wanted:
            found[key] = value


def _tokens(path: Path, found: dict) -> dict:
    """The template and the bos/eos token texts, out of the values read."""
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


def _open_regular(path: Path):
    """The file opened for reading, if it is a regular file: a FIFO or a device named like a model would block or
    never end. Opened without blocking so that even a FIFO is only looked at."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise HarnessError(f"{path}: cannot read: {exc.strerror or exc}") from None
    f = open(fd, "rb")
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        f.close()
        raise HarnessError(f"{path}: not a regular file, so not a GGUF model")
    return f


def is_gguf(path: Path | str) -> bool:
    try:
        with _open_regular(Path(path)) as f:
            return f.read(4) == b"GGUF"
    except (OSError, HarnessError):
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
