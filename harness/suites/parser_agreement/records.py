"""The parser-agreement record: one reply read by a peer project's tool parser, one-shot and streamed, with its
labels. Its kind is the suite's name; harness.storage.records reads it when a reader names this class (the
records floor cannot import a suite)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from harness.storage.records.fields import NULL, SCHEMA_VERSION, check_field

PARSER_AGREEMENT = "parser-agreement"


@dataclass
class ParserAgreementRecord:
    """One reply read by a peer project's tool parser, one-shot and streamed, with its labels (harness.suites.
    parser_agreement.driver writes it, harness.suites.parser_agreement.judging labels it). No timestamp: a rerun of the same
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
        text = {k: check_field(raw, k, (str,)) for k in ("project", "version", "parser", "family", "source", "case",
                                                     "reply")}
        return cls(**text, labels=check_field(raw, "labels", (list,)),
                   details=check_field(raw, "details", (list,), optional=True) or [],
                   streams=check_field(raw, "streams", (int,)), splits=check_field(raw, "splits", (int,)),
                   seed=check_field(raw, "seed", (int,)), fed=check_field(raw, "fed", (str, NULL), optional=True),
                   profile=check_field(raw, "profile", (str, NULL), optional=True),
                   tokens=check_field(raw, "tokens", (int, NULL), optional=True),
                   expect=check_field(raw, "expect", (dict, NULL), optional=True),
                   one_shot=check_field(raw, "one_shot", (dict, NULL), optional=True),
                   schema=check_field(raw, "schema", (int,), optional=True) or 0)

    def to_json(self) -> dict:
        return {"schema": SCHEMA_VERSION, "kind": PARSER_AGREEMENT, "project": self.project,
                "version": self.version, "parser": self.parser, "family": self.family, "source": self.source,
                "case": self.case, "reply": self.reply, "fed": self.fed, "profile": self.profile,
                "tokens": self.tokens, "splits": self.splits, "seed": self.seed, "streams": self.streams,
                "expect": self.expect, "one_shot": self.one_shot, "labels": self.labels, "details": self.details}
