"""`harness run`: the live matrix (models × scenarios × samples), resumable, one transcript per model."""

import signal
import sys
import time
from pathlib import Path

from harness.backends import BACKENDS, DEFAULT_IN_PROCESS, DEFAULT_SERVED, backend_class
from harness.cli.common import (
    PROBE_SECONDS, add_results_dir, check_endpoints, check_runtime_name, emit_json, report_hint,
)
from harness.cli.run_compare import comparison, nothing_ran_notice
from harness.cli.runtime_check import STRICT_PATH
from harness.core import constants
from harness.core.errors import HarnessError
from harness.core.values import MAX_SAMPLES, MAX_SEED, MAX_THREADS, int_argument, seconds_argument
from harness.evaluation.scenarios import load_scenarios
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
                        help="the grammar design of grammar and fallback modes: refusal-list (the default), "
                             "no-brace, native-example or envelope (docs/live-evaluation.md); samples recorded under "
                             "another design are run again and superseded")
    parser.add_argument("--seed", type=int_argument(0, MAX_SEED), default=0, metavar="S",
                        help=f"base seed, 0 to {MAX_SEED}; sample i uses S+i (default 0)")
    parser.add_argument("--threads", type=int_argument(1, MAX_THREADS), metavar="N",
                        help="llama.cpp threads (default: $HARNESS_THREADS, else 1: robust on a shared 2-core machine)")
    add_results_dir(parser, "append to DIR/transcripts/<model>.jsonl; an experiment in another folder leaves the "
                            "committed results alone")
    parser.add_argument("--suite", choices=("scenarios", "bfcl"), default="scenarios",
                        help="scenarios (scenarios/*.yaml, the default) or bfcl: BFCL v4's single-turn cases from "
                             "the pinned bfcl-eval wheel, into DIR/bfcl/<model>.jsonl (docs/bfcl.md)")
    parser.add_argument("--category", action="append", metavar="NAME",
                        help="with --suite bfcl: a BFCL category, e.g. simple_python (repeatable or a comma list; "
                             "default: every single-turn category)")
    parser.add_argument("--cases", type=int_argument(1, 100000), metavar="N",
                        help="with --suite bfcl: N cases per category, a draw seeded by --seed (default: all)")
    parser.add_argument("--json", action="store_true", help="print a JSON summary on stdout")
    parser.epilog = (
        "Samples go to DIR/transcripts/<model>.jsonl one by one as they finish; a killed run resumes where it "
        "stopped. Experiments go to their own --results-dir and leave the committed results alone. On a terminal a "
        "progress bar; in a log (CI) one line per sample with an estimate. With --endpoint the same scenarios run "
        "through a model behind any OpenAI-compatible server (llama-server, vLLM, SGLang, Ollama) on the strict "
        "path (our render, the server's raw completion, our parser; native mode), kept as <served model>--<runtime> "
        "beside the in-process results; a dead endpoint stops the run before any sample. --model path.gguf runs an "
        "unpinned file in process and records its SHA-256. A new backend is one file and one line of the table in "
        "harness/backends/__init__.py (docs/adding-a-backend.md). Without the embedded extra (llama-cpp-python) "
        "only --endpoint runs. exit status: 0, 1 when a sample could not generate (it is not done: the next run "
        "asks it again) or a model failed, 2 error")
    parser.set_defaults(func=run)


def run(args) -> int:
    from harness.grammar.plan import DEFAULT_VARIANT, check_variant
    from harness.live.modes import parse_modes

    args.grammar_variant = check_variant(args.grammar_variant or DEFAULT_VARIANT)

    if args.suite == "bfcl" or args.category or args.cases:
        from harness.cli.run_bfcl import run_bfcl
        return run_bfcl(args)

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


def models_to_run(args, sources, modes) -> tuple:
    """(model ids, the opened ones by id, the Backend class) a run drives: the pins named (or the default set),
    served models (--endpoint) and unpinned GGUFs; unknown pins fail here, before any work."""
    pinned = [m for m in args.model or () if not m.endswith(".gguf")]
    if not args.model and not args.endpoint:
        pinned = [m.id for m in sources.default_models()]
    for model_id in pinned:
        sources.model(model_id)  # unknown ids fail before any work
    backend_cls = backend_class(args.backend or (DEFAULT_SERVED if args.endpoint else DEFAULT_IN_PROCESS))
    if args.endpoint:
        pinned = []                  # --model ID names the pin the server runs (its template), not a run here
    opened = _opened_models(args, sources, modes, backend_cls)
    if args.template and pinned and not args.endpoint:
        opened += _with_template(pinned, args, sources, backend_cls)
        pinned = []
    return pinned + [m.id for m in opened], {m.id: m for m in opened}, backend_cls


