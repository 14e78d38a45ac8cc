"""results/report.html: an overview first (harness.reports.html_overview: the verdict, the models × modes
tables, a heat map), then the per-model tables of results/<model>.md, each row linking to its samples, then the
suites' sections (harness.suites) and the pinned templates' conformance. The samples' transcripts are on pages beside it
(results/samples/, harness.reports.html_pages), so the report opens as fast whatever the number of samples.

Self-contained (inline CSS and JS, no request leaves the file; links to the sample pages only) and
byte-identical on repeat (no timestamp, models, scenarios, modes and seeds in a fixed order), so CI's comparison
of results/ holds. The script adds a model filter and scrolls to the anchor. Anchors: #overview, #<model>; a
sample's or a row's anchor (#<model>--<scenario>--<mode>[--<sample>]) leads on to its page."""

import re
from html import escape
from pathlib import Path

import pandas as pd

from harness.reports.html_overview import conformance_html, overview_html, table_html
from harness.storage.results import ResultsDir
from harness.reports.examples import failing_examples
from harness.reports.html_pages import FOLDER, PAGE_SAMPLES, SampleLayout, write_sample_pages
from harness.reports.html_samples import STATUS_TEXT, names_html, status
from harness.reports.markdown import visible_controls
from harness.reports.staged import Pages, StagedWrites
from harness.reports.tables import EXAMPLES, by_mode, mode_table, replay_table, scenario_table

CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d1d1f}
header{position:sticky;top:0;background:#f5f5f7;border-bottom:1px solid #ccc;padding:6px 16px;z-index:1}
header h1{font-size:18px;margin:2px 0}
nav{display:flex;flex-wrap:wrap;gap:2px 12px}
form{display:flex;gap:14px;align-items:center;flex-wrap:wrap;margin:4px 0}
select{max-width:22em}
main{padding:0 16px 40px;overflow-wrap:break-word}
main>section{border-top:3px solid #444;margin-top:24px}
table{border-collapse:collapse;margin:8px 0;font-size:12px;max-width:100%}
td,th{border:1px solid #ccc;padding:2px 4px;vertical-align:top;text-align:left}
code{white-space:pre-wrap;overflow-wrap:anywhere}
td code,td a{overflow-wrap:anywhere}
table.labels th{overflow-wrap:anywhere;font-size:11px}
table.heatmap td.heat{text-align:center;min-width:3.2em;white-space:nowrap}
table.heatmap td.none{color:#888;background:#eee}
table.heatmap th.row{white-space:normal;background:#f5f5f7}
table.heatmap tr.replayed td.heat{background-image:repeating-linear-gradient(45deg,rgba(0,0,0,.22) 0 2px,
transparent 2px 7px)}
table.heatmap tr.replayed th.row{font-style:italic}
table.funnel td.stage{white-space:nowrap}table.funnel td.none{color:#888;background:#eee}
table.funnel th.row{background:#f5f5f7}
ul.bottom-line li{margin:6px 0;max-width:75em}
span.note{font-weight:normal;color:#555}
th{background:#eee}
td.ok{background:#d8f0d8}td.bad{background:#f6d5d5}td.na{color:#888}
span.pass{color:#17692a;font-weight:600}span.fail{color:#b3261e;font-weight:600}span.n\\/a{color:#666}
span.name{border-bottom:1px dotted #666;cursor:help}
details.sample{border:1px solid #ddd;border-radius:4px;margin:4px 0;padding:2px 8px}
details.sample[open]{background:#fafafa}
details.sample:target{outline:2px solid #1a5fb4}
section,details.sample{scroll-margin-top:140px}
pre{white-space:pre-wrap;word-break:break-word;margin:4px 0}
pre.raw{background:#fff;border:1px solid #bbb;padding:4px;font-size:12px}
pre.empty{color:#888}
span.tok{background:#e4e0f5;color:#4a2a9a;border-radius:3px}
dl.parse{display:grid;grid-template-columns:max-content 1fr;gap:0 10px;margin:4px 0}
dl.parse dt{font-weight:600}dl.parse dd{margin:0}
strong.dev{color:#b3261e}
p.meta{color:#555;margin:8px 0 0;font-size:12px}
p.user{font-weight:600;margin:10px 0 2px}
p.fallback{font-style:italic;margin:4px 0 0}
div.step{border-left:3px solid #ccc;padding-left:8px;margin:4px 0}
code.ex{font-size:11px}
"""

JS = """
(function () {
  var form = document.getElementById('filter');
  var models = document.querySelectorAll('[data-model]');
  function apply() {
    var model = form.elements.model.value;
    Array.prototype.forEach.call(models, function (m) { m.hidden = model && m.dataset.model !== model; });
    var shown = 0, all = 0;
    Array.prototype.forEach.call(document.querySelectorAll('section.model'), function (s) {
      var n = Number(s.dataset.samples);
      all += n;
      if (!s.hidden) shown += n;
    });
    document.getElementById('shown').textContent = shown + ' of ' + all + ' samples shown';
  }
  function follow(id) {
    // A sample's or a row's anchor (#<model>--<scenario>--<mode>[--<sample>]): its page beside the report, by
    // the table link to the sample or, failing that, to its row's first page.
    var links = Array.prototype.slice.call(document.querySelectorAll('main a[href*="#"]'));
    var row = id.replace(/--[0-9]+$/, '');
    var link = links.filter(function (a) { return decodeURIComponent(a.hash.slice(1)) === id; })[0] ||
               links.filter(function (a) { return decodeURIComponent(a.hash.slice(1)) === row; })[0];
    if (link) location.href = link.href.split('#')[0] + '#' + encodeURIComponent(id);
  }
  function reveal() {
    var id = decodeURIComponent(location.hash.slice(1));
    var target = document.getElementById(id);
    if (!target && id) { follow(id); return; }
    if (!target) return;
    var section = target.closest('section.model');
    if (section && section.hidden) { form.elements.model.value = ''; apply(); }
    target.scrollIntoView();
  }
  form.addEventListener('change', apply);
  window.addEventListener('hashchange', reveal);
  apply();
  reveal();
})();
"""


def _examples_html(group: pd.DataFrame, model: str, layout: SampleLayout) -> str:
    items = [f'<a href="{escape(layout.href(model, e.scenario, e.mode, e.sample))}">seed {e.seed}</a> '
             f"({escape(e.label)}): <code class=\"ex\">{escape(visible_controls(e.reply[:160], keep=chr(10) + chr(9)))}"
             f"{'…' if len(e.reply) > 160 else ''}"
             "</code>" for e in failing_examples(group)]
    return "<br>".join(items) or "–"


def _live_tables(model: str, live: pd.DataFrame, layout: SampleLayout) -> list:
    parts = []
    if live["mode"].nunique() > 1:
        parts += ["<h3>Modes</h3>", table_html(mode_table(live))]
    table = scenario_table(live).drop(columns=[EXAMPLES])
    cells = {}
    for i, ((scenario, mode), group) in enumerate(by_mode(live, ["scenario", "mode"])):
        cells[(i, "scenario")] = f'<a href="{escape(layout.href(model, scenario, mode))}">{escape(scenario)}</a>'
        cells[(i, "deviations")] = names_html(d for ds in group["deviations"] for d in ds)
        cells[(i, "findings")] = names_html(f for fs in group["findings"] for f in fs)
        cells[(i, EXAMPLES)] = _examples_html(group, model, layout)
    table[EXAMPLES] = ""
    return [*parts, "<h3>Live, by scenario and mode</h3>", table_html(table, cells)]


def _samples(model: str, frame: pd.DataFrame, layout: SampleLayout) -> list:
    """Links to the pages that hold the model's samples (harness.reports.html_pages), not the samples."""
    names = layout.page_names(model)
    failed = sum(status(v) == "fail" for v in frame["passed"])
    links = " ".join(f'<a href="{escape(name)}">{n}</a>' for n, name in enumerate(names, start=1))
    return ["<h3>Samples</h3>", f"<p>Every sample's transcript ({len(frame)} samples, {failed} failed), on "
            f"{len(names)} page{'s' if len(names) > 1 else ''} of up to {PAGE_SAMPLES} beside this report: "
            f"{links}. Each table row links to its samples.</p>"]


def _illustrations_html(illustrations: list) -> str:
    items = "".join(f"<li>{escape(i['scenario'])}: <code>{escape(i['reply'])}</code> → {escape(i['reading'])}. "
                    f"The ADR: “{escape(i['quote'])}” Filled in: {escape(i['note'])}</li>" for i in illustrations)
    return ("<h3>Reconstructed from the seed ADR's description (illustrations, not scored)</h3>"
            f"<ul>{items}</ul>")


def model_html(model: str, frame: pd.DataFrame, record, illustrations=(), layout: SampleLayout | None = None
               ) -> str:
    layout = layout if layout is not None else SampleLayout.of(frame)
    live = frame[~frame["replayed"]] if not frame.empty else frame
    replayed = frame[frame["replayed"]] if not frame.empty else frame
    parts = [f'<section class="model" id="{escape(model)}" data-model="{escape(model)}" '
             f'data-samples="{len(frame)}"><h2>{escape(model)}</h2>']
    if record is not None:
        parts.append(f"<p>family: <strong>{escape(record.family or 'none (chat without tools)')}</strong>: "
                     f"{escape((record.detection or {}).get('reason', ''))}</p>")
    if not live.empty:
        parts += _live_tables(model, live, layout)
    if not replayed.empty:
        parts += ["<h3>Quoted by the seed ADR (not run here)</h3>", table_html(replay_table(replayed))]
    if illustrations:
        parts.append(_illustrations_html(illustrations))
    if not frame.empty:
        parts += _samples(model, frame, layout)
    parts.append("</section>")
    return "".join(parts)


def page(collected, sections: str = "", layout: SampleLayout | None = None, more=(), first: str = "",
         first_models=()) -> str:
    """The overview first (its bottom line, with `more`: the sentences the suites add, and the funnel are the
    first screen), then each model's tables, then `sections` (the runtime suites and the templates'
    conformance), which answer other questions. `first`: HTML that opens the page above the overview (the
    deployment table, from harness.suites) and `first_models` the models its rows name."""
    frame = collected.samples
    # The selector offers every model the page shows: its samples', and those only the first screen's rows name.
    models = sorted(set(frame["model"]) | {i["model"] for i in collected.illustrations} | set(first_models))
    head = ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>harness: live results and transcripts</title><style>{CSS}</style></head><body>")
    links = [*([("deployment", "deployment")] if 'id="deployment"' in first else []),
             ("overview", "overview"), *([("funnel", "funnel")] if len(frame) and not frame["replayed"].all() else []),
             *((k, k.replace("-", " ")) for k in re.findall(r'<section id="([^"]+)"', sections))]
    nav = "".join(f'<a href="#{k}">{escape(t)}</a>' for k, t in links)
    form = ('<form id="filter"><label>model <select name="model"><option value="">all</option>'
            + "".join(f'<option value="{escape(m)}">{escape(m)}</option>' for m in models)
            + f'</select></label><span id="shown">{len(frame)} samples</span></form>')
    source = collected.source
    folder = "results" if source is None or source.is_project else str(source.root)
    replays = " and the seed ADR's replayed replies" if frame["replayed"].any() or collected.illustrations else ""
    legend = (f"<p>Rebuilt by <code>harness report</code> from {escape(folder)}/transcripts/*.jsonl{replays}, "
              "re-parsed by the current parsers. Below the overview, each model's tables, then the runtime suites; "
              "every sample's "
              f"transcript is on the pages beside this report ({FOLDER}/), a few hundred samples a page, where it "
              "opens from a table row's link and samples filter by mode, failure, deviation or finding. A sample "
              f"is {STATUS_TEXT['pass']} when every check that applies holds. Hover a deviation or finding name "
              "for its explanation; pick a model above to show it alone.</p>")
    body = [f"<header><h1>Live results and transcripts</h1><nav>{nav}</nav>{form}</header><main>", first,
            overview_html(collected, legend, more)]
    layout = layout if layout is not None else SampleLayout.of(frame)
    body += [model_html(m, frame[frame["model"] == m], collected.models.get(m),
                        [i for i in collected.illustrations if i["model"] == m], layout) for m in models]
    body.append(sections)
    # Any control character left in a model id, a reason or a name is shown as its escape, never sent raw.
    return visible_controls("".join([head, *body, f"</main><script>{JS}</script></body></html>\n"]), keep="\n\t")


def write_html(collected, path: Path, pages: Pages | None = None, conformance_json: Path | None = None,
               staged=None) -> list:
    """report.html at `path` and the sample pages beside it (harness.reports.html_pages), staged in `staged`
    (harness.reports.staged) or, without one, put in place at once; their paths. pages: what the suites added
    (harness.reports.staged.Pages): sentences to the bottom line, HTML that opens the page (first_screen) and
    sections after the tables, in the order the suites are registered; the templates' conformance follows them."""
    if staged is None:
        with StagedWrites() as own:
            written = write_html(collected, path, pages, conformance_json, own)
            own.commit()
            return written
    path = Path(path)
    added = pages if pages is not None else Pages(None, [], staged)
    sections = "".join(added.sections) + (conformance_html(conformance_json) if conformance_json else "")
    layout = SampleLayout.of(collected.samples)
    staged.text(path, page(collected, sections, layout, added.bottom_line, "".join(added.first_screen),
                           added.models))
    return [str(path), *write_sample_pages(layout, collected.models, ResultsDir(path.parent), staged, CSS)]
