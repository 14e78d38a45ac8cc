"""The records of the runtime suites: a runtime check (strict path against the runtime's chat endpoint), a
runtime-conformance request (a scripted reply through a runtime), a parser-agreement case (a peer's parser
on one reply)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from harness.evaluation.records.fields import (
    _NONE, PARSER_AGREEMENT, RUNTIME_CHECK, RUNTIME_CONFORMANCE, SCHEMA_VERSION, _check, _nested, _within,
)
from harness.evaluation.records.samples import ScenarioRef

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
    reply_ids: list | None = None     # the script's token ids, its end of turn last
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
                   reply_ids=_check(raw, "reply_ids", (list, _NONE), optional=True),
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
                "reply_tokens": self.reply_tokens, "reply_ids": self.reply_ids, "expect": self.expect,
                "ours": self.ours, "key": self.key,
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
