"""`harness run`: drive models × scenarios × samples through the tool loop and write every sample to the
model's transcript as soon as it finishes. Samples already recorded (same model file, scenario hash, mode,
sample index and seed) are skipped, so a killed run resumes where it stopped."""

import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness.core.errors import GenerationError, SourcesError, TemplateError
from harness.core.hashing import sha256_text
from harness.storage.records import ModelRecord, ModelRef, SampleRecord, ScenarioRef
from harness.storage.results import ResultsDir
from harness.evaluation.scoring import score_sample
from harness.grammar import GrammarError
from harness.grammar.plan import DEFAULT_VARIANT, unbuildable_grammar
from harness.live.pending import (MODE, RETRIES_CHANGED, example_of, pending, planned_count, sample_seed,
                                  setup_inputs, setups_for, stale_retries, superseding)
from harness.live.modes import grammar_plan
from harness.live.opening import OpenModel, open_model
from harness.live.tool_loop import first_prompt, run_sample, step_seed
from harness.pins.sources import load_sources
from harness.storage.transcript_writer import TranscriptWriter
from harness.storage.transcripts import GENERATION_FAILED, now, read_transcript


def model_record(model: OpenModel) -> ModelRecord:
    """What the report needs about the model without loading it: the template as rendered, and detection."""
    return ModelRecord(
        model=ModelRef(model.id, model.sha256, model.filename),
        template={"source": model.template_source, "pinned_id": model.template_id,
                  "sha256": sha256_text(model.chat.template), "text": model.chat.template},
        bos_token=model.chat.bos_token, eos_token=model.chat.eos_token, family=model.chat.family,
        detection=model.detection.to_json(), template_kwargs=model.chat.template_kwargs, recorded=now(),
        runtime=model.runtime)


def sample_record(model: OpenModel, scenario, index: int, seed: int, result: dict, started: str, seconds: float,
                  batch: dict | None = None, mode: str = MODE, plan=None) -> SampleRecord:
    record = SampleRecord(
        model=ModelRef(model.id, model.sha256), scenario=ScenarioRef(scenario.name, scenario.hash),
        sample=index, seed=seed, mode=mode, family=model.chat.family,
        template={"id": model.template_id, "sha256": sha256_text(model.chat.template),
                  "source": model.template_source},
        # The grammar of grammar and fallback attempts: family, triggers, GBNF hash and the preamble as sent.
        grammar=plan.to_json(mode) if plan is not None and mode != "native" else None,
        sampling=scenario.sampling, max_steps=scenario.max_steps, template_kwargs=model.chat.template_kwargs,
        turns=result["turns"], error=result["error"], executions=result["executions"],
        started=started, finished=now(), seconds=round(seconds, 3), batch=batch, engine=_engine(model))
    record.recorded_verdicts = score_sample(scenario, record)
    return record


def _engine(model: OpenModel) -> dict:
    """What wrote the replies beside the model: backend, binding version, threads (what a backend says of
    itself; a served model's runtime is in its model record)."""
    described = model.chat.backend.describe()
    return {k: described[k] for k in ("backend", "binding", "threads") if k in described}


def default_modes(model_id: str, sources, model: OpenModel | None = None) -> tuple | None:
    """The modes a model runs in when the run names none: an opened model's (model_modes_for), else its pin's."""
    return model_modes_for(model, sources) if model is not None else sources.model(model_id).modes


def model_modes_for(model: OpenModel, sources) -> tuple | None:
    """The modes a model runs in by default: its pin's, or native alone where its backend holds no grammar
    (a served model), whatever its pin would choose."""
    pinned = getattr(sources.models.get(model.pin or model.id), "modes", None)
    return pinned if model.chat.backend.holds_grammar else ("native",)


