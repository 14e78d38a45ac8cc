"""`harness deployment --again`: which recorded requests are asked again (a label their latest record carries,
or STALE: switches other than a record made now holds), and what the new record says of the old one."""

from __future__ import annotations

from harness.suites.deployment.records import DeploymentRecord

STALE = "stale"         # --again's word for a record asked otherwise than a record made now would be


def carries(record: DeploymentRecord, label: str) -> bool:
    """Whether the record carries the label, or a label of that head (`runtime-forgave` for
    `runtime-forgave:bare-json`)."""
    return any(have == label or have.startswith(label + ":") for have in record.labels)


ANSWER = ("status", "content", "reasoning", "tool_calls", "finish_reason")


def mark_asked_again(record: DeploymentRecord, before: DeploymentRecord) -> bool:
    """Write into a request's new record (--again) what changed against its earlier one, streamed and not (its
    `again` field and a line of its details); True where the runtime answered as before (what an app receives: a
    greedy answer with a fixed seed that changes between runs is the runtime's, or its build's, to explain)."""
    changed = [f"{what} {field}" for what in ("plain", "stream")
               for field in ANSWER if (getattr(record, what) or {}).get(field) != (getattr(before, what) or {}).get(field)]
    record.again = {"after": before.recorded, "changed": changed}
    record.details.append(f"asked again after the record of {before.recorded or 'an undated run'} "
                          f"({', '.join(before.labels)}): "
                          + (f"{', '.join(changed)} not as before" if changed else "answered as before"))
    return not changed
