"""What a GGUF header costs to read is bounded by what is needed from it, not by what it declares: huge token
strings are walked over, never held, and a file cut shorter while it is read is one clear error, not SIGBUS."""

import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path

import pytest

from harness.pins.gguf_header import check_gguf_header, embedded_template, read_gguf_metadata

ROOT = Path(__file__).resolve().parents[2]
BIG_TOKEN = 16 << 20          # as large as a kept value may be
BIG_TOKENS = 8


def _str(b: bytes) -> bytes:
    return len(b).to_bytes(8, "little") + b


def _huge_vocabulary(path: Path) -> Path:
    """A header whose vocabulary opens with BIG_TOKENS strings of BIG_TOKEN bytes (holes on disk: they read as
    zeros and take no space), then the bos and eos tokens, then the keys naming them and a template."""
    head = (b"GGUF" + (3).to_bytes(4, "little") + (0).to_bytes(8, "little") + (4).to_bytes(8, "little")
            + _str(b"tokenizer.ggml.tokens") + (9).to_bytes(4, "little") + (8).to_bytes(4, "little")
            + (BIG_TOKENS + 2).to_bytes(8, "little"))
    with open(path, "wb") as f:
        f.write(head)
        for _ in range(BIG_TOKENS):
            f.write(BIG_TOKEN.to_bytes(8, "little"))
            f.seek(BIG_TOKEN, 1)
        f.write(_str(b"<s>") + _str(b"</s>")
                + _str(b"tokenizer.ggml.bos_token_id") + (4).to_bytes(4, "little") + BIG_TOKENS.to_bytes(4, "little")
                + _str(b"tokenizer.ggml.eos_token_id") + (4).to_bytes(4, "little")
                + (BIG_TOKENS + 1).to_bytes(4, "little")
                + _str(b"tokenizer.chat_template") + (8).to_bytes(4, "little") + _str(b"{{ bos_token }}"))
    return path


@pytest.mark.parametrize("read, expected", [
    (read_gguf_metadata, {"chat_template": b"{{ bos_token }}", "bos_token": "<s>", "eos_token": "</s>"}),
    (embedded_template, ("{{ bos_token }}", "<s>", "</s>")),        # harness detect and pin-template
    (check_gguf_header, None),                                      # before a model is loaded
], ids=["metadata", "detect", "check"])
def test_huge_token_strings_are_walked_over_not_held(tmp_path, read, expected):
    path = _huge_vocabulary(tmp_path / "huge-vocab.gguf")
    assert path.stat().st_size > BIG_TOKENS * BIG_TOKEN
    tracemalloc.start()
    try:
        got = read(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert got == expected
    # The tokens add up to 128 MB; what is held is a read window and two short tokens.
    assert peak < 4 << 20, peak


SHRINKING = textwrap.dedent("""
    import os, sys
    from harness.core.errors import HarnessError
    from harness.pins import gguf_header

    path, entry = sys.argv[1], sys.argv[2]
    measured = gguf_header._Reader.__init__

    def measure_then_shrink(self, f, where):
        measured(self, f, where)
        os.truncate(path, 64)          # another process rewrites the file after it was measured

    gguf_header._Reader.__init__ = measure_then_shrink
    try:
        getattr(gguf_header, entry)(path)
    except HarnessError as exc:
        print(exc)
        sys.exit(1)
    print("read whole")
""")


@pytest.mark.parametrize("entry", ["read_gguf_metadata", "check_gguf_header"])
def test_a_gguf_cut_shorter_while_it_is_read_is_a_clear_error(tmp_path, entry):
    path = tmp_path / "shrinking.gguf"
    path.write_bytes(b"GGUF" + (3).to_bytes(4, "little") + (0).to_bytes(8, "little") + (1).to_bytes(8, "little")
                     + _str(b"tokenizer.chat_template") + (8).to_bytes(4, "little") + _str(b"x" * (2 << 20)))
    # In a process of its own: a mapped file cut shorter kills its reader with SIGBUS, which would take pytest.
    done = subprocess.run([sys.executable, "-c", SHRINKING, str(path), entry], capture_output=True, text=True,
                          cwd=ROOT)
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    assert str(path) in done.stdout and "cut shorter or rewritten" in done.stdout, done.stdout
