"""`harness list`: what this checkout knows, for scripts (`--json`) and people: families, templates, models,
scenarios, and every plug-in table (backends, runtimes, suites, commands). Reads the pins, the YAML files and the
tables only; nothing is rendered, downloaded, started or run (a runtime's module is imported to read what it
says of itself, and runtime modules import nothing heavy)."""

from __future__ import annotations

from harness.suites.command_line import emit_json
from harness.core import constants
from harness.pins.sources import load_sources, model_cache_path

KINDS = ("families", "templates", "models", "scenarios", "backends", "runtimes", "suites", "commands")


def _families() -> list:
    from harness import families as registry
    return [{"name": f.name, "label": f.label, "markers": list(f.markers),
             "near_misses": sorted({n.deviation for n in f.near_misses}), "source": f.source,
             "detectable": f.detectable, "peers": dict(f.peers)}
            for f in registry.families().values()]


def _templates() -> list:
    return [{"id": t.id, "file": t.file, "repo": t.repo, "license": t.license, "model": t.model}
            for t in load_sources().templates.values()]


def _models() -> list:
    return [{"id": m.id, "default": m.default, "filename": m.filename, "size": m.size, "template": m.template,
             "modes": list(m.modes) if m.modes else None, "in_cache": model_cache_path(m).is_file()}
            for m in load_sources().models.values()]


def _scenarios() -> list:
    from harness.evaluation.scenario_files import load_scenarios
    return [{"name": s.name, "description": s.description, "tools": [t.name for t in s.tools],
             "turns": len(s.turns), "samples": s.samples, "modes": list(s.modes) if s.modes else None}
            for s in load_scenarios()]


def _backends() -> list:
    from harness.backends import BACKENDS, DEFAULT_IN_PROCESS, DEFAULT_SERVED
    return [{"name": name, "implementation": where,
             "default": {DEFAULT_IN_PROCESS: "in process", DEFAULT_SERVED: "served"}.get(name)}
            for name, where in BACKENDS.items()]


def _runtimes() -> list:
    from harness.backends import runtimes
    return [{"name": name, "implementation": runtimes.RUNTIMES[name], "summary": r.summary,
             "record_name": r.record_name, "startable": r.startable, "environment": r.environment}
            for name, r in ((name, runtimes.get(name)) for name in runtimes.RUNTIMES)]


def _suites() -> list:
    from harness import suites
    return [{"name": name, "implementation": suites.SUITES[name], "folder": s.folder, "page": s.page,
             "labels": list(s.labels)} for name, s in suites.registered().items()]


def _commands() -> list:
    from harness.cli import command_modules
    return [{"name": name, "implementation": where} for name, where in command_modules().items()]


LISTERS = {"families": _families, "templates": _templates, "models": _models, "scenarios": _scenarios,
           "backends": _backends, "runtimes": _runtimes, "suites": _suites, "commands": _commands}
# The column shown for each kind besides its name, in the plain-text listing.
SUMMARY = {"families": lambda r: r["label"] + ("" if r["detectable"] else " [not detectable]"),
           "templates": lambda r: r["repo"] or "",
           "models": lambda r: ("default" if r["default"] else "") + (" in cache" if r["in_cache"] else ""),
           "scenarios": lambda r: ", ".join(r["tools"]) or "(no tools)",
           "backends": lambda r: r["implementation"] + (f" (default {r['default']})" if r["default"] else ""),
           "runtimes": lambda r: r["summary"],
           "suites": lambda r: f"results/{r['folder']}/, {r['page']}, {len(r['labels'])} labels",
           "commands": lambda r: r["implementation"]}


def run_list(args) -> int:
    kinds = [args.kind] if args.kind else list(KINDS)
    listing = {kind: LISTERS[kind]() for kind in kinds}
    if args.json:
        emit_json(listing if not args.kind else listing[args.kind])
        return 0
    for kind, rows in listing.items():
        print(f"{kind} ({len(rows)}):")
        for row in rows:
            key = row.get("name") or row["id"]
            print(f"  {key:45} {SUMMARY[kind](row)}".rstrip())
    return 0


def register(sub) -> None:
    p = sub.add_parser("list", help="list the families, templates, models, scenarios and plug-in tables this checkout knows",
                       description=f"List what {constants.ROOT} knows: families (harness/families), pinned "
                                   "templates and models (sources.json), scenarios (scenarios/), and the "
                                   "plug-in tables: backends, runtimes, suites, commands.")
    p.add_argument("kind", nargs="?", choices=KINDS, help="only this kind (default: all of them)")
    p.add_argument("--json", action="store_true", help="print JSON: an object of lists, or one list with KIND")
    p.epilog = "Models say whether they are in the cache. `harness --version` prints the package version."
    p.set_defaults(func=run_list)
