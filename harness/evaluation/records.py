"""The records the harness keeps, typed: what a live run, a replay or a runtime check writes, and what resume
and the reports read back. Each kind is a dataclass with `to_json()` and `from_json()`; `from_json` checks every
field it declares and names the first one that is missing or of the wrong type, so a damaged line is skipped
with its reason instead of failing a report halfway. The step log inside a sample (`turns`) is the tool loop's
own JSON, described by the `Turn` and `Step` types below and judged when the sample is scored.

A record carries `schema` (SCHEMA_VERSION when written); a reader skips records of a newer schema."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypedDict

SCHEMA_VERSION = 1
SAMPLE, MODEL, RUNTIME_CHECK, RUNTIME_CONFORMANCE = "sample", "model", "runtime-check", "runtime-conformance"
PARSER_AGREEMENT = "parser-agreement"


class RecordError(ValueError):
    """A record lacks a field its kind declares, or has it with the wrong type."""


class Step(TypedDict, total=False):
    """One reply of the model and what the loop made of it."""
    reply: str | None
    prompt_tail: str
    prompt_sha256: str | None
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    seed: int | None
    shared_prompt: bool          # written in one batch with the other samples' first steps
    timings: dict
    parse: dict                  # the parse at run time (the report parses the reply again)
    calls: list                  # the calls that ran, with their results
    error: str | None
    family: str                  # under a grammar: the family whose shape it imposed
    grammar: str                 # "auto" or "required"
    grammar_from: int | None     # where a lazy grammar took over (None: it never did)
    fallback_from: dict          # fallback mode: the native attempt this step replaced
    reply_sha256: str            # replays: the quoted reply's hash


class Turn(TypedDict):
    user: str
    steps: list


_NONE = type(None)


def _check(raw: dict, name: str, types: tuple, optional: bool = False):
    """raw[name] if it has one of `types` (bool is not an int here), else RecordError naming it."""
    if name not in raw:
        if optional:
            return None
        raise RecordError(f"missing field {name!r}")
    value = raw[name]
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        shown = json.dumps(value, default=str)[:60]
        expected = " or ".join("null" if t is _NONE else t.__name__ for t in types)
        raise RecordError(f"field {name!r} is {type(value).__name__} {shown}, not {expected}")
    return value


def _nested(raw: dict, name: str) -> dict:
    return _check(raw, name, (dict,))


def _check_steps(turns: list) -> list:
    """The step log as a run writes it (Turn, Step), each declared field of the right type, named by its path
    (`turns[0].steps[1].calls[0].errors`) when not: the reports read these fields, and one record of the wrong
    shape must be skipped with its reason rather than end a report halfway."""
    for t, turn in enumerate(turns):
        where = f"turns[{t}]"
        if not isinstance(turn, dict):
            raise RecordError(f"field {where!r} is {type(turn).__name__}, not dict")
        _within(where, lambda: _check(turn, "user", (str,), optional=True))
        steps = _within(where, lambda: _check(turn, "steps", (list,), optional=True)) or []
        for s, step in enumerate(steps):
            _check_step(step, f"{where}.steps[{s}]")
    return turns


# The fields of a Step the reports and scoring read, with the types a run writes (None where a run may).
STEP_FIELDS = {"reply": (str, _NONE), "prompt_tail": (str,), "prompt_sha256": (str, _NONE),
               "prompt_tokens": (int, _NONE), "completion_tokens": (int, _NONE), "finish_reason": (str, _NONE),
               "seed": (int, _NONE), "shared_prompt": (bool,), "timings": (dict, _NONE), "parse": (dict, _NONE),
               "calls": (list,), "error": (str, _NONE), "family": (str, _NONE), "grammar": (str, _NONE),
               "grammar_from": (int, _NONE), "fallback_from": (dict, _NONE), "reply_sha256": (str,)}
CALL_FIELDS = {"id": (str, _NONE), "name": (str, _NONE), "arguments": (dict, _NONE), "typed": (dict, _NONE),
               "errors": (list,), "coerced": (list,), "executed": (bool,), "executions": (int,),
               "error": (bool,)}


def _check_step(step, where: str) -> None:
    if not isinstance(step, dict):
        raise RecordError(f"field {where!r} is {type(step).__name__}, not dict")
    for name, types in STEP_FIELDS.items():
        _within(where, lambda: _check(step, name, types, optional=True))
    if isinstance(step.get("fallback_from"), dict):
        _check_step(step["fallback_from"], f"{where}.fallback_from")
    for c, call in enumerate(step.get("calls") or []):
        at = f"{where}.calls[{c}]"
        if not isinstance(call, dict):
            raise RecordError(f"field {at!r} is {type(call).__name__}, not dict")
        for name, types in CALL_FIELDS.items():
            _within(at, lambda: _check(call, name, types, optional=True))
        for e, error in enumerate(call.get("errors") or []):
            if not isinstance(error, str):
                raise RecordError(f"field '{at}.errors[{e}]' is {type(error).__name__}, not str")


def _within(prefix: str, check):
    """check(), its RecordError naming the field by its dotted path under `prefix`."""
    try:
        return check()
    except RecordError as exc:
        raise RecordError(str(exc).replace("field '", f"field '{prefix}.", 1)) from None


def _detection(raw: dict) -> dict | None:
    """The detection a model record keeps; the reports print its family, reason and rendered call as text."""
    detection = _check(raw, "detection", (dict, _NONE), optional=True)
    if detection is not None:
        _within("detection", lambda: [_check(detection, k, (str, _NONE), optional=True)
                                      for k in ("family", "reason", "rendered_call", "status")])
    return detection


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
        return cls(
            model=model, scenario=scenario,
            sample=_check(raw, "sample", (int,)), seed=_check(raw, "seed", (int, _NONE)),
            mode=_check(raw, "mode", (str,), optional=True) or "native",
            family=_check(raw, "family", (str, _NONE), optional=True),
            template=_check(raw, "template", (dict, _NONE), optional=True),
            grammar=_check(raw, "grammar", (dict, _NONE), optional=True),
            sampling=_check(raw, "sampling", (dict, _NONE), optional=True),
            max_steps=_check(raw, "max_steps", (int, _NONE), optional=True),
            template_kwargs=_check(raw, "template_kwargs", (dict, _NONE), optional=True) or {},
            replayed=bool(_check(raw, "replayed", (bool, _NONE), optional=True)),
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


@dataclass
class RuntimeCheckRecord:
    """One scenario and seed asked of a served model both ways (harness.live.runtime_check), with its label."""
    KIND: ClassVar[str] = RUNTIME_CHECK
    runtime: str
    served_model: str
    scenario: ScenarioRef
    seed: int
    template: dict                    # {"id", "sha256"}
    label: str
    detail: Any = None
    endpoints: list = field(default_factory=list)
    family: str | None = None
    sampling: dict | None = None
    template_kwargs: dict = field(default_factory=dict)
    recorded: str | None = None
    strict: dict | None = None        # our render, the raw reply, our parse
    runtime_reply: dict | None = None  # what the runtime returned
    schema: int = SCHEMA_VERSION     # as read; to_json writes this harness's schema

    def key(self) -> tuple:
        return self.runtime, self.served_model, self.template["sha256"], self.scenario.hash, self.seed

    @classmethod
    def from_json(cls, raw: dict) -> "RuntimeCheckRecord":
        scenario = _nested(raw, "scenario")
        scenario = _within("scenario", lambda: ScenarioRef.from_json(scenario))
        template = _nested(raw, "template")
        _within("template", lambda: [_check(template, k, (str, _NONE)) for k in ("id", "sha256")])
        return cls(runtime=_check(raw, "runtime", (str,)), served_model=_check(raw, "served_model", (str,)),
                   scenario=scenario, seed=_check(raw, "seed", (int,)), template=template,
                   label=_check(raw, "label", (str,)), detail=raw.get("detail"),
                   endpoints=_check(raw, "endpoints", (list,), optional=True) or [],
                   family=_check(raw, "family", (str, _NONE), optional=True),
                   sampling=_check(raw, "sampling", (dict, _NONE), optional=True),
                   template_kwargs=_check(raw, "template_kwargs", (dict, _NONE), optional=True) or {},
                   recorded=_check(raw, "recorded", (str, _NONE), optional=True),
                   strict=_check(raw, "strict", (dict, _NONE), optional=True),
                   runtime_reply=_check(raw, "runtime_reply", (dict, _NONE), optional=True),
                   schema=_check(raw, "schema", (int,), optional=True) or 0)

    def to_json(self) -> dict:
        return {"schema": SCHEMA_VERSION, "runtime": self.runtime, "served_model": self.served_model,
                "endpoints": self.endpoints, "kind": RUNTIME_CHECK, "scenario": self.scenario.to_json(),
                "seed": self.seed, "template": self.template, "family": self.family, "sampling": self.sampling,
                "template_kwargs": self.template_kwargs, "recorded": self.recorded, "strict": self.strict,
                "runtime_reply": self.runtime_reply, "label": self.label, "detail": self.detail}


@dataclass
class RuntimeConformanceRecord:
    """One scripted reply through a runtime's /v1/chat/completions, non-streamed and streamed, with its labels
    (harness.live.runtime_conformance writes it, harness.evaluation.runtime_conformance labels it)."""
    KIND: ClassVar[str] = RUNTIME_CONFORMANCE
    runtime: str
    server: str
    template: dict                    # {"id", "sha256"}
    case: dict                        # {"name", "hash"}
    variant: str                      # the tool_choice / thinking variant asked
    reply: str                        # the exact reply the scripted model writes
    labels: list
    details: list = field(default_factory=list)
    family: str | None = None
    profile: str | None = None        # the vocabulary the scripted model was built on
    request: dict | None = None       # the request's switches (tool_choice, stream, ...)
    reply_tokens: int | None = None
    expect: dict | None = None        # the strict parse of the reply
    ours: dict | None = None          # our render's prompt length
    key: dict | None = None           # the prompt length the reply was keyed to, and where it came from
    model: str | None = None          # the scripted GGUF's file name
    plain: dict | None = None         # the non-streamed answer as returned
    stream: dict | None = None        # the streamed answer, deltas accumulated
    recorded: str | None = None
    # A runtime the user serves (server "endpoint"): where, the scripted-model manifest, the served name.
    endpoint: str | None = None
    manifest: str | None = None
    served_model: str | None = None
    schema: int = SCHEMA_VERSION     # as read; to_json writes this harness's schema

    def done_key(self) -> tuple:
        """What a resumed run skips: this template's case and variant, already asked."""
        return self.template["sha256"], self.case["name"], self.case["hash"], self.variant

    @classmethod
    def from_json(cls, raw: dict) -> "RuntimeConformanceRecord":
        template, case = _nested(raw, "template"), _nested(raw, "case")
        _within("template", lambda: [_check(template, k, (str,)) for k in ("id", "sha256")])
        _within("case", lambda: [_check(case, k, (str,)) for k in ("name", "hash")])
        return cls(runtime=_check(raw, "runtime", (str,)), server=_check(raw, "server", (str,)),
                   template=template, case=case, variant=_check(raw, "variant", (str,)),
                   reply=_check(raw, "reply", (str,)), labels=_check(raw, "labels", (list,)),
                   details=_check(raw, "details", (list,), optional=True) or [],
                   family=_check(raw, "family", (str, _NONE), optional=True),
                   profile=_check(raw, "profile", (str, _NONE), optional=True),
                   request=_check(raw, "request", (dict, _NONE), optional=True),
                   reply_tokens=_check(raw, "reply_tokens", (int, _NONE), optional=True),
                   expect=_check(raw, "expect", (dict, _NONE), optional=True),
                   ours=_check(raw, "ours", (dict, _NONE), optional=True),
                   key=_check(raw, "key", (dict, _NONE), optional=True),
                   model=_check(raw, "model", (str, _NONE), optional=True),
                   plain=_check(raw, "plain", (dict, _NONE), optional=True),
                   stream=_check(raw, "stream", (dict, _NONE), optional=True),
                   recorded=_check(raw, "recorded", (str, _NONE), optional=True),
                   endpoint=_check(raw, "endpoint", (str, _NONE), optional=True),
                   manifest=_check(raw, "manifest", (str, _NONE), optional=True),
                   served_model=_check(raw, "served_model", (str, _NONE), optional=True),
                   schema=_check(raw, "schema", (int,), optional=True) or 0)

    def to_json(self) -> dict:
        served = {"endpoint": self.endpoint, "manifest": self.manifest, "served_model": self.served_model}
        return {"schema": SCHEMA_VERSION, "kind": RUNTIME_CONFORMANCE, "runtime": self.runtime,
                "server": self.server, **(served if self.endpoint is not None else {}),
                "template": self.template, "family": self.family, "profile": self.profile,
                "case": self.case, "variant": self.variant, "request": self.request, "reply": self.reply,
                "reply_tokens": self.reply_tokens, "expect": self.expect, "ours": self.ours, "key": self.key,
                "model": self.model, "plain": self.plain, "stream": self.stream, "recorded": self.recorded,
                "labels": self.labels, "details": self.details}


