"""Per-sample verdicts from transcripts: what `harness score --json` prints and what every report table counts.
One function scores them (score_transcripts, through scoring.score_sample), so a CI gate reading the JSON and
a person reading the tables see the same verdicts."""

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from harness import families as registry
from harness.evaluation.scoring import FIRST_REPLY, VERDICTS, score_sample
from harness.storage.records import ModelRecord, SampleRecord
from harness.storage.counted_once import CountedOnce, distinct_files, sample_home
from harness.evaluation.setups import CurrentSetups
from harness.grammar.plan import folder_variant
from harness.storage.transcripts import GENERATION_FAILED, Transcript, scan_transcript


@dataclass
class Scored:
    samples: list = field(default_factory=list)   # (record, scenario, verdicts) of records of current scenarios
    stale: list = field(default_factory=list)     # records of a scenario that has since changed, or is gone, or
    #                                               written under another setup than today's (an older grammar)
    not_generated: list = field(default_factory=list)  # records of a sample whose generation failed: no verdict
    models: dict = field(default_factory=dict)    # model id -> latest model record
    model_files: dict = field(default_factory=dict)  # (model id, sha256) -> its latest model record
    warnings: list = field(default_factory=list)
    skipped: list = field(default_factory=list)   # malformed records left out (also in warnings)

    def stale_counts(self) -> Counter:
        return Counter((r.model.id, r.scenario.name) for r in self.stale)


def _whole(record, scenario, verdicts, ref):
    return record, scenario, verdicts


def _sources(source, out: "Scored"):
    """(record, RecordRef or None) of a transcript given as a path (streamed, one record in memory at a time) or
    as a Transcript already read; the read warnings of a path are gathered in a Transcript of their own."""
    if isinstance(source, Transcript):
        for record in source.records:
            yield record, None, source.where(record)
        out.warnings += source.warnings
        out.skipped += source.skipped
        return
    read = Transcript(Path(source))
    try:
        for record, ref in scan_transcript(source, read):
            yield record, ref, str(ref)
    finally:
        out.warnings += read.warnings
        out.skipped += read.skipped


def score_transcripts(transcripts, scenarios: dict, keep=_whole, slim=lambda record: record) -> Scored:
    """Score every sample of the transcripts (paths, streamed; or harness.storage.transcripts.Transcript)
    against the named scenarios, the last record of each sample's key winning (a key recorded twice was run
    twice), each file read once and each key counted once across files (harness.storage.counted_once: a copy
    or a link of a transcript beside it counts nothing twice, and is named in a warning). A record whose scenario hash differs was run on a conversation the scenario no longer holds: it is
    not comparable, and listed as stale rather than scored.

    What is kept of each scored sample is keep(record, scenario, verdicts, ref) (by default the record with its
    scenario and verdicts), and of a stale or not-generated one slim(record): a report keeps only what its
    tables count, so its memory follows the number of samples, not the size of their replies."""
    out = Scored()
    transcripts = list(transcripts)
    transcripts = [t for t in transcripts if isinstance(t, Transcript)] + distinct_files(
        [t for t in transcripts if not isinstance(t, Transcript)], out.warnings)
    # Each sample once, by its key, however many files hold it (a copy of a transcript beside it).
    once = CountedOnce()
    for transcript in transcripts:
        samples, models = [], []
        path = transcript.path if isinstance(transcript, Transcript) else transcript
        setups = CurrentSetups(folder_variant(Path(path)))
        for record, ref, where in _sources(transcript, out):
            if isinstance(record, ModelRecord):
                models.append(record)
                setups.add(record)
            elif isinstance(record, SampleRecord):
                samples.append((record.key(), sample_home(record),
                                _score_one(record, ref, where, scenarios, keep, slim, setups)))
        once.add_file(path, samples)
        for record in models:
            out.models[record.model.id] = record
            out.model_files[(record.model.id, record.model.sha256)] = record
    for kind, kept, problem in once.values():
        if kind is not None:
            getattr(out, kind).append(kept)
        if problem:
            out.warnings.append(problem)
            if kind is None:
                out.skipped.append(problem)
    out.warnings += once.warnings()
    return out


def _score_one(record: SampleRecord, ref, where: str, scenarios: dict, keep, slim, setups=None) -> tuple:
    """(the Scored list it goes to, or None when skipped; what is kept; the warning about it, if any)."""
    scenario = scenarios.get(record.scenario.name)
    if scenario is None or scenario.hash != record.scenario.hash:
        return "stale", slim(record), None
    if setups is not None and setups.outdated(record, scenario):
        return "stale", slim(record), None
    if (record.error or "").startswith(GENERATION_FAILED):
        # Nothing was written (a server down, a deadline, a refused prompt): a verdict would score the runtime's
        # absence as the model's failure. A later run asks the sample again.
        return "not_generated", slim(record), (f"{where}: not generated, not scored ({record.error}); "
                                               "run again to ask it")
    unknown = _unknown_family(record)
    if unknown:
        return None, None, f"{where}: malformed record skipped: {unknown}"
    try:
        verdicts = score_sample(scenario, record)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        # Turns or steps unlike any a run writes: that record is lost, not the whole report.
        return None, None, (f"{where}: malformed record skipped: cannot be scored: "
                            f"{type(exc).__name__}: {exc}")
    return "samples", keep(record, scenario, verdicts, ref), None


def _unknown_family(record: SampleRecord) -> str | None:
    """Why the record names a family no parser here reads (its field and value), or None: that one record
    cannot be scored, the others can."""
    known = set(registry.names())
    named = [("family", record.family)]
    for t, turn in enumerate(record.turns):
        for s, step in enumerate(turn.get("steps") or []):
            named.append((f"turns[{t}].steps[{s}].family", step.get("family")))
            native = step.get("fallback_from") or {}
            named.append((f"turns[{t}].steps[{s}].fallback_from.family", native.get("family")))
    for where, name in named:
        if name is not None and name not in known:
            return f"field {where!r} names an unknown family {name!r}"
    return None


def sample_entry(record: SampleRecord, scenario, verdicts: dict | None, unscored: str = "stale") -> dict:
    """One sample's verdicts, machine-readable: None for a record not scored, flagged by why (`unscored`: stale,
    or not_generated)."""
    entry = {"model": record.model.id, "scenario": record.scenario.name, "mode": record.mode, "seed": record.seed,
             "sample": record.sample}
    if verdicts is None:
        return {**entry, unscored: True, "verdicts": None, "deviations": [], "findings": []}
    checks = {name: verdicts[name] for name in (*VERDICTS, "call_readable")}
    if record.mode == "fallback":
        checks.update({f"first_{name}": verdicts[f"first_{name}"] for name in FIRST_REPLY})
    return {**entry, "call_due": scenario.call_due, "verdicts": {**checks, "all_checks": verdicts["passed"]},
            "deviations": verdicts["deviations"], "findings": verdicts["findings"]}
