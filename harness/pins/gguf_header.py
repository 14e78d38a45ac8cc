"""Read the chat template and bos/eos tokens from a GGUF file's metadata, without loading the model.

The `gguf` package's GGUFReader builds a numpy view per vocabulary entry, which takes tens of seconds on a
262k-token vocabulary; this reads the same key/value section sequentially (GGUF v2/v3, little-endian) and stops
before the tensors, so it takes well under a second and also works on the first piece of a split file.
tests/pins/test_sources.py checks it against GGUFReader.

A header is untrusted input (pin-template reads any GGUF a user hands it): every length and count is checked
against the bytes left in the file before anything is allocated, arrays nest only a few levels, and the
values read are checked for their type, so a hostile header is one clear HarnessError. Arrays are walked, never
kept: the vocabulary's place is noted and only the bos and eos tokens are read back out of it, so what is held
is the template and two tokens, whatever the header declares. The file is read with pread, not mapped: a file
cut shorter while it is read (another process rewriting it) gives short reads, which are an error, where a
mapped page past the new end would kill the process with SIGBUS.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from harness.core.errors import HarnessError
from harness.core.input_files import open_regular

_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
_TOKENS = "tokenizer.ggml.tokens"
_WANTED = frozenset({"tokenizer.chat_template", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                     _TOKENS})
# The GGUF spec caps a key at 65535 bytes; real files nest arrays at most one level (none of the wanted keys do).
_MAX_KEY = 65535
_MAX_DEPTH = 4
# A value that is read (the template) is held in memory: a chat template is kilobytes.
_MAX_KEPT = 16 << 20
# A bos or eos token is a few bytes; one far longer is not a token.
_MAX_TOKEN = 1 << 16
# Real headers hold a few dozen keys and a few hundred thousand array items (a 262k vocabulary, its merges).
# A length check alone does not bound the work: a sparse file of terabytes reads as zeros, every zero a valid
# empty key or string, so the keys and the items read are counted too.
_MAX_KEYS = 1 << 16
_MAX_ITEMS = 1 << 23
# The key/value section is read from at most this many bytes at the start of the file.
_MAX_HEADER = 1 << 30
# Bytes read from the file at a time: lengths and scalars are taken from this window, strings skipped over it.
_WINDOW = 1 << 20


@dataclass(frozen=True)
class _Array:
    """Where an array's items start in the file, what they are and how many: arrays are walked, not kept."""
    item_type: int
    count: int
    offset: int


