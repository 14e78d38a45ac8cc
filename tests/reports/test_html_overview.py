"""results/report.html opens on an overview (the bottom line and the funnel on the first screen, then the
rankings, models × modes, a heat map with counts and the seed ADR's quotes hatched), then the models, then the
runtime suites (runtime agreement and conformance, parser agreement, template conformance); it filters by model
and never scrolls sideways; read in a real headless Chromium on the committed page, which CI regenerates."""

import pytest

from harness.reports.report import write_reports
from tests import chromium
from tests.pins.test_fetch import ROOT
from tests.reports.test_report import setup

PAGE = ROOT / "results" / "report.html"
REPLAYS = """\
source: a test
replays:
  - {model: old-model, family: hermes, scenario: arithmetic, kind: quoted, reply: '51', quote: the quote}
"""


def test_the_heat_map_shows_counts_and_hatches_the_quoted_replies(tmp_path):
    scenarios, results = setup(tmp_path, REPLAYS)
    write_reports(results, scenarios, plot=False, replays=True)
    text = (results / "report.html").read_text(encoding="utf-8")
    heat = text[text.index('<table class="heatmap">'):]
    heat = heat[:heat.index("</table>")]
    live = heat[heat.index('data-model="m1"'):]
    assert 'title="2 of 3 passed">2/3</td>' in live.split("</tr>")[0]          # the count, not a bare colour
    quoted = heat[heat.index('<tr class="replayed" data-model="old-model">'):]
    assert "old-model · quoted by the seed ADR" in quoted and ">1/1</td>" in quoted
    assert text.index('id="overview"') < text.index('id="m1"')                 # the overview comes first


@pytest.fixture(scope="module")
def browser():
    opened = chromium.Browser()
    yield opened
    opened.close()


def _open(browser, width: int, url: str = "") -> None:
    browser.call("Emulation.setDeviceMetricsOverride", session=True, width=width, height=900,
                 deviceScaleFactor=1, mobile=False)
    browser.open(PAGE.as_uri() + url)


@pytest.mark.browser
def test_the_page_opens_on_the_overview_with_every_summary(browser):
    _open(browser, 1400)
    sections = browser.evaluate("[...document.querySelectorAll('main > section')].map(s => [s.id, s.className])")
    if sections[0][0] == "deployment":
        # With deployment records the page opens on the one table model x setup (a suite's first_screen): its
        # table on the first screen, the overview right after it.
        assert browser.evaluate("document.elementFromPoint(400, 450).closest('main > section').id") == "deployment"
        assert browser.evaluate("document.querySelector('#deployment table').getBoundingClientRect().top") < 900
        sections = sections[1:]
        browser.evaluate("document.getElementById('overview').scrollIntoView()")
    assert browser.evaluate("document.elementFromPoint(400, 450).closest('main > section').id") == "overview"
    # The overview's first screen: the bottom line, then the funnel drawn in the page (a table, not the picture).
    assert browser.evaluate("document.querySelector('ul.bottom-line').getBoundingClientRect().top") < 900
    assert browser.evaluate("document.getElementById('funnel').getBoundingClientRect().top") < 900
    assert browser.evaluate("document.querySelectorAll('table.funnel svg rect').length") > 0
    # Then the models; the runtime suites after them.
    assert sections[0][0] == "overview"
    kinds = [cls for _, cls in sections[1:]]
    models = kinds.count("model")
    assert models and kinds[:models] == ["model"] * models
    assert [i for i, _ in sections[1 + models:]] == ["runtime-agreement", "runtime-conformance", "parser-agreement",
                                                     "conformance"]
    overview = browser.evaluate("document.getElementById('overview').innerText")
    for heading in ("Bottom line", "The funnel: where each model loses its samples", "Ranked, question by question",
                    "Top deviations per model", "Models and modes", "All checks by scenario"):
        assert heading in overview
    assert "Calls due" in overview and "No call due" in overview and "BFCL" in overview
    hatched = browser.evaluate("[...document.querySelectorAll('table.heatmap tr.replayed td.heat')]"
                               ".map(td => getComputedStyle(td).backgroundImage)")
    assert hatched and all(h.startswith("repeating-linear-gradient") for h in hatched)


@pytest.mark.browser
@pytest.mark.parametrize("width", [1400, 1200])
def test_the_page_never_scrolls_sideways_even_with_every_sample_open(browser, width):
    _open(browser, width)
    wide, seen = browser.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert wide <= seen
    for page in sorted((PAGE.parent / "samples").glob("*.html")):   # the pages that hold the samples
        browser.open(page.as_uri())
        browser.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        wide, seen = browser.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
        assert wide <= seen, page.name


@pytest.mark.browser
def test_the_model_filter_shows_one_model_and_a_sample_link_brings_the_others_back(browser):
    _open(browser, 1400)
    models = browser.evaluate("[...document.querySelectorAll('section.model')].map(s => s.id)")
    chosen = models[-1]
    browser.evaluate(f"const m = document.querySelector('select[name=model]'); m.value = {chosen!r};"
                     "m.dispatchEvent(new Event('change', {bubbles: true}))")
    shown = browser.evaluate("[...document.querySelectorAll('section.model')].filter(s => !s.hidden).map(s => s.id)")
    assert shown == [chosen]
    rows = browser.evaluate("[...document.querySelectorAll('table.heatmap tr[data-model]')]"
                            ".filter(r => !r.hidden).map(r => r.dataset.model)")
    assert rows and set(rows) == {chosen}
    samples = browser.evaluate(f"document.getElementById({chosen!r}).dataset.samples")
    assert browser.evaluate("document.getElementById('shown').textContent").startswith(f"{samples} of ")
    other = models[0]
    browser.evaluate(f"location.hash = {other!r}")
    assert browser.evaluate(f"document.getElementById({other!r}).hidden") is False
