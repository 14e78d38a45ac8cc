"""Text from transcripts is data, never layout: a model id with a newline, a pipe or HTML, and a reply with a raw
ESC byte, leave every markdown table one row per line with its cells where they belong, and show the control
character as an escape (in the markdown and on the pages), never send it raw."""

import re

from harness.storage.results import ResultsDir
from harness.evaluation.scenario_files import load_scenarios
from harness.storage.transcript_writer import TranscriptWriter
from harness.reports.markdown import cell, visible_controls
from harness.reports.report import write_reports
from tests.reports.test_report import ARITHMETIC_SCENARIO, append, sample

HOSTILE_ID = "evil<b>model</b>|x\ny"
ESC_REPLY = "\x1b[31mred\x1b[0m and no answer"


def _report(tmp_path):
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    (scenarios / "arithmetic.yaml").write_text(ARITHMETIC_SCENARIO)
    (scenario,) = load_scenarios(scenarios)
    results = ResultsDir(tmp_path / "results")
    with TranscriptWriter(results.transcript(HOSTILE_ID)) as writer:
        append(writer, {"kind": "model", "model": {"id": HOSTILE_ID, "sha256": "f" * 64, "file": "m.gguf"},
                       "template": {"source": "gguf", "sha256": "0" * 64, "text": "{{ x }}", "pinned_id": None},
                       "family": "hermes", "detection": {"reason": "test <i>\x1b"}, "template_kwargs": {}})
        append(writer, sample(scenario, 0, "17 times 3 is 51.", model=HOSTILE_ID))
        append(writer, sample(scenario, 1, ESC_REPLY, model=HOSTILE_ID))
    return write_reports(results.root, scenarios, plot=False), results


def _cells(row: str) -> int:
    return len(re.findall(r"(?<!\\)\|", row))


def test_every_markdown_table_keeps_its_rows_and_cells_and_shows_controls_as_escapes(tmp_path):
    out, results = _report(tmp_path)
    for path in (results.summary, results.model_table(HOSTILE_ID)):
        text = path.read_text(encoding="utf-8")
        assert "\x1b" not in text and "<b>" not in text and "<i>" not in text
        lines = text.splitlines()
        for i, row in enumerate(lines):
            # A table is a header, its rule, then its rows: each row as many cells as the header.
            if row.startswith("|") and i + 1 < len(lines) and lines[i + 1].startswith("|:"):
                body = []
                for r in lines[i + 1:]:
                    if not r.startswith("|"):
                        break
                    body.append(r)
                width = _cells(row)
                assert [_cells(r) for r in body] == [width] * len(body), (path.name, row)
    summary = results.summary.read_text(encoding="utf-8")
    assert "| evil&lt;b&gt;model&lt;/b&gt;\\|x\\ny |" in summary.replace("  ", " ").replace("  ", " ")
    table = results.model_table(HOSTILE_ID).read_text(encoding="utf-8")
    assert table.startswith("# evil&lt;b&gt;model&lt;/b&gt;|x\\ny\n")
    assert "`\\x1b[31mred\\x1b[0m and no answer`" in table        # the failed sample's example, one line
    assert "- Family: **hermes**: test &lt;i&gt;\\x1b" in table


def test_the_pages_escape_the_id_and_mark_the_escape_byte(tmp_path):
    out, results = _report(tmp_path)
    html = results.html.read_text(encoding="utf-8")
    assert "\x1b" not in html and "<b>model" not in html and "evil&lt;b&gt;model&lt;/b&gt;|x\ny" in html
    page = results.sample_page(HOSTILE_ID, 1).read_text(encoding="utf-8")
    assert "\x1b" not in page
    assert '<span class="tok">\\x1b</span>[31mred<span class="tok">\\x1b</span>[0m and no answer' in page


def test_cells_and_controls():
    assert cell("a|b\n<c>&\x1b\u202e") == "a\\|b\\n&lt;c&gt;&amp;\\x1b\\u202e"
    assert visible_controls("a\nb\tc\x00", keep="\n") == "a\nb\\tc\\x00"
