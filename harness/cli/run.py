"""`harness run`: the live matrix (models × scenarios × samples), resumable, one transcript per model. The run loop
it shares with `harness run --suite bfcl` is harness.suites.run_loop; BFCL's flags and its run are the suite's
(harness.suites.bfcl.command)."""

from harness.backends import BACKENDS
from harness.suites.command_line import add_results_dir, emit_json, report_hint
from harness.cli.run_compare import comparison, nothing_ran_notice
from harness.suites.run_loop import drive, models_to_run
from harness.suites.bfcl import command as bfcl
from harness.suites.runtime_check.command import STRICT_PATH
from harness.core import constants
from harness.core.errors import GrammarError
from harness.grammar.plan import DEFAULT_VARIANT, VARIANTS
from harness.core.values import MAX_SAMPLES, MAX_SEED, MAX_THREADS, int_argument, seconds_argument
from harness.evaluation.scenario_files import load_scenarios
from harness.pins.sources import load_sources


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "run", help="run scenarios on models and append every sample to results/transcripts/<model>.jsonl",
        description="Run the scenario matrix on local models in modes native, grammar and/or fallback. Samples already in the transcript are skipped, so a killed run resumes. "
                    "Then `harness report` builds the tables.")
    parser.add_argument("--model", action="append", metavar="ID_OR_GGUF",
                        help="model id from sources.json, or the path of an unpinned .gguf file (its SHA-256 is "
                             "recorded) (repeatable; default: the models marked default)")
    parser.add_argument("--template", metavar="PATH_OR_ID",
                        help="the template to render with: for a served model (--endpoint), taken from the pin "
                             "when --model ID or --served-model names a pinned model; the stand-in "
                             "for a GGUF that embeds none; for a pinned model or a GGUF with its own template it "
                             "replaces that one, and the samples go to MODEL--template-ID, a transcript and "
                             "tables of their own whose header names the template")
    parser.add_argument("--backend", choices=sorted(BACKENDS), metavar="NAME",
                        help=f"where replies come from: {', '.join(sorted(BACKENDS))} (default: openai with "
                             "--endpoint, else embedded: the GGUF in this process through llama-cpp-python)")
    parser.add_argument("--endpoint", action="append", metavar="URL",
                        help="drive a model behind an OpenAI-compatible server instead (repeatable: replicas); "
                             "needs --served-model and --template; native mode only (strict path: our render, "
                             f"the server's raw text from {STRICT_PATH}, our parser)")
    parser.add_argument("--served-model", metavar="NAME", help="the model name the server expects")
    parser.add_argument("--in-flight", type=int_argument(1, 256), default=1, metavar="N",
                        help="with --endpoint: requests open at once per endpoint (samples run side by side)")
    parser.add_argument("--runtime", metavar="NAME",
                        help="with --endpoint: the runtime serving it, e.g. llama-server-b6000; served samples are "
                             "kept as <served model>--<runtime>, beside the in-process ones (default: llama-server "
                             "or llama-cpp-python where the server says which it is, else 'served')")
    parser.add_argument("--retries", type=int_argument(0, 20), metavar="N",
                        help="with --endpoint: retries of a failed request, with exponential backoff (default 3)")
    parser.add_argument("--timeout", type=seconds_argument(), metavar="SECONDS",
                        help="with --endpoint: deadline of one request, retries included (default 180)")
    parser.add_argument("--scenario", action="append", metavar="NAME_OR_PATH",
                        help="scenario name from scenarios/*.yaml, or the path of a scenario file kept elsewhere "
                             "(its tools from library/tools.yaml beside it, else the shipped library) "
                             "(repeatable; default: all)")
    parser.add_argument("--samples", type=int_argument(1, MAX_SAMPLES), metavar="N",
                        help=f"samples per scenario, 1 to {MAX_SAMPLES} (default: each scenario's own `samples`)")
    parser.add_argument("--mode", action="append", metavar="MODE",
                        help="native (the model's template and parser), grammar (sampling constrained by a grammar "
                             "from the tool schemas) or fallback (native, a failed step retried under the grammar); "
                             "repeatable or a comma list (default: the scenario's `modes`, else the model's in "
                             "sources.json, else native)")
    parser.add_argument("--grammar-variant", default=None, metavar="NAME",
                        help="the grammar design of grammar and fallback modes (docs/live-evaluation.md): "
                             f"{', '.join(VARIANTS)}. A results folder holds one: the default "
                             f"({DEFAULT_VARIANT}), or a design study's own, DIR/designs/NAME (the default there); "
                             "samples recorded under another setup are run again and superseded")
    parser.add_argument("--seed", type=int_argument(0, MAX_SEED), default=0, metavar="S",
                        help=f"base seed, 0 to {MAX_SEED}; sample i uses S+i (default 0)")
    parser.add_argument("--threads", type=int_argument(1, MAX_THREADS), metavar="N",
                        help="llama.cpp threads (default: $HARNESS_THREADS, else 1: robust on a shared 2-core machine)")
    add_results_dir(parser, "append to DIR/transcripts/<model>.jsonl; an experiment in another folder leaves the "
                            "committed results alone")
    bfcl.add_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    parser.epilog = (
        "Samples go to DIR/transcripts/<model>.jsonl one by one as they finish; a killed run resumes where it "
        "stopped. Experiments go to their own --results-dir and leave the committed results alone. On a terminal a "
        "progress bar; in a log (CI) one line per sample with an estimate. With --endpoint the same scenarios run "
        "through a model behind any OpenAI-compatible server (llama-server, vLLM, SGLang, Ollama) on the strict "
        "path (our render, the server's raw completion, our parser; native mode), kept as <served model>--<runtime> "
        "beside the in-process results; a dead endpoint stops the run before any sample. --model path.gguf runs an "
        "unpinned file in process and records its SHA-256. A new backend is one file and one line of the table in "
        "harness/backends/__init__.py (harness/backends/README.md). Without the embedded extra (llama-cpp-python) "
        "only --endpoint runs. exit status: 0, 1 when a sample could not generate (it is not done: the next run "
        "asks it again) or a model failed, 2 error")
    parser.set_defaults(func=run)


