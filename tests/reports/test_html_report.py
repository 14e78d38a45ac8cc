"""results/report.html (per-model tables and every sample's transcript), the example replies of failing rows,
and the heat map's stage panel; the page is also opened in a real headless Chromium, clicked and read."""

import pytest

from harness.reports.examples import code_span
from harness.reports.funnel import funnel_counts
from harness.reports.report import write_reports
from harness.reports.tables import collect
from harness.evaluation.scenario_files import load_scenarios
from harness.storage.transcript_writer import TranscriptWriter
from tests import chromium
from tests.reports.test_report import ARITHMETIC_SCENARIO, append, sample

# Seed 1: a hermes model writing its call as bare JSON, then its end-of-turn token as text.
BARE = '{"name": "get_time", "arguments": {}}<|im_end|>'
HOSTILE = "<script>document.title='pwned'</script> 17 × 3 = 50"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    (root / "scenarios").mkdir()
    (root / "scenarios" / "arithmetic.yaml").write_text(ARITHMETIC_SCENARIO)
    (scenario,) = load_scenarios(root / "scenarios")
    with TranscriptWriter(root / "results" / "transcripts" / "m1.jsonl") as writer:
        append(writer, {"kind": "model", "model": {"id": "m1", "sha256": "f" * 64, "file": "m1.gguf"},
                       "template": {"source": "gguf", "sha256": "0" * 64, "text": "{{ x }}", "pinned_id": None},
                       "family": "hermes", "detection": {"reason": "test"}, "template_kwargs": {}})
        for index, reply in enumerate(["17 times 3 is 51.", BARE, HOSTILE, BARE]):
            append(writer, sample(scenario, index, reply))
        append(writer, {**sample(scenario, 0, "51"), "mode": "grammar"})
    out = write_reports(root / "results", root / "scenarios", plot=False)
    return root, out


def test_report_html_is_written_self_contained_and_byte_identical_on_repeat(report):
    root, out = report
    page = root / "results" / "report.html"
    assert str(page) in out["written"]
    text = page.read_text(encoding="utf-8")
    # Inline CSS and JS only: nothing the browser would fetch.
    assert "<style>" in text and "<script>" in text
    for outside in ("http://", "https://", "src=", "<link", "@import"):
        assert outside not in text
    # The raw replies are escaped: the hostile reply is text, not a script.
    assert "&lt;script&gt;document.title=" in text and "<script>document.title" not in text
    first = page.read_bytes()
    write_reports(root / "results", root / "scenarios", plot=False)
    assert page.read_bytes() == first


def test_each_sample_shows_reply_parse_deviation_explanation_and_verdicts(report):
    text = (report[0] / "results" / "samples" / "m1.1.html").read_text(encoding="utf-8")
    start = text.index('id="m1--arithmetic--native--1"')
    block = text[start:text.index("</details>", start)]
    assert 'data-status="fail"' in block and 'data-names="bare-json past-end-of-turn"' in block
    assert '<span class="tok">&lt;|im_end|&gt;</span>' in block  # the special token marked, not swallowed
    assert "a JSON call object with none of the family&#x27;s markers" in block  # from deviations.py's comment
    assert "turn 1, user: What is 17 times 3?" in block
    assert '<td class="bad">no</td>' in block  # its verdicts


def test_failing_rows_list_example_replies_lowest_seeds_first_with_different_labels(report):
    table = (report[0] / "results" / "m1.md").read_text(encoding="utf-8")
    row = next(line for line in table.splitlines() if line.startswith("| arithmetic") and "| native" in line)
    # Seeds 1 and 3 fail the same way; seed 2 differently: the examples are seed 1 and seed 2.
    assert "seed 1 (bare-json): `{\"name\": \"get_time\", \"arguments\": {}}<\\|im_end\\|>`" in row
    assert "<br>seed 2 (no deviation; checks failed: answer): `<script>" in row
    assert "seed 3" not in row and "seed 0" not in row
    html = (report[0] / "results" / "report.html").read_text(encoding="utf-8")
    assert '<a href="samples/m1.1.html#m1--arithmetic--native--1">seed 1</a> (bare-json)' in html
    grammar = next(line for line in table.splitlines() if line.startswith("| arithmetic") and "| grammar" in line)
    assert grammar.rstrip(" |").endswith("–")  # a row without failures has no example


def test_code_span_holds_backticks_pipes_and_newlines_on_one_line():
    assert code_span("a|b") == "`a\\|b`"
    assert code_span("```json\n{}") == "```` ```json\n{} ````"
    assert code_span("x``y") == "```x``y```"


