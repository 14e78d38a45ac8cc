"""The samples' transcripts beside results/report.html: samples/<model>.<n>.html, up to PAGE_SAMPLES samples a
page, each a static page of its own (inline CSS and JS, nothing fetched: a page opened from disk works in any
browser, where fetch() of a file:// URL is refused). report.html holds the tables and links here, so it opens
as fast for 50,000 samples as for 50; a page is written from one record at a time, read again from its
transcript, so `harness report` never holds the replies of all samples.

Order: per model, by scenario then mode (native, grammar, fallback), then seed and sample, as the tables; a
(scenario, mode) group may run over two pages. Anchors as on the report: #<model>--<scenario>--<mode> where a
group starts, #<model>--<scenario>--<mode>--<sample> for one sample."""

from dataclasses import dataclass, field
from html import escape

import pandas as pd

from harness.storage.results import file_stem
from harness.storage.transcripts import RecordRef, load_record
from harness.reports.html_samples import sample_html, status, token_pattern
from harness.reports.markdown import visible_controls
from harness.reports.tables import RATES, by_mode, mode_order

FOLDER = "samples"  # beside report.html (harness.storage.results.ResultsDir.samples)
PAGE_SAMPLES = 200  # samples a page: a few hundred kB of HTML, opened at once in any browser

SAMPLES_JS = """
(function () {
  var form = document.getElementById('filter');
  var samples = Array.prototype.slice.call(document.querySelectorAll('details.sample'));
  var groups = document.querySelectorAll('section.group');
  var next = -1;
  function apply() {
    var mode = form.elements.mode.value, failed = form.elements.failed.checked, name = form.elements.name.value;
    var shown = 0;
    samples.forEach(function (s) {
      var keep = (!mode || s.dataset.mode === mode) && (!failed || s.dataset.status === 'fail') &&
                 (!name || s.dataset.names.split(' ').indexOf(name) >= 0);
      s.hidden = !keep;
      if (keep) shown += 1;
    });
    Array.prototype.forEach.call(groups, function (g) {
      g.hidden = !g.querySelector('details.sample:not([hidden])');
    });
    document.getElementById('shown').textContent = shown + ' of ' + samples.length + ' samples shown';
  }
  function reveal() {
    var id = decodeURIComponent(location.hash.slice(1));
    // A sample on a later page of its row (the report links to where each row starts): on to the next page
    // while the row goes on there, else the row here.
    var row = document.getElementById(id.replace(/--[0-9]+$/, ''));
    var onward = document.querySelector('a[rel=next]');
    if (!document.getElementById(id) && row && row.dataset.continues && onward) {
      location.href = onward.href.split('#')[0] + location.hash;
      return;
    }
    var target = document.getElementById(id) || row;
    if (!target) return;
    for (var el = target; el; el = el.parentElement) if (el.hidden) el.hidden = false;
    if (target.tagName === 'DETAILS') target.open = true;
    target.scrollIntoView();
  }
  form.addEventListener('change', apply);
  document.getElementById('next-failed').addEventListener('click', function () {
    var failed = samples.filter(function (s) { return s.dataset.status === 'fail' && !s.hidden; });
    if (!failed.length) return;
    next = (next + 1) % failed.length;
    location.hash = failed[next].id;
  });
  window.addEventListener('hashchange', reveal);
  apply();
  reveal();
})();
"""


def anchor(*parts) -> str:
    return "--".join(str(p) for p in parts)


@dataclass
class Part:
    """The samples of one (scenario, mode) group on one page."""
    scenario: str
    mode: str
    rows: list
    first: bool        # the group starts on this page
    total: int         # samples in the whole group
    failed: int        # failed samples in the whole group
    continues: bool = False  # the group goes on on the next page


@dataclass
class SampleLayout:
    """Which page holds which sample, decided before any page is written, so the report links to them."""
    pages: dict = field(default_factory=dict)    # model -> [[Part]]
    at: dict = field(default_factory=dict)       # (model, scenario, mode[, sample]) -> page number (from 1)

    @classmethod
    def of(cls, frame: pd.DataFrame, per_page: int | None = None) -> "SampleLayout":
        per_page = per_page or PAGE_SAMPLES
        out = cls()
        if frame.empty:
            return out
        for model, samples in frame.groupby("model", sort=True):
            pages, room = [[]], per_page
            for (scenario, mode), group in by_mode(samples, ["scenario", "mode"]):
                # Replayed samples have no seed (NaN here, which sorts unreliably): they go by index after live.
                rows = sorted(group.to_dict("records"),
                              key=lambda r: (r["replayed"], -1 if r["replayed"] else r["seed"], r["sample"]))
                total, failed = len(rows), sum(status(r["passed"]) == "fail" for r in rows)
                out.at[(model, scenario, mode)] = len(pages) + (room == 0)
                while rows:
                    if not room:
                        pages.append([])
                        room = per_page
                    part, rows = rows[:room], rows[room:]
                    pages[-1].append(Part(scenario, mode, part, len(part) + len(rows) == total, total, failed,
                                          bool(rows)))
                    for row in part:
                        out.at.setdefault((model, scenario, mode, row["sample"]), len(pages))
                    room -= len(part)
            out.pages[model] = pages
        return out

    def href(self, model: str, scenario: str, mode: str, sample=None) -> str:
        """The link from report.html to a group's first sample, or to one sample."""
        key = (model, scenario, mode) if sample is None else (model, scenario, mode, sample)
        return f"{page_name(model, self.at.get(key, 1))}#{anchor(*key)}"

    def page_names(self, model: str) -> list:
        return [page_name(model, n) for n in range(1, len(self.pages.get(model, [])) + 1)]


