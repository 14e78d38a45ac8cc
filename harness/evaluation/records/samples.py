"""The records of a live run or a replay: a model (what the report needs without loading it) and a sample
(one scenario, seed and mode, with the tool loop's step log)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from harness.evaluation.records.fields import (
    _NONE, MODEL, SAMPLE, SCHEMA_VERSION, _check, _check_steps, _detection, _nested, _within,
)

@dataclass(frozen=True)
class ModelRef:
    id: str
    sha256: str | None = None
    file: str | None = None         # model records name the file too

    @classmethod
    def from_json(cls, raw: dict, sha256_required: bool = False) -> "ModelRef":
        sha = _check(raw, "sha256", (str,) if sha256_required else (str, _NONE), optional=not sha256_required)
        return cls(_check(raw, "id", (str,)), sha, _check(raw, "file", (str, _NONE), optional=True))

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
        return cls(_check(raw, "name", (str,)), _check(raw, "hash", (str,)))

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
    turns: list = field(default_factory=list)     # [Turn]
    error: str | None = None          # the error that stopped the sample, if one did
    executions: dict | None = None
    started: str | None = None
    finished: str | None = None
    seconds: float | None = None
    batch: dict | None = None         # the first step was written in a batch: its size and wall time
    verdicts: dict | None = None      # the verdicts at run time (the report scores again)
    schema: int = SCHEMA_VERSION     # as read; to_json writes this harness's schema

    def key(self) -> tuple:
        """What makes two sample records the same sample: resume skips a key already recorded."""
        return (self.model.id, self.model.sha256, self.scenario.name, self.scenario.hash, self.mode, self.sample,
                self.seed)

    @classmethod
    def from_json(cls, raw: dict) -> "SampleRecord":
        model, scenario = _nested(raw, "model"), _nested(raw, "scenario")
        model = _within("model", lambda: ModelRef.from_json(model))
        scenario = _within("scenario", lambda: ScenarioRef.from_json(scenario))
        replayed = bool(_check(raw, "replayed", (bool, _NONE), optional=True))
        # A run seeds every sample it writes (the reports sort and pair samples by seed); only a replayed reply,
        # quoted rather than generated, has none.
        seed = _check(raw, "seed", (int, _NONE) if replayed else (int,))
        return cls(
            model=model, scenario=scenario,
            sample=_check(raw, "sample", (int,)), seed=seed,
            mode=_check(raw, "mode", (str,), optional=True) or "native",
            family=_check(raw, "family", (str, _NONE), optional=True),
            template=_check(raw, "template", (dict, _NONE), optional=True),
            grammar=_check(raw, "grammar", (dict, _NONE), optional=True),
            sampling=_check(raw, "sampling", (dict, _NONE), optional=True),
            max_steps=_check(raw, "max_steps", (int, _NONE), optional=True),
            template_kwargs=_check(raw, "template_kwargs", (dict, _NONE), optional=True) or {},
            replayed=replayed,
            replay=_check(raw, "replay", (dict, _NONE), optional=True),
            turns=_check_steps(_check(raw, "turns", (list,), optional=True) or []),
            error=_check(raw, "error", (str, _NONE), optional=True),
            executions=_check(raw, "executions", (dict, _NONE), optional=True),
            started=_check(raw, "started", (str, _NONE), optional=True),
            finished=_check(raw, "finished", (str, _NONE), optional=True),
            seconds=_check(raw, "seconds", (int, float, _NONE), optional=True),
            batch=_check(raw, "batch", (dict, _NONE), optional=True),
            verdicts=_check(raw, "verdicts", (dict, _NONE), optional=True),
            schema=_check(raw, "schema", (int,), optional=True) or 0,
        )

    def to_json(self) -> dict:
        out = {"schema": SCHEMA_VERSION, "kind": SAMPLE, "model": self.model.to_json(), "template": self.template,
               "family": self.family, "mode": self.mode, "grammar": self.grammar,
               "scenario": self.scenario.to_json(), "sample": self.sample, "seed": self.seed,
               "sampling": self.sampling, "max_steps": self.max_steps, "template_kwargs": self.template_kwargs,
               "replayed": self.replayed}
        if self.replay is not None:
            out["replay"] = self.replay
        out.update({"turns": self.turns, "error": self.error, "executions": self.executions,
                    "started": self.started, "finished": self.finished, "seconds": self.seconds,
                    "batch": self.batch, "verdicts": self.verdicts})
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
        model = _nested(raw, "model")
        model = _within("model", lambda: ModelRef.from_json(model, sha256_required=True))
        template = _nested(raw, "template")
        _within("template", lambda: [_check(template, k, (str,)) for k in ("source", "sha256", "text")])
        return cls(model=model, template=template,
                   family=_check(raw, "family", (str, _NONE), optional=True),
                   detection=_detection(raw),
                   bos_token=_check(raw, "bos_token", (str, _NONE), optional=True),
                   eos_token=_check(raw, "eos_token", (str, _NONE), optional=True),
                   template_kwargs=_check(raw, "template_kwargs", (dict, _NONE), optional=True) or {},
                   recorded=_check(raw, "recorded", (str, _NONE), optional=True),
                   runtime=_check(raw, "runtime", (dict, _NONE), optional=True),
                   schema=_check(raw, "schema", (int,), optional=True) or 0)

    def to_json(self) -> dict:
        out = {"schema": SCHEMA_VERSION, "kind": MODEL, "model": self.model.to_json(), "template": self.template,
               "bos_token": self.bos_token, "eos_token": self.eos_token, "family": self.family,
               "detection": self.detection, "template_kwargs": self.template_kwargs, "recorded": self.recorded}
        if self.runtime is not None:
            out["runtime"] = self.runtime
        return out
