"""BFCL v4's single-turn categories as cases the runner drives like a scenario.

The data is read from the pinned bfcl-eval wheel (sources.json, archive bfcl-eval-2026.3.23), unpacked into the
cache only after its size and SHA-256 match the pin: a file that does not match is refused before any case
exists. Each entry becomes a Scenario of one user turn (its system message and any earlier turns as history),
its functions as the scenario's tools, one sample, one step, greedy sampling: the model's own template renders
it, the run's mode drives it and the strict parser reads the reply, as for a YAML scenario.

BFCL writes its schemas in its own dialect ("type": "dict", "float", "tuple", "any"); they are turned into JSON
Schema by TYPE_SUBSTITUTIONS (the same mapping BFCL applies for its function-calling models, type_mappings.py's
GORILLA_TO_OPENAPI), at every depth. A case whose converted schema our typing cannot read (check_tools) is kept
as a Skipped with its id and the reason, counted, never dropped silently. The original functions stay with the
case: BFCL's checker types values by BFCL's own names."""

from __future__ import annotations

import copy
import json
import os
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.errors import BFCLDataError, ToolSchemaError
from harness.core.input_files import read_regular_text
from harness.core.values import DEFAULT_SAMPLING
from harness.evaluation.scenarios import Expectation, Scenario, StubTool, Turn
from harness.pins.archives import archive_tree
from harness.schema.schemas import check_tools

ARCHIVE_ID = "bfcl-eval-2026.3.23"
SUITE = "bfcl"
# The single-turn categories, in BFCL's leaderboard order (non-live, then live).
CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance", "live_simple",
              "live_multiple", "live_parallel", "live_parallel_multiple", "live_irrelevance", "live_relevance")
# No call may be made (irrelevance), or any call counts (relevance): BFCL ships no possible answers for these.
IRRELEVANCE = ("irrelevance", "live_irrelevance")
RELEVANCE = ("live_relevance",)
# BFCL's non-standard type names and the JSON Schema type each becomes (BFCL's GORILLA_TO_OPENAPI for them).
TYPE_SUBSTITUTIONS = {"dict": "object", "float": "number", "tuple": "array", "any": "string"}
# Greedy (BFCL samples its local models at 0.001): one reply per case, the same on every run. A parallel case
# writes up to four calls; 400 tokens holds them with room.
SAMPLING = {**DEFAULT_SAMPLING, "temperature": 0.0, "max_tokens": 400}
CASE_PREFIX = "bfcl-"


@dataclass(frozen=True)
class Case:
    id: str
    category: str
    functions: list          # BFCL's own function documents, as shipped (BFCL's checker reads these)
    answer: list | None      # BFCL's possible answer (ground_truth); None for irrelevance and relevance
    scenario: Scenario

    @property
    def name(self) -> str:
        return self.scenario.name


@dataclass(frozen=True)
class Skipped:
    id: str
    category: str
    reason: str


@dataclass
class Suite:
    cases: dict = field(default_factory=dict)      # id -> Case, in file order per category
    skipped: list = field(default_factory=list)    # [Skipped]
    totals: dict = field(default_factory=dict)     # category -> entries in BFCL's file

    def of(self, category: str) -> list:
        return [c for c in self.cases.values() if c.category == category]

    def skipped_in(self, category: str) -> list:
        return [s for s in self.skipped if s.category == category]

    def by_name(self, name: str) -> Case | None:
        return self.cases.get(name[len(CASE_PREFIX):]) if name.startswith(CASE_PREFIX) else None


def category_of(case_id: str) -> str | None:
    """The category a case id belongs to (`live_simple_3` to live_simple, not simple), or None."""
    found = [c for c in CATEGORIES if case_id.startswith(c + "_")]
    return max(found, key=len) if found else None


