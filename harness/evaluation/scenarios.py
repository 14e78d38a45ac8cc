"""Scenarios: what a live run offers a model and what a sample must do to count as right.

`scenarios/*.yaml` holds one scenario per file; `scenarios/library/tools.yaml` holds the declared tools (schema
plus the stub's fixed result or error) that scenarios offer by name. Every problem is reported as
`file:line: field: problem` (ScenarioError), because a typo in an expectation would otherwise surface as a
silently wrong rate."""

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.hashing import sha256_text
from harness.schema.arguments import type_arguments
from harness.core.errors import ScenarioError
from harness.core.values import DEFAULT_SAMPLING as BINDING_SAMPLING, MAX_SAMPLES, MODES, valid_modes
from harness.core.yaml_source import Located

# Where a scenario's declared tools come from (harness.evaluation.scenario_files loads that file; named here for
# the message of a tool it lacks). Loading lives there: it parses each file with this module.
LIBRARY_PATH = Path("library") / "tools.yaml"

NAME = re.compile(r"^[a-z0-9][a-z0-9-]*$")
TOOL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# The binding's chat defaults (harness.core.values); max_tokens bounds a reply.
DEFAULT_SAMPLING = {**BINDING_SAMPLING, "max_tokens": 192}
DEFAULT_SAMPLES = 5
DEFAULT_MAX_STEPS = 3
# Each sampling value's rule, as llama.cpp reads it: (integer?, accepts(value), what it must be). A NaN would
# pass every comparison-based check below by failing none of them, so floats must first be finite.
_INT32 = 2**31 - 1
SAMPLING_RULES = {
    "temperature": (False, lambda v: v >= 0, "a finite number >= 0 (0 is greedy)"),
    "top_p": (False, lambda v: 0 < v <= 1, "a number in (0, 1]"),
    "top_k": (True, lambda v: 0 <= v <= _INT32, f"an integer from 0 (off) to {_INT32}"),
    "min_p": (False, lambda v: 0 <= v <= 1, "a number in [0, 1]"),
    "repeat_penalty": (False, lambda v: v > 0, "a finite number > 0 (1 is off)"),
    # A reply cannot outgrow the context a run opens (harness.live.opening.N_CTX).
    "max_tokens": (True, lambda v: 1 <= v <= 4096, "an integer from 1 to 4096"),
}
# A step budget far above any scenario's needs (a call, its result, an answer): more is a typo.
MAX_STEPS = 50
SCENARIO_KEYS = {"name", "description", "tools", "conversation", "sampling", "samples", "max_steps", "modes"}
# How a run drives the model (harness.live.modes): its own template and parser, a grammar from the tool schemas,
# or native with a grammar retry of a failed step. Like `samples`, a run setting: not part of the hash.
TOOL_KEYS = {"name", "description", "parameters", "returns", "raises", "evidence"}
EXPECT_KEYS = {"tool", "arguments", "not_tools", "no_tool", "answer_contains", "uses_tool_result"}
# A description says what a scenario is for; what a sample must do is written as `expect` fields, so no promise
# goes unchecked (Expectation.checks() writes them out for the reports).
PROMISE = re.compile(r"\bmust\b", re.IGNORECASE)
ROLES = {"system", "user", "assistant", "tool"}


@dataclass(frozen=True)
class StubTool:
    name: str
    description: str
    parameters: dict
    returns: object = None
    raises: str | None = None
    # Distinctive strings of the stub's result: an answer that contains one has used the result (nobody
    # guesses "7-31-19"). Not sent to the model, so not part of the scenario's hash.
    evidence: tuple = ()

    def schema(self) -> dict:
        """The OpenAI-style tool every template's `tools` variable takes."""
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}

    def result_message(self) -> str:
        """What the tool message carries back to the model: the result as JSON, or {"error": ...}."""
        if self.raises is not None:
            return json.dumps({"error": self.raises}, ensure_ascii=False)
        if isinstance(self.returns, str):
            return self.returns
        return json.dumps(self.returns, ensure_ascii=False)

    def to_json(self) -> dict:
        out = {"name": self.name, "description": self.description, "parameters": self.parameters}
        out.update({"raises": self.raises} if self.raises is not None else {"returns": self.returns})
        return out


