"""The package layout is the architecture: each stage imports only what lies below it, so the data flows one
way (sources.json → render → detect → generate → parse → score → reports). These tests read every module's
imports (module level and inside functions alike) and fail on an import that goes upward."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "harness"
# Floors, bottom to top.
# formats is the parsing engine, families the family definitions built on it; schema (arguments typed by JSON
# Schema) and families share a floor, as do live and reports: neither of a pair imports the other. scripted
# (the scripted-model factory) and peers (other projects' parsers, run in their own environment) are not
# backends: they sit above the backends they drive.
FLOORS = {"core": 0, "formats": 1, "families": 2, "schema": 2, "pins": 3, "template": 4, "grammar": 5,
          "evaluation": 6, "backends": 7, "scripted": 8, "peers": 9, "live": 10, "reports": 10, "cli": 11}
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
