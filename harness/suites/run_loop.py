"""The run loop `harness run` and `harness run --suite bfcl` share: which models a run drives (pins, served
models, unpinned GGUFs), and driving them under one progress line and the signal handlers. It sits with the
suites, below harness.cli, because BFCL's run (harness.suites.bfcl.command) drives it and a suite imports
nothing above its floor."""

import signal
import sys
import time
from pathlib import Path

from harness.backends import DEFAULT_IN_PROCESS, DEFAULT_SERVED, backend_class
from harness.suites.command_line import PROBE_SECONDS, check_endpoints, check_runtime_name
from harness.core.errors import HarnessError
from harness.grammar.plan import DEFAULT_VARIANT


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
                                               variant=getattr(args, "grammar_variant", None) or DEFAULT_VARIANT))
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
    from harness.live.opening import open_endpoint, open_gguf

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
    template, harness.live.opening._override), and said so, since their samples go to transcripts of their own."""
    from harness.live.opening import open_model

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
    (harness.storage.transcripts)."""

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