class WithCases(Mapping):
    """Scenarios by name, BFCL's cases among them: what a BFCL record (`bfcl-<case id>`) was run on is the case's
    scenario, looked up in the pinned suite (each category read on first use), so its verdicts are scored as the
    report scores them; any other name is looked up in the scenarios given."""

    def __init__(self, scenarios: dict, tree: Path | None = None):
        self.scenarios, self.tree, self.suite, self.read = dict(scenarios), tree, Suite(), set()

    def _case(self, name: str) -> Case | None:
        category = category_of(name[len(CASE_PREFIX):]) if name.startswith(CASE_PREFIX) else None
        if category is None:
            return None
        if category not in self.read:
            loaded = load_suite([category], self.tree)
            self.suite.cases.update(loaded.cases)
            self.read.add(category)
        return self.suite.by_name(name)

    def __getitem__(self, name: str):
        if name in self.scenarios:
            return self.scenarios[name]
        case = self._case(name) if isinstance(name, str) else None
        if case is None:
            raise KeyError(name)
        return case.scenario

    def __iter__(self):
        return iter({**self.scenarios, **{c.name: c for c in self.suite.cases.values()}})

    def __len__(self) -> int:
        return len(self.scenarios) + len(self.suite.cases)


def data_dir(tree: Path | None = None) -> Path:
    """BFCL's data folder, from the pinned wheel (fetched, verified and unpacked on first use)."""
    return Path(tree or archive_tree(ARCHIVE_ID)) / "data"


def checker_source(tree: Path | None = None) -> Path:
    """BFCL's AST checker as the pinned wheel ships it: the checker environment's copy must match its bytes."""
    return Path(tree or archive_tree(ARCHIVE_ID)) / "eval_checker" / "ast_eval" / "ast_checker.py"


def _lines(path: Path) -> list:
    if not os.path.lexists(path):
        raise BFCLDataError(f"{path}: BFCL's file is missing from the pinned archive")
    out = []
    for number, line in enumerate(read_regular_text(path, BFCLDataError).splitlines(), 1):
        if line.strip():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as exc:
                raise BFCLDataError(f"{path}:{number}: not a JSON line: {exc.msg}") from None
            except RecursionError:
                raise BFCLDataError(f"{path}:{number}: not a JSON line: nested too deep") from None
            except ValueError as exc:       # a number past int()'s limit on digits
                raise BFCLDataError(f"{path}:{number}: not a JSON line: {exc}") from None
            if not isinstance(entry, dict):
                raise BFCLDataError(f"{path}:{number}: a JSON {type(entry).__name__} where BFCL has an object")
            out.append(entry)
    return out


def load_suite(categories=None, tree: Path | None = None) -> Suite:
    """Every entry of the categories (default: all of CATEGORIES) as a Case, or a Skipped with its reason."""
    wanted = tuple(categories or CATEGORIES)
    unknown = [c for c in wanted if c not in CATEGORIES]
    if unknown:
        raise BFCLDataError(f"unknown BFCL category {', '.join(unknown)} (known: {', '.join(CATEGORIES)})")
    data = data_dir(tree)
    suite = Suite()
    for category in wanted:
        entries = _lines(data / f"BFCL_v4_{category}.json")
        answers = {}
        if category not in IRRELEVANCE + RELEVANCE:
            answers = {a.get("id"): a.get("ground_truth") for a in _lines(data / "possible_answer" /
                                                                          f"BFCL_v4_{category}.json")}
        suite.totals[category] = len(entries)
        for entry in entries:
            case_id = entry.get("id")
            try:
                suite.cases[case_id] = to_case(entry, category, answers.get(case_id))
            except (CaseError, ToolSchemaError) as exc:
                suite.skipped.append(Skipped(str(case_id), category, str(exc)))
    return suite


class CaseError(ValueError):
    """An entry this code cannot turn into a case; the reason is reported with its id."""