def _unbuildable(model: OpenModel, scenario, index: int, seed: int, mode: str, exc) -> SampleRecord:
    """The record of a sample whose grammar cannot be built: its error says why; its grammar block holds the
    reason, so its setup is what setups_for gives such a case, and a later run does not ask it again."""
    stamp = now()
    record = SampleRecord(
        model=ModelRef(model.id, model.sha256), scenario=ScenarioRef(scenario.name, scenario.hash), sample=index,
        seed=seed, mode=mode, family=model.chat.family, grammar=unbuildable_grammar(exc),
        template={"id": model.template_id, "sha256": sha256_text(model.chat.template),
                  "source": model.template_source}, sampling=scenario.sampling, max_steps=scenario.max_steps,
        template_kwargs=model.chat.template_kwargs, turns=[], error=f"grammar: {exc}", executions={},
        started=stamp, finished=stamp, seconds=0.0, engine=_engine(model))
    record.recorded_verdicts = score_sample(scenario, record)
    return record


def run_model(model_id: str, scenarios, samples: int | None, base_seed: int, progress=None, sources=None,
              results_dir=None, warn=print, threads: int | None = None, model: OpenModel | None = None,
              modes=None, backend_cls=None, transcript: Path | None = None, variant: str = DEFAULT_VARIANT) -> dict:
    """Run every pending sample of one model (opened here, by `backend_cls`, unless `model` is already open: an unpinned GGUF or
    a served model, which have no pin). `transcript`: the file the samples go to, when not the model's scenario
    transcript (a suite of its own, BFCL's). Returns a summary: counts and wall time. `progress` (harness.cli.run's):
    update(n) for samples run, skip(n) for samples already recorded, write(message, file) for a line."""
    sources = sources or load_sources()
    sha256 = model.sha256 if model is not None else sources.model(model_id).sha256
    model_modes = default_modes(model_id, sources, model)
    results = ResultsDir.at(results_dir)
    path = Path(transcript) if transcript is not None else results.transcript(model_id)
    # The lock is taken before the done set is read: a second run on this transcript stops here, naming the run
    # that holds it, instead of reading the same done set and running the same samples beside it.
    with TranscriptWriter(path, root=results.root, wait=False) as writer:
        for message in writer.warnings:
            warn(message)
        existing = read_transcript(path)
        for message in existing.warnings:
            warn(message)
        if model is not None:     # before the done set is consulted: another model's samples are not this one's
            _checked(writer, existing, model, sources, path)
        done = existing.done_setups()
        # A fallback sample whose retries today's rule would not make is run again like one of another setup.
        rerun = stale_retries(existing, scenarios)
        done.update(dict.fromkeys(rerun, RETRIES_CHANGED))
        # The setup each sample gets today, from the open model or else the model record of this file (no record:
        # nothing of it is recorded, so nothing can be superseded).
        recorded = existing.models().get(sha256)
        known = setup_inputs(model) if model is not None else \
            (recorded.family, (recorded.template or {}).get("text"), (recorded.detection or {}).get("rendered_call")) \
            if recorded is not None else None
        work = pending(model_id, sha256, scenarios, samples, base_seed, done, modes, model_modes,
                       setups_for(*known[:2], variant, known[2]) if known else None)
        total = sum(len(todo) for _, _, todo in work)
        skipped = planned_count(scenarios, samples, model_modes, modes) - total
        # errors: samples stopped by an error (a template that raised is a finding about the model); failed:
        # those stopped because generation failed, which a later run asks again. superseded: samples recorded
        # under another setup (an older grammar or fallback rule), run again; their old records are dropped.
        summary = {"model": model_id, "transcript": str(path), "ran": 0, "skipped": skipped, "seconds": 0.0,
                   "errors": 0, "failed": 0, "family": None,
                   "superseded": superseding(work, done, model_id, sha256, base_seed)}
        if progress is not None:
            progress.skip(skipped)
        if total == 0:
            writer.discard_if_empty()
            return summary
        started = time.monotonic()
        if model is None:
            try:
                model = open_model(model_id, sources, threads, backend_cls=backend_cls)
            except BaseException:
                writer.discard_if_empty()     # a model that cannot load leaves no empty transcript behind
                raise
            _checked(writer, existing, model, sources, path)
            if setup_inputs(model) != known:
                # The model as opened now decides the setups (its template or family changed since the record).
                work = pending(model_id, sha256, scenarios, samples, base_seed, done, modes, model_modes,
                               setups_for(model.chat.family, model.chat.template, variant, example_of(model)))
                summary["superseded"] = superseding(work, done, model_id, sha256, base_seed)
        summary["family"] = model.chat.family
        if model.sha256 not in existing.models() or _changed(existing.models()[model.sha256], model):
            writer.append(model_record(model))
        _run_work(model, work, base_seed, writer, summary, progress, variant)
        if summary["superseded"]:
            summary["dropped"] = writer.drop_superseded(rerun)
    summary["seconds"] = round(time.monotonic() - started, 1)
    return summary