class _Reader:
    """The key/value section, read through a window of at most _WINDOW bytes, inside the first _MAX_HEADER bytes
    of the file: skipping a string is moving a position, and nothing past that is ever touched."""

    def __init__(self, f, path):
        self.path = path
        self.fd = f.fileno()
        self.file_size = os.fstat(self.fd).st_size
        self.size = min(self.file_size, _MAX_HEADER)
        self.pos = 0
        self.items = 0
        self.window, self.window_at = b"", 0

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

    def _read_at(self, at: int, n: int) -> bytes:
        """n bytes at offset `at`, all of them: a short read means the file shrank after it was measured."""
        parts, got = [], 0
        while got < n:
            try:
                part = os.pread(self.fd, n - got, at + got)
            except OSError as exc:
                self._fail(f"cannot be read at byte {at + got}: {exc.strerror or exc}")
            if not part:
                raise HarnessError(f"{self.path}: the file ended at byte {at + got} while its GGUF metadata was "
                                   f"read, though it measured {self.file_size} bytes: it was cut shorter or "
                                   "rewritten meanwhile (read it again once nothing writes it)")
            parts.append(part)
            got += len(part)
        return b"".join(parts)

    def _view(self, n: int) -> int:
        """The window holding bytes [pos, pos + n), n <= _WINDOW, after _room; their offset in the window."""
        start = self.pos - self.window_at
        if start < 0 or start + n > len(self.window):
            self.window = self._read_at(self.pos, max(n, min(_WINDOW, self.size - self.pos)))
            self.window_at, start = self.pos, 0
        return start

    def take(self, n: int) -> bytes:
        self._room(n, "a value")
        if n > _WINDOW:
            data = self._read_at(self.pos, n)
        else:
            start = self._view(n)
            data = self.window[start:start + n]
        self.pos += n
        return data

    def unpack(self, fmt: str):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self, keep=True, limit: int = _MAX_KEPT, what: str = "a chat template") -> bytes | None:
        n = self.unpack("<Q")
        self._room(n, "a string")
        if keep:
            if n > limit:
                self._fail(f"holds a string of {n} bytes where {what} belongs (more than {limit} is refused)")
            return self.take(n)
        self.pos += n
        return None

    def skip_strings(self, count: int) -> None:
        # The hot loop of a header (a vocabulary's tokens and merges): lengths read out of the window, the
        # strings themselves skipped unread. Kept in local variables: this runs a million times.
        length = struct.Struct("<Q")
        pos, size, window, at = self.pos, self.size, self.window, self.window_at
        for _ in range(count):
            if pos < at or pos + 8 > at + len(window):
                self.pos = pos
                self._room(8, "a string's length")
                self._view(8)
                window, at = self.window, self.window_at
            n = length.unpack_from(window, pos - at)[0]
            pos += 8
            if n > size - pos:
                self.pos = pos
                self._room(n, "a string")
            pos += n
        self.pos = pos

    def value(self, vtype: int, keep: bool, depth: int = 0):
        """A scalar, a string (kept only when `keep`), or an array walked and returned as its _Array."""
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
            array = _Array(item_type, count, self.pos)
            if item_type in _SCALAR:
                self.pos += struct.calcsize(_SCALAR[item_type]) * count
            elif item_type == _STRING:
                self.skip_strings(count)
            else:
                for _ in range(count):
                    self.value(item_type, False, depth + 1)
            return array
        self._fail(f"has unknown value type {vtype}")

    def token(self, tokens: _Array, index: int) -> bytes:
        """Item `index` of a string array walked earlier: the strings before it skipped again, it read."""
        self.pos = tokens.offset
        self.skip_strings(index)
        return self.string(True, _MAX_TOKEN, "a token")


def check_gguf_header(path: Path | str) -> None:
    """Walk the whole key/value section, keeping nothing: raises HarnessError naming the file and what is wrong
    with a malformed header, in bounded time and memory, before a runtime that trusts it reads it."""
    with open_regular(Path(path)) as f:
        _walk(_Reader(f, Path(path)), frozenset())


def read_gguf_metadata(path: Path | str) -> dict:
    """{"chat_template": bytes or None, "bos_token": str or None, "eos_token": str or None}."""
    path = Path(path)
    with open_regular(path) as f:
        reader = _Reader(f, path)
        return _tokens(reader, _walk(reader, _WANTED))


def _walk(r: _Reader, wanted: frozenset) -> dict:
    """The values of the `wanted` keys; every other value is skipped, but checked as it is walked."""
    found = {}
    if r.size < 4 or r.take(4) != b"GGUF":
        raise HarnessError(f"{r.path}: not a GGUF file")
    version = r.unpack("<I")
    if version not in (2, 3):
        raise HarnessError(f"{r.path}: GGUF version {version} is not supported (big-endian or too old?)")
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
    return found


def _tokens(r: _Reader, found: dict) -> dict:
    """The template and the bos/eos token texts, out of the values read (the two tokens read back from the
    vocabulary's place in the file)."""
    path = r.path
    template = found.get("tokenizer.chat_template")
    if template is not None and not isinstance(template, bytes):
        raise HarnessError(f"{path}: tokenizer.chat_template is not a string")
    tokens = found.get(_TOKENS, _Array(_STRING, 0, 0))
    if not isinstance(tokens, _Array) or tokens.item_type != _STRING:
        raise HarnessError(f"{path}: {_TOKENS} is not a list of strings")

    def token(key):
        idx = found.get(key)
        if idx is None:
            return None
        if type(idx) is not int:
            raise HarnessError(f"{path}: {key} is not an integer")
        if not 0 <= idx < tokens.count:
            return None
        try:
            return r.token(tokens, idx).decode("utf-8")
        except UnicodeDecodeError:
            raise HarnessError(f"{path}: {key} names token {idx}, which is not UTF-8 text") from None

    return {"chat_template": template, "bos_token": token("tokenizer.ggml.bos_token_id"),
            "eos_token": token("tokenizer.ggml.eos_token_id")}


def is_gguf(path: Path | str) -> bool:
    try:
        with open_regular(Path(path)) as f:
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