def convert_schema(schema, where: str = "parameters"):
    """BFCL's schema as JSON Schema: TYPE_SUBSTITUTIONS applied to every `type`, at every depth (properties,
    items, additionalProperties). Everything else is kept as written; what is not JSON Schema is left for
    check_tools to refuse with its place."""
    if not isinstance(schema, dict):
        return copy.deepcopy(schema)
    out = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, str):
            out[key] = TYPE_SUBSTITUTIONS.get(value, value)
        elif key == "properties" and isinstance(value, dict):
            out[key] = {name: convert_schema(sub, f"{where}.{name}") for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = convert_schema(value, f"{where}.{key}")
        else:
            out[key] = copy.deepcopy(value)
    return out


def convert_tools(functions: list) -> list:
    """BFCL's function documents as OpenAI-style tools, each checked as a user's tool file is."""
    if not isinstance(functions, list) or not functions:
        # A few live_irrelevance entries ask a chat that offers no tools: every case here renders with tools.
        raise CaseError("offers no functions (a chat without tools; this suite renders every case with tools)")
    tools = []
    for function in functions:
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise CaseError(f"a function without a name: {json.dumps(function)[:80]}")
        parameters = convert_schema(function.get("parameters") or {"type": "dict", "properties": {}})
        if parameters.get("type") != "object":
            raise CaseError(f"{function['name']}: parameters of type {parameters.get('type')!r}, not an object")
        tools.append({"type": "function", "function": {"name": function["name"],
                                                       "description": function.get("description", ""),
                                                       "parameters": parameters}})
    check_tools(tools)
    return tools


def _expectation(category: str, answer) -> Expectation:
    if category in IRRELEVANCE:
        return Expectation(no_tool=True)
    if category in RELEVANCE:
        return Expectation(call_expected=True)
    if not isinstance(answer, list) or not answer or not all(isinstance(a, dict) and len(a) == 1 for a in answer):
        raise CaseError("no possible answer of one or more calls")
    names = {next(iter(a)) for a in answer}
    # Our right-tool check names one tool; a parallel case calling several is judged by BFCL's checker alone.
    return Expectation(tool=names.pop()) if len(names) == 1 else Expectation(call_expected=True)


def _conversation(question) -> tuple:
    """(system, history, last user message) of a single-turn question: its one turn's messages."""
    if not isinstance(question, list) or len(question) != 1 or not isinstance(question[0], list):
        raise CaseError("not a single-turn question")
    messages = question[0]
    if not messages or not all(isinstance(m, dict) and m.get("role") in ("system", "user", "assistant")
                               and isinstance(m.get("content"), str) for m in messages):
        raise CaseError("a message that is not a system, user or assistant text")
    if messages[-1]["role"] != "user":
        raise CaseError("the question does not end with a user message")
    system = None
    if messages[0]["role"] == "system":
        system, messages = messages[0]["content"], messages[1:]
    history = tuple({"role": m["role"], "content": m["content"]} for m in messages[:-1])
    return system, history, messages[-1]["content"]


def to_case(entry: dict, category: str, answer) -> Case:
    case_id = entry.get("id")
    if not isinstance(case_id, str) or not case_id:
        raise CaseError("an entry without an id")
    tools = convert_tools(entry.get("function"))
    system, history, user = _conversation(entry.get("question"))
    expect = _expectation(category, answer)
    stubs = tuple(StubTool(t["function"]["name"], t["function"]["description"], t["function"]["parameters"],
                           returns={"ok": True}) for t in tools)
    if len({s.name for s in stubs}) != len(stubs):
        raise CaseError("a function offered twice")
    scenario = Scenario(f"{CASE_PREFIX}{case_id}", f"BFCL v4 {category} {case_id}", stubs, (Turn(user, expect),),
                        system, history, dict(SAMPLING), samples=1, max_steps=1)
    return Case(case_id, category, entry["function"], answer, scenario)


def draw(suite: Suite, categories, per_category: int | None, seed: int = 0) -> list:
    """A seeded, stratified draw: per category, the first `per_category` cases of a shuffle seeded by the seed
    and the category (all of them when None). A larger N extends a smaller one's draw, so a run resumes and
    grows; the cases run in BFCL's file order."""
    out = []
    for category in categories or CATEGORIES:
        cases = suite.of(category)
        order = list(range(len(cases)))
        random.Random(f"bfcl:{seed}:{category}").shuffle(order)
        chosen = sorted(order if per_category is None else order[:per_category])
        out += [cases[i] for i in chosen]
    return out