def _run_work(model: OpenModel, work: list, base_seed: int, writer, summary: dict, progress,
              variant: str = DEFAULT_VARIANT) -> None:
    """Every pending sample of `work`, each written to the transcript as it finishes."""
    lock = threading.Lock()      # samples of a served model land from several threads
    for scenario, mode, todo in work:
        if not todo:
            continue
        clock = time.monotonic()
        try:
            plan = grammar_plan(model.chat.family, scenario, model.chat.template, variant, example_of(model)) \
                if mode != "native" else None
        except GrammarError as exc:
            # A tool set our grammar cannot express: a finding about this case, recorded per sample with the
            # reason (never dropped, never run without the grammar it needs).
            for index in todo:
                writer.append(_unbuildable(model, scenario, index, sample_seed(base_seed, index), mode, exc))
                summary["ran"] += 1
                summary["errors"] += 1
                if progress is not None:
                    progress.update(1)
            continue
        # Native and fallback samples open with a native attempt, written in one batch; grammar samples
        # go one by one (the batch's sampler chains hold no GrammarGate).
        batched = mode != "grammar" and model.chat.backend.batches_samples   # a server batches on its own
        firsts = _first_steps(model, scenario, todo, base_seed) if batched else [None] * len(todo)
        batch = None
        if any(firsts):
            batch = {"size": len(todo), "seconds": round(time.monotonic() - clock, 3)}
        # A sample's time: its own steps plus its share of the batched first step.
        share = batch["seconds"] / batch["size"] if batch else 0.0

        def one(index, first):
            seed = sample_seed(base_seed, index)
            began, clock = now(), time.monotonic()
            result = run_sample(model.chat, scenario, seed, first=first, mode=mode, plan=plan)
            seconds = time.monotonic() - clock + share
            record = sample_record(model, scenario, index, seed, result, began, seconds, batch, mode, plan)
            with lock:
                writer.append(record)
                summary["ran"] += 1
                summary["errors"] += bool(result["error"])
                summary["failed"] += (result["error"] or "").startswith(GENERATION_FAILED)
                if progress is not None:
                    progress.update(1)

        if model.parallel == 1:
            for index, first in zip(todo, firsts):
                one(index, first)
            continue
        pool = ThreadPoolExecutor(max_workers=model.parallel)
        futures = []
        try:
            futures = [pool.submit(one, i, f) for i, f in zip(todo, firsts)]
            for future in futures:
                future.result()
        except BaseException:
            # Ctrl-C or a write that failed: the samples not yet started are dropped, not run to the end
            # behind a run that is stopping; those in flight finish (each request within its deadline), and
            # are written, or not. Cancelled before anything is said: a request in flight that ends meanwhile
            # would free its worker to start the next sample.
            for future in futures:
                future.cancel()
            running = sum(f.running() for f in futures)
            if running and progress is not None:
                progress.write(f"harness run: stopping: waiting for {running} request(s) in flight", file=sys.stderr)
            pool.shutdown(wait=True, cancel_futures=True)
            raise
        pool.shutdown(wait=True)


