"""`harness report` over a transcripts folder with one good record and broken ones of every kind: each broken
record is skipped and named file:line with the reason, every report is still written, the exit status is 1."""

import json
import os
import subprocess
import sys

from harness.evaluation.scenario_files import load_scenarios
from harness.pins.sources_file import write_sources
from harness.storage.transcripts import read_transcript
from tests.pins.test_fetch import ROOT
from tests.reports.test_report import ARITHMETIC_SCENARIO, sample

MODEL_RECORD = {"kind": "model", "model": {"id": "m1", "sha256": "f" * 64, "file": "m1.gguf"},
                "template": {"source": "gguf", "sha256": "0" * 64, "text": "{{ x }}", "pinned_id": None},
                "family": "hermes", "detection": {"reason": "test"}, "template_kwargs": {}}


def broken_lines(good: dict) -> list:
    """(line text, what the message must say) for each kind of damage."""
    no_scenario = {k: v for k, v in good.items() if k != "scenario"}
    return [
        ('{"kind": "sample", "model": ', "unreadable record skipped"),                      # bad JSON mid-file
        ("[1, 2, 3]", "not a JSON object but list"),
        (json.dumps({**good, "kind": "sampel"}), "unknown kind 'sampel'"),
        (json.dumps(no_scenario), "missing field 'scenario'"),
        (json.dumps({**good, "sample": "zero"}), "field 'sample' is str"),
        (json.dumps({**good, "sample": 5, "model": {"id": 7}}), "field 'model.id' is int"),
        (json.dumps({**good, "sample": 6, "seconds": "slow"}), "field 'seconds' is str"),
        (json.dumps({**good, "sample": 7, "seed": 7, "turns": ["not a turn"]}), "field 'turns[0]' is str"),
        (json.dumps({**good, "sample": 8, "seed": 8,
                     "turns": [{"user": "x", "steps": [{"reply": 42}]}]}),
         "field 'turns[0].steps[0].reply' is int"),
        (json.dumps({**MODEL_RECORD, "template": "gguf"}), "field 'template' is str"),
        # Fields the reports print or walk, of the wrong type: that record skipped, named by its field.
        (json.dumps({**MODEL_RECORD, "bos_token": ["<s>"]}), "field 'bos_token' is list"),
        (json.dumps({**MODEL_RECORD, "detection": {"reason": 5}}), "field 'detection.reason' is int"),
        (json.dumps({**good, "sample": 9, "seed": 9, "turns": [{"user": "x", "steps": [
            {**good["turns"][0]["steps"][0], "fallback_from": "native"}]}]}),
         "field 'turns[0].steps[0].fallback_from' is str"),
        (json.dumps({**good, "sample": 10, "seed": 10, "turns": [{"user": "x", "steps": [
            {**good["turns"][0]["steps"][0], "calls": [{"name": "get_time", "errors": 3}]}]}]}),
         "field 'turns[0].steps[0].calls[0].errors' is int"),
        # A family this harness has no parser for: that record is skipped, not every report (exit 2).
        (json.dumps({**good, "sample": 11, "seed": 11, "family": "no-such-family"}),
         "field 'family' names an unknown family 'no-such-family'"),
    ]


def make_tree(tmp_path):
    root = tmp_path / "root"
    (root / "scenarios").mkdir(parents=True)
    (root / "scenarios" / "arithmetic.yaml").write_text(ARITHMETIC_SCENARIO)
    (root / "templates").mkdir()
    write_sources({"version": 1, "templates": [], "models": []}, root / "sources.json")
    (scenario,) = load_scenarios(root / "scenarios")
    good = {"schema": 1, **sample(scenario, 0, "17 times 3 is 51.")}
    broken = broken_lines(good)
    lines = [json.dumps({"schema": 1, **MODEL_RECORD}), json.dumps(good)] + [text for text, _ in broken]
    transcripts = root / "results" / "transcripts"
    transcripts.mkdir(parents=True)
    (transcripts / "m1.jsonl").write_text("\n".join(lines) + "\n")
    return root, transcripts / "m1.jsonl", broken


def test_each_broken_record_is_skipped_named_and_fails_the_command(tmp_path):
    root, path, broken = make_tree(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HARNESS_"))}
    env.update(HARNESS_ROOT=str(root), PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "harness", "report", "--no-plot"], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    for number, (_, why) in enumerate(broken, start=3):
        line = next((m for m in done.stderr.splitlines() if f"{path}:{number}: " in m), None)
        assert line is not None and why in line, (number, why, done.stderr)
    assert f"{len(broken)} malformed transcript record(s) skipped" in done.stderr
    report = (root / "results" / "m1.md").read_text()
    assert "1/1 100%" in report                   # the one good sample, alone
    assert (root / "results" / "summary.md").is_file()


def test_resume_reads_past_broken_records_too(tmp_path):
    _, path, broken = make_tree(tmp_path)
    transcript = read_transcript(path)
    # Only the unknown family is found when scored (the step logs are checked as they are read).
    assert [r.KIND for r in transcript.records] == ["model", "sample", "sample"]
    assert len(transcript.done()) == 2 and len(transcript.skipped) == len(broken) - 1