def drive(args, models, by_id, backend_cls, scenarios, samples, sources, modes, transcript_for=None,
          label="") -> tuple | int:
    """Every model's pending samples of `scenarios`, under one progress line and the signal handlers:
    (summaries, failures), or the exit status when SIGINT/SIGTERM stopped the run (what was recorded is kept).
    transcript_for(model id): the file of a suite of its own (BFCL's), else the model's scenario transcript."""
    from harness.live.runner import default_modes, planned_count, run_model

    total = sum(planned_count(scenarios, samples, default_modes(m, sources, by_id.get(m)), modes) for m in models)
    summaries, failures = [], []
    with _progress(total) as bar, _stop_on_signals():
        try:
            for model_id in models:
                bar.set_description(model_id + label)
                try:
                    summaries.append(run_model(model_id, scenarios, samples, args.seed, bar, sources,
                                               results_dir=args.results_dir,
                                               warn=lambda m: bar.write(f"warning: {m}", file=sys.stderr),
                                               threads=args.threads, modes=modes, model=by_id.get(model_id),
                                               backend_cls=backend_cls,
                                               transcript=transcript_for(model_id) if transcript_for else None,
                                               variant=getattr(args, "grammar_variant", None) or "refusal-list"))
                except HarnessError as exc:
                    # A missing or drifted model file says how to fetch it, a transcript another run holds who
                    # holds it; the other models still run.
                    failures.append({"model": model_id, "error": str(exc)})
                    bar.write(f"harness run: {model_id}: {exc}", file=sys.stderr)
        except Stopped as stop:
            bar.write(f"harness run: stopped by {stop.name}: {bar.ran} new sample(s) recorded by this run"
                      f" ({bar.ran + bar.skipped} recorded in all, of {total} planned); every recorded sample is "
                      "kept: run the same command again to resume", file=sys.stderr)
            return 128 + stop.signum
    return summaries, failures


TIMEOUT, RETRIES = 180.0, 3      # with --endpoint, as runtime-check's defaults


def _opened_models(args, sources, modes, cls) -> list:
    """Models that are not pins: a served model (--endpoint) or unpinned GGUF files (--model path.gguf), driven
    by the Backend class `cls`; what it can do (its capability flags) decides which, never its name."""
    from harness.live.runner import open_endpoint, open_gguf

    name = cls.name
    if modes and set(modes) != {"native"} and not cls.holds_grammar:
        raise HarnessError(f"the {name} backend runs native mode only: grammar and fallback need the sampler in "
                           "this process (the embedded backend)")
    if not cls.loads_model_files:
        from harness.backends.openai import Endpoint, identify_runtime

        template = args.template or _pinned_template(args, sources)
        missing = [flag for flag, given in (("--endpoint URL", args.endpoint), ("--served-model NAME",
                   args.served_model), ("--template PATH_OR_ID (or --model ID of the pinned model it serves)",
                   template)) if not given]
        if missing:
            raise HarnessError(f"the {name} backend (a served model) also needs {' and '.join(missing)}")
        args.template = template
        if args.runtime is not None:
            check_runtime_name(args.runtime)
        endpoints = [Endpoint(url, args.served_model) for url in args.endpoint]
        timeout = TIMEOUT if args.timeout is None else args.timeout
        check_endpoints(endpoints, timeout)
        runtime = args.runtime or identify_runtime(endpoints[0], min(timeout, PROBE_SECONDS))
        backend = cls(endpoints, in_flight=args.in_flight, retries=RETRIES if args.retries is None else args.retries,
                      timeout=timeout)
        return [open_endpoint(backend, args.served_model, args.template, runtime,
                              parallel=args.in_flight * len(args.endpoint))]
    if args.endpoint:
        raise HarnessError(f"--endpoint names a server: the {name} backend runs a GGUF in this process")
    given = [f"--{k}" for k in ("runtime", "retries", "timeout") if getattr(args, k) is not None]
    if given:
        raise HarnessError(f"{', '.join(given)}: only with --endpoint (a model run in this process has no requests)")
    files = [m for m in args.model or () if m.endswith(".gguf")]
    opened = [open_gguf(Path(f), args.template, args.threads, backend_cls=cls) for f in files]
    for model in opened:
        if "given with --template" in model.template_source:
            print(f"harness run: {model.filename}: --template {args.template} replaces the template the GGUF "
                  f"embeds; samples go to {model.id}", file=sys.stderr)
    return opened