def _checked(writer, existing, model: OpenModel, sources, path) -> None:
    try:
        _check_one_model(existing, model, sources, path)
    except SourcesError:
        writer.discard_if_empty()
        raise


def _check_one_model(existing, model: OpenModel, sources, path) -> None:
    """One model per transcript. Ids are file names made from model names (served_id), so two models can map to
    one id ("a/b" and "a--b" are both "a--b"; q4/x.gguf and q8/x.gguf are both "x"), and an unpinned GGUF can be
    named as a pin is: their samples would mix in one file and one table. Refused, naming both. A model file is
    known by its bytes (its SHA-256), never by its name."""
    mine = _identity(model)
    pin = sources.models.get(model.id) if model.pin is None and model.runtime is None else None
    if pin is not None and pin.sha256 != model.sha256:
        raise SourcesError(f"{model.filename}: its id {model.id!r} is a pinned model's, but the file is not that "
                           f"pin's (SHA-256 {model.sha256[:12]}…, the pin's {pin.sha256[:12]}…): their samples "
                           "would mix in one transcript; rename the file")
    # A sample names its file's hash too: a transcript whose model record was lost still says whose it is.
    recorded = [_identity(r) for r in existing.records if isinstance(r, ModelRecord) and r.model.id == model.id]
    recorded += [("file", None, r.model.sha256) for r in existing.records if isinstance(r, SampleRecord)
                 and r.model.id == model.id and r.model.sha256 not in (None, "served")]
    for theirs in recorded:
        # A pin's file renamed or replaced by a later pin is the pin's (sources.json says which file it is); the
        # same bytes under another name are the same model.
        if mine[0] == theirs[0] == "file" and (model.pin is not None or theirs[2] == mine[2]):
            continue
        if mine[0] == theirs[0] == "served" and theirs == mine:
            continue
        raise SourcesError(f"{path} holds the samples of {_describe(theirs)}, and {_describe(mine)} maps to "
                           f"the same id {model.id!r}: they would mix in one file; {_way_out(mine)}")


def _identity(model) -> tuple:
    """What a transcript's id stands for: the served model and its runtime, or (in process) the model file, by
    its name and its SHA-256."""
    runtime = model.runtime
    if runtime is not None:
        return "served", runtime.get("served_model"), runtime.get("name")
    if isinstance(model, OpenModel):
        return "file", model.filename, model.sha256
    return "file", model.model.file, model.model.sha256


def _describe(identity: tuple) -> str:
    if identity[0] == "served":
        return f"served model {identity[1]!r} on runtime {identity[2]!r}"
    named = f"model file {identity[1]!r}" if identity[1] else "a model file"
    return f"{named} (SHA-256 {identity[2]})"


def _way_out(identity: tuple) -> str:
    if identity[0] == "served":
        return "name the runtime apart with --runtime, or keep this run in its own --results-dir"
    return "rename the file, or keep this run in its own --results-dir"


def _changed(recorded: ModelRecord, model: OpenModel) -> bool:
    return recorded.template.get("sha256") != sha256_text(model.chat.template) or \
        recorded.family != model.chat.family


def _first_steps(model: OpenModel, scenario, todo: list, base_seed: int) -> list:
    """The first step of every pending sample in one batch, sharing the prompt's evaluation. A failure here
    (a template that cannot render, a prompt too long) is left to each sample's own loop to record."""
    if len(todo) < 2:
        return [None] * len(todo)
    try:
        prompt = first_prompt(model.chat, scenario)
        seeds = [step_seed(sample_seed(base_seed, i), 0, 0) for i in todo]
        return model.chat.complete_many(prompt, scenario.sampling, seeds)
    except (GenerationError, TemplateError):
        return [None] * len(todo)
