"""`harness runtime-check`: ask an OpenAI-compatible server each scenario's opening conversation twice (the
harness's strict path and the runtime's own) and record whether the runtime reads what the model wrote as the
strict parser does (the suite harness.suites.runtime_check: judging.py labels, driver.py asks). `harness report`
builds the table from the records."""

from __future__ import annotations

import sys
from collections import Counter

from harness.suites.command_line import add_results_dir, check_endpoints, check_runtime_name, emit_json, report_hint
from harness.core.values import MAX_SAMPLES, MAX_SEED, int_argument, seconds_argument


def run(args) -> int:
    from harness.backends.openai import Endpoint, OpenAIBackend
    from harness.suites.runtime_check import SUITE
    from harness.evaluation.scenario_files import load_scenarios
    from harness.live.opening import template_chat
    from harness.suites.runtime_check.driver import run_checks

    check_runtime_name(args.runtime)
    endpoints = [Endpoint(url, args.served_model) for url in args.endpoint]
    chat, ref, _ = template_chat(args.template)
    check_endpoints(endpoints, args.timeout)
    backend = OpenAIBackend(endpoints, in_flight=args.in_flight, retries=args.retries, timeout=args.timeout)
    path = args.results_dir.runtime_records(args.runtime)
    existing, problems = SUITE.read_records(path)
    for problem in problems:
        print(f"warning: {problem}", file=sys.stderr)
    scenarios = load_scenarios(names=args.scenario)

    def progress(record):
        print(f"harness runtime-check: {record.scenario.name} seed {record.seed}: {record.label}",
              file=sys.stderr, flush=True)

    records, failures = run_checks(backend, chat, ref.id, args.runtime, scenarios, args.samples, args.seed, path,
                                   {r.key() for r in existing}, workers=args.in_flight * len(args.endpoint),
                                   progress=progress)
    agree = sum(r.label == "agree" for r in records)
    for failure in failures:
        print(f"harness runtime-check: failed, not recorded: {failure}", file=sys.stderr)
    if args.json:
        labels = Counter(r.label for r in records)
        emit_json({"runtime": args.runtime, "records": str(path), "checked": len(records),
                   "already_recorded": len(existing), "failed": failures, "labels": dict(sorted(labels.items())),
                   "pairs": [{"scenario": r.scenario.name, "seed": r.seed, "label": r.label, "detail": r.detail}
                             for r in records]})
        return 1 if failures else 0
    failed = f", {len(failures)} failed (not recorded; run again to retry them)" if failures else ""
    print(f"{args.runtime}: {len(records)} pair(s) checked, {agree} agree{failed}, {len(existing)} already recorded "
          f"-> {path}")
    print(report_hint(args.results_dir))
    return 1 if failures else 0


# What the strict path asks a server for (harness.backends.openai.OpenAIBackend.complete); `run --endpoint`
# says the same.
STRICT_PATH = ("llama-server's /completion, its token ids turned into text by /detokenize, which keeps special "
               "tokens; a server without those endpoints: /v1/completions")


def register(subparsers) -> None:
    from harness.suites.runtime_check import SUITE

    labels = ", ".join(f"{label}:<deviation>" if label == "runtime-forgave" else label for label in SUITE.labels)
    p = subparsers.add_parser(
        "runtime-check", help="does an OpenAI-compatible server read tool calls as the strict parser does?",
        description="For each scenario's opening conversation and seed, greedy: render the prompt with the pinned "
                    f"template and ask for raw text ({STRICT_PATH}; parsed strictly), and send the messages and "
                    "tools to /v1/chat/completions (parsed by the runtime). Every pair is appended to "
                    f"DIR/runtimes/RUNTIME.jsonl with a label ({labels}); a killed run resumes.")
    p.add_argument("--endpoint", action="append", required=True, metavar="URL",
                   help="the server's base URL (repeatable: replicas of one served model, used in turn)")
    p.add_argument("--served-model", required=True, metavar="NAME", help="the model name the server expects")
    p.add_argument("--template", required=True, metavar="PATH_OR_ID",
                   help="the template the served model uses (a pinned id or a .jinja file)")
    p.add_argument("--runtime", required=True, metavar="NAME",
                   help="a name for the runtime and its version, e.g. llama-server-b6000 (names the records file)")
    p.add_argument("--scenario", action="append", metavar="NAME", help="scenario (repeatable; default: all)")
    p.add_argument("--samples", type=int_argument(1, MAX_SAMPLES), default=1, metavar="N",
                   help="seeds per scenario (default 1: greedy makes more mostly repeats)")
    p.add_argument("--seed", type=int_argument(0, MAX_SEED), default=0, metavar="S", help="base seed (default 0)")
    p.add_argument("--in-flight", type=int_argument(1, 256), default=1, metavar="N",
                   help="requests open at once per endpoint (match the server's --parallel)")
    p.add_argument("--retries", type=int_argument(0, 20), default=3, metavar="N",
                   help="retries of a failed request, with exponential backoff (default 3)")
    p.add_argument("--timeout", type=seconds_argument(), default=180.0, metavar="SECONDS",
                   help="deadline of one request, retries included (default 180)")
    add_results_dir(p, "append the pairs to DIR/runtimes/RUNTIME.jsonl")
    p.add_argument("--json", action="store_true",
                   help='print {"runtime", "records", "checked", "already_recorded", "labels", "pairs"} on stdout')
    p.set_defaults(func=run)
