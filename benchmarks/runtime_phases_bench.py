"""Where a runtime-conformance run's time goes, per runtime, side by side in one run: the same templates' corpora
through each runtime the harness starts (runtime conformance's own driver, into a scratch folder), the wall time
split into building the scripted models, starting servers, asking the runtime's prompt keys, and the requests
themselves (non-streamed and streamed each count one). The last columns scale the run to the whole committed
corpus of that runtime (its records in results/runtime-conformance) by requests, start-ups by templates.

A runtime whose start-up is a large share wants its models loaded once for many requests; one whose requests
dominate wants requests in flight, or more servers at once (`--workers 1 --workers 2`: one row each, the same
templates). Runs each runtime one after the other (nothing beside it but what the machine runs), each server on
one thread.

    python benchmarks/runtime_phases_bench.py [--template ID ... | --all] [--runtime NAME ...] [--workers N ...]
"""

import argparse
import collections
import functools
import statistics
import sys
import tempfile
import time
from pathlib import Path

from harness.backends import runtimes
from harness.backends.servers import LocalServer
from harness.core.errors import HarnessError
from harness.pins.sources import load_sources, resolve_template
from harness.suites.runtime_conformance import driver, read_records
from harness.suites.runtime_conformance.corpus import build_corpus

REPO = Path(__file__).resolve().parents[1]
DEFAULT_TEMPLATES = ("Qwen-Qwen2.5-7B-Instruct", "meta-llama-Llama-3.1-8B-Instruct",
                     "mistralai-Mistral-Nemo-Instruct-2407")


class Clock:
    """Seconds spent in each phase, and each request's seconds."""

    def __init__(self):
        self.phases, self.requests, self.starts = collections.Counter(), [], 0

    def wrap(self, phase, fn, per_call=False):
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            began = time.monotonic()
            try:
                return fn(*args, **kwargs)
            finally:
                spent = time.monotonic() - began
                self.phases[phase] += spent
                if per_call:
                    self.requests.append(spent)
        return timed


def measure(runtime: str, templates: list, folder: Path) -> dict:
    try:
        runtimes.get(runtime).check_startable()
    except HarnessError as exc:
        return {"runtime": runtime, "error": str(exc)}
    clock, saved = Clock(), {}
    patches = {"build_models": ("build", False), "runtime_key": ("keys", False), "chat_answer": ("requests", True),
               "chat_stream": ("requests", True)}
    for name, (phase, per_call) in patches.items():
        saved[name] = getattr(driver, name)
        setattr(driver, name, clock.wrap(phase, saved[name], per_call))
    start = LocalServer.start

    def counted_start(self, *args, **kwargs):
        clock.starts += 1
        return clock.wrap("start", start)(self, *args, **kwargs)

    LocalServer.start = counted_start
    began = time.monotonic()
    try:
        name = runtimes.get(runtime).record_name
        records, _ = driver.run_suite(runtime, name, templates, folder / f"{runtime}.jsonl", folder / "work", set(),
                                      log=lambda record: None)
    finally:
        LocalServer.start = start
        for name, fn in saved.items():
            setattr(driver, name, fn)
    wall = time.monotonic() - began
    committed = REPO / "results" / "runtime-conformance" / f"{runtimes.get(runtime).record_name}.jsonl"
    corpus_requests = len(read_records(committed)[0]) if committed.is_file() else None
    return {"runtime": runtime, "wall": wall, "records": len(records), "starts": clock.starts,
            "phases": clock.phases, "median": statistics.median(clock.requests) if clock.requests else None,
            "corpus": corpus_requests}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--template", action="append", metavar="ID", help=f"default: {', '.join(DEFAULT_TEMPLATES)}")
    parser.add_argument("--all", action="store_true", help="every pinned template (the whole suite)")
    parser.add_argument("--runtime", action="append", metavar="NAME", help="default: every runtime the harness starts")
    parser.add_argument("--workers", action="append", type=int, metavar="N",
                        help="measure each runtime with N servers going at once (repeatable: one row per N; "
                             "default: the runtime's own conformance_workers)")
    args = parser.parse_args()
    sources = load_sources()
    ids = list(sources.templates) if args.all else args.template or DEFAULT_TEMPLATES
    templates = [(ref, build_corpus(ref)) for ref in (resolve_template(t, sources) for t in ids)]
    rows = []
    for runtime in args.runtime or runtimes.startable():
        declared = type(runtimes.get(runtime)).conformance_workers
        for workers in args.workers or [declared]:
            type(runtimes.get(runtime)).conformance_workers = workers
            try:
                with tempfile.TemporaryDirectory(prefix="harness-phases-bench-") as folder:
                    row = measure(runtime, templates, Path(folder))
            finally:
                type(runtimes.get(runtime)).conformance_workers = declared
            row["runtime"] = f"{runtime} x{workers}"
            rows.append(row)
            print(f"measured {row['runtime']}", file=sys.stderr, flush=True)
    print(f"{len(templates)} templates ({', '.join(ref.id for ref, _ in templates)}), every case, streamed and not")
    print(f"{'runtime':<20} {'records':>7} {'wall s':>7} {'build s':>7} {'starts':>6} {'start s':>7} {'keys s':>7} "
          f"{'requests s':>10} {'median s/req':>12} {'corpus records':>14} {'corpus min (scaled)':>19}")
    for row in rows:
        if "error" in row:
            print(f"{row['runtime']:<20} not measured: {row['error']}")
            continue
        p = row["phases"]
        scaled = (f"{row['wall'] * row['corpus'] / row['records'] / 60:.1f}" if row["corpus"] and row["records"]
                  else "–")
        print(f"{row['runtime']:<20} {row['records']:7d} {row['wall']:7.1f} {p['build']:7.1f} {row['starts']:6d} "
              f"{p['start']:7.1f} {p['keys']:7.1f} {p['requests']:10.1f} "
              f"{row['median'] if row['median'] is not None else float('nan'):12.2f} "
              f"{row['corpus'] if row['corpus'] is not None else '–':>14} {scaled:>19}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
