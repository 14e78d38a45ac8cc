"""The records of a live run or a replay: a model (what the report needs without loading it) and a sample
(one scenario, seed and mode, with the tool loop's step log)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from harness.grammar.plan import setup_digest
from harness.storage.records.fields import (
    NULL, MODEL, SAMPLE, SCHEMA_VERSION, check_field, check_steps, detection_field, nested_field, within_field,
)

# The key a sample's run-time verdicts are written under: named so a reader of the file sees they are what was
# recorded then, not what the sample scores now (older records call them "verdicts").
RECORDED_VERDICTS = "recorded_verdicts"

@dataclass(frozen=True)
class ModelRef:
    id: str
    sha256: str | None = None
    file: str | None = None         # model records name the file too

    @classmethod
    def from_json(cls, raw: dict, sha256_required: bool = False) -> "ModelRef":
        sha = check_field(raw, "sha256", (str,) if sha256_required else (str, NULL), optional=not sha256_required)
        return cls(check_field(raw, "id", (str,)), sha, check_field(raw, "file", (str, NULL), optional=True))

    def to_json(self) -> dict:
        out = {"id": self.id, "sha256": self.sha256}
        if self.file is not None:
            out["file"] = self.file
        return out


@dataclass(frozen=True)
class ScenarioRef:
    name: str
    hash: str

    @classmethod
    def from_json(cls, raw: dict) -> "ScenarioRef":
        return cls(check_field(raw, "name", (str,)), check_field(raw, "hash", (str,)))

    def to_json(self) -> dict:
        return {"name": self.name, "hash": self.hash}


@dataclass
class SampleRecord:
    """One sample of a scenario on a model in a mode: every step the model wrote, as the run recorded it."""
    KIND: ClassVar[str] = SAMPLE
    model: ModelRef
    scenario: ScenarioRef
    sample: int
    seed: int | None
    mode: str = "native"
    family: str | None = None
    template: dict | None = None      # {"id", "sha256", "source"} of the template rendered
    grammar: dict | None = None       # grammar and fallback modes: the grammar plan as sent
    sampling: dict | None = None
    max_steps: int | None = None
    template_kwargs: dict = field(default_factory=dict)
    replayed: bool = False
    replay: dict | None = None        # replayed replies: {"kind", "quote", "note"}
    # A sample taken over from another grammar design whose prompt and grammar were the same for this model
    # (only the design's name differed): {"from": that design, "setup": its setup digest}. Its replies are what
    # this design would have sampled (tools/adopt_design.py --carry-from).
    carried: dict | None = None
    turns: list = field(default_factory=list)     # [Turn]
    error: str | None = None          # the error that stopped the sample, if one did
    executions: dict | None = None
    started: str | None = None
    finished: str | None = None
    seconds: float | None = None
    batch: dict | None = None         # the first step was written in a batch: its size and wall time
    # What wrote the replies beyond the model: the backend, the binding's version and its threads. A reply can
    # differ with them (and with the batch) at the same seed, so a comparison of runs says which differed.
    engine: dict | None = None
    # What scoring said when the sample was recorded, kept as a record of then and never read as the verdict:
    # the parsers and checks have changed since, and every report and `harness score` scores the replies again.
    # Records written before it had this name hold it under "verdicts" (read here all the same). Where current
    # scoring contradicted it, tools/rescore_transcripts.py replaced it with today's verdicts, the run's own
    # all-checks verdict kept in it as `rescored.run_passed`.
    recorded_verdicts: dict | None = None
    schema: int = SCHEMA_VERSION     # as read; to_json writes this harness's schema

    def key(self) -> tuple:
        """What makes two sample records the same sample: resume skips a key already recorded."""
        return (self.model.id, self.model.sha256, self.scenario.name, self.scenario.hash, self.mode, self.sample,
                self.seed)

    def setup(self) -> str:
        """The digest of what decided this sample's reply beyond its key (mode, grammar): a later record of the
        same key under another setup supersedes this one (harness.grammar.plan.setup_digest)."""
        return setup_digest(self.mode, self.grammar)

    @classmethod
    def from_json(cls, raw: dict) -> "SampleRecord":
        model, scenario = nested_field(raw, "model"), nested_field(raw, "scenario")
        model = within_field("model", lambda: ModelRef.from_json(model))
        scenario = within_field("scenario", lambda: ScenarioRef.from_json(scenario))
        replayed = bool(check_field(raw, "replayed", (bool, NULL), optional=True))
        # A run seeds every sample it writes (the reports sort and pair samples by seed); only a replayed reply,
        # quoted rather than generated, has none.
        seed = check_field(raw, "seed", (int, NULL) if replayed else (int,))
        return cls(
            model=model, scenario=scenario,
            sample=check_field(raw, "sample", (int,)), seed=seed,
            mode=check_field(raw, "mode", (str,), optional=True) or "native",
            family=check_field(raw, "family", (str, NULL), optional=True),
            template=check_field(raw, "template", (dict, NULL), optional=True),
            grammar=check_field(raw, "grammar", (dict, NULL), optional=True),
            sampling=check_field(raw, "sampling", (dict, NULL), optional=True),
            max_steps=check_field(raw, "max_steps", (int, NULL), optional=True),
            template_kwargs=check_field(raw, "template_kwargs", (dict, NULL), optional=True) or {},
            replayed=replayed,
            replay=check_field(raw, "replay", (dict, NULL), optional=True),
            carried=check_field(raw, "carried", (dict, NULL), optional=True),
            turns=check_steps(check_field(raw, "turns", (list,), optional=True) or []),
            error=check_field(raw, "error", (str, NULL), optional=True),
            executions=check_field(raw, "executions", (dict, NULL), optional=True),
            started=check_field(raw, "started", (str, NULL), optional=True),
            finished=check_field(raw, "finished", (str, NULL), optional=True),
            seconds=check_field(raw, "seconds", (int, float, NULL), optional=True),
            batch=check_field(raw, "batch", (dict, NULL), optional=True),
            engine=check_field(raw, "engine", (dict, NULL), optional=True),
            recorded_verdicts=check_field(raw, RECORDED_VERDICTS, (dict, NULL), optional=True)
            if RECORDED_VERDICTS in raw else check_field(raw, "verdicts", (dict, NULL), optional=True),
            schema=check_field(raw, "schema", (int,), optional=True) or 0,
        )

    def to_json(self) -> dict:
        out = {"schema": SCHEMA_VERSION, "kind": SAMPLE, "model": self.model.to_json(), "template": self.template,
               "family": self.family, "mode": self.mode, "grammar": self.grammar,
               "scenario": self.scenario.to_json(), "sample": self.sample, "seed": self.seed,
               "sampling": self.sampling, "max_steps": self.max_steps, "template_kwargs": self.template_kwargs,
               "replayed": self.replayed}
        if self.replay is not None:
            out["replay"] = self.replay
        if self.carried is not None:
            out["carried"] = self.carried
        out.update({"turns": self.turns, "error": self.error, "executions": self.executions,
                    "started": self.started, "finished": self.finished, "seconds": self.seconds,
                    "batch": self.batch, RECORDED_VERDICTS: self.recorded_verdicts})
        if self.engine is not None:
            out["engine"] = self.engine
        return out


@dataclass
class ModelRecord:
    """Once per model file in its transcript: what the report needs without loading the model."""
    KIND: ClassVar[str] = MODEL
    model: ModelRef
    template: dict                    # {"source", "pinned_id", "sha256", "text"}: the template as rendered
    family: str | None = None
    detection: dict | None = None
    bos_token: str | None = None
    eos_token: str | None = None
    template_kwargs: dict = field(default_factory=dict)
    recorded: str | None = None
    # A served model: {"name": the runtime, "endpoints": [URL], "served_model"}; absent for a model run in
    # this process (llama-cpp-python in process).
    runtime: dict | None = None
    schema: int = SCHEMA_VERSION     # as read; to_json writes this harness's schema

    @classmethod
    def from_json(cls, raw: dict) -> "ModelRecord":
        model = nested_field(raw, "model")
        model = within_field("model", lambda: ModelRef.from_json(model, sha256_required=True))
        template = nested_field(raw, "template")
        within_field("template", lambda: [check_field(template, k, (str,)) for k in ("source", "sha256", "text")])
        return cls(model=model, template=template,
                   family=check_field(raw, "family", (str, NULL), optional=True),
                   detection=detection_field(raw),
                   bos_token=check_field(raw, "bos_token", (str, NULL), optional=True),
                   eos_token=check_field(raw, "eos_token", (str, NULL), optional=True),
                   template_kwargs=check_field(raw, "template_kwargs", (dict, NULL), optional=True) or {},
                   recorded=check_field(raw, "recorded", (str, NULL), optional=True),
                   runtime=check_field(raw, "runtime", (dict, NULL), optional=True),
                   schema=check_field(raw, "schema", (int,), optional=True) or 0)

    def to_json(self) -> dict:
        out = {"schema": SCHEMA_VERSION, "kind": MODEL, "model": self.model.to_json(), "template": self.template,
               "bos_token": self.bos_token, "eos_token": self.eos_token, "family": self.family,
               "detection": self.detection, "template_kwargs": self.template_kwargs, "recorded": self.recorded}
        if self.runtime is not None:
            out["runtime"] = self.runtime
        return out
