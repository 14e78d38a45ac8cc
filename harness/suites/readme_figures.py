"""The figures README.md's "What it found" quotes, computed from a results folder by the same code the reports
use, so the README cannot drift from the pages it links: the live samples' rows as summary.md counts them
(harness.reports.tables.collect), conformance.json's summary, the runtime-conformance records and the
deployment records.

In the README each figure stands between markers, `<!-- fig KEY -->VALUE<!-- /fig -->`; `fill` rewrites the
values (tools/readme_figures.py), and `problems` names a value that differs from what the folder gives, a
marker whose key is unknown, and any number in the section outside a marker (a figure nobody checks).
Each finding also rests on a claim its prose makes (no violation, no call read); when the data no longer
supports it, computing the figures fails and says which finding to rewrite."""

from __future__ import annotations

import json
import re
from collections import Counter

from harness.core.errors import ReadmeFiguresError
from harness.evaluation.judging import label_head
from harness.storage.results import ResultsDir
from harness.suites.runtime_conformance import SUITE as RUNTIME_CONFORMANCE
from harness.reports.rates import counts

SECTION = "## What it found"
MARKER = re.compile(r"<!-- fig (?P<key>[a-z0-9_.-]+) -->(?P<value>.*?)<!-- /fig -->", re.S)
# The model finding 1 is about: a small model that chooses the right tool and writes no call the parser reads.
FINDING_MODEL = "qwen2.5-coder-0.5b-instruct-q4_k_m"
# Finding 3's runtimes: the two servers built on the same llama.cpp.
IN_PROCESS_SERVER, LLAMA_SERVER = "llama-cpp-python", "llama-server"
# A number outside a marker: digits (not an ordered list's "1. ") or a number written as a word.
NUMBER = re.compile(r"\d(?:[\d.,/]*\d)?|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|both|twice|half|"
                    r"dozen|hundred|thousand)\b", re.I)
LIST_ITEM = re.compile(r"^\d+\. ", re.M)


def _ratio(values, keys=None) -> str:
    k, n, _, _ = counts(values, keys)
    return f"{k}/{n}"


def _ids(rows: list) -> str:
    return ", ".join(f"`{r['id']}`" for r in sorted(rows, key=lambda r: r["id"]))


def _claim(holds: bool, finding: int, what: str) -> None:
    if not holds:
        raise ReadmeFiguresError(f"README.md's finding {finding} no longer holds ({what}): rewrite its prose, then "
                                 "run python tools/readme_figures.py")


def sample_figures(results: ResultsDir) -> dict:
    """Finding 1: the model's native, fallback and all-mode counts, and every row's call-due samples."""
    from harness.reports.tables import collect   # pandas and the parsers load only when the figures are asked

    frame = collect(results, replays=False).samples
    if frame.empty:
        raise ReadmeFiguresError(f"{results.transcripts}: no live samples to quote")
    live = frame[~frame["replayed"]]
    model = live[live["model"] == FINDING_MODEL]
    if model.empty:
        raise ReadmeFiguresError(f"{results.transcripts}: no samples of {FINDING_MODEL}, the model finding 1 is about")
    due = model[model["call_due"]]
    native, fallback = due[due["mode"] == "native"], due[due["mode"] == "fallback"]
    named = Counter(name for names in model["deviations"] for name in names)
    whole = live[live["call_due"]]
    out = {"model": f"`{FINDING_MODEL}`", "native-intended": _ratio(native["intended_tool"]),
           "native-parsed": _ratio(native["parsed"]), "fenced-json": str(named["fenced-json"]),
           "bare-json": str(named["bare-json"]), "modes": str(model["mode"].nunique()),
           "fallback-parsed": _ratio(fallback["parsed"]),
           "fallback-expected-args": _ratio(fallback["expected_arguments"])}
    passed, total, _, _ = counts(whole["passed"])
    out.update({"all-checks-passed": f"{passed:,}", "call-due-samples": f"{total:,}"})
    _claim(counts(native["intended_tool"])[0] > 0 and counts(native["parsed"])[0] == 0, 1,
           "the model chooses the tool natively and writes no call the strict parser reads")
    return out


