"""The overview that opens results/report.html: summary.md's bottom line, the funnel (harness.reports.funnel),
the rankings, top deviations and models × modes tables, a heat map of all checks by scenario (the sample count
in every cell; the seed ADR's quoted replies in hatched rows of their own, since one or two replies are no
rate); the offline conformance of every pinned template, the last section after the models; and table_section,
the one shape of a section, which the suites (harness.suites) build theirs with."""

import json
import re
from html import escape
from pathlib import Path

import pandas as pd

from harness.reports.html_samples import names_html
from harness.reports.tables import LEGEND, class_table, mode_order, row_labels
from harness.reports.funnel import funnel_html
from harness.reports.verdict import RULE, bottom_line, recorded_differences, table_title, top_names


def table_html(frame: pd.DataFrame, cells: dict | None = None, cls: str = "") -> str:
    """A DataFrame as an HTML table, every value escaped; `cells` maps (row, column) to ready HTML."""
    cells = cells or {}
    head = "".join(f"<th>{escape(str(c))}</th>" for c in frame.columns)
    body = []
    for i, row in enumerate(frame.itertuples(index=False)):
        tds = "".join(f"<td>{cells[(i, c)] if (i, c) in cells else escape(str(v))}</td>"
                      for c, v in zip(frame.columns, row))
        body.append(f"<tr>{tds}</tr>\n")
    return f"<table{f' class={chr(34)}{cls}{chr(34)}' if cls else ''}>\n<tr>{head}</tr>\n{''.join(body)}</table>\n"


def _bold(text: str) -> str:
    """The bottom line's markdown (**strong**, *emphasis*, `code`) as HTML, the rest escaped."""
    html = escape(text)
    html = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", html)
    html = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])", r"<em>\1</em>", html)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html)


def _rate(passed, known) -> str:
    """A heat-map cell: the count always, its colour from red (0) to green (1)."""
    if not known:
        return '<td class="heat none">–</td>'
    rate = passed / known
    return (f'<td class="heat" style="background-color:hsl({round(120 * rate)},55%,{round(78 - 8 * rate)}%)" '
            f'title="{passed} of {known} passed">{passed}/{known}</td>')


def _known(value) -> bool:
    return value is not None and value == value  # NaN != NaN: pandas' missing value


def _heat_rows(frame: pd.DataFrame, scenarios: list, replayed: bool):
    labels = row_labels(frame) if not replayed else frame["model"] + " · quoted by the seed ADR"
    frame = frame.assign(label=labels)
    order = sorted(set(zip(frame["model"], frame["runtime"], frame["mode"].map(mode_order), frame["label"])))
    for model, _, _, label in order:
        group = frame[frame["label"] == label]
        cells = []
        for scenario in [*scenarios, None]:
            part = group if scenario is None else group[group["scenario"] == scenario]
            known = [bool(v) for v in part["passed"] if _known(v)]
            cells.append(_rate(sum(known), len(known)))
        cls = "replayed" if replayed else ""
        note = ' <span class="note">(not run here; one reply each, not a rate)</span>' if replayed else ""
        yield (f'<tr class="{cls}" data-model="{escape(model)}"><th class="row">{escape(label)}{note}</th>'
               f"<td>{len(group)}</td>{''.join(cells)}</tr>\n")


def heat_map_html(frame: pd.DataFrame) -> str:
    """All checks by scenario, one row per model (runtime) and mode; the seed ADR's quotes hatched below."""
    scenarios = sorted(set(frame["scenario"]))
    head = "".join(f"<th>{escape(s)}</th>" for s in scenarios)
    rows = [*_heat_rows(frame[~frame["replayed"]], scenarios, False),
            *_heat_rows(frame[frame["replayed"]], scenarios, True)]
    quoted = (" Hatched rows are the seed ADR's quoted replies, scored one by one and never run here."
              if frame["replayed"].any() else "")
    return ("<p>Samples that passed every check, of those run, per scenario: <em>k/n</em> in every cell, so a "
            f"rate over two samples reads as the two it is; – where the row did not run the scenario.{quoted}</p>"
            f'<table class="heatmap"><tr><th>model · mode</th><th>samples</th>{head}<th>all</th></tr>\n'
            f"{''.join(rows)}</table>\n")


def _top_html(live: pd.DataFrame) -> str:
    items = "".join(f"<li><strong>{escape(label)}</strong> ({n} samples): deviations "
                    f"{names_html(name for name, k in devs for _ in range(k)) if devs else 'none'}; findings "
                    f"{names_html(name for name, k in finds for _ in range(k)) if finds else 'none'}</li>"
                    for label, n, devs, finds in top_names(live))
    return f"<ul>{items}</ul>"


def table_section(anchor: str, title: str, intro_html: str, frame: pd.DataFrame, cls: str = "") -> str:
    """A section of the page: a heading, an introduction (ready HTML) and one table."""
    return (f'<section id="{anchor}"><h2>{title}</h2><p>{intro_html}</p>' + table_html(frame, cls=cls)
            + "</section>")


def conformance_html(path: Path) -> str:
    """The offline conformance of every pinned template (conformance.json, `harness conformance`)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    rows = data.get("templates") if isinstance(data, dict) else None
    if not isinstance(rows, list) or not rows:
        return ""
    frame = pd.DataFrame([{"template": str(r.get("id")), "family": str(r.get("family") or "–"),
                           "status": str(r.get("status")), "reason": str(r.get("reason") or "")}
                          for r in rows if isinstance(r, dict)])
    summary = data.get("summary") if isinstance(data.get("summary"), dict) else {}
    counts = ", ".join(f"{escape(str(k)).replace('_', ' ')} {escape(str(v))}" for k, v in summary.items())
    return table_section("conformance", "Conformance of the pinned templates",
                          "Offline (<code>harness conformance</code>): each template's family, detected from its "
                          f"rendered call. {counts}.", frame, cls="wide")


def _ranking_html(tables: list) -> list:
    return [part for question, index, cases, table in tables
            for part in (f"<h4>{escape(table_title(question, index, cases))}</h4>", table_html(table))]


def overview_html(collected, legend: str, more=()) -> str:
    """The first screen: the bottom line per question (then `more`, the sentences the suites add), then the
    funnel; under them the rule and the rankings, the deviations, the models × modes tables and the heat map by
    scenario."""
    frame = collected.samples
    live = frame[~frame["replayed"]]
    parts = ['<section id="overview"><h2>Overview</h2>']
    if not live.empty:
        sentences, tables = bottom_line(live, more)
        parts += ['<h3>Bottom line</h3><ul class="bottom-line">', *(f"<li>{_bold(s)}</li>" for s in sentences),
                  "</ul>"]
        parts += ['<h3 id="funnel">The funnel: where each model loses its samples</h3>', funnel_html(live)]
        differ = recorded_differences(live)
        if differ:
            parts.append(f"<p>{_bold(differ)}</p>")
        parts += [legend, "<h3>Ranked, question by question</h3>", f"<p>{_bold(RULE)}</p>", f"<p>{_bold(LEGEND)}</p>",
                  *_ranking_html(tables), "<h3>Top deviations per model</h3>", _top_html(live),
                  "<h3>Models and modes</h3>"]
        for title, due in (("Call due", True), ("No call due", False), ("All scenarios", None)):
            table = class_table(live, due)
            if not table.empty:
                parts += [f"<h4>{title}</h4>", table_html(table)]
    else:
        parts.append(legend)
    if not frame.empty:
        parts += ["<h3>All checks by scenario</h3>", heat_map_html(frame)]
    parts.append("</section>")
    return "".join(parts)