def run(args) -> int:
    from harness.grammar.plan import check_variant, folder_variant
    from harness.live.modes import parse_modes

    # A results folder holds one grammar design: the default, or a design study's own (DIR/designs/<variant>),
    # so a report never counts two designs' samples as one mode.
    held = folder_variant(args.results_dir.root)
    args.grammar_variant = check_variant(args.grammar_variant or held)
    if args.grammar_variant != held:
        raise GrammarError(f"--grammar-variant {args.grammar_variant}: {args.results_dir.root} holds "
                           f"{'the default design, ' + DEFAULT_VARIANT if held == DEFAULT_VARIANT else held}; a design "
                           f"study's samples go to a folder of their own: --results-dir "
                           f"{args.results_dir.root / 'designs' / args.grammar_variant}")

    if bfcl.asked(args):
        return bfcl.run_bfcl(args)

    if args.threads is None:
        constants.check_env("HARNESS_THREADS")  # before any model is loaded, not after the first one
    sources = load_sources()
    modes = parse_modes(args.mode) or None  # None: each scenario's, else each model's (runner.modes_for)
    scenarios = load_scenarios(names=args.scenario)
    models, by_id, backend_cls = models_to_run(args, sources, modes)
    outcome = drive(args, models, by_id, backend_cls, scenarios, args.samples, sources, modes)
    if isinstance(outcome, int):
        return outcome
    summaries, failures = outcome
    if args.json:
        emit_json({"models": summaries, "failures": failures})
    else:
        for s in summaries:
            stopped = f", {s['errors']} stopped by errors" if s["errors"] else ""
            if s["failed"]:
                stopped += f" ({s['failed']} could not generate: not done, run again to retry them)"
            if s.get("superseded"):
                stopped += (f"; {s['superseded']} recorded under another setup (grammar, fallback rule) run again"
                            f", {s.get('dropped', 0)} old record(s) superseded")
            print(f"{s['model']}: ran {s['ran']}, already recorded {s['skipped']}, {s['seconds']} s{stopped}"
                  f" -> {s['transcript']}")
        for line in nothing_ran_notice(summaries, args.results_dir) + comparison(summaries, args.results_dir,
                                                                                  scenarios):
            print(line)
        if summaries:
            print(report_hint(args.results_dir))
    # A sample that could not generate is recorded but not done: the run did not do what was asked.
    return 1 if failures or any(s["failed"] for s in summaries) else 0
