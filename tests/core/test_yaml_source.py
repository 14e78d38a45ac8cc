"""harness.core.yaml_source: hostile or broken YAML is an error naming file and line, never a traceback or a hang."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.core.constants import ROOT, SCENARIOS_DIR
from harness.core.errors import ScenarioError
from harness.core.yaml_source import load_located

LAUGHS = 'a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(9))

BAD = [
    ("recursive-alias", b"a: &a [*a]\n", 1, r"anchors \(&a\) are not allowed"),
    ("billion-laughs", LAUGHS.encode(), 1, r"anchors \(&a\) are not allowed"),
    ("alias-of-a-scalar", b"x: 1\ny: *x\n", 2, r"aliases \(\*x\) are not allowed"),
    ("anchor-alone", b"x: 1\ny: &keep 2\n", 2, r"anchors \(&keep\) are not allowed"),
    ("merge-key", b"base: {a: 1}\nother:\n  <<: *base\n", 3, r"aliases \(\*base\) are not allowed"),
    ("complex-key", b"x: 1\n? [a, b]\n: c\n", 2, r"a key must be a plain scalar"),
    ("mapping-key", b"x: 1\n{a: b}: c\n", 2, r"a key must be a plain scalar"),
    ("latin-1", b"x: 1\ny: caf\xe9\n", 2, r"not UTF-8 \(byte 0xe9 at offset 11\)"),
    ("utf-16", "x: 1\n".encode("utf-16"), 1, r"not UTF-8"),
    ("duplicate-key", b"name: a\nlabel: b\nname: c\n", 3, r"duplicate key 'name' \(first at line 1\)"),
    ("duplicate-nested-key", b"a:\n  b: 1\n  c: 2\n  b: 3\n", 4, r"duplicate key 'b' \(first at line 2\)"),
    ("deep-nesting", ("a: " + "[" * 5000 + "]" * 5000 + "\n").encode(), 1, r"nested more than 100 levels"),
    ("python-tag", b"a: !!python/object:os.system x\n", 1, r"cannot read this value: could not determine"),
    ("bad-float-tag", b"x: 1\na: !!float abc\n", 2, r"cannot read this value: could not convert"),
    ("two-documents", b"a: 1\n---\nb: 2\n", 2, r"invalid YAML: but found another document"),
    ("tab-indent", b"a:\n\tb: 1\n", 2, r"invalid YAML"),
]


@pytest.mark.parametrize("raw, line, message", [case[1:] for case in BAD], ids=[case[0] for case in BAD])
def test_bad_yaml_is_an_error_naming_file_and_line(tmp_path, raw, line, message):
    path = tmp_path / "bad.yaml"
    path.write_bytes(raw)
    started = time.process_time()      # CPU time: a hang or a blow-up costs it, a loaded machine does not
    with pytest.raises(ScenarioError, match=rf"^{path}:{line}: .*{message}"):
        load_located(path, ScenarioError)
    assert time.process_time() - started < 1.0


def test_values_keep_their_types_and_lines(tmp_path):
    path = tmp_path / "good.yaml"
    path.write_text("a:\n  b: [1, {c: d}]\nn: null\nt: true\ns: 'é'\n", encoding="utf-8")
    doc = load_located(path, ScenarioError)
    assert doc.data == {"a": {"b": [1, {"c": "d"}]}, "n": None, "t": True, "s": "é"}
    assert doc.line("a", "b", 1, "c") == 2 and doc.line("t") == 4
    assert doc.where("s") == f"{path}:5: s"


def test_every_project_yaml_file_loads():
    # No project file uses anchors, duplicate keys or complex keys; the rules above cost them nothing.
    paths = [*SCENARIOS_DIR.rglob("*.yaml"), *(ROOT / "harness").rglob("*.yaml")]
    assert len(paths) > 30
    for path in paths:
        assert isinstance(load_located(Path(path), ScenarioError).data, (dict, list)), path


@pytest.fixture
def bad_family_dir(tmp_path, monkeypatch):
    """The real family files plus one whose second line breaks YAML, as the registry's folder."""
    from harness import families as registry
    for path in registry.HERE.glob("*.yaml"):
        (tmp_path / path.name).write_bytes(path.read_bytes())
    (tmp_path / "broken.yaml").write_text("name: broken\nlabel: [unclosed\n", encoding="utf-8")
    from harness.template import render_worker
    monkeypatch.setattr(registry, "HERE", tmp_path)
    registry.families.cache_clear()
    # Detection runs in the render process, a fork of this one: one forked before the folder changed would
    # still hold the real families, so the next render forks afresh from the patched registry.
    render_worker.stop()
    yield tmp_path / "broken.yaml"
    registry.families.cache_clear()
    render_worker.stop()


def test_one_bad_family_file_breaks_only_the_commands_that_need_families(bad_family_dir, capsys):
    from harness import cli
    for argv in (["--help"], ["parse", "--help"], ["detect", "--help"]):
        with pytest.raises(SystemExit) as done:
            cli.main(argv)
        assert done.value.code == 0 and "usage:" in capsys.readouterr().out
    assert cli.main(["list", "templates", "--json"]) == 0
    capsys.readouterr()
    for argv in (["detect", "templates/Qwen-Qwen3-0.6B.jinja"], ["parse", "--template", "x", "--family", "hermes"]):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"{bad_family_dir}:3: invalid YAML" in err, err


def test_a_fresh_process_with_a_bad_family_file_still_answers_help(bad_family_dir):
    # A new interpreter, so nothing loaded at import time hides behind families already loaded by the tests.
    script = ("import sys; from pathlib import Path; import harness.families as registry; "
              f"registry.HERE = Path({str(bad_family_dir.parent)!r}); from harness import cli; "
              "sys.exit(cli.main(sys.argv[1:]))")
    run = [sys.executable, "-c", script]
    ok = subprocess.run([*run, "--help"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert ok.returncode == 0 and "usage: harness" in ok.stdout and not ok.stderr
    bad = subprocess.run([*run, "detect", "templates/Qwen-Qwen3-0.6B.jinja"], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)
    assert bad.returncode == 2 and bad.stderr.startswith(f"harness detect: {bad_family_dir}:3: invalid YAML")
    assert bad.stderr.count("\n") == 1
