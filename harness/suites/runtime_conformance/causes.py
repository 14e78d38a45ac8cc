"""Root causes of runtime-conformance disagreements: the records of one runtime grouped by what the runtime did,
so that a runtime author reads a handful of lines (what it does, how many requests, which families, one command
that replays it) instead of a thousand.

A record belongs to one cause: its most telling label (CAUSE_ORDER: an error, then a history the runtime renders
otherwise than the template (what the history cases are asked for), then a parse outcome before the rewrite or
stream difference that often comes with it, a prompt that differs near the end, since it alone changes nothing a
user sees, and last a stream that ended without its [DONE], the cause only where nothing else differs), qualified
where the label alone would lump different behaviours together: an error by its message, a forgiven reply by its
deviation, a rewrite or another set of calls by the request's tool_choice variant, a history by where it sends
the reasoning back."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from harness.suites.runtime_conformance.history_cases import AFTER_TOOL, AFTER_USER
from harness.backends.transport import error_words
from harness.evaluation.judging import label_head
from harness.suites.runtime_conformance.corpus import AUTO, NAMED, NAMED_OTHER, NO_PARALLEL, NONE, REQUIRED

CAUSE_ORDER = ("runtime-error", "history-reasoning-dropped", "history-reasoning-kept", "history-differs",
               "runtime-dropped-call", "call-left-in-content", "parallel-ignored", "required-ignored",
               "call-ids-repeat", "runtime-forgave", "calls-differ", "arguments-changed", "content-differs",
               "reply-rewritten", "stream-differs", "prompts-differ", "no-done-sentinel",
               "history-refused")
# What the runtime does, for each cause label; {q} is the qualifier.
DOES = {
    "runtime-error": "answers an error ({q})",
    "history-reasoning-dropped": "drops the reasoning sent back where the template renders it ({q})",
    "history-reasoning-kept": "renders the reasoning sent back where the template drops it ({q})",
    "history-differs": "renders a history with reasoning sent back otherwise than the template ({q})",
    "runtime-dropped-call": "drops a call: no tool_calls and not the call's text",
    "call-left-in-content": "returns the call's text as content, no tool_calls",
    "parallel-ignored": "returns several calls though parallel_tool_calls is false",
    "required-ignored": "returns no call though tool_choice is required",
    "call-ids-repeat": "gives two calls of one answer the same id",
    "runtime-forgave": "turns a reply the strict parser rejects ({q}) into a call",
    "calls-differ": "returns other calls than the reply writes ({q})",
    "arguments-changed": "changes a call's arguments (emptied, stringified or retyped)",
    "content-differs": "returns other content or reasoning than the reply writes",
    "reply-rewritten": "generates other tokens than the scripted reply: its grammar or sampling ({q})",
    "stream-differs": "streams another answer than it returns non-streamed",
    "prompts-differ": "renders another prompt than the pinned template does",
    "no-done-sentinel": "ends a finished stream without `data: [DONE]` (nothing else differs)",
    "history-refused": "refuses a history whose call's arguments are not JSON with a 4xx and its words (a client "
                       "error, as it should be)",
}
QUALIFIED_BY_VARIANT = {"calls-differ", "reply-rewritten"}
# The request a variant makes, as a runtime author knows it.
REQUEST = {AUTO: "tool_choice auto", REQUIRED: "tool_choice required", NONE: "tool_choice none",
           NAMED: "tool_choice naming the function the reply calls",
           NAMED_OTHER: "tool_choice naming another function than the reply calls",
           NO_PARALLEL: "parallel_tool_calls false"}
# Where the history sends the reasoning back, as a reader of an agent loop knows it.
HISTORY = {AFTER_TOOL: "after a tool result", AFTER_USER: "after a new user turn"}
SIGNATURE_WORDS = 12
# harness.backends.servers' words for a server that exited before it was ready, up to its log's last lines.
NOT_STARTED = re.compile(r"(?:server start: )?\S+ exited with .*? before it was ready .*?last lines of [^\n]*:\n",
                         re.S)


@dataclass
class Cause:
    runtime: str
    label: str
    qualifier: str | None
    records: list = field(default_factory=list)

    @property
    def does(self) -> str:
        return DOES[self.label].format(q=self.qualifier)

    @property
    def families(self) -> list:
        return sorted({r.family or "?" for r in self.records})

    @property
    def templates(self) -> list:
        return sorted({r.template["id"] for r in self.records})


def error_signature(detail: str) -> str:
    """The words of an error that name its cause, without what varies from request to request: where it was
    asked (prompt, non-streamed, streamed), the HTTP status and the server's message, its first line cut to
    SIGNATURE_WORDS words with numbers and quoted text blanked."""
    where, _, rest = detail.partition(": ")
    start = NOT_STARTED.match(rest)
    if start:       # a server that did not start: its own last words name why, not the file it was given
        tail = [x.strip() for x in rest[start.end():].splitlines() if x.strip()]
        rest = f"did not start: {tail[-1] if tail else 'no words'}"
    status = re.search(r"HTTP (\d{3})", rest)
    body = rest[status.end():].lstrip(": ") if status else rest
    message = error_words(body) or body
    lines = [x.strip() for x in message.splitlines() if x.strip().strip("-")]
    words = (lines[0] if lines else "").split()[:SIGNATURE_WORDS]
    text = re.sub(r"\d+", "N", re.sub(r"'[^']*'|\"[^\"]*\"|`[^`]*`", "…", " ".join(words)))
    return f"{where}: {'HTTP ' + status.group(1) + ' ' if status else ''}{text}".strip()


def cause_key(record) -> tuple | None:
    """(label, qualifier) of a record's cause; None for a record labelled agree."""
    heads = {label_head(x): x for x in record.labels}
    label = next((x for x in CAUSE_ORDER if x in heads), None)
    if label is None:
        return None
    if label == "runtime-error":
        errors = [d for d in record.details if d.startswith(("prompt:", "non-streamed:", "streamed:"))]
        return label, error_signature(errors[0]) if errors else "no words"
    if label == "runtime-forgave":
        return label, heads[label].partition(":")[2] or "a deviation"
    if label.startswith("history-"):
        return label, HISTORY.get(record.case["name"], record.case["name"])
    if label in QUALIFIED_BY_VARIANT:
        return label, REQUEST.get(record.variant, record.variant)
    return label, None


def root_causes(records: list) -> list:
    """The causes of every disagreeing record, per runtime, most requests first (ties by label order)."""
    causes: dict = {}
    for r in records:
        key = cause_key(r)
        if key is None:
            continue
        causes.setdefault((r.runtime, *key), Cause(r.runtime, *key)).records.append(r)
    for cause in causes.values():
        cause.records.sort(key=_order)
    return sorted(causes.values(), key=lambda c: (c.runtime, -len(c.records), CAUSE_ORDER.index(c.label),
                                                  c.qualifier or ""))


def _order(r) -> tuple:
    return (r.family or "", r.template["id"], r.case["name"], r.variant)


def cause_line(cause: Cause, replay, limit: int = 8) -> str:
    """One line: what the runtime does, how many requests, which families, and the command that replays the
    first of them."""
    families = cause.families
    shown = ", ".join(families[:limit]) + (f" and {len(families) - limit} more" if len(families) > limit else "")
    return (f"{cause.runtime} {cause.does}: {len(cause.records)} request(s), {len(cause.templates)} template(s), "
            f"families {shown}; replay: `{replay(cause.records[0])}`")