def test_the_funnel_counts_each_stage_per_model_and_mode_and_the_page_draws_the_same(report):
    root, _ = report
    passed, known, rows, cols = funnel_counts(collect(root / "results", root / "scenarios").samples)
    assert rows == ["m1 · native", "m1 · grammar"]
    assert cols == ["call due: chose the tool", "call due: wrote it parseably", "call due: right tool",
                    "call due: right arguments", "call due: used the result", "call due: answered",
                    "call due: all checks", "no call due: made no call", "no call due: answered",
                    "no call due: all checks"]
    native = dict(zip(cols, zip(passed[0], known[0])))
    assert native["no call due: made no call"] == (2, 4)  # seeds 0 and 2 answer in text; 1 and 3 are bare JSON
    assert native["no call due: all checks"] == (1, 4)
    # No call is due in arithmetic: the call-due stages count nothing (not the no-call samples as passes).
    assert native["call due: wrote it parseably"] == native["call due: right tool"] == (0, 0)
    # report.html draws these numbers (not the picture): the native row's no-call stages, in order.
    text = (root / "results" / "report.html").read_text(encoding="utf-8")
    funnel = text[text.index('<table class="funnel">'):]
    row = funnel[funnel.index('<tr data-model="m1"><th class="row">m1 · native</th>'):]
    row = row[:row.index("</tr>")]
    assert [c.split("</svg> ")[-1] for c in row.split("</td>")[-4:-1]] == ["2/4", "1/4", "1/4"]
    assert row.count('title="applied to no sample of this row">–</td>') == 7
    assert text.index('<table class="funnel">') < text.index('id="m1"')    # on the first screen, before the model


@pytest.fixture(scope="module")
def browser():
    opened = chromium.Browser()
    yield opened
    opened.close()


@pytest.mark.browser
def test_chromium_renders_the_tables_and_opens_a_failing_sample_from_its_anchor(report, browser):
    browser.open((report[0] / "results" / "report.html").as_uri())
    headers = browser.evaluate("[...document.querySelectorAll('#m1 table tr:first-child th')]"
                               ".map(th => th.textContent)")
    assert "all checks" in headers and "example replies of failed samples" in headers
    # The example's link leads to the sample on its page beside the report, opened.
    browser.evaluate("document.querySelector('#m1 a[href$=\"#m1--arithmetic--native--1\"]').click()")
    browser.wait_for("Page.loadEventFired")
    assert browser.evaluate("location.pathname").endswith("/results/samples/m1.1.html")
    assert browser.evaluate("document.title") == "harness: m1: samples, page 1 of 1"  # no script ran
    sample = "document.getElementById('m1--arithmetic--native--1')"
    assert browser.evaluate(f"{sample}.open") is True
    text = browser.evaluate(f"{sample}.innerText")
    assert BARE in text and "bare-json" in text
    assert browser.evaluate("document.getElementById('m1--arithmetic--native--0').open") is False


@pytest.mark.browser
def test_a_sample_anchor_on_the_report_leads_on_to_the_sample_on_its_page(report, browser):
    browser.open((report[0] / "results" / "report.html").as_uri() + "#m1--arithmetic--native--3")
    if browser.evaluate("location.pathname").endswith("/report.html"):
        browser.wait_for("Page.loadEventFired")  # the report's script moves on to the page that holds it
    assert browser.evaluate("location.pathname").endswith("/results/samples/m1.1.html")
    assert browser.evaluate("document.getElementById('m1--arithmetic--native--3').open") is True


@pytest.mark.browser
def test_chromium_filters_by_mode_and_failure_and_jumps_to_the_next_failed_sample(report, browser):
    browser.open((report[0] / "results" / "samples" / "m1.1.html").as_uri())
    visible = "[...document.querySelectorAll('details.sample')].filter(s => !s.hidden).map(s => s.id)"
    assert len(browser.evaluate(visible)) == 5
    browser.evaluate("document.querySelector('input[name=failed]').click()")
    assert browser.evaluate(visible) == ["m1--arithmetic--native--1", "m1--arithmetic--native--2",
                                         "m1--arithmetic--native--3"]
    assert browser.evaluate("document.getElementById('shown').textContent") == "3 of 5 samples shown"
    browser.evaluate("document.querySelector('input[name=failed]').click();"
                     "const mode = document.querySelector('select[name=mode]'); mode.value = 'grammar';"
                     "mode.dispatchEvent(new Event('change', {bubbles: true}))")
    assert browser.evaluate(visible) == ["m1--arithmetic--grammar--0"]
    browser.evaluate("const m = document.querySelector('select[name=mode]'); m.value = '';"
                     "m.dispatchEvent(new Event('change', {bubbles: true}));"
                     "document.getElementById('next-failed').click(); document.getElementById('next-failed').click()")
    assert browser.evaluate("location.hash") == "#m1--arithmetic--native--2"
    assert browser.evaluate("document.getElementById('m1--arithmetic--native--2').open") is True