def conformance_figures(results: ResultsDir) -> dict:
    """Finding 2: conformance.json, as `harness conformance` wrote it."""
    path = results.conformance[1]
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        summary, templates = data["summary"], data["templates"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ReadmeFiguresError(f"{path}: not the conformance report `harness conformance` writes ({exc})") from None
    by = lambda status: [t for t in templates if t.get("status") == status]  # noqa: E731
    in_prompt = [t for t in by("detected")
                 if any(f.get("name") == "tools-in-system-prompt" for f in t.get("findings") or [])]
    _claim(summary["matrix_violations"] == 0, 2, "no strict parser reads another family's text")
    return {"violations": str(summary["matrix_violations"]), "matrix-cases": f"{summary['matrix_cases']:,}",
            "templates": str(summary["templates"]), "detected": str(summary["detected"]),
            "tools-in-prompt": _ids(in_prompt), "declared": str(summary["declared"]), "declared-ids": _ids(by("declared")),
            "no-tools": str(summary["no_tools"]), "walls": str(summary["walls"]), "wall-ids": _ids(by("wall"))}


def runtime_figures(results: ResultsDir) -> dict:
    """Finding 3: llama-cpp-python's server and llama-server on the same corpus, request by request."""
    warnings: list = []
    records = RUNTIME_CONFORMANCE.read_all(results.root, warnings)
    runtimes = {}
    for server in (IN_PROCESS_SERVER, LLAMA_SERVER):
        names = sorted({r.runtime for r in records if r.server == server})
        if len(names) != 1:
            raise ReadmeFiguresError(f"{results.root / RUNTIME_CONFORMANCE.folder}: finding 3 quotes one {server} "
                                     f"runtime; the records hold {len(names)} ({', '.join(names) or 'none'})")
        runtimes[server] = [r for r in records if r.runtime == names[0]]
    labelled = {server: Counter(h for r in mine for h in {label_head(label) for label in r.labels})
                for server, mine in runtimes.items()}
    requests = {len(mine) for mine in runtimes.values()}
    templates = {len({r.template["id"] for r in mine}) for mine in runtimes.values()}
    _claim(len(requests) == 1 and len(templates) == 1, 3, "both runtimes were asked the same requests")
    left, forgave = labelled[IN_PROCESS_SERVER]["call-left-in-content"], labelled[LLAMA_SERVER]["runtime-forgave"]
    _claim(left > 0 and forgave > 0, 3, "the two runtimes read the same replies differently")
    return {"requests": f"{requests.pop():,}", "rc-templates": str(templates.pop()),
            "in-process-runtime": f"`{runtimes[IN_PROCESS_SERVER][0].runtime}`", "call-left-in-content": f"{left:,}",
            "llama-server-runtime": f"`{runtimes[LLAMA_SERVER][0].runtime}`",
            "llama-server-agree": f"{labelled[LLAMA_SERVER]['agree']:,}", "runtime-forgave": f"{forgave:,}"}


def deployment_figures(results: ResultsDir) -> dict:
    """Finding 4: finding 1's model served, asked the BFCL cases as an app asks them (harness deployment). Per
    runtime, tool_choice and side (non-streamed, streamed), the answers given and those carrying tool_calls,
    counted from the latest record of each question (its answers and labels; no checker is needed): under auto
    how few non-streamed answers carry calls; under required the runtimes that return calls in most answers
    (forcing them) and how often the others return none; and the runtimes whose streamed answers carry calls in
    most records where their non-streamed ones do not (reading the model's own text as a call in the stream
    alone)."""
    from harness.suites.deployment.judging import answered
    from harness.suites.deployment.openings import is_opening
    from harness.suites.deployment.page import read_records

    records = [r for r in read_records(results, []) if r.model["id"] == FINDING_MODEL and not is_opening(r)]
    tally: dict = {}      # (tool_choice, side) -> runtime -> Counter
    for r in records:
        for side in ("plain", "stream"):
            answer = getattr(r, side)
            if answered(answer):
                c = tally.setdefault((r.tool_choice, side), {}).setdefault(r.runtime, Counter())
                c["answered"] += 1
                c["calls"] += bool(answer.get("tool_calls"))
                c["left"] += side == "plain" and any(label_head(x) == "call-left-in-content" for x in r.labels)
    total = lambda rows, key: sum(c[key] for c in rows.values())  # noqa: E731
    most = lambda c: 2 * c["calls"] > c["answered"]  # noqa: E731
    auto, required = tally.get(("auto", "plain"), {}), tally.get(("required", "plain"), {})
    forcing = sorted(runtime for runtime, c in required.items() if most(c))
    others = {runtime: c for runtime, c in required.items() if runtime not in forcing}
    streamed = {runtime: tally.get(("auto", "stream"), {}).get(runtime, Counter())
                + tally.get(("required", "stream"), {}).get(runtime, Counter()) for runtime in auto}
    in_stream = sorted(runtime for runtime, c in streamed.items() if most(c) and runtime not in forcing
                       and not most(auto[runtime] + required.get(runtime, Counter())))
    _claim(bool(auto) and 20 * total(auto, "calls") < total(auto, "answered"), 4,
           "served under tool_choice auto, the model's non-streamed answers almost never carry tool_calls")
    _claim(bool(forcing) and bool(others) and 10 * total(others, "calls") <= total(others, "answered"), 4,
           "under required, some runtime returns calls in most answers and the others return none in nine of ten")
    _claim(bool(in_stream), 4, "some runtime returns calls in most streamed answers and not in the non-streamed")
    forced = {runtime: required[runtime] for runtime in forcing}
    stream_only = {runtime: streamed[runtime] for runtime in in_stream}
    names = lambda runtimes: ", ".join(f"`{runtime}`" for runtime in runtimes)  # noqa: E731
    ratio = lambda rows, key: f"{total(rows, key):,}/{total(rows, 'answered'):,}"  # noqa: E731
    return {"deploy-model": f"`{FINDING_MODEL}`", "deploy-auto-calls": ratio(auto, "calls"),
            "deploy-runtimes": str(len(auto)), "deploy-auto-left": f"{total(auto, 'left'):,}",
            "deploy-forcing": names(forcing), "deploy-forced": ratio(forced, "calls"),
            "deploy-others": str(len(others)),
            "deploy-ignored": f"{total(others, 'answered') - total(others, 'calls'):,}/{total(others, 'answered'):,}",
            "deploy-stream-runtimes": names(in_stream), "deploy-stream-calls": ratio(stream_only, "calls")}


def figures(results_dir=None) -> dict:
    """Every figure README's findings quote, by marker key, from the folder (default: the project's results/)."""
    results = ResultsDir.at(results_dir)
    return {**sample_figures(results), **conformance_figures(results), **runtime_figures(results),
            **deployment_figures(results)}


def section_bounds(text: str) -> tuple:
    """(start, end) of README's "What it found" section: from its heading to the next heading of its level."""
    start = text.find("\n" + SECTION + "\n")
    if start < 0:
        raise ReadmeFiguresError(f"README.md has no {SECTION!r} section")
    end = text.find("\n## ", start + 1)
    return start + 1, (end + 1 if end >= 0 else len(text))


def fill(text: str, values: dict) -> str:
    """README's text with every marker of the section holding the figure of its key."""
    start, end = section_bounds(text)
    unknown = sorted({m["key"] for m in MARKER.finditer(text, start, end)} - set(values))
    if unknown:
        raise ReadmeFiguresError(f"README.md: unknown figure marker(s) {', '.join(unknown)} (known: "
                                 f"{', '.join(values)})")
    part = MARKER.sub(lambda m: f"<!-- fig {m['key']} -->{values[m['key']]}<!-- /fig -->", text[start:end])
    return text[:start] + part + text[end:]


def problems(text: str, values: dict) -> list:
    """What is wrong with README's figures against the folder's: a value that differs, an unknown key, a number
    outside a marker. Empty when every figure of the section is checked and right."""
    start, end = section_bounds(text)
    part = text[start:end]
    found = []
    for m in MARKER.finditer(part):
        if m["key"] not in values:
            found.append(f"unknown figure {m['key']!r}")
        elif m["value"] != values[m["key"]]:
            found.append(f"{m['key']}: README says {m['value']!r}, results/ gives {values[m['key']]!r}")
    bare = LIST_ITEM.sub("", re.sub(r"<!--.*?-->", "", MARKER.sub("", part), flags=re.S))
    for line in bare.splitlines():
        for number in NUMBER.finditer(line):
            found.append(f"a number outside a figure marker: {number.group()!r} in {line.strip()[:80]!r}")
    return found