@dataclass(frozen=True)
class Expectation:
    tool: str | None = None
    arguments: dict | None = None
    not_tools: tuple = ()
    no_tool: bool = False
    any_of: tuple = ()
    all_of: tuple = ()
    uses_tool_result: bool = False
    # Set only by replays whose prompt is unknown but whose reply the ADR calls an attempted call.
    call_expected: bool | None = None

    @property
    def expects_call(self) -> bool | None:
        """True when a call is due, False when none may be made, None when the turn leaves it open."""
        if self.call_expected is not None:
            return self.call_expected
        return True if self.tool else (False if self.no_tool else None)

    @property
    def wants_answer(self) -> bool:
        """The turn must end in an answer of the model's own, holding the expected words."""
        return bool(self.any_of or self.all_of)

    def to_json(self) -> dict:
        return {"tool": self.tool, "arguments": self.arguments, "not_tools": list(self.not_tools), "no_tool": self.no_tool,
                "any_of": list(self.any_of), "all_of": list(self.all_of), "uses_tool_result": self.uses_tool_result}


@dataclass(frozen=True)
class Turn:
    user: str
    expect: Expectation


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    tools: tuple
    turns: tuple
    system: str | None = None
    history: tuple = ()
    sampling: dict = field(default_factory=lambda: dict(DEFAULT_SAMPLING))
    samples: int = DEFAULT_SAMPLES
    max_steps: int = DEFAULT_MAX_STEPS
    path: Path | None = None
    modes: tuple | None = None  # the modes `harness run` uses when --mode is not given (None: the model's)

    def tool(self, name: str) -> StubTool | None:
        return next((t for t in self.tools if t.name == name), None)

    @property
    def call_due(self) -> bool | None:
        """True when some turn must call a tool, False when the turns that say anything say none may be called,
        None when no turn says. The tables report call-due and no-call samples apart: over all samples, a
        rate like "right tool" is mostly the share of one kind."""
        said = [t.expect.expects_call for t in self.turns if t.expect.expects_call is not None]
        return True if True in said else (False if said else None)

    def tool_schemas(self) -> list:
        return [t.schema() for t in self.tools]

    def run_definition(self) -> dict:
        """Everything that decides what the model sees and how it samples. Expectations, description and
        the sample count are left out on purpose: refining an expectation re-scores old transcripts instead
        of orphaning them, and raising the sample count extends a run instead of restarting it."""
        return {"tools": [t.to_json() for t in self.tools], "system": self.system,
                "history": list(self.history), "turns": [t.user for t in self.turns],
                "sampling": self.sampling, "max_steps": self.max_steps}

    @property
    def hash(self) -> str:
        text = json.dumps(self.run_definition(), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return sha256_text(text)


class _Checker:
    """Field checks against one located document; every failure names file, line and field."""

    def __init__(self, doc: Located):
        self.doc = doc

    def fail(self, keys, problem: str):
        raise ScenarioError(f"{self.doc.where(*keys)}: {problem}")

    def get(self, obj: dict, keys, name, types, required=True, default=None):
        if name not in obj:
            if required:
                self.fail(keys, f"missing field {name!r}")
            return default
        value = obj[name]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in _tuple(types)):
            self.fail(keys + (name,), f"must be {_names(types)}, got {json.dumps(value, default=str)}")
        return value

    def only(self, obj: dict, keys, allowed: set):
        for key in obj:
            if key not in allowed:
                self.fail(keys + (key,), f"unknown field (allowed: {', '.join(sorted(allowed))})")

    def strings(self, obj, keys, name) -> tuple:
        items = self.get(obj, keys, name, list, required=False, default=[])
        for i, item in enumerate(items):
            if not isinstance(item, str) or not item.strip():
                self.fail(keys + (name, i), "must be a non-empty string")
        return tuple(items)


def _tuple(types):
    return types if isinstance(types, tuple) else (types,)


def _names(types) -> str:
    return " or ".join({"str": "a string", "int": "an integer", "float": "a number", "bool": "true or false",
                        "dict": "a mapping", "list": "a list"}[t.__name__] for t in _tuple(types))


