"""The runtime-conformance record: one scripted reply through a runtime, non-streamed and streamed, with its
labels. Its kind is the suite's name; harness.storage.records reads it when a reader names this class (the
records floor cannot import a suite)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from harness.storage.records.fields import NULL, SCHEMA_VERSION, check_field, nested_field, within_field

RUNTIME_CONFORMANCE = "runtime-conformance"


@dataclass
class RuntimeConformanceRecord:
    """One scripted reply through a runtime's /v1/chat/completions, non-streamed and streamed, with its labels
    (driver.py and endpoint.py ask it, judging.conformance_record makes and labels it)."""
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
    # Where the runtime generated other text than the script (its grammar closed the call, or stopped before the
    # trailing text) and showed it: the strict parse of that text after the same prompt. The runtime's parse is
    # judged against it, so the runtime is never said to forgive text it did not write.
    generated_expect: dict | None = None
    # Which build of the runtime answered (harness.backends.binaries): {"version", "build", "commit", "archive",
    # "sha256"} for a runtime that runs a binary (the binary's own --version words), {"version"} for one whose
    # module names its version; None in records made before the field, and for a runtime served by the user.
    build: dict | None = None
    # A case whose history carries reasoning sent back (history_cases.py): what the pinned
    # template does with it and what the runtime's prompt shows of it, to judge the runtime's render.
    history: dict | None = None
    schema: int = SCHEMA_VERSION     # as read; to_json writes this harness's schema

    def done_key(self) -> tuple:
        """What a resumed run skips: this template's case and variant, already asked."""
        return self.template["sha256"], self.case["name"], self.case["hash"], self.variant

    @classmethod
    def from_json(cls, raw: dict) -> "RuntimeConformanceRecord":
        template, case = nested_field(raw, "template"), nested_field(raw, "case")
        within_field("template", lambda: [check_field(template, k, (str,)) for k in ("id", "sha256")])
        within_field("case", lambda: [check_field(case, k, (str,)) for k in ("name", "hash")])
        return cls(runtime=check_field(raw, "runtime", (str,)), server=check_field(raw, "server", (str,)),
                   template=template, case=case, variant=check_field(raw, "variant", (str,)),
                   reply=check_field(raw, "reply", (str,)), labels=check_field(raw, "labels", (list,)),
                   details=check_field(raw, "details", (list,), optional=True) or [],
                   family=check_field(raw, "family", (str, NULL), optional=True),
                   profile=check_field(raw, "profile", (str, NULL), optional=True),
                   request=check_field(raw, "request", (dict, NULL), optional=True),
                   reply_tokens=check_field(raw, "reply_tokens", (int, NULL), optional=True),
                   reply_ids=check_field(raw, "reply_ids", (list, NULL), optional=True),
                   expect=check_field(raw, "expect", (dict, NULL), optional=True),
                   ours=check_field(raw, "ours", (dict, NULL), optional=True),
                   key=check_field(raw, "key", (dict, NULL), optional=True),
                   model=check_field(raw, "model", (str, NULL), optional=True),
                   plain=check_field(raw, "plain", (dict, NULL), optional=True),
                   stream=check_field(raw, "stream", (dict, NULL), optional=True),
                   recorded=check_field(raw, "recorded", (str, NULL), optional=True),
                   endpoint=check_field(raw, "endpoint", (str, NULL), optional=True),
                   manifest=check_field(raw, "manifest", (str, NULL), optional=True),
                   served_model=check_field(raw, "served_model", (str, NULL), optional=True),
                   generated_expect=check_field(raw, "generated_expect", (dict, NULL), optional=True),
                   build=check_field(raw, "build", (dict, NULL), optional=True),
                   history=check_field(raw, "history", (dict, NULL), optional=True),
                   schema=check_field(raw, "schema", (int,), optional=True) or 0)

    def to_json(self) -> dict:
        served = {"endpoint": self.endpoint, "manifest": self.manifest, "served_model": self.served_model}
        generated = {} if self.generated_expect is None else {"generated_expect": self.generated_expect}
        # Written only when known, so a record made before the field is rewritten (relabelled) byte for byte.
        build = {} if self.build is None else {"build": self.build}
        history = {} if self.history is None else {"history": self.history}
        return {"schema": SCHEMA_VERSION, "kind": RUNTIME_CONFORMANCE, "runtime": self.runtime,
                "server": self.server, **build, **(served if self.endpoint is not None else {}),
                "template": self.template, "family": self.family, "profile": self.profile,
                "case": self.case, "variant": self.variant, "request": self.request, "reply": self.reply,
                "reply_tokens": self.reply_tokens, "reply_ids": self.reply_ids, "expect": self.expect,
                **generated, "ours": self.ours, "key": self.key, **history,
                "model": self.model, "plain": self.plain, "stream": self.stream, "recorded": self.recorded,
                "labels": self.labels, "details": self.details}
