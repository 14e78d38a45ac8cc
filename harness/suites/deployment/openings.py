"""The deployment page's scenario openings: each served answer to a YAML scenario's opening turn (cases.Opening),
judged by that scenario's expectation of its first turn, as the in-process scoring judges a first reply
(harness.evaluation.scoring.first_reply_verdicts) but on what an app receives: the returned `tool_calls`, or, with
none, the content read by the family's strict parser (a call attempt left there is an attempt, as in process).

Right where a call is due: the first returned call is the expected tool, with the expected arguments where the
scenario names them (harness.evaluation.scoring.arguments_match: a subset, strings compared case-insensitively).
Right where no call is due: no call returned and none attempted in the content."""

from __future__ import annotations

from collections import defaultdict

from harness import families
from harness.evaluation.judging import arguments_object, label_head, text
from harness.evaluation.scoring import arguments_match, first_reply_verdicts, judged_parse
from harness.formats.calls import ParseResult, ToolCall
from harness.reports.rates import rate_cell
from harness.suites.deployment.cases import SCENARIO
from harness.suites.deployment.judging import answer_view, prompt_tail
from harness.suites.deployment.records import served_setup

COLUMNS = ("model", "setup", "right, a call due", "right, no call due", "calls left in content", "errors")


def is_opening(record) -> bool:
    return record.case["category"] == SCENARIO


def app_parse(record, answer: dict, names: list) -> ParseResult:
    """What an app reads in one answer: its tool_calls, or the strict parse of its content when it has none."""
    calls = answer.get("tool_calls") or []
    if calls:
        read = [ToolCall(c.get("name"), arguments_object(c.get("arguments")) or {}) for c in calls]
        return ParseResult(record.family or "", calls=read, content=text(answer.get("content")))
    return judged_parse(families.parse(record.family, text(answer.get("content")), prompt_tail(record)), names)


def verdict(record, answer: dict | None, scenario) -> dict:
    """{"due", "right", "errored", "left_in_content"} of one answer to the scenario's opening."""
    answer = answer or {}
    expect = scenario.turns[0].expect
    # Errored and left in content as the BFCL rows count them (judging.answer_view).
    view = answer_view(record, answer, scenario.tool_schemas())
    errored = view["errored"]
    names = [t.name for t in scenario.tools]
    parse = app_parse(record, answer, names) if not errored else ParseResult(record.family or "")
    first = first_reply_verdicts(expect, parse, names)
    # A call the strict parser reads in the content is no call to an app: only returned tool_calls are right.
    returned = bool(answer.get("tool_calls"))
    right = bool(first["right_tool"]) and not errored and (returned or expect.expects_call is not True)
    if right and expect.tool and expect.arguments is not None:
        right = arguments_match(parse.calls[0].arguments, expect.arguments)
    return {"due": expect.expects_call, "right": right, "errored": errored, "left_in_content": view["left_in_content"]}


def section(records: list, scenarios: dict, warnings: list) -> list:
    """The page's "Scenario openings" section: per model × runtime × tool_choice × streamed, the answers judged."""
    rows, stale = defaultdict(list), 0
    for r in records:
        name = r.case["id"][len(SCENARIO) + 1:]
        scenario = scenarios.get(name)
        if scenario is None or scenario.hash != r.case["hash"]:
            stale += 1
            continue
        for streamed, answer in ((False, r.plain), (True, r.stream)):
            setup = served_setup(r, streamed)
            rows[(r.model["id"], r.runtime, r.tool_choice != "auto", streamed, setup)].append(
                (r, verdict(r, answer, scenario)))
    if stale:
        warnings.append(f"deployment: {stale} scenario-opening record(s) of a scenario changed since, left out (run "
                        "harness deployment again)")
    if not rows:
        return []
    lines = ["## Scenario openings", "",
             "Each shipped YAML scenario's opening turn (scenarios/*.yaml: system message, history, first user "
             "message, tools) asked as the BFCL cases are, judged by the scenario's expectation of that turn on "
             "what an app receives (harness/suites/deployment/openings.py). *Right, a call due*: the first "
             "returned call is the expected tool with the expected arguments; *right, no call due*: no call "
             "returned and none attempted in the content. k/n, percent, Wilson 95% interval; `required` is asked "
             "only where a call is due.", "",
             "| " + " | ".join(COLUMNS) + " |", "|---|---|---|---|---|---|"]
    for (model, *_, setup), answers in sorted(rows.items(), key=lambda kv: kv[0][:4]):
        due = [v["right"] for _, v in answers if v["due"] is True]
        none_due = [v["right"] for _, v in answers if v["due"] is False]
        lines.append(f"| {model} | {setup} | {rate_cell(due)} | {rate_cell(none_due)} | "
                     f"{rate_cell([v['left_in_content'] for _, v in answers])} | "
                     f"{rate_cell([v['errored'] for _, v in answers])} |")
    labelled = defaultdict(int)
    for r in {id(r): r for answers in rows.values() for r, _ in answers}.values():
        for head in {label_head(x) for x in r.labels}:
            labelled[head] += 1
    lines += ["", "The runtime's labels on these records: " + ", ".join(
        f"`{k}` {v}" for k, v in sorted(labelled.items())) + ".", ""]
    return lines