@dataclass
class ParserAgreementRecord:
    """One reply read by a peer project's tool parser, one-shot and streamed, with its labels (harness.live.
    parser_agreement writes it, harness.evaluation.parser_agreement labels it). No timestamp: a rerun of the same
    peers on the same corpus writes the same lines."""
    KIND: ClassVar[str] = PARSER_AGREEMENT
    project: str                      # vllm, sglang
    version: str                      # the project's version in the peers environment
    parser: str
    family: str
    source: str                       # "canonical", "near-miss", or the template id whose corpus holds it
    case: str
    reply: str
    labels: list
    details: list = field(default_factory=list)
    streams: int = 0                  # streams fed (whole, token by token, random splits)
    splits: int = 0
    seed: int = 0
    fed: str | None = None            # what the parser was given (the reply after its reasoning)
    profile: str | None = None        # the scripted-model vocabulary it was tokenized with
    tokens: int | None = None
    expect: dict | None = None        # the strict parse
    one_shot: dict | None = None      # the peer's non-streamed answer
    schema: int = SCHEMA_VERSION     # as read; to_json writes this harness's schema

    def case_key(self) -> tuple:
        """The case it judges: a later record of the same case (another parser, another corpus) supersedes it."""
        return self.project, self.family, self.source, self.case

    def done_key(self) -> tuple:
        """What a resumed run skips: this case, already read by this parser, version and split plan."""
        return (*self.case_key(), self.parser, self.version, self.reply, self.splits, self.seed)

    @classmethod
    def from_json(cls, raw: dict) -> "ParserAgreementRecord":
        text = {k: _check(raw, k, (str,)) for k in ("project", "version", "parser", "family", "source", "case",
                                                     "reply")}
        return cls(**text, labels=_check(raw, "labels", (list,)),
                   details=_check(raw, "details", (list,), optional=True) or [],
                   streams=_check(raw, "streams", (int,)), splits=_check(raw, "splits", (int,)),
                   seed=_check(raw, "seed", (int,)), fed=_check(raw, "fed", (str, _NONE), optional=True),
                   profile=_check(raw, "profile", (str, _NONE), optional=True),
                   tokens=_check(raw, "tokens", (int, _NONE), optional=True),
                   expect=_check(raw, "expect", (dict, _NONE), optional=True),
                   one_shot=_check(raw, "one_shot", (dict, _NONE), optional=True),
                   schema=_check(raw, "schema", (int,), optional=True) or 0)

    def to_json(self) -> dict:
        return {"schema": SCHEMA_VERSION, "kind": PARSER_AGREEMENT, "project": self.project,
                "version": self.version, "parser": self.parser, "family": self.family, "source": self.source,
                "case": self.case, "reply": self.reply, "fed": self.fed, "profile": self.profile,
                "tokens": self.tokens, "splits": self.splits, "seed": self.seed, "streams": self.streams,
                "expect": self.expect, "one_shot": self.one_shot, "labels": self.labels, "details": self.details}


KINDS = {kind.KIND: kind for kind in (SampleRecord, ModelRecord, RuntimeCheckRecord, RuntimeConformanceRecord,
                                      ParserAgreementRecord)}


def record_from_json(raw, kinds=(SAMPLE, MODEL)):
    """The typed record a JSON line holds; RecordError says why it cannot be one of `kinds`."""
    if not isinstance(raw, dict):
        raise RecordError(f"not a JSON object but {type(raw).__name__}")
    kind = raw.get("kind")
    if kind not in kinds:
        expected = " or ".join(repr(k) for k in kinds)
        raise RecordError(f"unknown kind {kind!r} (expected {expected})")
    return KINDS[kind].from_json(raw)