def _with_template(pinned: list, args, sources, backend_cls) -> list:
    """Pinned models run with --template in place of their own template: opened here (their ids name the
    template, harness.live.runner._override), and said so, since their samples go to transcripts of their own."""
    from harness.live.runner import open_model

    opened = []
    for model_id in pinned:
        model = open_model(model_id, sources, args.threads, template=args.template, backend_cls=backend_cls)
        print(f"harness run: {model_id}: --template {args.template} replaces its own template; samples go to "
              f"{model.id}", file=sys.stderr)
        opened.append(model)
    return opened


def _pinned_template(args, sources) -> str | None:
    """The template of the pinned model a server runs, when --model ID or --served-model names a pin (by id, or
    by its file's stem, the name a local server gives it): said on stderr, since it was not given."""
    if args.model and len(args.model) > 1:
        raise HarnessError("--endpoint serves one model: give one --model ID (the pin whose template to use)")
    names = [m for m in args.model or () if not m.endswith(".gguf")] or (
        [args.served_model] if args.served_model else [])
    for name in names:
        pin = sources.models.get(name) or next((p for p in sources.models.values()
                                                if Path(p.filename).stem == name), None)
        if pin is None:
            if args.model:
                sources.model(name)         # an unknown --model id: its error names the close ones
            return None
        template = pin.template or pin.stand_in_template
        if template is None:
            raise HarnessError(f"{pin.id}: its pin names no template (its GGUF's own is not pinned): give "
                               "--template PATH_OR_ID")
        print(f"harness run: --template {template}: the template pinned for {pin.id}", file=sys.stderr)
        return template
    return None


class Stopped(BaseException):
    """SIGINT (Ctrl-C) or SIGTERM during a run. A BaseException, as KeyboardInterrupt is: no `except Exception`
    on the way swallows it, and a record being written is cut back to the last whole one
    (harness.evaluation.transcripts)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum
        self.name = "Ctrl-C (SIGINT)" if signum == signal.SIGINT else signal.Signals(signum).name


class _stop_on_signals:
    """SIGINT and SIGTERM raise Stopped in the main thread while the block runs; the old handlers come back."""

    def __enter__(self):
        self.previous = {}
        for signum in (signal.SIGINT, signal.SIGTERM):
            try:
                self.previous[signum] = signal.signal(signum, self._raise)
            except ValueError:          # not the main thread: signals stay as they were
                pass
        return self

    def __exit__(self, *exc):
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        return False

    @staticmethod
    def _raise(signum, frame):
        raise Stopped(signum)


def _progress(total: int):
    if not sys.stderr.isatty():
        return LineProgress(total)
    return BarProgress(total)


class BarProgress:
    """A progress bar on a terminal (tqdm). Samples already recorded leave the total rather than count as done,
    so the rate and the time left are those of the samples this run writes."""

    def __init__(self, total: int):
        from tqdm import tqdm

        self.bar = tqdm(total=total, unit="sample", file=sys.stderr, dynamic_ncols=True)
        self.ran = self.skipped = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.bar.close()
        return False

    def set_description(self, model: str) -> None:
        self.bar.set_description(model)

    def write(self, message: str, file=None) -> None:
        self.bar.write(message, file=file or sys.stderr)

    def skip(self, n: int) -> None:
        self.skipped += n
        if n > 0:
            self.bar.total -= n
            self.bar.refresh()

    def update(self, n: int = 1) -> None:
        self.ran += n
        self.bar.update(n)


class LineProgress:
    """Progress for a log (CI, a file, a pipe): a bar would be one unreadable line of carriage returns, no
    output at all leaves an hour-long run looking hung. One plain line per finished sample, with the count,
    elapsed time and an estimate of what is left."""

    def __init__(self, total: int, stream=None):
        self.total, self.done, self.model = total, 0, ""
        self.ran = self.skipped = 0
        self.stream = stream or sys.stderr
        self.started = time.monotonic()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def set_description(self, model: str) -> None:
        self.model = model

    def write(self, message: str, file=None) -> None:
        print(message, file=file or self.stream, flush=True)

    def skip(self, n: int) -> None:
        """Samples already recorded: out of the total, so the estimate is that of the samples still to run."""
        if n > 0:
            self.skipped += n
            self.total -= n
            self.write(f"harness run: {self.model}: {n} sample(s) already recorded, skipped")

    def update(self, n: int = 1) -> None:
        if n <= 0:
            return
        self.done += n
        self.ran += n
        elapsed = time.monotonic() - self.started
        left = ""
        if self.done < self.total and elapsed > 0:
            left = f", about {_minutes(elapsed / self.done * (self.total - self.done))} left"
        self.write(f"harness run: {self.done}/{self.total} samples ({self.model}), {_minutes(elapsed)} elapsed{left}")


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
