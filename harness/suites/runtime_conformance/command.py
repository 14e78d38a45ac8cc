"""`harness runtime-conformance`: every template's corpus of exact replies, written by scripted models, through a
runtime's /v1/chat/completions, non-streamed and streamed, labelled (docs/runtimes.md). Records go to
DIR/runtime-conformance/RUNTIME.jsonl; `harness report` writes DIR/runtime-conformance.md from them."""

from __future__ import annotations

import signal
import sys
import tempfile
from pathlib import Path

from harness.backends import runtimes
from harness.suites.command_line import add_results_dir, check_runtime_name, report_hint
from harness.core.values import seconds_argument


def run(args) -> int:
    from harness.core.errors import HarnessError
    from harness.suites.runtime_conformance import SUITE
    from harness.suites.runtime_conformance.corpus import build_corpus
    from harness.suites.runtime_conformance.driver import run_suite
    from harness.pins.sources import load_sources, resolve_template

    if bool(args.server) == bool(args.endpoint):
        raise HarnessError("give --server (a runtime the harness starts) or --endpoint (one you serve), not both")
    if args.binary is not None and not args.server:
        raise HarnessError("--binary runs your own build of a runtime the harness starts: give it with --server")
    if args.endpoint and not ((args.manifest or args.template) and args.runtime):
        raise HarnessError("--endpoint needs --manifest (from harness scripted-model) or --template (its manifest "
                           "rebuilt), and --runtime")
    if args.endpoint and (bool(args.manifest) == bool(args.template) or len(args.template or ()) > 1):
        raise HarnessError("with --endpoint give --manifest FILE or one --template ID whose manifest `harness "
                           "scripted-model` rebuilds, not both")
    if args.server and (args.timeout is not None or args.deadline is not None):
        raise HarnessError("--timeout and --deadline bound the requests to an --endpoint you serve; the servers "
                           "the harness starts are restarted when they stop answering")
    if args.endpoint:
        runtime = check_runtime_name(args.runtime)
        return _endpoint(args, runtime)
    # What runs, asked before anything is built: the user's own binary is refused here in one line when it is no
    # executable answering --version. The records carry it; their name by default is the runtime's own (its
    # version included, from its module), or for the user's build the version and commit it reports.
    served = runtimes.get(args.server)
    build = served.build(args.binary.resolve() if args.binary is not None else None)
    runtime = args.runtime or (served.own_record_name(build) if args.binary is not None else served.record_name)
    check_runtime_name(runtime)
    sources = load_sources()
    ids = args.template or list(sources.templates)
    templates = [(ref, build_corpus(ref)) for ref in (resolve_template(t, sources) for t in ids)]
    path = args.results_dir.runtime_conformance_records(runtime)
    existing, problems = SUITE.read_records(path)
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)

    # A run stopped with SIGTERM unwinds like ^C: the server it started is stopped and the scratch folder removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with tempfile.TemporaryDirectory(prefix="harness-scripted-") as scratch:
        workdir = Path(args.work_dir or scratch)
        workdir.mkdir(parents=True, exist_ok=True)
        records, skipped = run_suite(args.server, runtime, templates, path, workdir,
                                     {r.done_key() for r in existing}, args.case, args.variant, _log,
                                     keep=args.work_dir is not None,
                                     binary=args.binary.resolve() if args.binary is not None else None, build=build)
    for template_id, why in skipped:
        print(f"  no scripted model for {template_id}: {why}")
    agree = sum(r.labels == ["agree"] for r in records)
    print(f"{runtime}: {len(records)} request(s) asked, {agree} agree, {len(existing)} already recorded -> {path}")
    print(report_hint(args.results_dir))
    return 0


def _log(record) -> None:
    """Each request as it is recorded: its labels and, where it disagrees, why (a replay prints this)."""
    why = "" if record.labels == ["agree"] else " — " + "; ".join(record.details)
    print(f"harness runtime-conformance: {record.template['id']} {record.case['name']}/{record.variant}: "
          f"{', '.join(record.labels)}{why}", file=sys.stderr, flush=True)