def _tool(c: _Checker, raw, keys, library: dict) -> StubTool:
    if isinstance(raw, str):
        raw = {"name": raw}
    if not isinstance(raw, dict):
        c.fail(keys, "must be a tool name or a mapping")
    c.only(raw, keys, TOOL_KEYS)
    name = c.get(raw, keys, "name", str)
    if not TOOL_NAME.match(name):
        c.fail(keys + ("name",), f"{name!r} is not a valid function name")
    base = library.get(name, {})
    merged = {**base, **raw}
    if "returns" in raw and "raises" in base:
        merged.pop("raises")
    if "raises" in raw and "returns" in base:
        merged.pop("returns")
    for required in ("description", "parameters"):
        if required not in merged:
            c.fail(keys, f"tool {name!r} is not in {LIBRARY_PATH} and has no {required!r}")
    description = c.get(merged, keys, "description", str)
    parameters = c.get(merged, keys, "parameters", dict)
    if parameters.get("type") != "object" or not isinstance(parameters.get("properties", {}), dict):
        c.fail(keys + ("parameters",), "must be a JSON schema with type: object and a properties mapping")
    for req in parameters.get("required", []):
        if req not in parameters.get("properties", {}):
            c.fail(keys + ("parameters", "required"), f"{req!r} is required but not a property")
    if ("returns" in merged) == ("raises" in merged):
        c.fail(keys, f"tool {name!r} needs exactly one of 'returns' (the stub's result) or 'raises' (its error)")
    raises = c.get(merged, keys, "raises", str, required=False)
    evidence = c.strings(merged, keys, "evidence")
    return StubTool(name, description, parameters, merged.get("returns"), raises, evidence)


def _expectation(c: _Checker, raw, keys, tools: dict) -> Expectation:
    if raw is None:
        return Expectation()
    if not isinstance(raw, dict):
        c.fail(keys, "must be a mapping")
    c.only(raw, keys, EXPECT_KEYS)
    tool = c.get(raw, keys, "tool", str, required=False)
    if tool is not None and tool not in tools:
        c.fail(keys + ("tool",), f"{tool!r} is not one of the scenario's tools ({', '.join(tools)})")
    arguments = c.get(raw, keys, "arguments", dict, required=False)
    if arguments is not None:
        if tool is None:
            c.fail(keys + ("arguments",), "expected arguments need the expected 'tool'")
        typed = type_arguments(arguments, tools[tool].parameters)
        for problem in typed.errors:
            if not problem.startswith("missing required"):
                c.fail(keys + ("arguments",), f"does not fit {tool}'s schema: {problem}")
    not_tools = c.strings(raw, keys, "not_tools")
    for i, name in enumerate(not_tools):
        if name not in tools:
            c.fail(keys + ("not_tools", i), f"{name!r} is not one of the scenario's tools")
    no_tool = c.get(raw, keys, "no_tool", bool, required=False, default=False)
    if no_tool and (tool or not_tools):
        c.fail(keys + ("no_tool",), "no_tool excludes 'tool' and 'not_tools'")
    contains = c.get(raw, keys, "answer_contains", dict, required=False, default={})
    c.only(contains, keys + ("answer_contains",), {"any_of", "all_of"})
    any_of = c.strings(contains, keys + ("answer_contains",), "any_of")
    all_of = c.strings(contains, keys + ("answer_contains",), "all_of")
    uses = c.get(raw, keys, "uses_tool_result", bool, required=False, default=False)
    if uses and not (tool and tools[tool].evidence):
        c.fail(keys + ("uses_tool_result",), "needs the expected 'tool', with 'evidence' strings of its result")
    return Expectation(tool, arguments, not_tools, no_tool, any_of, all_of, uses)


