"""The committed live samples a person judged (hand_judged.yaml): scoring must give every verdict the person
gave. A rule that drifts from what a reader of the raw reply would say fails here, sample by sample."""

import hashlib
import json
from collections import Counter
from pathlib import Path

import pytest
import yaml

from harness.core import constants
from harness.evaluation.scenario_files import load_scenarios
from harness.evaluation.scoring import score_sample
from harness.grammar.plan import DEFAULT_VARIANT, recorded_variant
from harness.storage.transcripts import read_all

JUDGED = yaml.safe_load((Path(__file__).with_name("hand_judged.yaml")).read_text(encoding="utf-8"))["samples"]
SCENARIOS = {s.name: s for s in load_scenarios()}


def replies_digest(record) -> str:
    """Every step's reply and the native attempt a fallback rewrote, in order, as one digest."""
    replies = []
    for turn in record.turns:
        for step in turn.get("steps", []):
            replies.append(step.get("reply"))
            if step.get("fallback_from"):
                replies.append(step["fallback_from"].get("reply"))
    return hashlib.sha256(json.dumps(replies, ensure_ascii=False).encode()).hexdigest()[:16]


@pytest.fixture(scope="module")
def records():
    """(design, model, scenario, mode, sample) -> record: the main folder's samples under the design None (a
    native sample) and the default's, and a design study's under its name (results/designs/<design>/)."""
    out = {}
    folders = {constants.RESULTS_DIR: (None, DEFAULT_VARIANT)}
    for design in {s.get("design") for s in JUDGED} - {None, DEFAULT_VARIANT}:
        folders[constants.RESULTS_DIR / "designs" / design] = (design,)
    for folder, designs in folders.items():
        for transcript in read_all(folder):
            for record in transcript.samples():
                for design in designs:
                    out[(design, record.model.id, record.scenario.name, record.mode, record.sample)] = record
    return out


def test_the_set_spans_models_modes_and_scenarios():
    keys = [tuple(s["key"]) for s in JUDGED]
    # One judgement per sample: a key recurs only under another design (another folder's sample).
    designed = [(s.get("design"), *s["key"]) for s in JUDGED]
    assert len(keys) >= 40 and len(set(designed)) == len(designed)
    assert len({k[0] for k in keys}) == 4 and {k[2] for k in keys} == {"native", "grammar", "fallback"}
    assert set(Counter(k[1] for k in keys)) == set(SCENARIOS)
    assert all(s["reason"].strip() and s["verdicts"] for s in JUDGED)
    # Both answers are in the set: samples that pass every check and samples that fail.
    assert {s["verdicts"]["all_checks"] for s in JUDGED} == {True, False}


@pytest.mark.parametrize("judged", JUDGED, ids=lambda s: "/".join(map(str, s["key"])))
def test_scoring_agrees_with_the_person(judged, records):
    record = records[(judged.get("design"), *judged["key"])]
    assert judged.get("design") in (None, recorded_variant(record.grammar)) or record.mode == "native"
    # The replies the person read: a sample run again since wrote other text, which nobody has judged.
    assert replies_digest(record) == judged["replies_sha256"], "the sample was run again: judge its new replies"
    scenario = SCENARIOS[record.scenario.name]
    assert record.scenario.hash == scenario.hash  # judged against the conversation the model was shown
    verdicts = score_sample(scenario, record)
    got = {name: verdicts["passed" if name == "all_checks" else name] for name in judged["verdicts"]}
    assert got == judged["verdicts"], judged["reason"]
