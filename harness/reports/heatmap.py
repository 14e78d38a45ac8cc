"""results/heatmap.png, two views of the same live samples, red to green, the count written in each cell, grey
where nothing was run or the check never applies (the seed ADR's quoted replies are in their own table, its
reconstructed ones are never scored: neither is drawn here):

- the funnel: one row per model and mode, one column per stage a sample passes through
  (harness.reports.funnel: chose the tool, wrote it parseably, right tool, right arguments, used the result,
  answered, all checks over the call-due samples; made no call, answered, all checks over the others), so
  where a model loses its samples is read left to right; report.html draws the same numbers;
- all checks by scenario: models × scenarios, one panel per mode (native, grammar, fallback) with the same rows
  and columns so the panels compare at a glance."""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never a display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from harness.reports.funnel import counts as _counts, funnel_counts  # noqa: E402
from harness.core.values import MODES  # noqa: E402

def _panel(ax, passed, known, rows: list, cols: list, cmap, title: str):
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(known > 0, passed / np.maximum(known, 1), np.nan)
    image = ax.imshow(np.ma.masked_invalid(rate), cmap=cmap, vmin=0, vmax=1, aspect="auto")
    for i in range(len(rows)):
        for j in range(len(cols)):
            if not known[i, j]:
                ax.text(j, i, "–", ha="center", va="center", color="#555555", fontsize=9)
                continue
            ax.text(j, i, f"{int(passed[i, j])}/{int(known[i, j])}", ha="center", va="center", fontsize=9,
                    color="white" if rate[i, j] < 0.2 or rate[i, j] > 0.85 else "black")
    ax.set_xticks(range(len(cols)), cols, rotation=35, ha="right", fontsize=9)
    ax.set_yticks(range(len(rows)), rows, fontsize=9)
    ax.set_xticks(np.arange(-0.5, len(cols)), minor=True)
    ax.set_yticks(np.arange(-0.5, len(rows)), minor=True)
    ax.grid(which="minor", color="white", linewidth=2)
    ax.tick_params(which="minor", length=0)
    ax.set_title(title, fontsize=10, loc="left")
    return image


def draw_heatmap(frame: pd.DataFrame, path: Path) -> Path:
    """frame: live samples only."""
    # Scenarios alphabetically; one panel per mode, stacked in MODES order with the same rows and columns so a
    # column reads down across modes.
    # A model served by a runtime is a row of its own beside the same model in process.
    who = frame["model"] + ((" (" + frame["runtime"] + ")") if frame["runtime"].nunique() > 1 else "")
    frame = frame.assign(who=who)
    models = sorted(set(who))
    cols = sorted(set(frame["scenario"]))
    present = set(frame["mode"])
    modes = [m for m in MODES if m in present] + sorted(present - set(MODES))
    panels = [(mode, models) for mode in modes]
    stage = funnel_counts(frame)
    heights = [len(stage[2]), *(max(1, len(rows)) for _, rows in panels)]
    # Constrained layout: the stage panel's slanted column titles and the panel titles below never overlap.
    size = (1.1 * len(cols) + 4.5, 0.36 * sum(heights) + 1.2 * len(heights) + 1)
    fig, axes = plt.subplots(len(heights), 1, figsize=size, dpi=120, squeeze=False, layout="constrained",
                             gridspec_kw={"height_ratios": heights})
    cmap = matplotlib.colormaps["RdYlGn"].with_extremes(bad="#d9d9d9")
    image = _panel(axes[0, 0], *stage, cmap, "The funnel, all scenarios: samples that passed each stage, of those it applies to")
    for index, (ax, (mode, rows)) in enumerate(zip(axes[1:, 0], panels)):
        mode_frame = frame[frame["mode"] == mode]
        cells = pd.DataFrame({"row": mode_frame["who"], "col": mode_frame["scenario"],
                              "verdict": mode_frame["passed"]})
        _panel(ax, *_counts(cells, rows, cols), rows, cols, cmap, f"All checks by scenario, mode {mode}")
        if index < len(panels) - 1:
            ax.set_xticklabels([])
    fig.suptitle("Live samples that passed, by stage and by scenario; grey: not run or the check never applies",
                 fontsize=11)
    bar = fig.colorbar(image, ax=list(axes[:, 0]), fraction=0.025, pad=0.01)
    bar.set_label("pass rate")
    path = Path(path)
    # No version stamp (CI compares bytes); the format named, as the report writes to a temporary name first.
    fig.savefig(path, format="png", metadata={"Software": None}, bbox_inches="tight")
    plt.close(fig)
    return path
