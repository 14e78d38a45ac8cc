"""What every record kind shares: the kind names, the schema version, RecordError, and the field checks
that name the first missing or wrong-typed field by its dotted path."""

from __future__ import annotations

import json
from typing import TypedDict

from harness.core.errors import RecordError

SCHEMA_VERSION = 1
SAMPLE, MODEL = "sample", "model"


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
    grammar_refused: int | None  # sampled tokens the grammar refused (0: it changed nothing in this reply)
    grammar_trigger: str | None  # lazy: the trigger word the grammar took over at (None: it never did)
    grammar_held: bool           # lazy: that trigger opened a call in another spelling than the family's own
    repeated_call_after_result: list  # fallback: ids of the earlier calls this reply repeated (not run again)
    fallback_from: dict          # fallback mode: the native attempt this step replaced
    reply_sha256: str            # replays: the quoted reply's hash
    reused: bool                 # the same request's reply, written earlier in this run (no timings of its own)


class Turn(TypedDict):
    user: str
    steps: list


NULL = type(None)


def check_field(raw: dict, name: str, types: tuple, optional: bool = False):
    """raw[name] if it has one of `types` (bool is not an int here), else RecordError naming it."""
    if name not in raw:
        if optional:
            return None
        raise RecordError(f"missing field {name!r}")
    value = raw[name]
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        shown = json.dumps(value, default=str)[:60]
        expected = " or ".join("null" if t is NULL else t.__name__ for t in types)
        raise RecordError(f"field {name!r} is {type(value).__name__} {shown}, not {expected}")
    return value


def nested_field(raw: dict, name: str) -> dict:
    return check_field(raw, name, (dict,))


def check_steps(turns: list) -> list:
    """The step log as a run writes it (Turn, Step), each declared field of the right type, named by its path
    (`turns[0].steps[1].calls[0].errors`) when not: the reports read these fields, and one record of the wrong
    shape must be skipped with its reason rather than end a report halfway."""
    for t, turn in enumerate(turns):
        where = f"turns[{t}]"
        if not isinstance(turn, dict):
            raise RecordError(f"field {where!r} is {type(turn).__name__}, not dict")
        within_field(where, lambda: check_field(turn, "user", (str,), optional=True))
        steps = within_field(where, lambda: check_field(turn, "steps", (list,), optional=True)) or []
        for s, step in enumerate(steps):
            _check_step(step, f"{where}.steps[{s}]")
    return turns


# The fields of a Step the reports and scoring read, with the types a run writes (None where a run may).
STEP_FIELDS = {"reply": (str, NULL), "prompt_tail": (str,), "prompt_sha256": (str, NULL),
               "prompt_tokens": (int, NULL), "completion_tokens": (int, NULL), "finish_reason": (str, NULL),
               "seed": (int, NULL), "shared_prompt": (bool,), "timings": (dict, NULL), "parse": (dict, NULL),
               "calls": (list,), "error": (str, NULL), "family": (str, NULL), "grammar": (str, NULL),
               "grammar_from": (int, NULL), "grammar_refused": (int, NULL), "grammar_trigger": (str, NULL),
               "grammar_held": (bool,), "fallback_from": (dict, NULL),
               "repeated_call_after_result": (list,), "reply_sha256": (str,), "reused": (bool,)}
CALL_FIELDS = {"id": (str, NULL), "name": (str, NULL), "arguments": (dict, NULL), "typed": (dict, NULL),
               "errors": (list,), "coerced": (list,), "executed": (bool,), "executions": (int,),
               "error": (bool,), "repeat_of": (str,)}


def _check_step(step, where: str) -> None:
    if not isinstance(step, dict):
        raise RecordError(f"field {where!r} is {type(step).__name__}, not dict")
    for name, types in STEP_FIELDS.items():
        within_field(where, lambda: check_field(step, name, types, optional=True))
    if isinstance(step.get("fallback_from"), dict):
        _check_step(step["fallback_from"], f"{where}.fallback_from")
    for c, call in enumerate(step.get("calls") or []):
        at = f"{where}.calls[{c}]"
        if not isinstance(call, dict):
            raise RecordError(f"field {at!r} is {type(call).__name__}, not dict")
        for name, types in CALL_FIELDS.items():
            within_field(at, lambda: check_field(call, name, types, optional=True))
        for e, error in enumerate(call.get("errors") or []):
            if not isinstance(error, str):
                raise RecordError(f"field '{at}.errors[{e}]' is {type(error).__name__}, not str")


def within_field(prefix: str, check):
    """check(), its RecordError naming the field by its dotted path under `prefix`."""
    try:
        return check()
    except RecordError as exc:
        raise RecordError(str(exc).replace("field '", f"field '{prefix}.", 1)) from None


def detection_field(raw: dict) -> dict | None:
    """The detection a model record keeps; the reports print its family, reason and rendered call as text."""
    detection = check_field(raw, "detection", (dict, NULL), optional=True)
    if detection is not None:
        # Detection always gives a reason (the reports print it); the others are null where nothing was found.
        within_field("detection", lambda: [check_field(detection, k, (str,) if k == "reason" else (str, NULL), optional=True)
                                      for k in ("family", "reason", "rendered_call", "status")])
    return detection
