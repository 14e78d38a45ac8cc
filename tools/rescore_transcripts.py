#!/usr/bin/env python
"""Maintainer tool: make the verdicts stored in the committed sample records (results/transcripts/*.jsonl and
results/bfcl/*.jsonl) what current scoring gives, offline, from the replies the records hold.

    python tools/rescore_transcripts.py          # rewrite the records whose stored verdicts differ
    python tools/rescore_transcripts.py --check  # exit 1 when a stored verdict differs from current scoring

A run stores what scoring said then (`recorded_verdicts`; older records: `verdicts`). Nothing reads that as the
verdict: every report and `harness score` score the replies again. But a reader of the file sees it, so a
stored verdict that current scoring contradicts is stale. This tool replaces only that block, with what
harness.evaluation.scoring.score_sample gives now (as a run writes it), and records its run inside it:
`"rescored": {"by": this tool, "harness": the version, "on": the date, "run_passed": the all-checks verdict the
run itself stored}`. Everything else in the line stays byte for byte: the replies, the parses, the steps. A file
whose lines would not come back byte for byte from their JSON is refused, never rewritten. Records of a scenario
or BFCL case that has since changed are left as they are (they are stale as a whole and scored by nothing).
"""

from __future__ import annotations

import datetime
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness import __version__  # noqa: E402
from harness.suites.bfcl.cases import WithCases  # noqa: E402
from harness.storage.records import SampleRecord  # noqa: E402
from harness.storage.records.samples import RECORDED_VERDICTS  # noqa: E402
from harness.evaluation.scenario_files import load_scenarios  # noqa: E402
from harness.evaluation.scoring import score_sample  # noqa: E402
from harness.storage.transcript_writer import encode_line  # noqa: E402

FOLDERS = ("transcripts", "bfcl")
TOOL = "tools/rescore_transcripts.py"
RESCORED = "rescored"
# The stored names of the block, the current one first (harness.storage.records.samples reads either).
FIELDS = (RECORDED_VERDICTS, "verdicts")


def scenario_lookup(scenarios_dir: Path | None = None) -> WithCases:
    return WithCases({s.name: s for s in load_scenarios(scenarios_dir)})


def _plain(value):
    """A verdict as its JSON reads back (tuples as lists), so a stored block and a fresh one compare alike."""
    return json.loads(json.dumps(value))


def stored_field(raw: dict) -> str | None:
    return next((name for name in FIELDS if isinstance(raw.get(name), dict)), None)


def contradicts(stored, now) -> bool:
    """Whether a stored verdict block says anything current scoring does not: a value it holds that differs (per
    sample and per turn), or a verdict scoring no longer gives. A verdict added to scoring since the run (a key
    the block lacks) contradicts nothing."""
    if isinstance(stored, dict) and isinstance(now, dict):
        return any(key not in now or contradicts(value, now[key]) for key, value in stored.items()
                   if key != RESCORED)
    if isinstance(stored, list) and isinstance(now, list) and any(isinstance(x, dict) for x in stored + now):
        return len(stored) != len(now) or any(contradicts(a, b) for a, b in zip(stored, now))
    return stored != now


def disagreement(raw: dict, scenarios) -> tuple:
    """(the field holding the stored verdicts, the verdicts scoring gives now) of a sample record whose stored
    verdicts current scoring contradicts; (None, None) when it does not, or there is nothing to compare (no
    stored block; a scenario or case that changed since)."""
    name = stored_field(raw)
    if raw.get("kind") != "sample" or name is None:
        return None, None
    record = SampleRecord.from_json(raw)
    scenario = scenarios.get(record.scenario.name)
    if scenario is None or scenario.hash != record.scenario.hash:
        return None, None
    now = _plain(score_sample(scenario, record))
    return (name, now) if contradicts(raw[name], now) else (None, None)


def rescore(path: Path, scenarios, today: str) -> tuple:
    """(the file's new bytes, how many records were rescored). Raises SystemExit on a line that does not come
    back byte for byte from its JSON: rewriting it would change more than its verdicts."""
    lines = path.read_bytes().splitlines(keepends=True)
    out, changed = [], 0
    for number, line in enumerate(lines, 1):
        raw = json.loads(line)
        name, now = disagreement(raw, scenarios)
        if name is None:
            out.append(line)
            continue
        if encode_line(raw) != line:
            raise SystemExit(f"{path}:{number}: the record does not read back byte for byte; not rewritten")
        before = raw[name]
        run_passed = (before.get(RESCORED) or {}).get("run_passed", before.get("passed"))
        raw[name] = {**now, RESCORED: {"by": TOOL, "harness": __version__, "on": today, "run_passed": run_passed}}
        new = encode_line(raw)
        # Only the verdict block moved: every other field, the replies first, is what it was.
        assert {k: v for k, v in json.loads(new).items() if k != name} == {
            k: v for k, v in json.loads(line).items() if k != name}
        out.append(new)
        changed += 1
    return b"".join(out), changed


def files(results: Path) -> list:
    return [p for folder in FOLDERS for p in sorted((results / folder).glob("*.jsonl"))]


def main(argv: list) -> int:
    results = ROOT / "results"
    scenarios, today = scenario_lookup(), datetime.datetime.now(datetime.UTC).date().isoformat()
    stale = 0
    for path in files(results):
        text, changed = rescore(path, scenarios, today)
        stale += changed
        print(f"{path.relative_to(ROOT)}: {changed} record(s) rescored")
        if changed and "--check" not in argv:
            scratch = path.with_name(path.name + ".tmp")
            scratch.write_bytes(text)
            os.replace(scratch, path)
    if "--check" in argv and stale:
        print(f"out of date: run python {TOOL}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
