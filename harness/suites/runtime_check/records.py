"""The runtime-check record: one scenario opening and seed asked of a served model the strict way and the
runtime's own way, with its label. Its kind is the suite's name; harness.storage.records reads it when a
reader names this class (the records floor cannot import a suite)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from harness.storage.records import ScenarioRef
from harness.storage.records.fields import NULL, SCHEMA_VERSION, check_field, nested_field, within_field

RUNTIME_CHECK = "runtime-check"


@dataclass
class RuntimeCheckRecord:
    """One scenario and seed asked of a served model both ways (harness.suites.runtime_check.driver), with its label."""
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
        scenario = nested_field(raw, "scenario")
        scenario = within_field("scenario", lambda: ScenarioRef.from_json(scenario))
        template = nested_field(raw, "template")
        within_field("template", lambda: [check_field(template, k, (str, NULL)) for k in ("id", "sha256")])
        return cls(runtime=check_field(raw, "runtime", (str,)), served_model=check_field(raw, "served_model", (str,)),
                   scenario=scenario, seed=check_field(raw, "seed", (int,)), template=template,
                   label=check_field(raw, "label", (str,)), detail=raw.get("detail"),
                   endpoints=check_field(raw, "endpoints", (list,), optional=True) or [],
                   family=check_field(raw, "family", (str, NULL), optional=True),
                   sampling=check_field(raw, "sampling", (dict, NULL), optional=True),
                   template_kwargs=check_field(raw, "template_kwargs", (dict, NULL), optional=True) or {},
                   recorded=check_field(raw, "recorded", (str, NULL), optional=True),
                   strict=check_field(raw, "strict", (dict, NULL), optional=True),
                   runtime_reply=check_field(raw, "runtime_reply", (dict, NULL), optional=True),
                   schema=check_field(raw, "schema", (int,), optional=True) or 0)

    def to_json(self) -> dict:
        return {"schema": SCHEMA_VERSION, "runtime": self.runtime, "served_model": self.served_model,
                "endpoints": self.endpoints, "kind": RUNTIME_CHECK, "scenario": self.scenario.to_json(),
                "seed": self.seed, "template": self.template, "family": self.family, "sampling": self.sampling,
                "template_kwargs": self.template_kwargs, "recorded": self.recorded, "strict": self.strict,
                "runtime_reply": self.runtime_reply, "label": self.label, "detail": self.detail}
