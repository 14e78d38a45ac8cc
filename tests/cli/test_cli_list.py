"""`harness list` and `harness --version`: what a script can ask the checkout without running anything."""

import json
import subprocess
import sys
from importlib.metadata import version

from harness import families as registry
from harness.evaluation.scenario_files import load_scenarios
from harness.pins.sources import load_sources


def harness(*args):
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True)


def test_version_is_the_installed_package_version():
    done = harness("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"harness {version('harness')}"


def test_list_json_names_every_family_template_model_and_scenario():
    done = harness("list", "--json")
    assert done.returncode == 0, done.stderr
    listing = json.loads(done.stdout)
    sources = load_sources()
    assert [f["name"] for f in listing["families"]] == registry.names()
    assert [t["id"] for t in listing["templates"]] == list(sources.templates)
    assert [m["id"] for m in listing["models"]] == list(sources.models)
    assert [s["name"] for s in listing["scenarios"]] == [s.name for s in load_scenarios()]
    assert all(f["near_misses"] for f in listing["families"])
    # generic-json is listed, marked: no template writes it, so detection never picks it.
    assert [f["name"] for f in listing["families"] if not f["detectable"]] == ["generic-json"]
    assert all(f["peers"] == registry.get(f["name"]).peers for f in listing["families"])
    plain = harness("list", "families").stdout
    assert "Generic JSON call (grammar fallback) [not detectable]" in plain


def test_list_names_every_entry_of_every_plug_in_table():
    from harness.backends import BACKENDS, runtimes
    from harness.cli import COMMANDS
    listing = json.loads(harness("list", "--json").stdout)
    from harness import suites
    from harness.cli import command_modules
    for kind, table in (("backends", BACKENDS.items()), ("runtimes", runtimes.RUNTIMES.items()),
                        ("suites", suites.SUITES.items()),
                        ("commands", command_modules().items())):
        assert [(r["name"], r["implementation"]) for r in listing[kind]] == list(table), kind
    assert list(COMMANDS) == [r["name"] for r in listing["commands"]][:len(COMMANDS)]
    assert {r["name"]: r["default"] for r in listing["backends"]} == {"embedded": "in process", "openai": "served"}
    assert all(r["summary"] and r["record_name"].startswith(r["name"]) for r in listing["runtimes"])
    assert sorted(r["page"] for r in listing["suites"]) == ["bfcl.md", "deployment.md", "parser-agreement.md",
                                                            "runtime-agreement.md", "runtime-conformance.md"]
    plain = harness("list", "suites").stdout
    assert "runtime-conformance" in plain and "results/runtime-conformance/, runtime-conformance.md" in plain


def test_list_one_kind_and_a_reader_that_leaves_early():
    done = harness("list", "models", "--json")
    assert {m["id"] for m in json.loads(done.stdout)} == set(load_sources().models)
    # The reader is gone before harness writes (`true` exits at once; harness takes ~1 s to start).
    gone = subprocess.run(f"{sys.executable} -m harness list --json | true", shell=True, capture_output=True,
                          text=True)
    assert "Traceback" not in gone.stderr and "BrokenPipeError" not in gone.stderr
