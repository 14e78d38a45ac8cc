"""The funnel: per model and mode, each stage a sample passes through, counted where the stage applies. A
call-due sample chooses the tool, writes it so the strict parser reads it, names the right tool with the right
arguments, uses the result and answers; a no-call sample makes no call and answers. Read left to right, it
shows where a model loses its samples (one that chose right but wrote it wrong loses them at the second stage).

One set of numbers, drawn twice: in report.html as HTML (funnel_html, the first thing the page shows) and as
the top panel of heatmap.png (harness.reports.heatmap), so the two never disagree. Plain pandas here: the
page is written without loading matplotlib."""

from html import escape

import numpy as np
import pandas as pd

from harness.reports.rates import known
from harness.reports.tables import mode_order, of_class, row_labels

# (title, verdict, which samples: True call due, False no call due), in the order a sample meets them.
STAGES = (("chose the tool", "intended_tool", True), ("wrote it parseably", "parsed", True),
          ("right tool", "right_tool", True), ("right arguments", "expected_arguments", True),
          ("used the result", "result_used", True), ("answered", "answer", True), ("all checks", "passed", True),
          ("made no call", "right_tool", False), ("answered", "answer", False), ("all checks", "passed", False))
CLASSES = {True: "call due", False: "no call due"}


def stage_titles() -> list:
    """Each stage's title with its class ('call due: chose the tool'): two stages share a short title."""
    return [f"{CLASSES[due]}: {title}" for title, _, due in STAGES]


def counts(cells: pd.DataFrame, rows: list, cols: list):
    """(passed, known) arrays rows × cols from a long table of (row, col, verdict)."""
    if cells.empty:
        return np.zeros((len(rows), len(cols))), np.zeros((len(rows), len(cols)))
    cells = cells.assign(known=cells["verdict"].map(known),
                         ok=cells["verdict"].map(lambda v: known(v) and bool(v)))
    grouped = cells.groupby(["row", "col"])
    shape = lambda s: s.unstack().reindex(index=rows, columns=cols).fillna(0).to_numpy(dtype=float)  # noqa: E731
    return shape(grouped["ok"].sum()), shape(grouped["known"].sum())


def funnel_counts(frame: pd.DataFrame):
    """(passed, known, rows, cols): rows 'model · mode' (modes in their usual order), columns the stages."""
    labels = row_labels(frame)
    order = sorted(set(zip(frame["model"], frame["runtime"], frame["mode"].map(mode_order), frame["mode"], labels)))
    rows = [label for *_, label in order]
    cols = stage_titles()
    cells = pd.concat([pd.DataFrame({"row": labels[of_class(frame, due).index], "col": col,
                                     "verdict": of_class(frame, due)[key]})
                       for (_, key, due), col in zip(STAGES, cols)])
    return (*counts(cells, rows, cols), rows, cols)


def _cell(passed: float, total: float) -> str:
    """k/n and a bar as long as the rate, coloured red (0) to green (1); '–' where the stage applied to none."""
    if not total:
        return '<td class="stage none" title="applied to no sample of this row">–</td>'
    rate = passed / total
    colour = f"hsl({round(120 * rate)},55%,45%)"
    return (f'<td class="stage" title="{int(passed)} of {int(total)} samples where it applies">'
            f'<svg width="40" height="8" aria-hidden="true"><rect width="40" height="8" fill="#e6e6e6"/>'
            f'<rect width="{40 * rate:.1f}" height="8" fill="{colour}"/></svg> {int(passed)}/{int(total)}</td>')


def funnel_html(frame: pd.DataFrame) -> str:
    """The funnel as an HTML table (live samples), a row per model and mode, its model named for the filter."""
    passed, total, rows, _ = funnel_counts(frame)
    models = dict(zip(row_labels(frame), frame["model"]))
    spans = [(CLASSES[due], sum(1 for _, _, d in STAGES if d == due)) for due in CLASSES]
    head = ("<tr><th rowspan=\"2\">model · mode</th>"
            + "".join(f'<th colspan="{n}">{escape(title)} samples</th>' for title, n in spans) + "</tr>\n<tr>"
            + "".join(f"<th>{escape(title)}</th>" for title, _, _ in STAGES) + "</tr>\n")
    body = "".join(f'<tr data-model="{escape(models[label])}"><th class="row">{escape(label)}</th>'
                   + "".join(_cell(passed[i, j], total[i, j]) for j in range(len(STAGES))) + "</tr>\n"
                   for i, label in enumerate(rows))
    return ("<p>Where each model loses its samples, stage by stage: <em>k/n</em> of the samples the stage "
            "applies to (a stage a sample never reached does not count it: <em>right arguments</em> counts the "
            "samples that called the expected tool; – where it counted none). The same numbers as the top panel "
            "of heatmap.png.</p>"
            f'<table class="funnel">\n{head}{body}</table>\n')
