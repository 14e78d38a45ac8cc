"""Two rules about errors that the code is read for, as tests/test_layout.py reads it for its layout: every
exception a user may meet is a HarnessError in harness/core/errors.py (the command line prints those as one line,
and lets anything else through as a traceback), and a package only an extra brings is looked up before it is
imported (harness.core.extras), so that where it is missing the error names the extra."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "harness"

# Exception classes that may live outside harness/core/errors.py: each is caught where it is raised, or is no
# error at all, so no user meets it.
INTERNAL_EXCEPTIONS = {
    "schema/safe_regex.py:UnsafePattern": "its one caller (schema.schemas) rewords it as a ToolSchemaError naming "
                                          "the tool, or reads it as no match",
    "suites/bfcl/cases.py:CaseError": "load_suite records it as the case's reason for being skipped",
    "formats/payloads.py:Mismatch": "a parser's verdict on a reply (its deviation), caught by the parse",
    "formats/deviations.py:_CallKeyFound": "stops a JSON decode at the first call key; caught around the decode",
    "suites/run_loop.py:Stopped": "a signal's way out of a run (a BaseException, as KeyboardInterrupt is)",
    "suites/runtime_conformance/scheduling.py:Stopped": "a conformance worker's way out when another failed or the run "
                                                    "was stopped; caught by the worker's own thread",
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


def unchecked_extra_imports(package: Path) -> list:
    """The rule for heavy imports (harness.core.extras): a package only an extra brings is imported at the top
    of a module, never inside a function, and only in a package whose __init__ require()s it first."""
    from harness.core.extras import EXTRA_MODULES

    def required(folder: Path) -> set:
        init = folder / "__init__.py"
        if not init.is_file():
            return set()
        return {node.args[0].value for node in ast.walk(ast.parse(init.read_text(encoding="utf-8")))
                if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "require"
                and node.args and isinstance(node.args[0], ast.Constant)}

    out = []
    for path in sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.parts):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        in_functions = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                        for n in ast.walk(f)}
        checked = set().union(*(required(folder) for folder in path.parents if package in (folder, *folder.parents)))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module]
            else:
                continue
            where = f"{path.relative_to(package).as_posix()}:{node.lineno} imports"
            for top in {n.split(".")[0] for n in names} & set(EXTRA_MODULES):
                if id(node) in in_functions:
                    out.append(f"{where} {top} inside a function: import it at the module's top")
                elif top not in checked:
                    out.append(f"{where} {top} unchecked: its package's __init__ must require({top!r}, ...) first")
    return out


def test_an_extra_is_checked_before_it_is_imported_and_imported_at_the_top():
    assert unchecked_extra_imports(PACKAGE) == []


def test_the_extra_rule_catches_a_late_or_unchecked_import(tmp_path):
    package = tmp_path / "harness"
    files = {
        "backends/embedded/__init__.py": "from harness.core.extras import require\n\nrequire('llama_cpp', 'x')\n",
        "backends/embedded/fine.py": "import llama_cpp\nfrom llama_cpp._internals import LlamaModel\n",
        "backends/embedded/late.py": "def f():\n    import llama_cpp\n",
        "backends/runtimes/served.py": "import uvicorn.config\n",
        "backends/runtimes/light.py": "import json\n",
    }
    for name, text in files.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    assert unchecked_extra_imports(package) == [
        "backends/embedded/late.py:2 imports llama_cpp inside a function: import it at the module's top",
        "backends/runtimes/served.py:1 imports uvicorn unchecked: its package's __init__ must require('uvicorn', "
        "...) first",
    ]


def rule_paragraph(doc: Path) -> str:
    text = doc.read_text(encoding="utf-8")
    found = re.search(r"\*\*Heavy imports, one rule\*\*.*?checks\s+the rule\.", text, flags=re.S)
    return " ".join(found.group(0).split()) if found else f"{doc.name} states no rule for heavy imports"


def test_the_backend_and_runtime_guides_state_the_same_rule():
    backend, runtime = (rule_paragraph(ROOT / "harness" / folder / "README.md")
                        for folder in ("backends", "backends/runtimes"))
    assert backend == runtime
    assert "harness.core.extras.require" in backend and "never inside a function" in backend
