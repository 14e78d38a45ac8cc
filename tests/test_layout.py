"""The package layout is the architecture: each stage imports only what lies below it, so the data flows one
way (sources.json → render → detect → generate → parse → score → reports). These tests read every module's
imports (module level and inside functions alike) and fail on an import that goes upward or closes a circle."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "harness"
# Floors, bottom to top.
# formats is the parsing engine, families the family definitions built on it; schema (arguments typed by JSON
# Schema) and families share a floor, as do live and reports: neither of a pair imports the other. scripted
# (the scripted-model factory) and peers (other projects' parsers, run in their own environment) are not
# backends: they sit above the backends they drive.
# suites (one folder per suite: its cases, driver, records, page and command) sit above live and reports, since a
# suite drives runtimes and writes its page with the report helpers, and below cli, which only lists them.
FLOORS = {"core": 0, "formats": 1, "families": 2, "schema": 2, "pins": 3, "template": 4, "grammar": 5,
          "storage": 6, "evaluation": 7, "backends": 8, "scripted": 9, "peers": 10, "live": 11, "reports": 11,
          "suites": 12, "cli": 13}
# The package's own face, not a stage.
ENTRY = {"__init__.py", "__main__.py"}
EMBEDDED = "backends/embedded/"


def stage(dotted: str) -> str | None:
    parts = dotted.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "harness" and parts[1] in FLOORS else None


def imports(path: Path) -> list:
    """(line, imported module) for every import in the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                found.append((node.lineno, "." * node.level + (node.module or "")))
            elif node.module == "harness":
                found += [(node.lineno, f"harness.{a.name}") for a in node.names]
            else:
                found.append((node.lineno, node.module))
    return found


def violations(package: Path) -> list:
    """Every import in `package` (a folder laid out like harness/) that breaks the layout, one line each."""
    out = []
    for path in sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.parts):
        name = path.relative_to(package).as_posix()
        mine = stage("harness." + name.replace("/", "."))
        if mine is None and name not in ENTRY:
            out.append(f"{name}: in no stage")
        for line, target in imports(path):
            where = f"{name}:{line} imports {target}"
            if target.startswith("."):
                out.append(f"{where}: relative import")
                continue
            if target.split(".")[0] == "llama_cpp" and not name.startswith(EMBEDDED):
                out.append(f"{where}: only {EMBEDDED} imports the binding")
            if target.startswith("harness." + EMBEDDED.replace("/", ".")) and not name.startswith(EMBEDDED):
                out.append(f"{where}: the embedded backend is reached through the table in harness.backends")
            theirs = stage(target)
            if mine and theirs and theirs != mine and FLOORS[theirs] >= FLOORS[mine]:
                out.append(f"{where}: {mine} may not import {theirs}")
    return out


def test_every_module_imports_only_stages_below_its_own():
    assert violations(PACKAGE) == []


def test_the_rules_catch_what_they_forbid(tmp_path):
    package = tmp_path / "harness"
    files = {
        "evaluation/upward.py": "from harness.reports.report import write_reports\n",
        "evaluation/binding.py": "def f():\n    import llama_cpp\n",
        "live/direct.py": "from harness.backends.embedded.generate import generate\n",
        "live/sideways.py": "import harness.reports.tables\n",
        "loose.py": "from harness.core import errors\n",
        "backends/embedded/fine.py": "import llama_cpp\nfrom harness.core.errors import HarnessError\n",
    }
    for name, text in files.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    assert violations(package) == [
        "evaluation/binding.py:2 imports llama_cpp: only backends/embedded/ imports the binding",
        "evaluation/upward.py:1 imports harness.reports.report: evaluation may not import reports",
        "live/direct.py:1 imports harness.backends.embedded.generate: the embedded backend is reached through the "
        "table in harness.backends",
        "live/sideways.py:1 imports harness.reports.tables: live may not import reports",
        "loose.py: in no stage",
    ]


def test_a_third_party_module_named_like_a_stage_is_no_stage():
    # The peers worker imports transformers.cli.serving.utils: transformers' cli, not harness's.
    assert stage("transformers.cli.serving.utils") is None and stage("harness.cli.run") == "cli"


