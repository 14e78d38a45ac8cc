"""Replayed records: live replies the seed ADR quotes for models that are not reachable here
(scenarios/replays/*.yaml), turned into sample records. The reports score the verbatim quotes (`kind: quoted`)
through the same scoring as live samples; a reconstructed reply is our text, shown but never scored.

A replay holds only the reply the ADR quotes (one step of the first turn); everything after it is unknown,
so scoring leaves the answer verdicts at None rather than counting them wrong."""

from dataclasses import dataclass
from pathlib import Path

from harness.core.hashing import sha256_text
from harness.core import constants
from harness import families as registry
from harness.core.errors import FamilySpecError, ScenarioError
from harness.evaluation.scenarios import Expectation, Scenario, Turn
from harness.storage.records import ModelRef, SampleRecord, ScenarioRef
from harness.core.yaml_source import load_located

KINDS = ("quoted", "reconstructed")
REPLAY_KEYS = {"model", "family", "scenario", "kind", "reply", "quote", "note", "call_expected"}
DESCRIBED_KEYS = {"model", "scenario", "what", "why"}
UNQUOTED = "prompt-not-quoted"


@dataclass(frozen=True)
class Replays:
    records: list        # sample records, replayed=True
    described: list      # observations without text: {"model", "scenario", "what", "why", "source"}
    scenarios: dict      # name -> Scenario for the replays whose prompt the ADR does not give


def _fail(doc, keys, problem):
    raise ScenarioError(f"{doc.where(*keys)}: {problem}")


def _string(doc, item, keys, name, required=True):
    value = item.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        _fail(doc, keys + (name,), "must be a non-empty string")
    return value


def _unquoted_scenario(call_expected) -> Scenario:
    """Stands in for a prompt the ADR does not give: nothing is known but whether a call was attempted."""
    turn = Turn("(the ADR does not quote the prompt)", Expectation(call_expected=call_expected))
    name = UNQUOTED + {True: "-call", False: "-text", None: ""}[call_expected]
    return Scenario(name, "A replay whose prompt the seed ADR does not quote.", (), (turn,))


def load_replays(directory: Path | None = None, known_scenarios: dict | None = None) -> Replays:
    directory = Path(directory or constants.SCENARIOS_DIR) / "replays"
    known = known_scenarios or {}
    records, described, extra = [], [], {}
    for path in sorted(directory.glob("*.yaml")):
        doc = load_located(path, ScenarioError)
        data = doc.data
        if not isinstance(data, dict) or not isinstance(data.get("replays", []), list):
            _fail(doc, (), "a replay file is a mapping with a 'replays' list")
        source = _string(doc, data, (), "source")
        for i, item in enumerate(data.get("replays", [])):
            at = ("replays", i)
            if not isinstance(item, dict):
                _fail(doc, at, "must be a mapping")
            for key in item:
                if key not in REPLAY_KEYS:
                    _fail(doc, at + (key,), f"unknown field (allowed: {', '.join(sorted(REPLAY_KEYS))})")
            model, family = _string(doc, item, at, "model"), _string(doc, item, at, "family")
            try:
                registry.get(family)
            except FamilySpecError as exc:
                _fail(doc, at + ("family",), str(exc))
            kind = _string(doc, item, at, "kind")
            if kind not in KINDS:
                _fail(doc, at + ("kind",), f"must be one of {', '.join(KINDS)}")
            if kind == "reconstructed" and not item.get("note"):
                _fail(doc, at + ("note",), "a reconstructed reply must say what was filled in")
            name = item.get("scenario")
            if name is None:
                expected = item.get("call_expected")
                if expected not in (None, True, False):
                    _fail(doc, at + ("call_expected",), "must be true or false")
                scenario = extra.setdefault(expected, _unquoted_scenario(expected))
            elif name not in known:
                _fail(doc, at + ("scenario",), f"no scenario named {name!r}")
            else:
                scenario = known[name]
            reply = _string(doc, item, at, "reply")
            records.append(_record(model, family, scenario, reply, i, {
                "kind": kind, "quote": _string(doc, item, at, "quote"), "note": item.get("note"),
                "source": source, "file": path.name, "line": doc.line(*at)}))
        for i, item in enumerate(data.get("described_only", []) or []):
            at = ("described_only", i)
            if not isinstance(item, dict) or set(item) - DESCRIBED_KEYS:
                _fail(doc, at, f"must be a mapping with {', '.join(sorted(DESCRIBED_KEYS))}")
            described.append({"model": _string(doc, item, at, "model"), "scenario": item.get("scenario"),
                              "what": _string(doc, item, at, "what"), "why": _string(doc, item, at, "why"),
                              "source": source})
    return Replays(records, described, {s.name: s for s in extra.values()})


def _record(model: str, family: str, scenario: Scenario, reply: str, index: int, replay: dict) -> SampleRecord:
    return SampleRecord(
        model=ModelRef(model, None), scenario=ScenarioRef(scenario.name, scenario.hash), sample=index, seed=None,
        family=family, replayed=True, replay=replay,
        turns=[{"user": scenario.turns[0].user,
                "steps": [{"reply": reply, "prompt_tail": "", "calls": [],
                           "prompt_sha256": None, "reply_sha256": sha256_text(reply)}]}])
