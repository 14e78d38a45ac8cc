"""results/report.html: an overview first (harness.reports.html_overview: the verdict, the models × modes
tables, a heat map, runtime agreement and conformance, the pinned templates' conformance), then the per-model
tables of results/<model>.md and, under them, every sample's transcript (harness.reports.html_samples), on one
static page.

Self-contained (inline CSS and JS, no request leaves the file) and byte-identical on repeat (no timestamp,
models, scenarios, modes and seeds in a fixed order), so CI's comparison of results/ holds. Without JS every
sample is still there, collapsed; the script adds filters (model, mode, failed only, a deviation or finding
name) and opens the sample an anchor points at. Anchors: #overview, #<model>, #<model>--<scenario>--<mode> (a
table row's samples), #<model>--<scenario>--<mode>--<sample> (one sample)."""

from html import escape
from pathlib import Path

import pandas as pd

from harness.reports.html_overview import (
    agreement_html, conformance_html, overview_html, parser_agreement_html, runtime_conformance_html, table_html,
)
from harness.reports.html_samples import STATUS_TEXT, names_html, sample_html, status, token_pattern
from harness.reports.examples import failing_examples
from harness.reports.tables import EXAMPLES, RATES, by_mode, mode_order, mode_table, replay_table, scenario_table

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
td,th{border:1px solid #ccc;padding:2px 6px;vertical-align:top;text-align:left}
code{white-space:pre-wrap;overflow-wrap:anywhere}
td code,td a{overflow-wrap:anywhere}
table.heatmap td.heat{text-align:center;min-width:3.2em;white-space:nowrap}
table.heatmap td.none{color:#888;background:#eee}
table.heatmap th.row{white-space:normal;background:#f5f5f7}
table.heatmap tr.replayed td.heat{background-image:repeating-linear-gradient(45deg,rgba(0,0,0,.22) 0 2px,
transparent 2px 7px)}
table.heatmap tr.replayed th.row{font-style:italic}
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
  var samples = Array.prototype.slice.call(document.querySelectorAll('details.sample'));
  var groups = document.querySelectorAll('section.group');
  var next = -1;
  var models = document.querySelectorAll('[data-model]');
  function apply() {
    var mode = form.elements.mode.value, failed = form.elements.failed.checked, name = form.elements.name.value;
    var model = form.elements.model.value;
    Array.prototype.forEach.call(models, function (m) { m.hidden = model && m.dataset.model !== model; });
    var shown = 0;
    samples.forEach(function (s) {
      var keep = (!mode || s.dataset.mode === mode) && (!failed || s.dataset.status === 'fail') &&
                 (!name || s.dataset.names.split(' ').indexOf(name) >= 0) &&
                 !s.closest('section.model').hidden;
      s.hidden = !keep;
      if (keep) shown += 1;
    });
    Array.prototype.forEach.call(groups, function (g) {
      g.hidden = !g.querySelector('details.sample:not([hidden])');
    });
    document.getElementById('shown').textContent = shown + ' of ' + samples.length + ' samples shown';
  }
  function reveal() {
    var target = document.getElementById(decodeURIComponent(location.hash.slice(1)));
    if (!target) return;
    var section = target.closest('section.model');
    if (section && section.hidden) { form.elements.model.value = ''; apply(); }
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


def _examples_html(group: pd.DataFrame, model: str) -> str:
    items = [f'<a href="#{escape(anchor(model, e.scenario, e.mode, e.sample))}">seed {e.seed}</a> '
             f"({escape(e.label)}): <code class=\"ex\">{escape(e.reply[:160])}{'…' if len(e.reply) > 160 else ''}"
             "</code>" for e in failing_examples(group)]
    return "<br>".join(items) or "–"


def _live_tables(model: str, live: pd.DataFrame) -> list:
    parts = []
    if live["mode"].nunique() > 1:
        parts += ["<h3>Modes</h3>", table_html(mode_table(live))]
    table = scenario_table(live).drop(columns=[EXAMPLES])
    cells = {}
    for i, ((scenario, mode), group) in enumerate(by_mode(live, ["scenario", "mode"])):
        cells[(i, "scenario")] = f'<a href="#{escape(anchor(model, scenario, mode))}">{escape(scenario)}</a>'
        cells[(i, "deviations")] = names_html(d for ds in group["deviations"] for d in ds)
        cells[(i, "findings")] = names_html(f for fs in group["findings"] for f in fs)
        cells[(i, EXAMPLES)] = _examples_html(group, model)
    table[EXAMPLES] = ""
    return [*parts, "<h3>Live, by scenario and mode</h3>", table_html(table, cells)]


def _samples(model: str, frame: pd.DataFrame, tokens) -> list:
    parts = ["<h3>Samples</h3>"]
    for (scenario, mode), group in by_mode(frame, ["scenario", "mode"]):
        # Replayed samples have no seed (NaN here, which sorts unreliably): they go by index after live ones.
        rows = sorted(group.to_dict("records"),
                      key=lambda r: (r["replayed"], -1 if r["replayed"] else r["seed"], r["sample"]))
        failed = sum(status(r["passed"]) == "fail" for r in rows)
        parts.append(f'<section class="group" id="{escape(anchor(model, scenario, mode))}">'
                     f"<h4>{escape(scenario)} · {escape(mode)}: {failed} of {len(rows)} failed</h4>\n")
        parts += [sample_html(r, anchor(model, scenario, mode, r["sample"]), RATES, tokens) for r in rows]
        parts.append("</section>\n")
    return parts


def _illustrations_html(illustrations: list) -> str:
    items = "".join(f"<li>{escape(i['scenario'])}: <code>{escape(i['reply'])}</code> → {escape(i['reading'])}. "
                    f"The ADR: “{escape(i['quote'])}” Filled in: {escape(i['note'])}</li>" for i in illustrations)
    return ("<h3>Reconstructed from the seed ADR's description (illustrations, not scored)</h3>"
            f"<ul>{items}</ul>")


def model_html(model: str, frame: pd.DataFrame, record, illustrations=()) -> str:
    live = frame[~frame["replayed"]] if not frame.empty else frame
    replayed = frame[frame["replayed"]] if not frame.empty else frame
    parts = [f'<section class="model" id="{escape(model)}" data-model="{escape(model)}"><h2>{escape(model)}</h2>']
    if record is not None:
        parts.append(f"<p>family: <strong>{escape(record.family or 'none (chat without tools)')}</strong>: "
                     f"{escape((record.detection or {}).get('reason', ''))}</p>")
    if not live.empty:
        parts += _live_tables(model, live)
    if not replayed.empty:
        parts += ["<h3>Quoted by the seed ADR (not run here)</h3>", table_html(replay_table(replayed))]
    if illustrations:
        parts.append(_illustrations_html(illustrations))
    if not frame.empty:
        parts += _samples(model, frame, token_pattern(record))
    parts.append("</section>")
    return "".join(parts)


def page(collected, sections: str = "") -> str:
    frame = collected.samples
    models = sorted(set(frame["model"]) | {i["model"] for i in collected.illustrations})
    names = sorted({n for col in ("deviations", "findings") for ns in frame[col] for n in ns})
    modes = sorted(set(frame["mode"]), key=lambda m: (mode_order(m), m))
    head = ('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>harness: live results and transcripts</title><style>{CSS}</style></head><body>")
    links = [("overview", "overview"), *((k, k.replace("-", " ")) for k in
                                         ("runtime-agreement", "runtime-conformance", "parser-agreement",
                                          "conformance")
                                         if f'id="{k}"' in sections)]
    nav = "".join(f'<a href="#{k}">{escape(t)}</a>' for k, t in links)
    form = ('<form id="filter"><label>model <select name="model"><option value="">all</option>'
            + "".join(f'<option value="{escape(m)}">{escape(m)}</option>' for m in models)
            + '</select></label><label>mode <select name="mode"><option value="">all</option>'
            + "".join(f'<option value="{escape(m)}">{escape(m)}</option>' for m in modes)
            + '</select></label><label><input type="checkbox" name="failed"> failed samples only</label>'
            '<label>deviation or finding <select name="name"><option value="">any</option>'
            + "".join(f'<option value="{escape(n)}">{escape(n)}</option>' for n in names)
            + '</select></label><button type="button" id="next-failed">next failed sample</button>'
            f'<span id="shown">{len(frame)} samples</span></form>')
    source = collected.source
    folder = "results" if source is None or source.is_project else str(source.root)
    replays = " and the seed ADR's replayed replies" if frame["replayed"].any() or collected.illustrations else ""
    legend = (f"<p>Rebuilt by <code>harness report</code> from {escape(folder)}/transcripts/*.jsonl{replays}, "
              "re-parsed by the current parsers. Below the overview, each model's tables, then every sample: "
              "table rows link to their samples; a sample opens to its transcript. A sample is "
              f"{STATUS_TEXT['pass']} when every check that applies holds. Hover a deviation or finding name for "
              "its explanation; pick a model above to show it alone.</p>")
    body = [f"<header><h1>Live results and transcripts</h1><nav>{nav}</nav>{form}</header><main>",
            overview_html(collected, legend), sections]
    body += [model_html(m, frame[frame["model"] == m], collected.models.get(m),
                        [i for i in collected.illustrations if i["model"] == m]) for m in models]
    return "".join([head, *body, f"</main><script>{JS}</script></body></html>\n"])


def write_html(collected, path: Path, runtime_records: list = (), agreement_records: list = (),
               conformance_json: Path | None = None, parser_records: list = ()) -> Path:
    path = Path(path)
    sections = (agreement_html(list(agreement_records)) + runtime_conformance_html(list(runtime_records))
                + parser_agreement_html(list(parser_records))
                + (conformance_html(conformance_json) if conformance_json else ""))
    path.write_text(page(collected, sections), encoding="utf-8")
    return path
