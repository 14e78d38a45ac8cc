"""`harness deployment`: a real model served by a runtime, asked the committed BFCL subset as an app asks it
(harness.suites.deployment). Records go to DIR/deployment/<model>.jsonl; `harness report` writes
DIR/deployment.md from them, beside the in-process rows of the same cases."""

from __future__ import annotations

import json
import sys
from collections import Counter

from harness.backends import runtimes
from harness.core.errors import HarnessError
from harness.core.values import int_argument
from harness.suites.bfcl.cases import CATEGORIES
from harness.suites.command_line import add_results_dir, report_hint

MAX_CASES = 400


def run(args) -> int:
    from harness.pins.entries import ID_PATTERN
    from harness.suites.deployment import cases, driver

    if bool(args.server) == bool(args.endpoint):
        raise HarnessError("give --server (a runtime the harness starts) or --endpoint (one you serve), not both")
    if args.in_flight > 1 and not args.endpoint:
        raise HarnessError("--in-flight: with --endpoint only (a runtime the harness starts here serves one request "
                           "at a time, and a request queued behind others would be timed for their time too)")
    if args.endpoint and not args.name:
        raise HarnessError("--endpoint needs --name: the runtime and its version, as the row and records call it")
    if args.name and not ID_PATTERN.fullmatch(args.name):
        raise HarnessError(f"--name {args.name!r}: a name of letters, digits, '.', '_' or '-' (it names a row)")
    if args.endpoint:
        from harness.backends.transport import probe

        why = probe(args.endpoint.rstrip("/") + "/v1/models", 30.0)
        if why:
            raise HarnessError(f"--endpoint {args.endpoint}: the server does not answer ({why}); start it or fix "
                               "the URL")
    if args.replay:
        if args.again:
            raise HarnessError("--again asks served requests again; a --replay run writes each committed reply once")
        return _replay(args)
    only = set(args.case or ())

    def log(record):
        print(f"harness deployment: {record.case['id']}/{record.tool_choice}: {', '.join(record.labels)}",
              file=sys.stderr, flush=True)

    if only:
        drawn = [c.id for c in cases.cases(args.cases) + cases.openings()]
        unknown = sorted(only - set(drawn))
        if unknown:
            raise HarnessError(f"--case {', '.join(unknown)}: not among the {len(drawn)} drawn cases "
                               f"(--cases {args.cases}; e.g. {', '.join(drawn[:3])})")
    out = driver.run(args.model, args.results_dir, server=args.server, endpoint=args.endpoint, name=args.name,
                     served=args.served_model, per_category=args.cases, log=log, only=only or None,
                     inflight=args.in_flight, again=tuple(args.again or ()))
    for name, why in out.failed:
        print(f"harness deployment: failed, not recorded: {name}: {why}", file=sys.stderr)
    runtime = args.name or runtimes.get(args.server).record_name
    if args.json:
        labels = Counter(label for r in out.written for label in r.labels)
        json.dump({"model": args.model, "runtime": runtime, "records": str(driver.records_path(args.results_dir,
                                                                                             args.model)),
                   "written": len(out.written), "already_recorded": out.already, "changed": out.changed,
                   "failed": [f"{name}: {why}" for name, why in out.failed], "labels": dict(sorted(labels.items()))},
                  sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 1 if out.failed else 0
    failed = f", {len(out.failed)} failed (not recorded; the same command asks them again)" if out.failed else ""
    started = f" (started in {out.startup:.1f} s)" if out.startup is not None else ""
    print(f"{args.model} on {runtime}{started}: {len(out.written)} record(s) written, {out.already} already "
          f"recorded{failed} -> {driver.records_path(args.results_dir, args.model)}")
    if args.again:
        asked = len([r for r in out.written if r.again is not None])
        print(f"asked again ({', '.join(args.again)}): {asked - len(out.changed)} answered as before, "
              f"{len(out.changed)} not"
              + (f" (e.g. {', '.join(out.changed[:3])}; each record's details say what changed)" if out.changed
                 else ""))
    print(report_hint(args.results_dir))
    return 1 if out.failed else 0


def _replay(args) -> int:
    """--replay: the model's committed in-process replies written by scripted models through the runtime."""
    import signal
    import tempfile
    from pathlib import Path

    from harness.suites.deployment import replays

    if not args.server or args.name or args.served_model:
        raise HarnessError("--replay runs scripted models on a runtime the harness starts: give --server, and no "
                           "--endpoint, --name or --served-model")

    def log(record):
        # A record as it lands, or a warning about the committed replies read (a stale sample left out).
        said = record if isinstance(record, str) else f"{record.case['name']}: {', '.join(record.labels)}"
        print(f"harness deployment --replay: {said}", file=sys.stderr, flush=True)

    # SIGTERM unwinds like ^C: the server is stopped and the scripted models' folder removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with tempfile.TemporaryDirectory(prefix="harness-replay-") as scratch:
        written, found, path = replays.run(args.model, args.results_dir, args.server, args.cases, Path(scratch), log,
                                           only=set(args.case or ()) or None)
    print(f"{args.model} replayed on {runtimes.get(args.server).record_name}: {found} committed repl"
          f"{'y' if found == 1 else 'ies'}, {len(written)} record(s) written -> {path}")
    print(report_hint(args.results_dir))
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "deployment", help="a real model served by a runtime, asked BFCL cases as an app asks them",
        description="Serve a pinned GGUF on a runtime the harness starts (--server), or ask your own server "
                    "(--endpoint URL --name NAME), and send the committed BFCL subset (--cases per category of "
                    f"BFCL v4's {len(CATEGORIES)} single-turn categories, {', '.join(CATEGORIES)}, drawn as "
                    "harness run --suite bfcl draws them) and every shipped YAML "
                    "scenario's opening turn to /v1/chat/completions "
                    "with the tools, tool_choice auto (and required where a call is due), non-streamed and "
                    "streamed, greedy with a fixed seed and the in-process sampling (400 tokens at most). Each "
                    "case and tool_choice is appended to DIR/deployment/MODEL.jsonl with the runtime's labels "
                    "and the strict parse of the text the model generated (where the runtime shows it); a "
                    "killed run resumes. `harness report` writes DIR/deployment.md: BFCL's checker on what an "
                    "app receives, beside the in-process modes on the same cases.")
    p.add_argument("--model", required=True, metavar="ID", help="a pinned model (harness list models)")
    p.add_argument("--server", choices=runtimes.startable(), help="the runtime to start on the model's GGUF")
    p.add_argument("--endpoint", metavar="URL",
                   help="instead, your own OpenAI-compatible server with the model loaded (its base URL)")
    p.add_argument("--name", metavar="NAME",
                   help="with --endpoint: the runtime and its version, e.g. ollama-0.9 (names its rows)")
    p.add_argument("--served-model", metavar="NAME",
                   help="with --endpoint: the model name your server expects (default: the model id)")
    p.add_argument("--in-flight", type=int_argument(1, 256), default=1, metavar="N",
                   help="with --endpoint: requests open at once (default 1); a cluster (vLLM, SGLang) answers them "
                        "side by side, each record is written as it lands")
    p.add_argument("--cases", type=int_argument(1, MAX_CASES), default=5, metavar="N",
                   help=f"cases per category (default 5: {5 * len(CATEGORIES)} BFCL cases; a larger N extends a "
                        "smaller one's draw, so a run grows and resumes)")
    p.add_argument("--case", action="append", metavar="ID", help="only this drawn case (repeatable)")
    p.add_argument("--again", action="append", metavar="LABEL",
                   help="also ask again each drawn request whose latest record carries LABEL (or a label of that "
                        "head, e.g. runtime-forgave), such as generated-not-shown after the runtime learned to "
                        "show it; or, with `stale`, whose record was asked otherwise than one made now (other "
                        "switches, no fresh prompt state); repeatable, any of them; the new record is appended "
                        "after the old one, which stays, and says whether the runtime answered as before")
    p.add_argument("--replay", action="store_true",
                   help="instead of serving the model: have scripted models write its committed in-process "
                        "replies (every mode: BFCL on the drawn cases, and each scenario sample's first reply, "
                        "each distinct text once) through --server, tool_choice auto, streamed and not; records "
                        "go to DIR/deployment/replays/MODEL.RUNTIME.jsonl (vLLM and transformers serve: "
                        "scripts/hf_runtime_conformance.py --replay)")
    add_results_dir(p, "append the records to DIR/deployment/MODEL.jsonl")
    p.add_argument("--json", action="store_true",
                   help='print {"model", "runtime", "records", "written", "already_recorded", "changed", "failed", '
                        '"labels"}')
    p.set_defaults(func=run)
