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
    """Import circles among the modules of one stage (a package's __init__ aside: it is the package's face), each
    as its modules in order. A split made for size that reaches back into the module it came from is one."""
    edges = {}
    for path in sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.parts and p.name not in ENTRY):
        name = path.relative_to(package.parent).as_posix()
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                named = [_module(package, f"{node.module}.{a.name}") for a in node.names]
                targets.update(t for t in named if t) if any(named) else targets.add(_module(package, node.module))
            elif isinstance(node, ast.Import):
                targets.update(_module(package, a.name) for a in node.names)
        same = name.split("/")[1]
        edges[name] = {t for t in targets if t and t != name and not t.endswith("/__init__.py")
                       and t.split("/")[1] == same}
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


def test_no_import_circles_inside_a_stage():
    assert circles(PACKAGE) == []


def test_the_circle_rule_catches_a_split_that_reaches_back(tmp_path):
    package = tmp_path / "harness"
    (package / "evaluation").mkdir(parents=True)
    (package / "evaluation" / "__init__.py").write_text("from harness.evaluation import a\n")
    (package / "evaluation" / "a.py").write_text("def f():\n    from harness.evaluation.b import g\n")
    (package / "evaluation" / "b.py").write_text("from harness.evaluation import a\n")
    (package / "evaluation" / "c.py").write_text("from harness.evaluation.a import f\n")
    assert circles(package) == [["harness/evaluation/a.py", "harness/evaluation/b.py"]]


# Exception classes that may live outside harness/core/errors.py: each is caught where it is raised, or is no
# error at all, so no user meets it.
INTERNAL_EXCEPTIONS = {
    "schema/safe_regex.py:UnsafePattern": "its one caller (schema.schemas) rewords it as a ToolSchemaError naming "
                                          "the tool, or reads it as no match",
    "evaluation/bfcl.py:CaseError": "load_suite records it as the case's reason for being skipped",
    "formats/payloads.py:Mismatch": "a parser's verdict on a reply (its deviation), caught by the parse",
    "formats/deviations.py:_CallKeyFound": "stops a JSON decode at the first call key; caught around the decode",
    "cli/run_loop.py:Stopped": "a signal's way out of a run (a BaseException, as KeyboardInterrupt is)",
    "backends/embedded/grammar_check.py:TriggerHazard": "a test's assertion on a grammar (an AssertionError); "
                                                        "no command checks grammars this way",
    "backends/runtimes/mistralrs_worker.py:BadRequest": "the mistral.rs worker, which imports nothing from harness, "
                                                        "answers it as HTTP 400",
    "template/limits.py:LimitExceeded": "raised inside a render; template.render rewords it as a RenderLimitError",
}


def exception_classes(package: Path) -> dict:
    """"FILE:CLASS" -> its base names, for every class in the package that derives from an exception, read from
    the source (a base named like a built-in exception, or like another class found here)."""
    import builtins

    classes = {}
    for path in sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.parts):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = [b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in node.bases]
                classes[f"{path.relative_to(package).as_posix()}:{node.name}"] = bases
    names = {n for n in dir(builtins) if isinstance(getattr(builtins, n), type)
             and issubclass(getattr(builtins, n), BaseException)}
    while True:
        found = {key.split(":")[1] for key, bases in classes.items() if names & set(bases)}
        if found <= names:
            return {key: bases for key, bases in classes.items() if names & set(bases)}
        names |= found


def exceptions_out_of_place(package: Path) -> list:
    """Every exception class outside core/errors.py that is not a known internal one, and every class in
    core/errors.py that is not a HarnessError."""
    out = []
    classes = exception_classes(package)
    harness_errors = {"HarnessError"}
    while True:
        more = {key.split(":")[1] for key, bases in classes.items()
                if key.startswith("core/errors.py:") and harness_errors & set(bases)}
        if more <= harness_errors:
            break
        harness_errors |= more
    for key in classes:
        where, name = key.split(":")
        if where == "core/errors.py":
            if name not in harness_errors:
                out.append(f"{key}: not a HarnessError")
        elif key not in INTERNAL_EXCEPTIONS:
            out.append(f"{key}: a user may meet it; it belongs in core/errors.py under HarnessError")
    return out


def test_every_user_facing_exception_is_a_harness_error_in_core_errors():
    assert exceptions_out_of_place(PACKAGE) == []
    assert set(INTERNAL_EXCEPTIONS) <= set(exception_classes(PACKAGE)), "an internal exception is gone: drop it"


def test_the_exception_rule_catches_an_error_out_of_place(tmp_path):
    package = tmp_path / "harness"
    files = {
        "core/errors.py": "class HarnessError(Exception):\n    pass\n\n\nclass Fine(HarnessError, ValueError):\n"
                          "    pass\n\n\nclass Stray(RuntimeError):\n    pass\n",
        "peers/__init__.py": "class PeerError(RuntimeError):\n    pass\n\n\nclass Worse(PeerError):\n    pass\n",
        "reports/page.py": "from harness.core import errors\n\n\nclass PageError(errors.Fine):\n    pass\n\n\n"
                           "class Page:\n    pass\n",
    }
    for name, text in files.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    assert exceptions_out_of_place(package) == [
        "core/errors.py:Stray: not a HarnessError",
        "peers/__init__.py:PeerError: a user may meet it; it belongs in core/errors.py under HarnessError",
        "peers/__init__.py:Worse: a user may meet it; it belongs in core/errors.py under HarnessError",
        "reports/page.py:PageError: a user may meet it; it belongs in core/errors.py under HarnessError",
    ]