def _endpoint(args, runtime: str) -> int:
    from harness.backends.openai import Endpoint
    from harness.suites.command_line import check_endpoints
    from harness.suites.runtime_conformance import SUITE
    from harness.suites.runtime_conformance.driver import TIMEOUT
    from harness.suites.runtime_conformance.endpoint import run_manifest

    timeout = TIMEOUT if args.timeout is None else args.timeout
    # A dead or mistyped URL is a usage error before any request, not a run of failed ones.
    check_endpoints([Endpoint(args.endpoint, args.served_model or "")], timeout)
    path = args.results_dir.runtime_conformance_records(runtime)
    existing, problems = SUITE.read_records(path)
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="harness-manifest-") as scratch:
        manifest = args.manifest or _rebuilt_manifest(args.template[0], Path(scratch))
        # A registered runtime whose version its module names (vLLM's, transformers serve's, served by a script of
        # the repository under their record names): the records say it. Any other served build is not known here.
        known = runtimes.of_record(runtime)
        build = known.build() if known is not None and not known.runs_binary else None
        run = run_manifest(args.endpoint, args.served_model, manifest, runtime, path,
                           {r.done_key() for r in existing}, args.case, args.variant, log=_log,
                           timeout=timeout, deadline=args.deadline, build=build)
    for failure in run.failed:
        print(f"harness runtime-conformance: failed, not recorded: {failure}", file=sys.stderr)
    agree = sum(r.labels == ["agree"] for r in run.written)
    left = ""
    if run.left:
        stopped = f", {run.not_asked} not asked before the {args.deadline:g} s deadline" if run.not_asked else ""
        left = (f", {len(run.failed)} failed{stopped}: {run.left} left to retry (not recorded; the same command "
                "asks them again)")
    print(f"{runtime}: {len(run.written)} request(s) asked, {agree} agree, {len(existing)} already recorded{left} "
          f"-> {path}")
    return 1 if run.left else 0


def _rebuilt_manifest(template: str, scratch: Path) -> Path:
    """The manifest `harness scripted-model --template TEMPLATE` writes (every case, keyed to our render), built
    in `scratch`: what a record's replay asks from the template alone, with no machine's paths in it."""
    import argparse
    import contextlib

    from harness.suites.runtime_conformance import scripted_command as scripted

    options = argparse.Namespace(template=template, cases=None, case=None, key_from=scripted.RENDER,
                                 serve_with=None, out=scratch, max_bytes=None)
    with contextlib.redirect_stdout(sys.stderr):
        scripted.run(options)
    return next(scratch.glob("*.manifest.json"))


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "runtime-conformance", help="exact replies of every family through a runtime the harness starts",
        description="For each template (default: every pinned one with a detected family) and each case of its "
                    "corpus (one call, two calls, zero arguments, typed arguments, text before a call, reasoning "
                    "then a call, prose with braces or the marker, near misses, a history with a call and its "
                    "result, the reasoning a runtime returned sent back after a tool result and after a new user "
                    "turn): scripted models write the exact reply through the runtime's /v1/chat/completions, "
                    "non-streamed and streamed, with the case's tool_choice variants. Records are appended to "
                    "DIR/runtime-conformance/RUNTIME.jsonl with labels; a killed run resumes; a request that "
                    "kills the server is recorded and the server restarted. With --endpoint, a request the "
                    "runtime did not answer (connection refused or cut, a timeout, HTTP 408, 429, 502, 503 or "
                    "504) is not recorded: the run exits 1 and says how many are left to retry; an answer that "
                    "arrived whole (an HTTP 500, a body that is not JSON) is recorded as runtime-error, and a "
                    "redirect stops the run (give the URL that answers).")
    p.add_argument("--server", choices=runtimes.startable(),
                   help="the runtime to start (one the harness starts: harness.backends.runtimes)")
    p.add_argument("--endpoint", metavar="URL",
                   help="instead, a runtime you serve (Ollama, LM Studio, vLLM, …) with a scripted model loaded")
    p.add_argument("--manifest", type=Path, metavar="FILE",
                   help="with --endpoint: the harness scripted-model manifest (or give one --template: its "
                        "manifest is rebuilt in a scratch folder, as a record's replay does)")
    p.add_argument("--served-model", metavar="NAME",
                   help="with --endpoint: only the scripted model served as NAME (its served_name in the "
                        "manifest; default: every model of the manifest, each request naming its own, for a "
                        "runtime that hosts them all or loads the one a request names)")
    p.add_argument("--binary", type=Path, metavar="PATH",
                   help="with --server: run your own build of its binary (llama-server, llama-server-next); it must "
                        "answer --version, whose version and commit every record carries (default name of the "
                        "records: SERVER-own-VERSION-bBUILD-COMMIT, the binary's SHA-256 where the commit is unknown)")
    p.add_argument("--runtime", metavar="NAME", help="the name the records carry (default: the server and its version)")
    p.add_argument("--template", action="append", metavar="ID", help="template (repeatable; default: all pinned)")
    p.add_argument("--case", action="append", metavar="NAME", help="only this case (repeatable)")
    p.add_argument("--variant", action="append", metavar="V", help="only this tool_choice variant (repeatable)")
    p.add_argument("--timeout", type=seconds_argument(), metavar="SECONDS",
                   help="with --endpoint: deadline of one request (default 120); one that passes it is not "
                        "recorded and is asked again by the next run")
    p.add_argument("--deadline", type=seconds_argument(), metavar="SECONDS",
                   help="with --endpoint: bound of the whole run; past it no request starts and one under way is "
                        "cut; what finished is recorded, and the run says how many are left (default: none)")
    add_results_dir(p, "append the requests to DIR/runtime-conformance/RUNTIME.jsonl")
    p.add_argument("--work-dir", type=Path, metavar="DIR",
                   help="keep the scripted models here (default: a temporary folder, removed at the end)")
    p.set_defaults(func=run)
