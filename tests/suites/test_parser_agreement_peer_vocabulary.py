"""The map from SGLang's named tolerances to our names (harness/suites/parser_agreement/peer_vocabulary.py): every name of ours
it gives is one of ours, each witness reply is named so by the strict parser or by `harness parse --tools`, and
SGLang's names are SGLang's where the peers environment holds an SGLang that has them."""

import json
import re
import subprocess

import pytest

from harness import families as registry
from harness.suites.parser_agreement import peer_vocabulary as vocab
from harness.evaluation import scoring
from harness.formats import deviations as dev
from harness.peers import SETUP_COMMAND, peers_python
from tests.cli.test_cli_contract import run
from tests.pins.test_fetch import ROOT

DEVIATION_WITNESSES = [(e.name, w) for e, w in vocab.witnesses() if vocab.kind(w.name) == "deviation"]
FINDING_WITNESSES = [(e.name, w) for e, w in vocab.witnesses() if vocab.kind(w.name) == "finding"]


def test_every_name_of_ours_is_a_deviation_or_a_finding_we_give():
    names = [name for event in vocab.EVENTS for name in event.ours]
    assert names and all(vocab.kind(name) for name in names), [n for n in names if not vocab.kind(n)]
    assert {vocab.kind(n) for n in names} == {"deviation", "finding"}
    assert set(vocab.FINDINGS) <= {scoring.UNKNOWN_TOOL, scoring.INVALID_ARGUMENTS, scoring.STRING_COERCED,
                                   scoring.PYTHON_NOTATION, scoring.JSON_NOTATION}
    assert vocab.kind("a-name-nobody-gave") is None and vocab.kind(dev.UNCLOSED_CALL) == "deviation"


def test_sglang_events_are_named_once_each_as_sglang_spells_them():
    names = [event.name for event in vocab.EVENTS]
    assert len(names) == len(set(names)) == 16
    assert all(re.fullmatch(r"[a-z]+(-[a-z]+)*", n) for n in names)
    assert {event.scope for event in vocab.EVENTS} == {1, 2, 3, 4}
    # Strict mode raises on the model's deviations only: a bad tool schema and fail-open itself never raise.
    assert {e.name for e in vocab.EVENTS if not e.raises} == {"invalid-schema-ignored", "fail-open"}


def test_every_witness_is_named_by_one_of_the_event_s_names_and_a_family_of_ours_writes_it():
    for event, witness in vocab.witnesses():
        assert witness.name in event.ours, event.name
        assert witness.family in registry.detectable(), event.name
    # Every event but the two that are not the model's and Step3's (no pinned template writes it) has one.
    assert {e.name for e in vocab.EVENTS if e.witness is None} == {
        "skipped-non-function-entry", "invalid-schema-ignored", "fail-open"}


@pytest.mark.parametrize("event,witness", DEVIATION_WITNESSES, ids=[e for e, _ in DEVIATION_WITNESSES])
def test_the_strict_parser_refuses_each_witness_with_its_deviation(event, witness):
    parsed = registry.parse(witness.family, witness.reply)
    assert not parsed.accepted and not parsed.calls
    assert parsed.deviation == witness.name, (parsed.deviation, parsed.detail)
    assert parsed.content.strip(), "a refused reply stays as content"


@pytest.mark.parametrize("event,witness", FINDING_WITNESSES, ids=[e for e, _ in FINDING_WITNESSES])
def test_harness_parse_with_the_tools_names_each_finding_witness(event, witness, tmp_path):
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(vocab.TOOLS), encoding="utf-8")
    template = next(f"templates/{k}.jinja" for k in _templates_of(witness.family))
    code, out, err = run("parse", "--template", template, "--family", witness.family, "--tools", str(tools),
                         "--json", stdin=witness.reply)
    data = json.loads(out)
    assert code == 1, err
    assert data["deviation"] is None and len(data["calls"]) == 1, data
    assert [f["name"] for f in data["findings"]] == [witness.name], data["findings"]


def _templates_of(family: str) -> list:
    rows = json.loads((ROOT / "results" / "conformance.json").read_text(encoding="utf-8"))["templates"]
    return [row["id"] for row in rows if row["family"] == family]


def test_the_table_has_a_row_per_event_and_says_where_the_names_come_from():
    lines = vocab.vocabulary_lines()
    rows = [line for line in lines if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == [e.name for e in vocab.EVENTS]
    text = "\n".join(lines)
    assert vocab.UPSTREAM["commit"] in text and vocab.UPSTREAM["folder"] in text and "vLLM 0.33.0" in text
    assert "| `truncated-call-dropped` | 1 | raises |" in text and "`unclosed-call`" in text


_EVENTS_OF_INSTALLED = """
import json
try:
    from sglang.srt.function_call.compatibility import CompatibilityEvent
except ImportError:
    import sglang
    print(json.dumps({"version": sglang.__version__}))
else:
    print(json.dumps({"events": [[e.value, e.scope, e.strict_raises] for e in CompatibilityEvent]}))
"""


def test_the_events_are_those_of_the_sglang_in_the_peers_environment_where_it_names_them():
    python = peers_python()
    if python is None:
        pytest.skip(f"the peers environment is not built: {SETUP_COMMAND}")
    done = subprocess.run([str(python), "-c", _EVENTS_OF_INSTALLED], capture_output=True, text=True,
                          check=True)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    if "events" not in found:
        pytest.skip(f"sglang {found['version']} in the peers environment predates its compatibility package; the "
                    f"names are those of {vocab.UPSTREAM['folder']}{vocab.UPSTREAM['events']} at "
                    f"{vocab.UPSTREAM['commit']}")
    assert sorted(map(tuple, found["events"])) == sorted((e.name, e.scope, e.raises) for e in vocab.EVENTS)

