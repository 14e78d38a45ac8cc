"""`harness score PATH... --json`: every recorded sample's verdicts, from the transcript alone, the same verdicts
the report tables count."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.storage.results import ResultsDir
from harness.suites.bfcl.judging import read_outcomes
from harness.reports.tables import collect

ROOT = Path(__file__).resolve().parents[2]
TRANSCRIPT = ROOT / "results" / "transcripts" / "smollm2-135m-instruct-q4_1.jsonl"


def harness(*args):
    return subprocess.run([sys.executable, "-m", "harness", *map(str, args)], capture_output=True, text=True)


def test_json_gives_every_sample_the_verdicts_the_tables_count(tmp_path):
    done = harness("score", TRANSCRIPT, "--json")
    assert done.returncode == 0, done.stderr
    entries = json.loads(done.stdout)
    records = [json.loads(line) for line in TRANSCRIPT.read_text(encoding="utf-8").splitlines()]
    assert len(entries) == sum(r["kind"] == "sample" for r in records)
    for entry in entries:
        assert set(entry) == {"model", "scenario", "mode", "seed", "sample", "call_due", "verdicts", "deviations",
                              "findings"}
        assert entry["verdicts"]["all_checks"] in (True, False)
        assert ("first_parsed" in entry["verdicts"]) == (entry["mode"] == "fallback")
    # The report's rows for the same transcript hold the same verdicts, sample by sample.
    (tmp_path / "transcripts").mkdir()
    (tmp_path / "transcripts" / TRANSCRIPT.name).write_bytes(TRANSCRIPT.read_bytes())
    rows = collect(tmp_path).samples
    rows = {(r["scenario"], r["mode"], r["sample"]): r for r in rows[~rows["replayed"]].to_dict("records")}
    for entry in entries:
        row = rows[(entry["scenario"], entry["mode"], entry["sample"])]
        assert entry["verdicts"]["all_checks"] == row["passed"] and entry["findings"] == row["findings"]
        assert entry["verdicts"]["intended_tool"] == row["intended_tool"]
    greeting = next(e for e in entries if (e["scenario"], e["mode"], e["sample"]) == ("greeting", "native", 4))
    assert greeting["call_due"] is False and greeting["verdicts"]["all_checks"] is True


def test_a_stale_record_is_listed_without_verdicts_and_a_broken_one_fails(tmp_path):
    line = next(line for line in TRANSCRIPT.read_text(encoding="utf-8").splitlines() if '"kind":"sample"' in line)
    stale = json.loads(line)
    stale["scenario"]["hash"] = "0" * 64  # recorded on a conversation the scenario no longer holds
    path = tmp_path / "m.jsonl"
    path.write_text(json.dumps(stale) + "\n", encoding="utf-8")
    done = harness("score", tmp_path, "--json")
    assert done.returncode == 0, done.stderr
    (entry,) = json.loads(done.stdout)
    assert entry["stale"] is True and entry["verdicts"] is None
    path.write_text(json.dumps(stale) + "\n" + '{"kind": "sample"}\n', encoding="utf-8")
    broken = harness("score", path)
    assert broken.returncode == 1 and "malformed record" in broken.stderr and ": stale" in broken.stdout


def test_a_missing_path_is_a_usage_error():
    done = harness("score", ROOT / "results" / "no-such.jsonl")
    assert done.returncode == 2 and "no such file or folder" in done.stderr and "Traceback" not in done.stderr


def test_a_sample_that_was_never_generated_is_not_scored(tmp_path):
    # A dead server's sample: recorded as evidence, but no reply exists to judge, so no verdict and no table row.
    line = next(line for line in TRANSCRIPT.read_text(encoding="utf-8").splitlines() if '"kind":"sample"' in line)
    failed = json.loads(line)
    failed["error"] = "generate: connection refused"
    (tmp_path / "transcripts").mkdir()
    (tmp_path / "transcripts" / "m.jsonl").write_text(json.dumps(failed) + "\n", encoding="utf-8")
    done = harness("score", tmp_path / "transcripts", "--json")
    assert done.returncode == 0, done.stderr
    (entry,) = json.loads(done.stdout)
    assert entry["not_generated"] is True and entry["verdicts"] is None
    assert "not generated, not scored" in done.stderr
    assert len(collect(tmp_path).samples) == 0


def test_a_bfcl_record_is_scored_against_its_case_not_called_stale():
    # `harness run --suite bfcl` records are run on cases of the pinned BFCL suite, which no scenario file holds.
    bfcl = ROOT / "results" / "bfcl" / "qwen2.5-coder-1.5b-instruct-q4_k_m.jsonl"
    done = harness("score", bfcl, "--json")
    assert done.returncode == 0, done.stderr
    entries = json.loads(done.stdout)
    records = [json.loads(line) for line in bfcl.read_text(encoding="utf-8").splitlines()]
    assert len(entries) == sum(r["kind"] == "sample" for r in records)
    # Native records are scored against their case; a grammar or fallback record may be stale only by its setup
    # (written under an older grammar or fallback rule, harness.evaluation.setups), never by its case.
    native = [e for e in entries if e["mode"] == "native"]
    assert native and not [e for e in native if e.get("stale") or e["verdicts"] is None]
    scored = [e for e in entries if not e.get("stale")]
    # The verdicts are the ones bfcl.md counts as our checks (harness.suites.bfcl.outcome).
    outcomes, _, _ = read_outcomes(ResultsDir(ROOT / "results"), [])
    ours = {(o.case, o.mode): o for o in outcomes if o.model == "qwen2.5-coder-1.5b-instruct-q4_k_m"}
    assert len(ours) == len(scored)
    for entry in scored:
        outcome = ours[(entry["scenario"].removeprefix("bfcl-"), entry["mode"])]
        assert entry["call_due"] is outcome.call_due
        assert (entry["verdicts"]["parsed"], entry["verdicts"]["right_tool"]) == (outcome.parsed, outcome.right_tool)
    text = harness("score", bfcl)
    native_lines = [line for line in text.stdout.splitlines() if "  native  " in line]
    assert text.returncode == 0 and native_lines and not [line for line in native_lines if line.endswith(": stale")]


def _stale_copy(own: Path, other: Path) -> None:
    """A copy made before a sample of it was asked again: there it is the failed first try, in `own` the sample
    asked again (the key is the same: the original is the one to count)."""
    lines = own.read_text(encoding="utf-8").splitlines()
    first = next(i for i, line in enumerate(lines) if '"kind":"sample"' in line)
    failed = json.loads(lines[first])
    failed["error"] = "generate: the server went away"
    lines[first] = json.dumps(failed)
    other.write_text("\n".join(lines) + "\n", encoding="utf-8")


BESIDE = {
    "symlink": lambda own, other: other.symlink_to(own.name),
    "hard link": lambda own, other: os.link(own, other),
    "copy": lambda own, other: shutil.copyfile(own, other),
    "older copy": _stale_copy,
}


@pytest.mark.parametrize("make", BESIDE.values(), ids=BESIDE.keys())
def test_a_copy_or_a_link_beside_a_transcript_counts_nothing_twice(tmp_path, make):
    """`model (1).jsonl` beside `model.jsonl` (it sorts first): score and the report tables count each sample
    once, from the file harness run writes it to, and a warning names both files."""
    folder = tmp_path / "transcripts"
    folder.mkdir()
    own, other = folder / TRANSCRIPT.name, folder / f"{TRANSCRIPT.stem} (1).jsonl"
    own.write_bytes(TRANSCRIPT.read_bytes())
    make(own, other)
    samples = sum('"kind":"sample"' in line for line in TRANSCRIPT.read_text(encoding="utf-8").splitlines())
    done = harness("score", folder, "--json")
    assert done.returncode == 0, done.stderr
    entries = json.loads(done.stdout)
    assert len(entries) == samples and not any(e.get("not_generated") for e in entries)
    assert str(own) in done.stderr and str(other) in done.stderr, done.stderr
    rows = collect(tmp_path).samples
    assert (~rows["replayed"]).sum() == samples          # a not-generated sample (the older copy's) has no row