def _module(package: Path, dotted: str) -> str | None:
    """The module file `dotted` names, relative to the package's parent (harness/x/y.py), or None."""
    parts = dotted.split(".")
    if parts[0] != package.name:
        return None
    base = package.parent.joinpath(*parts)
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path.relative_to(package.parent).as_posix()
    return None


def circles(package: Path) -> list:
    """Import circles among the package's modules, each as its modules in order: of any length, inside one
    package or across packages, through a package's __init__ too (one that holds code, as the runtimes' table
    does, is a module like any other). A split made for size that reaches back into the module it came from is
    one. An edge is an import the file writes, at its top or inside a function; the parent packages Python runs on
    the way to a module are not edges (else every __init__ that imports its own modules would be a circle)."""
    edges = {}
    for path in sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.parts):
        name = path.relative_to(package.parent).as_posix()
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                # `from P import X`: X's own module when X is one, else P (its __init__ when P is a package).
                targets.update(_module(package, f"{node.module}.{a.name}") or _module(package, node.module)
                               for a in node.names)
            elif isinstance(node, ast.Import):
                targets.update(_module(package, a.name) for a in node.names)
        edges[name] = {t for t in targets if t and t != name}
    # Tarjan's strongly connected components: a component of two or more modules is a circle.
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(out)


def test_no_import_circles():
    assert circles(PACKAGE) == []


# Each package: file -> text, and the circles the rule must find in it.
CIRCLES = {
    "a split that reaches back from a function": (
        {"evaluation/__init__.py": "from harness.evaluation import a\n",
         "evaluation/a.py": "def f():\n    from harness.evaluation.b import g\n",
         "evaluation/b.py": "from harness.evaluation import a\n",
         "evaluation/c.py": "from harness.evaluation.a import f\n"},
        [["harness/evaluation/a.py", "harness/evaluation/b.py"]]),
    "three modules in a ring": (
        {"cli/run.py": "from harness.cli.run_bfcl import x\n",
         "cli/run_bfcl.py": "import harness.cli.run_loop\n",
         "cli/run_loop.py": "from harness.cli import run\n"},
        [["harness/cli/run.py", "harness/cli/run_bfcl.py", "harness/cli/run_loop.py"]]),
    "two modules of a subpackage": (
        {"storage/records/fields.py": "from harness.storage.records.samples import S\n",
         "storage/records/samples.py": "from harness.storage.records.fields import F\n"},
        [["harness/storage/records/fields.py", "harness/storage/records/samples.py"]]),
    "a module and its package's __init__": (
        {"backends/runtimes/__init__.py": "from harness.backends.runtimes.base import Runtime\n",
         "backends/runtimes/base.py": "from harness.backends.runtimes import RUNTIMES\n"},
        [["harness/backends/runtimes/__init__.py", "harness/backends/runtimes/base.py"]]),
    "two rings at once, one of them across packages": (
        {"scripted/rotary.py": "from harness.scripted.rotary_forward import forward\n",
         "scripted/rotary_forward.py": "from harness.scripted.rotary import ROPE\n",
         "peers/a.py": "from harness.live.b import g\n",
         "live/b.py": "from harness.peers.a import f\n"},
        [["harness/live/b.py", "harness/peers/a.py"],
         ["harness/scripted/rotary.py", "harness/scripted/rotary_forward.py"]]),
    "no ring: a chain, and an __init__ that imports its own modules": (
        {"core/__init__.py": "from harness.core import a, b\n",
         "core/a.py": "from harness.core.b import g\n",
         "core/b.py": "import json\nfrom harness.core.c import h\n",
         "core/c.py": "x = 1\n"},
        []),
}


@pytest.mark.parametrize("case", sorted(CIRCLES))
def test_the_circle_rule_finds_every_ring_and_only_rings(tmp_path, case):
    files, expected = CIRCLES[case]
    package = tmp_path / "harness"
    for name, text in files.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    assert circles(package) == expected