def _history(c: _Checker, raw, keys, tools: dict) -> tuple:
    """Seeded messages as a chat stores them. Tool-call ids are assigned here (hist00001, ...: nine
    alphanumerics, as Mistral's templates demand) so that the rendered history is the same on every run."""
    out, count = [], 0
    for i, item in enumerate(raw):
        at = keys + (i,)
        if not isinstance(item, dict):
            c.fail(at, "must be a mapping with role and content")
        c.only(item, at, {"role", "content", "tool_calls", "name"})
        role = c.get(item, at, "role", str)
        if role not in ROLES:
            c.fail(at + ("role",), f"must be one of {', '.join(sorted(ROLES))}")
        message = {"role": role, "content": c.get(item, at, "content", str, required=False, default="")}
        if role == "assistant" and "tool_calls" in item:
            calls = []
            for j, call in enumerate(c.get(item, at, "tool_calls", list)):
                if not isinstance(call, dict) or call.get("name") not in tools:
                    c.fail(at + ("tool_calls", j), f"must name one of the scenario's tools ({', '.join(tools)})")
                count += 1
                calls.append({"id": f"hist{count:05d}", "type": "function",
                              "function": {"name": call["name"], "arguments": call.get("arguments", {})}})
            message["tool_calls"] = calls
        if role == "tool":
            name = c.get(item, at, "name", str)
            if count == 0:
                c.fail(at, "a tool message must follow an assistant tool call")
            message.update(name=name, tool_call_id=f"hist{count:05d}")
        out.append(message)
    return tuple(out)


def _sampling(c: _Checker, raw, keys) -> dict:
    sampling = dict(DEFAULT_SAMPLING)
    c.only(raw, keys, set(DEFAULT_SAMPLING))
    for name, default in DEFAULT_SAMPLING.items():
        integer, accepts, wanted = SAMPLING_RULES[name]
        value = c.get(raw, keys, name, int if integer else (int, float), required=False, default=default)
        if not math.isfinite(value) or not accepts(value):
            c.fail(keys + (name,), f"must be {wanted}, got {value!r}")
        sampling[name] = value
    return sampling


def parse_scenario(doc: Located, library: dict) -> Scenario:
    c = _Checker(doc)
    raw = doc.data
    if not isinstance(raw, dict):
        c.fail((), "a scenario file must be a mapping")
    c.only(raw, (), SCENARIO_KEYS)
    name = c.get(raw, (), "name", str)
    if not NAME.match(name):
        c.fail(("name",), "must be lower-case letters, digits and hyphens")
    description = c.get(raw, (), "description", str)
    if PROMISE.search(description):
        c.fail(("description",), "says what a sample must do: write it as an `expect` field (a check) instead; "
                                 "the reports write the checks out")
    tool_items = c.get(raw, (), "tools", list, required=False, default=[])
    tools = {}
    for i, item in enumerate(tool_items):
        tool = _tool(c, item, ("tools", i), library)
        if tool.name in tools:
            c.fail(("tools", i), f"tool {tool.name!r} is offered twice")
        tools[tool.name] = tool
    conversation = c.get(raw, (), "conversation", dict)
    c.only(conversation, ("conversation",), {"system", "history", "turns"})
    system = c.get(conversation, ("conversation",), "system", str, required=False)
    history = _history(c, c.get(conversation, ("conversation",), "history", list, required=False, default=[]),
                       ("conversation", "history"), tools)
    turn_items = c.get(conversation, ("conversation",), "turns", list)
    if not turn_items:
        c.fail(("conversation", "turns"), "needs at least one user turn")
    turns = []
    for i, item in enumerate(turn_items):
        at = ("conversation", "turns", i)
        if not isinstance(item, dict):
            c.fail(at, "must be a mapping with 'user' and optional 'expect'")
        c.only(item, at, {"user", "expect"})
        turns.append(Turn(c.get(item, at, "user", str), _expectation(c, item.get("expect"), at + ("expect",), tools)))
    sampling = _sampling(c, c.get(raw, (), "sampling", dict, required=False, default={}), ("sampling",))
    samples = c.get(raw, (), "samples", int, required=False, default=DEFAULT_SAMPLES)
    max_steps = c.get(raw, (), "max_steps", int, required=False, default=DEFAULT_MAX_STEPS)
    for key, value, high in (("samples", samples, MAX_SAMPLES), ("max_steps", max_steps, MAX_STEPS)):
        if not 1 <= value <= high:
            c.fail((key,), f"must be an integer from 1 to {high}, got {value}")
    modes = tuple(c.strings(raw, (), "modes")) if "modes" in raw else None
    if modes is not None and not valid_modes(modes):
        c.fail(("modes",), f"must be a non-empty list of distinct modes from {', '.join(MODES)}")
    return Scenario(name, description, tuple(tools.values()), tuple(turns), system, history, sampling, samples,
                    max_steps, doc.path, modes)