def page_name(model: str, page: int) -> str:
    """A page's path relative to report.html."""
    return f"{FOLDER}/{file_stem(model)}.{page}.html"


def _resolved(row: dict) -> dict:
    record = row["record"]
    return {**row, "record": load_record(record) if isinstance(record, RecordRef) else record}


def _form(parts: list) -> str:
    rows = [r for p in parts for r in p.rows]
    modes = sorted({r["mode"] for r in rows}, key=lambda m: (mode_order(m), m))
    names = sorted({n for r in rows for col in ("deviations", "findings") for n in r[col]})
    return ('<form id="filter"><label>mode <select name="mode"><option value="">all</option>'
            + "".join(f'<option value="{escape(m)}">{escape(m)}</option>' for m in modes)
            + '</select></label><label><input type="checkbox" name="failed"> failed samples only</label>'
            '<label>deviation or finding <select name="name"><option value="">any</option>'
            + "".join(f'<option value="{escape(n)}">{escape(n)}</option>' for n in names)
            + '</select></label><button type="button" id="next-failed">next failed sample</button>'
            f'<span id="shown">{len(rows)} samples</span></form>')


def _nav(model: str, number: int, count: int) -> str:
    """Back to the model's tables on the report, and every page of this model's samples."""
    own = lambda n: page_name(model, n).split("/", 1)[1]  # noqa: E731 -- pages link to their neighbours
    links = [f'<a href="../report.html#{escape(model)}">report: {escape(model)}</a>']
    if number > 1:
        links.append(f'<a href="{escape(own(number - 1))}" rel="prev">previous page</a>')
    if number < count:
        links.append(f'<a href="{escape(own(number + 1))}" rel="next">next page</a>')
    if count > 1:
        links.append("pages " + " ".join(f"<strong>{n}</strong>" if n == number else
                                         f'<a href="{escape(own(n))}">{n}</a>' for n in range(1, count + 1)))
    return f"<nav>{''.join(links)}</nav>"


def page_html(model: str, number: int, count: int, parts: list, tokens, css: str) -> str:
    """One page of a model's samples, each record read again from its transcript as it is written."""
    title = f"{model}: samples, page {number} of {count}"
    out = ['<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
           '<meta name="viewport" content="width=device-width,initial-scale=1">'
           f"<title>harness: {escape(title)}</title><style>{css}</style></head><body>",
           f"<header><h1>{escape(title)}</h1>{_nav(model, number, count)}{_form(parts)}</header><main>"]
    for part in parts:
        group = anchor(model, part.scenario, part.mode)
        more = "" if part.first else " (continued from the previous page)"
        goes_on = ' data-continues="next"' if part.continues else ""
        out.append(f'<section class="group" id="{escape(group)}"{goes_on}><h4>{escape(part.scenario)} · '
                   f"{escape(part.mode)}: {part.failed} of {part.total} failed{more}</h4>\n")
        out += [sample_html(_resolved(r), anchor(model, part.scenario, part.mode, r["sample"]), RATES, tokens)
                for r in part.rows]
        out.append("</section>\n")
    out.append(f"</main><script>{SAMPLES_JS}</script></body></html>\n")
    # A control character left in a user message, a tool result or an id is shown as its escape, never raw.
    return visible_controls("".join(out), keep="\n\t")


def write_sample_pages(layout: SampleLayout, models: dict, results, staged, css: str) -> list:
    """Every page of every model, staged (harness.reports.staged); their paths."""
    written = []
    for model, pages in layout.pages.items():
        tokens = token_pattern(models.get(model))
        for number, parts in enumerate(pages, start=1):
            path = results.sample_page(model, number)
            staged.text(path, page_html(model, number, len(pages), parts, tokens, css))
            written.append(str(path))
    return written
