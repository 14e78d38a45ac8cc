"""The replays the deployment page lacks: for each model served here and each runtime of the runtime table, the
committed in-process replies (BFCL on the model's deployment cases, each scenario opening's distinct first
replies) that have no replay record on that runtime, with the command that replays them, or why none is made (vLLM
starts no tool parser for a template of no family, and refuses every request with tools under `auto` without
one, which the model's served vLLM rows already say)."""

from __future__ import annotations

from collections import Counter

from harness.backends import runtimes
from harness.suites.deployment.cases import SCENARIO
from harness.suites.deployment.replays import split_name
from harness.suites.runtime_conformance.hf_serving import how_served


def committed_keys(model: str, cases: set, outcomes: list, current: dict) -> set:
    """(case id, mode, reply) of every committed reply a replay of the model asks: its BFCL replies on `cases`
    (outcomes: bfcl.judging.read_outcomes) and its scenario openings' first replies (current:
    replays.scenario_first_replies), each distinct text once."""
    keys = {(o.case, o.mode, o.reply) for o in outcomes
            if o.model == model and o.case in cases and not o.errored and o.reply}
    keys |= {(f"{SCENARIO}-{name}", mode, reply) for (m, name, mode), texts in current.items() if m == model
             for reply in texts}
    return keys


def command(server: str, model: str, per_category: int) -> str:
    if runtimes.get(server).startable:
        return f"harness deployment --replay --server {server} --model {model} --cases {per_category}"
    return f".venv/bin/python scripts/hf_runtime_conformance.py --server {server} --replay {model} " \
           f"--cases {per_category}"


def gap_lines(served: list, outcomes: list, replayed: list, current: dict) -> list:
    """A line per model × runtime whose replays are not made, or fewer than the model's most replayed runtime's
    (a run not finished; a reply the model's template refuses to render is replayed nowhere, so the widest
    runtime is the measure, not every committed reply). served: the deployment records (their cases, and the
    per-category count a replay draws); replayed: replays.read_replays."""
    lines = []
    for model in sorted({r.model["id"] for r in served}):
        mine = [r for r in served if r.model["id"] == model and r.tool_choice == "auto"]
        per_category = max(max(Counter(r.case["category"] for r in mine if r.runtime == runtime).values())
                           for runtime in {r.runtime for r in mine})
        wanted = committed_keys(model, {r.case["id"] for r in mine}, outcomes, current)
        if not wanted:
            continue
        got = {name: wanted & {(split_name(r.case["name"])[1], split_name(r.case["name"])[2], r.reply)
                               for r in replayed if r.runtime == runtimes.get(name).record_name
                               and split_name(r.case["name"])[0] == model}
               for name in runtimes.RUNTIMES}
        widest = max(len(keys) for keys in got.values())
        family, template = mine[0].family, mine[0].template["id"]
        for name, keys in got.items():
            if len(keys) == widest and widest:
                continue
            _, why = (None, None) if runtimes.get(name).startable else how_served(name, family, template)
            if why:
                why = why if family else (f"its template has no tool-call family, so there is no "
                                          f"{runtimes.get(name).reader_project} tool parser to start it with")
                lines.append(f"- {model} on {name}: not replayed: {why}; the model's served rows there show what "
                             "an app gets.")
                continue
            said = f"{len(keys)} of the {widest} replies its widest runtime replayed" if keys else "not replayed"
            lines.append(f"- {model} on {name}: {said}; `{command(name, model, per_category)}`.")
    return lines
