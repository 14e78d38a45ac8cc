"""Per-sample verdicts from transcripts: what `harness score --json` prints and what every report table counts.
One function scores them (score_transcripts, through scoring.score_sample), so a CI gate reading the JSON and
a person reading the tables see the same verdicts."""

from collections import Counter
from dataclasses import dataclass, field

from harness import families as registry
from harness.evaluation.scoring import FIRST_REPLY, VERDICTS, score_sample
from harness.evaluation.records import ModelRecord, SampleRecord
from harness.evaluation.transcripts import GENERATION_FAILED


@dataclass
class Scored:
    samples: list = field(default_factory=list)   # (record, scenario, verdicts) of records of current scenarios
    stale: list = field(default_factory=list)     # records of a scenario that has since changed, or is gone
    not_generated: list = field(default_factory=list)  # records of a sample whose generation failed: no verdict
    models: dict = field(default_factory=dict)    # model id -> latest model record
    model_files: dict = field(default_factory=dict)  # (model id, sha256) -> its latest model record
    warnings: list = field(default_factory=list)
    skipped: list = field(default_factory=list)   # malformed records left out (also in warnings)

    def stale_counts(self) -> Counter:
        return Counter((r.model.id, r.scenario.name) for r in self.stale)


def score_transcripts(transcripts, scenarios: dict) -> Scored:
    """Score every sample of the transcripts (harness.evaluation.transcripts.Transcript) against the named
    scenarios. A record whose scenario hash differs was run on a conversation the scenario no longer holds:
    it is not comparable, and listed as stale rather than scored."""
    out = Scored()
    for transcript in transcripts:
        out.warnings += transcript.warnings
        out.skipped += transcript.skipped
        for record in transcript.records:
            if isinstance(record, ModelRecord):
                out.models[record.model.id] = record
                out.model_files[(record.model.id, record.model.sha256)] = record
        for record in transcript.samples():
            scenario = scenarios.get(record.scenario.name)
            if scenario is None or scenario.hash != record.scenario.hash:
                out.stale.append(record)
                continue
            if (record.error or "").startswith(GENERATION_FAILED):
                # Nothing was written (a server down, a deadline, a refused prompt): a verdict would score the
                # runtime's absence as the model's failure. A later run asks the sample again.
                out.not_generated.append(record)
                out.warnings.append(f"{transcript.where(record)}: not generated, not scored ({record.error}); "
                                    "run again to ask it")
                continue
            unknown = _unknown_family(record)
            if unknown:
                problem = f"{transcript.where(record)}: malformed record skipped: {unknown}"
                out.skipped.append(problem)
                out.warnings.append(problem)
                continue
            try:
                out.samples.append((record, scenario, score_sample(scenario, record)))
            except (KeyError, TypeError, ValueError, AttributeError) as exc:
                # Turns or steps unlike any a run writes: that record is lost, not the whole report.
                problem = f"{transcript.where(record)}: malformed record skipped: cannot be scored: " \
                          f"{type(exc).__name__}: {exc}"
                out.skipped.append(problem)
                out.warnings.append(problem)
    return out


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
