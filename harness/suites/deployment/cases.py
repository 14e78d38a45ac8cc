"""What the deployment suite asks: the committed BFCL subset, as the requests an app sends.

The cases are BFCL v4's single-turn cases drawn as `harness run --suite bfcl` draws them (harness.suites.bfcl.cases:
per category the first N of a shuffle seeded by the seed and the category, so N cases here are among the 20 the
committed in-process runs hold, and the in-process rows of the page are judged on the same cases). Each case is
one /v1/chat/completions request: its system message, history and user turn as messages, its functions as
`tools` (BFCL's schema dialect turned into JSON Schema, as in process), greedy with a fixed seed and the
in-process sampling, under tool_choice "auto"; a case of a category where a call is due is asked once more
under tool_choice "required", as an app that knows a call must come asks it.

Beside them, every shipped YAML scenario's opening turn (scenarios/*.yaml: its system message, history, first
user message and tools), asked the same way and judged by the scenario's own expectation of that turn.

No oracle: nothing in a request depends on the case's expected answer. The one thing the expectation decides is
which cases get the "required" request: the category (every category but the two irrelevance ones is one where
a call is due; a scenario's opening where its first turn names the tool to call), never the answer's content."""

from __future__ import annotations

from dataclasses import dataclass

from harness.backends.openai import wire_messages
from harness.suites.bfcl.cases import CATEGORIES, IRRELEVANCE, SAMPLING, draw, load_suite
from harness.live.tool_loop import opening_messages

# The categories are BFCL v4's eleven single-turn ones, as run in process on every reachable model (results/bfcl).
# Each is drawn on its own (draw), so the records of a run made before a category was added stay its draw's.
AUTO, REQUIRED = "auto", "required"
DEFAULT_CASES = 5
SEED = 0
# Greedy with the in-process run's sampling and token bound (harness.suites.bfcl.cases.SAMPLING): 400 tokens hold
# a parallel case's four calls. The bound also ends a reply that never stops: under tool_choice required a model
# whose call the runtime's grammar does not take (Qwen2.5-Coder's fence) writes to it.
BODY_SAMPLING = ("temperature", "top_p", "top_k", "min_p", "repeat_penalty", "max_tokens")
# Under tool_choice required a tighter bound: Qwen2.5-Coder writes its fence and then newlines until the bound in
# every required request, so 400 tokens cost minutes a request on 2 shared cores. 256 holds every call the
# committed in-process records of these cases hold (the longest, a parallel_multiple fallback of the 1.5B, is 200
# tokens), so a call the runtime holds the model to is not cut by it.
REQUIRED_MAX_TOKENS = 256


SCENARIO = "scenario"      # the category of a scenario's opening (harness' YAML scenarios, scenarios/*.yaml)


@dataclass(frozen=True)
class Opening:
    """A YAML scenario's opening turn as a deployment case: its system message, history and first user message,
    its tools; judged by the scenario's own expectation of that turn (openings.py), not by BFCL's checker."""
    scenario: object         # harness.evaluation.scenarios.Scenario
    category: str = SCENARIO

    @property
    def id(self) -> str:
        return f"{SCENARIO}-{self.scenario.name}"


def openings(names=None) -> list:
    """Every shipped scenario's opening, in name order."""
    from harness.evaluation.scenario_files import load_scenarios

    return [Opening(s) for s in sorted(load_scenarios(names=names), key=lambda s: s.name)]


@dataclass(frozen=True)
class Request:
    case: object           # harness.suites.bfcl.cases.Case
    tool_choice: str
    body: dict             # the request as sent, "model" and "stream" left to the driver

    @property
    def name(self) -> str:
        return f"{self.case.id}/{self.tool_choice}"


def call_due(category: str) -> bool:
    return category not in IRRELEVANCE


def opening_due(case) -> bool:
    """Whether a case gets the `required` request: a BFCL case by its category; a scenario's opening where its
    first turn names the tool it is to call (the scenario's design, as a category is BFCL's)."""
    if case.category == SCENARIO:
        return case.scenario.turns[0].expect.expects_call is True
    return call_due(case.category)


def cases(per_category: int = DEFAULT_CASES, categories=CATEGORIES, seed: int = SEED, tree=None) -> list:
    """The drawn cases, in BFCL's file order per category (harness.suites.bfcl.cases.draw)."""
    return draw(load_suite(categories, tree), categories, per_category, seed)


def messages(case) -> list:
    """The case's conversation as an app holds it: its system message and history, then the user turn."""
    return opening_messages(case.scenario) + [{"role": "user", "content": case.scenario.turns[0].user}]


def body(case, tool_choice: str) -> dict:
    """The request an app sends for one case: messages, tools, tool_choice, and the greedy sampling."""
    out = {"messages": wire_messages(messages(case)), "tools": case.scenario.tool_schemas(),
           "tool_choice": tool_choice, "seed": SEED}
    out.update({k: SAMPLING[k] for k in BODY_SAMPLING if k in SAMPLING})
    if tool_choice == REQUIRED:
        out["max_tokens"] = min(out["max_tokens"], REQUIRED_MAX_TOKENS)
    return out


def requests(drawn: list) -> list:
    """Every request of the drawn cases: auto for each, required too where the category has a call due."""
    out = []
    for case in drawn:
        for choice in (AUTO, REQUIRED) if opening_due(case) else (AUTO,):
            out.append(Request(case, choice, body(case, choice)))
    return out


def switches(request_body: dict) -> dict:
    """What a request sets beside the case's messages and tools (those follow from the case's id and hash)."""
    return {k: v for k, v in request_body.items() if k not in ("messages", "tools")}
