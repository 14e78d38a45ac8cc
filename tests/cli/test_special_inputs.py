"""Inputs a user names or pipes in that are not what they seem: a FIFO or a link to /dev/zero where a file is
expected, text that is not text (a lone surrogate escape), JSON no program can hold (100,000 levels deep, a
number of 5,000 digits), a cache that is /dev/null. Each is one clear error naming the file, never a hang, a
memory blow-up or a traceback."""

import json
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core.errors import FamilySpecError, HarnessError, ScenarioError
from tests.hub_server import HubServer

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "templates" / "Qwen-Qwen2.5-7B-Instruct.jinja"
ZERO = "/dev/zero"
# Guards only, for a regression: a FIFO read would wait for ever, /dev/zero would fill memory. A fixed command
# ends in seconds; the guard is far beyond that and no assertion is made about time.
HANG_GUARD = 300
MEMORY_CAP = 4 << 30

SNIPPET = """
import sys
from harness.core.errors import HarnessError
from harness.evaluation.scenario_files import load_scenarios
try:
    load_scenarios(names=[sys.argv[1]])
except HarnessError as exc:
    print(exc, file=sys.stderr)
    sys.exit(2)
"""


def _capped():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def _run(args, env=None, stdin=subprocess.DEVNULL, input_text=None):
    env = dict(os.environ, **(env or {}), PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, env=env,
                          stdin=None if input_text is not None else stdin, input=input_text, timeout=HANG_GUARD,
                          preexec_fn=_capped, cwd=ROOT)


def _special(path: Path, kind: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(ZERO)
    return path


def _scenario_tree(tmp_path: Path) -> Path:
    """A checkout with the project's scenarios and their tool library (`harness list scenarios` reads them)."""
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "scenarios", tree / "scenarios", ignore=shutil.ignore_patterns("replays"))
    shutil.copy(ROOT / "sources.json", tree / "sources.json")
    return tree


def _scenario_file(tmp_path, kind):
    special = _special(tmp_path / "mine.yaml", kind)
    return special, ["-c", SNIPPET, special], {}


def _scenario_folder_entry(tmp_path, kind):
    tree = _scenario_tree(tmp_path)
    special = _special(tree / "scenarios" / "zz-special.yaml", kind)
    return special, ["-m", "harness", "list", "scenarios"], {"HARNESS_ROOT": str(tree)}


def _scenario_library(tmp_path, kind):
    tree = _scenario_tree(tmp_path)
    library = tree / "scenarios" / "library" / "tools.yaml"
    library.unlink()
    special = _special(library, kind)
    return special, ["-m", "harness", "list", "scenarios"], {"HARNESS_ROOT": str(tree)}


def _tools_file(tmp_path, kind):
    special = _special(tmp_path / "tools.json", kind)
    return special, ["-m", "harness", "parse", "--template", TEMPLATE, "--tools", special], {}


def _sources_json(tmp_path, kind):
    tree = tmp_path / "tree"
    special = _special(tree / "sources.json", kind)
    return special, ["-m", "harness", "list", "models"], {"HARNESS_ROOT": str(tree)}


@pytest.mark.parametrize("kind", ["fifo", "zero-link"])
@pytest.mark.parametrize("entry", [_scenario_file, _scenario_folder_entry, _scenario_library, _tools_file,
                                   _sources_json],
                         ids=["scenario-file", "scenario-folder-entry", "scenario-library", "tools", "sources-json"])
def test_a_fifo_or_a_link_to_dev_zero_is_refused_by_name(tmp_path, entry, kind):
    special, args, env = entry(tmp_path, kind)
    done = _run(args, env, input_text="hello")
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr and str(special) in done.stderr, done.stderr[-2000:]
    assert "not a regular file" in done.stderr, done.stderr


def test_dev_zero_on_stdin_is_refused_not_read_whole():
    with open(ZERO, "rb") as zero:
        done = _run(["-m", "harness", "parse", "--template", TEMPLATE], stdin=zero)
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr and "the reply on stdin: more than" in done.stderr, done.stderr[-2000:]


# --- text that is not text ------------------------------------------------------------------------------------

def _with_line(source: Path, path: Path, starts: str, value: str):
    """`source` copied to `path` with its line starting `starts` set to a double-quoted `value`; that line."""
    lines = source.read_text(encoding="utf-8").splitlines()
    index = next(i for i, text in enumerate(lines) if text.startswith(starts))
    lines[index] = f'{starts} "{value}"'
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, index + 1


