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
from harness.reports.tables import mode_order
from harness.suites.deployment.cases import SCENARIO
from harness.suites.deployment.judging import answer_view, prompt_tail
from harness.suites.deployment.records import served_setup
from harness.suites.deployment.replays import REWRITTEN, split_name

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


def replay_rows(replayed: list, scenarios: dict, current: dict, warnings: list) -> dict:
    """(model, runtime, mode) -> ([(verdict, (scenario, reply))], samples whose reply the runtime's grammar
    rewrote) of the scenario openings' replays (replays.py): each committed sample's first reply (current:
    replays.scenario_first_replies) judged by what the runtime returned for its text, non-streamed; a text
    several samples wrote is one replay that counts once for each of them (the page's cells give the distinct
    texts beside, their interval over those). A reply the runtime's grammar rewrote is left out (what came back
    is not the runtime's reading of it) and counted per row; a replayed text no committed sample writes now is
    left out and counted in a warning."""
    rows, rewritten, stale = defaultdict(list), defaultdict(int), 0
    for r in replayed:
        model, case_id, mode = split_name(r.case["name"])
        if not case_id.startswith(f"{SCENARIO}-"):
            continue
        scenario = scenarios.get(case_id[len(SCENARIO) + 1:])
        samples = current.get((model, scenario.name, mode), {}).get(r.reply, 0) if scenario else 0
        if not samples:
            stale += 1
            continue
        if REWRITTEN in {label_head(x) for x in r.labels}:
            rewritten[(model, r.runtime, mode)] += samples
            continue
        rows[(model, r.runtime, mode)] += [(verdict(r, r.plain, scenario), (scenario.name, r.reply))] * samples
    if stale:
        warnings.append(f"deployment replays: {stale} scenario-opening record(s) of a reply no committed sample "
                        "writes now, left out (scripts/hf_runtime_conformance.py --replay or harness deployment "
                        "--replay drops them when run again)")
    return {key: (rows.get(key, []), rewritten.get(key, 0)) for key in rows.keys() | rewritten.keys()}


def section(records: list, scenarios: dict, warnings: list, replayed: dict | None = None) -> list:
    """The page's "Scenario openings" section: per model × runtime × tool_choice × streamed, the answers judged;
    then the replays of the committed samples' first replies (replayed: replay_rows)."""
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
    if not rows and not replayed:
        return []
    lines = ["## Scenario openings", "",
             "Each shipped YAML scenario's opening turn (scenarios/*.yaml: system message, history, first user "
             "message, tools) asked as the BFCL cases are, judged by the scenario's expectation of that turn on "
             "what an app receives (harness/suites/deployment/openings.py). *Right, a call due*: the first "
             "returned call is the expected tool with the expected arguments; *right, no call due*: no call "
             "returned and none attempted in the content. k/n, percent, Wilson 95% interval; `required` is asked "
             "only where a call is due. The rows *replayed in-process MODE samples' first replies*: the first "
             "reply each committed in-process sample (results/transcripts) wrote to the opening, written by a "
             "scripted model through the runtime under the same request, non-streamed; k/n counts the samples, "
             "and where samples wrote the same text the cell gives the distinct texts beside, the interval over "
             "those (the runtime reads a text the same every time).", "",
             "| " + " | ".join(COLUMNS) + " |", "|---|---|---|---|---|---|"]
    table = []
    for (model, *order, setup), answers in rows.items():
        due = [v["right"] for _, v in answers if v["due"] is True]
        none_due = [v["right"] for _, v in answers if v["due"] is False]
        table.append(((model, 0, *order), f"| {model} | {setup} | {rate_cell(due)} | {rate_cell(none_due)} | "
                      f"{rate_cell([v['left_in_content'] for _, v in answers])} | "
                      f"{rate_cell([v['errored'] for _, v in answers])} |"))
    for (model, runtime, mode), (answers, rewritten) in (replayed or {}).items():
        keys = [key for _, key in answers]
        note = f"; {rewritten} rewritten by its grammar, left out" if rewritten else ""
        due = [(v["right"], k) for v, k in answers if v["due"] is True]
        none_due = [(v["right"], k) for v, k in answers if v["due"] is False]
        table.append(((model, 1, runtime, mode_order(mode)),
                      f"| {model} | {runtime}, auto, replayed in-process {mode} samples' first replies{note} | "
                      f"{_keyed_cell(due)} | {_keyed_cell(none_due)} | "
                      f"{rate_cell([v['left_in_content'] for v, _ in answers], keys)} | "
                      f"{rate_cell([v['errored'] for v, _ in answers], keys)} |"))
    lines += [line for _, line in sorted(table, key=lambda kv: kv[0])]
    lines += served_beside_replays(rows, replayed or {})
    labelled = defaultdict(int)
    for r in {id(r): r for answers in rows.values() for r, _ in answers}.values():
        for head in {label_head(x) for x in r.labels}:
            labelled[head] += 1
    lines += ["", "The runtime's labels on these records: " + ", ".join(
        f"`{k}` {v}" for k, v in sorted(labelled.items())) + ".", ""]
    return lines


def served_beside_replays(rows: dict, replayed: dict) -> list:
    """Per model × runtime with both: the served model's non-streamed auto answer to each opening beside the
    replays of the in-process native samples' first replies to it (replay_rows). Same text, per opening: the
    runtime showed what the served model generated and one of the samples wrote it. Same verdict, per sample: its
    replay is judged right or not as the served answer is; a text several samples wrote counts once for each of
    them, the distinct texts beside. The samples were drawn at the temperature their records carry and the served
    model answers greedily, so their texts part more often than on BFCL's cases, where both are greedy."""
    served = {}
    for (model, runtime, required, streamed, _), answers in rows.items():
        if not required and not streamed:
            served.update({(model, runtime, r.case["id"][len(SCENARIO) + 1:]): (r, v) for r, v in answers})
    lines = []
    for (model, runtime, mode), (answers, _) in sorted(replayed.items()):
        mine = [(v, key) for v, key in answers if (model, runtime, key[0]) in served]
        if mode != "native" or not mine:
            continue
        names = sorted({name for _, (name, _) in mine})
        shown = [((served[(model, runtime, name)][0].plain or {}).get("generated"), name) for name in names]
        texts = [text in {reply for _, (n, reply) in mine if n == name} for text, name in shown
                 if isinstance(text, str)]
        same = [v["right"] == served[(model, runtime, key[0])][1]["right"] for v, key in mine]
        lines.append(f"| {model} | {runtime} | {len(names)} | {rate_cell(texts) if texts else '– (not shown)'} | "
                     f"{rate_cell(same, [key for _, key in mine])} |")
    if not lines:
        return []
    return ["", "The served model beside the replays of its in-process native samples' first replies, per model "
            "× runtime with both: *wrote a sample's reply*, per opening, the runtime showed what the served model "
            "generated and one of the samples wrote that text; *same verdict*, per sample, its replay is judged "
            "right or not as the served answer (auto, not streamed) is. The samples were drawn at the temperature "
            "their records carry (results/transcripts) and the served model answers greedily, so their texts part "
            "more often than on the BFCL cases above, where both are greedy.", "",
            "| model | runtime | openings | served model wrote a sample's first reply | same verdict |",
            "|---|---|---:|---|---|", *lines]


def _keyed_cell(pairs: list) -> str:
    return rate_cell([v for v, _ in pairs], [k for _, k in pairs])
