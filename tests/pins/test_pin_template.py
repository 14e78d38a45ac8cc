"""`harness pin-template`: a user's template lands in templates/ and sources.json, verified, or nothing changes."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.pins.sources import load_sources

ROOT = Path(__file__).resolve().parents[2]
QWEN = ROOT / "templates" / "Qwen-Qwen2.5-7B-Instruct.jinja"


@pytest.fixture
def tree(tmp_path):
    """A copy of the project's pins, so the command writes there and not into this checkout."""
    shutil.copy(ROOT / "sources.json", tmp_path / "sources.json")
    shutil.copytree(ROOT / "templates", tmp_path / "templates")
    return tmp_path


def harness(tree: Path, *args):
    env = dict(os.environ, HARNESS_ROOT=str(tree))
    return subprocess.run([sys.executable, "-m", "harness", *map(str, args)], capture_output=True, text=True,
                          env=env)


def test_a_jinja_file_is_pinned_and_detected(tree, tmp_path):
    src = tmp_path / "mine.jinja"
    shutil.copy(QWEN, src)
    done = harness(tree, "pin-template", src, "--id", "my-qwen", "--repo", "me/my-qwen", "--eos-token",
                   "<|im_end|>", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["detected"]["family"] == "hermes"
    pin = load_sources(tree / "sources.json").template("my-qwen")
    assert (tree / pin.file).read_bytes() == QWEN.read_bytes()
    assert (pin.repo, pin.repo_basis, pin.eos_token, pin.size) == ("me/my-qwen", "given to harness pin-template",
                                                                  "<|im_end|>", QWEN.stat().st_size)
    assert harness(tree, "verify").returncode == 0


def test_a_tokenizer_config_gives_its_template_and_tokens(tree, tmp_path):
    config = tmp_path / "tokenizer_config.json"
    config.write_text(json.dumps({"chat_template": QWEN.read_text(encoding="utf-8"), "bos_token": None,
                                  "eos_token": {"content": "<|im_end|>", "special": True}}), encoding="utf-8")
    done = harness(tree, "pin-template", config, "--id", "from-config")
    assert done.returncode == 0, done.stderr
    pin = load_sources(tree / "sources.json").template("from-config")
    assert (tree / pin.file).read_bytes() == QWEN.read_bytes() and pin.eos_token == "<|im_end|>"


@pytest.mark.parametrize("args, message", [
    (["--id", "Qwen-Qwen2.5-7B-Instruct"], "already pinned; re-pinning is deliberate"),
    (["--id", "../escape"], "must be letters"),
    (["--id", "ok", "--revision", "main"], "'revision' is malformed"),
])
def test_refusals_change_nothing(tree, tmp_path, args, message):
    src = tmp_path / "mine.jinja"
    shutil.copy(QWEN, src)
    before = (tree / "sources.json").read_bytes(), sorted(p.name for p in (tree / "templates").iterdir())
    done = harness(tree, "pin-template", src, *args)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert ((tree / "sources.json").read_bytes(), sorted(p.name for p in (tree / "templates").iterdir())) == before


def test_a_file_that_is_not_utf8_text_is_refused(tree, tmp_path):
    src = tmp_path / "bad.jinja"
    src.write_bytes(b"{{ '\xff' }}")
    done = harness(tree, "pin-template", src, "--id", "bad")
    assert done.returncode == 2 and "must be UTF-8" in done.stderr


# --- hostile and odd sources: refused before anything is written -----------------------------------------------

def _gguf(path: Path, kvs: list) -> Path:
    """A GGUF v3 header written by hand, so a test can put in it what no writer library would."""
    def string(b: bytes) -> bytes:
        return len(b).to_bytes(8, "little") + b
    body = b"GGUF" + (3).to_bytes(4, "little") + (0).to_bytes(8, "little") + len(kvs).to_bytes(8, "little")
    for key, vtype, payload in kvs:
        body += string(key.encode()) + vtype.to_bytes(4, "little") + payload
    path.write_bytes(body)
    return path


def _str(b: bytes) -> bytes:
    return len(b).to_bytes(8, "little") + b


def _unchanged(tree: Path):
    return (tree / "sources.json").read_bytes(), sorted(p.name for p in (tree / "templates").iterdir())


def test_a_gguf_whose_template_is_not_utf8_writes_nothing(tree, tmp_path):
    src = _gguf(tmp_path / "bad.gguf", [("tokenizer.chat_template", 8, _str(b"{{ '\xff' }}"))])
    before = _unchanged(tree)
    done = harness(tree, "pin-template", src, "--id", "bad-gguf")
    assert done.returncode == 2 and "must be UTF-8" in done.stderr, done.stderr
    assert _unchanged(tree) == before
    assert harness(tree, "verify").returncode == 0


@pytest.mark.parametrize("kvs, message", [
    ([("tokenizer.chat_template", 8, (1 << 62).to_bytes(8, "little"))], "goes past the end of the file"),
    ([("tokenizer.ggml.tokens", 9, (8).to_bytes(4, "little") + (1 << 60).to_bytes(8, "little"))],
     "an array of 1152921504606846976 items"),
    ([("x", 9, ((9).to_bytes(4, "little") + (1).to_bytes(8, "little")) * 5000)], "nests arrays"),
    ([("tokenizer.chat_template", 4, (7).to_bytes(4, "little"))], "tokenizer.chat_template is not a string"),
    ([("tokenizer.chat_template", 8, _str(b"{{ x }}")),
      ("tokenizer.ggml.tokens", 9, (4).to_bytes(4, "little") + (1).to_bytes(8, "little") + (5).to_bytes(4, "little"))],
     "tokens is not a list of strings"),
    ([("tokenizer.chat_template", 8, _str(b"{{ x }}")),
      ("tokenizer.ggml.tokens", 9, (8).to_bytes(4, "little") + (1).to_bytes(8, "little") + _str(b"<s>")),
      ("tokenizer.ggml.bos_token_id", 6, b"\x00\x00\x80\x3f")], "bos_token_id is not an integer"),
    ([("tokenizer.chat_template", 8, _str(b"{{ x }}")),
      ("tokenizer.ggml.tokens", 9, (8).to_bytes(4, "little") + (1).to_bytes(8, "little") + _str(b"\xff")),
      ("tokenizer.ggml.eos_token_id", 4, (0).to_bytes(4, "little"))], "not UTF-8 text"),
    ([("k", 8, b"")], "ends early"),
], ids=["string-2^62", "array-2^60", "arrays-5000-deep", "template-int", "tokens-ints", "bos-float",
        "token-not-utf8", "truncated"])
def test_a_hostile_gguf_header_is_one_clear_error(tree, tmp_path, kvs, message):
    from harness.core.errors import SourcesError
    from harness.pins.pin_template import read_template_source
    src = _gguf(tmp_path / "hostile.gguf", kvs)
    with pytest.raises(SourcesError, match=message):
        read_template_source(src)


def test_a_gguf_key_longer_than_the_spec_allows_is_refused(tmp_path):
    from harness.core.errors import SourcesError
    from harness.pins.pin_template import read_template_source
    path = tmp_path / "key.gguf"
    path.write_bytes(b"GGUF" + (3).to_bytes(4, "little") + (0).to_bytes(8, "little") + (1).to_bytes(8, "little")
                     + (1 << 62).to_bytes(8, "little"))
    with pytest.raises(SourcesError, match="has a key of"):
        read_template_source(path)


@pytest.mark.parametrize("config, message", [
    ('{"chat_template": ' + "[" * 100000 + "]" * 100000 + "}", "nested too deep"),
    ('{"chat_template": "\\ud800"}', "not valid text"),
    ('{"chat_template": [{"name": ["x"], "template": "t"}, {"name": "default", "template": 5}]}',
     "no template variant 'default'"),
    ('["chat_template"]', "has no 'chat_template' field"),
    ('{"chat_template": 7}', "neither a string nor a list"),
    (json.dumps({"chat_template": "{{ x }}", "bos_token": "b" * 10_000_000}), "bos_token is 10000000 characters"),
    (json.dumps({"chat_template": "{{ x }}", "eos_token": {"content": "\ud800"}}), "eos_token is not valid text"),
], ids=["deep", "surrogate", "odd-variants", "a-list", "an-int", "huge-bos", "surrogate-eos"])
def test_a_hostile_tokenizer_config_is_one_clear_error(tree, tmp_path, config, message):
    src = tmp_path / "tokenizer_config.json"
    src.write_text(config, encoding="utf-8", errors="surrogatepass")
    before = _unchanged(tree)
    done = harness(tree, "pin-template", src, "--id", "hostile")
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert _unchanged(tree) == before


@pytest.mark.parametrize("args, message", [
    (["--id", "abc\n"], "must be letters"),
    (["--id", "big"], "more than 1048576 is refused"),
    (["--id", "ok", "--eos-token", "e" * 300], "eos_token is 300 characters"),
], ids=["id-with-newline", "template-2MB", "long-eos-flag"])
def test_caps_and_the_id_check_hold(tree, tmp_path, args, message):
    src = tmp_path / "mine.jinja"
    src.write_bytes(QWEN.read_bytes() + (b"{# pad #}" * 240_000 if args[1] == "big" else b""))
    before = _unchanged(tree)
    done = harness(tree, "pin-template", src, *args)
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert _unchanged(tree) == before


def test_an_id_ending_in_a_newline_is_refused_in_sources_json(tree):
    from harness.core.errors import SourcesError
    raw = json.loads((tree / "sources.json").read_text(encoding="utf-8"))
    raw["templates"][0]["id"] += "\n"
    (tree / "sources.json").write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(SourcesError, match="field 'id' is malformed"):
        load_sources(tree / "sources.json")


PIN_ONE = """
import sys
from pathlib import Path
from harness.pins.pin_template import pin_template
pin_template(sys.argv[1], Path(sys.argv[2]))
"""


def test_pins_made_at_once_all_land(tree, tmp_path):
    # Without the lock on sources.json's read-modify-write, most of these overwrote each other's entry.
    src = tmp_path / "mine.jinja"
    shutil.copy(QWEN, src)
    env = dict(os.environ, HARNESS_ROOT=str(tree))
    ids = [f"at-once-{i}" for i in range(8)]
    procs = [subprocess.Popen([sys.executable, "-c", PIN_ONE, tid, str(src)], env=env, stderr=subprocess.PIPE,
                              text=True) for tid in ids]
    for p in procs:
        assert p.wait() == 0, p.stderr.read()
        p.stderr.close()
    pinned = load_sources(tree / "sources.json").templates
    assert all(tid in pinned for tid in ids)
    assert not list(tree.glob(".sources.json*"))
    assert harness(tree, "verify").returncode == 0


def test_a_gguf_template_too_large_to_hold_is_refused_before_it_is_read(tmp_path):
    from harness.core.errors import SourcesError
    from harness.pins.pin_template import read_template_source
    n = (16 << 20) + 1
    path = _gguf(tmp_path / "big.gguf", [("tokenizer.chat_template", 8, n.to_bytes(8, "little"))])
    with open(path, "ab") as f:
        f.truncate(path.stat().st_size + n)        # sparse: the bytes are there, nothing is written
    with pytest.raises(SourcesError, match="more than 16777216 is refused"):
        read_template_source(path)


def test_a_wall_is_pinned_with_a_warning_and_exit_status_1(tree, tmp_path):
    # Qwen2.5's template with the arguments printed as a Python dict: no family reads its call.
    src = tmp_path / "python-args.jinja"
    src.write_text(QWEN.read_text(encoding="utf-8").replace("tool_call.arguments | tojson", "tool_call.arguments"),
                   encoding="utf-8")
    done = harness(tree, "pin-template", src, "--id", "python-args")
    assert done.returncode == 1, done.stderr
    assert "warning: python-args is a wall" in done.stderr and "exit status 1" in done.stderr
    assert "nearest family: hermes: python-literals" in done.stdout
    assert "python-args" in load_sources(tree / "sources.json").templates


def test_a_template_that_hangs_is_not_pinned(tree, tmp_path):
    # No Jinja hook runs inside these loops: only the render process's kill ends the probe render.
    src = tmp_path / "hangs.jinja"
    src.write_text("{% set s = 'x' * 6000000 %}{% for a in s %}{% for b in s %}{% endfor %}{% endfor %}",
                   encoding="utf-8")
    before = _unchanged(tree)
    done = harness(tree, "pin-template", src, "--id", "hangs")
    assert done.returncode == 2 and "not pinned" in done.stderr and "nothing was written" in done.stderr, done.stderr
    assert "its process was killed" in done.stderr and "Traceback" not in done.stderr
    assert _unchanged(tree) == before


def _sparse_gguf(path: Path, keys: int, tail: bytes = b"") -> Path:
    # Terabytes that take no disk: past the header every byte reads as zero, and zeros are valid empty keys
    # of type uint8, so only a bound on the work stops the reader.
    head = b"GGUF" + (3).to_bytes(4, "little") + (0).to_bytes(8, "little") + keys.to_bytes(8, "little") + tail
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(1 << 40)
    return path


@pytest.mark.parametrize("keys, tail, message", [
    (1 << 40, b"", "claims 1099511627776 keys"),
    (1, _str(b"tokenizer.ggml.tokens") + (9).to_bytes(4, "little") + (8).to_bytes(4, "little")
     + (1 << 24).to_bytes(8, "little"), "more than 8388608 items in all"),
    (1, _str(b"tokenizer.ggml.tokens") + (9).to_bytes(4, "little") + (8).to_bytes(4, "little")
     + (1 << 36).to_bytes(8, "little"), "runs past its first 1073741824 bytes"),
    (2, _str(b"a") + (9).to_bytes(4, "little") + (0).to_bytes(4, "little") + (1 << 22).to_bytes(8, "little"),
     "more than 8388608 items in all"),
], ids=["keys-2^40", "tokens-2^24", "tokens-2^36", "arrays-add-up"])
def test_a_sparse_terabyte_gguf_is_refused_without_reading_it(tmp_path, keys, tail, message):
    from harness.core.errors import HarnessError
    from harness.pins.gguf_header import read_gguf_metadata
    path = _sparse_gguf(tmp_path / "sparse.gguf", keys, tail)
    if keys == 2:
        # Two arrays of 2^22 + 2^22 + 1 uint8 items: each under the bound, together over it.
        with open(path, "r+b") as f:
            f.seek(len(tail) + 24 + (1 << 22))
            f.write(_str(b"b") + (9).to_bytes(4, "little") + (0).to_bytes(4, "little") + ((1 << 22) + 1).to_bytes(8, "little"))
    with pytest.raises(HarnessError, match=message):
        read_gguf_metadata(path)


def test_detect_on_a_malformed_or_odd_gguf_says_what_is_wrong(tmp_path):
    bad_magic = tmp_path / "magic.gguf"
    bad_magic.write_bytes(b"GGUG" + bytes(20))
    truncated = _gguf(tmp_path / "cut.gguf", [("tokenizer.chat_template", 8, (1 << 62).to_bytes(8, "little"))])
    fifo = tmp_path / "fifo.gguf"
    os.mkfifo(fifo)
    for path, said in ((truncated, "goes past the end of the file"), (fifo, "is not a regular file"),
                       (_sparse_gguf(tmp_path / "sparse.gguf", 1 << 40), "claims 1099511627776 keys")):
        done = harness(tmp_path, "detect", path)
        assert done.returncode == 2 and str(path) in done.stderr and said in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    done = harness(tmp_path, "detect", bad_magic)
    assert done.returncode == 2 and "not a GGUF file: it starts with b'GGUG'" in done.stderr, done.stderr


def test_a_model_with_a_malformed_header_is_not_handed_to_llama_cpp(tmp_path):
    from harness.backends.embedded.generate import load_model
    from harness.core.errors import ModelLoadError
    with pytest.raises(ModelLoadError, match=r"sparse.gguf: GGUF metadata claims 1099511627776 keys"):
        load_model(_sparse_gguf(tmp_path / "sparse.gguf", 1 << 40))