def _scenario_with(tmp_path, value):
    return _with_line(ROOT / "scenarios" / "greeting.yaml", tmp_path / "greeting.yaml", "description:", value)


def _family_with(tmp_path, value):
    return _with_line(ROOT / "harness" / "families" / "hermes.yaml", tmp_path / "hermes.yaml", "label:", value)


def _load_scenario(path):
    from harness.evaluation.scenario_files import load_scenarios
    return load_scenarios(path.parent, names=[str(path)])


def _load_family(path):
    from harness.formats.spec import load_family
    return load_family(path, {})


@pytest.mark.parametrize("write, load, error", [
    (_scenario_with, _load_scenario, ScenarioError),
    (_family_with, _load_family, FamilySpecError),
], ids=["scenario", "family"])
@pytest.mark.parametrize("value", ["\\ud800", "a \\udfff and more"])
def test_a_lone_surrogate_escape_in_yaml_is_an_error_at_its_line(tmp_path, write, load, error, value):
    path, line = write(tmp_path, value)
    with pytest.raises(error) as raised:
        load(path)
    assert str(raised.value).startswith(f"{path}:{line}:") and "surrogate" in str(raised.value), raised.value


# --- JSON no program can hold ----------------------------------------------------------------------------------

DEEP = "[" * 100_000 + "]" * 100_000
LONG_NUMBER = "9" * 5000


def _bfcl_case_file(tmp_path, hostile):
    from harness.suites.bfcl.cases import load_suite
    data = tmp_path / "tree" / "data"
    data.mkdir(parents=True)
    good = json.dumps({"id": "irrelevance_0", "question": [[{"role": "user", "content": "hi"}]], "function": []})
    (data / "BFCL_v4_irrelevance.json").write_text(f"{good}\n{{\"id\": {hostile}}}\n", encoding="utf-8")
    return data / "BFCL_v4_irrelevance.json", 2, lambda: load_suite(["irrelevance"], tree=tmp_path / "tree")


def _sources_file(tmp_path, hostile):
    from harness.pins.sources import load_sources
    raw = json.loads((ROOT / "sources.json").read_text(encoding="utf-8"))
    text = json.dumps(raw).replace(f'"size": {raw["models"][0]["size"]}', f'"size": {hostile}', 1)
    path = tmp_path / "sources.json"
    path.write_text(text, encoding="utf-8")
    return path, None, lambda: load_sources(path)


@pytest.mark.parametrize("hostile", [DEEP, LONG_NUMBER], ids=["100k-deep", "5000-digits"])
@pytest.mark.parametrize("entry", [_bfcl_case_file, _sources_file], ids=["bfcl-case-file", "sources-json"])
def test_json_no_program_can_hold_is_an_error_naming_the_file(tmp_path, entry, hostile):
    path, line, load = entry(tmp_path, hostile)
    with pytest.raises(HarnessError) as raised:
        load()
    where = f"{path}:{line}:" if line else f"{path}:"
    assert str(raised.value).startswith(where), raised.value


def test_a_size_past_any_file_in_sources_json_is_refused(tmp_path):
    from harness.pins.sources import load_sources
    raw = json.loads((ROOT / "sources.json").read_text(encoding="utf-8"))
    raw["models"][0]["size"] = 10 ** 4000          # a number JSON can hold, but not a download deadline
    path = tmp_path / "sources.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    with pytest.raises(HarnessError, match="field 'size' must be a byte count"):
        load_sources(path)


# --- a cache that is not a folder ------------------------------------------------------------------------------

@pytest.fixture
def hub():
    with HubServer() as server:
        yield server


@pytest.mark.parametrize("what", ["--models", "--archives"])
def test_a_cache_that_is_dev_null_is_a_clear_error(tmp_path, hub, what):
    from tests.pins.test_fetch import DATA, FILE, REPO, model_entry, write_root
    hub.add(REPO, FILE, DATA)
    tree = tmp_path / "tree"
    write_root(tree, [model_entry()])
    raw = json.loads((tree / "sources.json").read_text(encoding="utf-8"))
    raw["archives"] = json.loads((ROOT / "sources.json").read_text(encoding="utf-8"))["archives"][-1:]
    (tree / "sources.json").write_text(json.dumps(raw), encoding="utf-8")
    done = _run(["-m", "harness", "fetch", what], {"HARNESS_ROOT": str(tree), "HARNESS_CACHE": os.devnull,
                                                   "HF_ENDPOINT": hub.url, "HF_HUB_OFFLINE": "0"})
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert f"{os.devnull}/" in done.stderr and "Not a directory" in done.stderr, done.stderr
