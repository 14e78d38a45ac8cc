"""results/heatmap.png: models × scenarios, the share of samples that passed every check, one panel per mode
(native, grammar, fallback) with the same rows and columns so the panels compare at a glance: red to green,
the count written in each cell, grey where a model has no sample of a scenario in that mode."""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never a display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from harness.scenarios import MODES  # noqa: E402


def _counts(frame: pd.DataFrame):
    labels = frame["model"] + frame["replayed"].map({True: " (replayed)", False: ""})
    frame = frame.assign(label=labels, ok=frame["passed"].map(lambda v: v is True),
                         known=frame["passed"].map(lambda v: v is not None and v == v))
    grouped = frame.groupby(["label", "scenario"])
    return grouped["ok"].sum().unstack(), grouped["known"].sum().unstack()


def _panel(ax, frame: pd.DataFrame, rows: list, cols: list, cmap, title: str, show_rows: bool = True):
    passed, known = _counts(frame) if not frame.empty else (pd.DataFrame(), pd.DataFrame())
    passed, known = passed.reindex(index=rows, columns=cols), known.reindex(index=rows, columns=cols)
    known_n = known.fillna(0).to_numpy(dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(known_n > 0, passed.fillna(0).to_numpy(dtype=float) / np.maximum(known_n, 1), np.nan)
    image = ax.imshow(np.ma.masked_invalid(rate), cmap=cmap, vmin=0, vmax=1, aspect="auto")
    for i in range(len(rows)):
        for j in range(len(cols)):
            n = known_n[i, j]
            if not n:
                ax.text(j, i, "–", ha="center", va="center", color="#555555", fontsize=9)
                continue
            k = int(passed.iat[i, j])
            ax.text(j, i, f"{k}/{int(n)}", ha="center", va="center", fontsize=9,
                    color="white" if rate[i, j] < 0.2 or rate[i, j] > 0.85 else "black")
    ax.set_xticks(range(len(cols)), cols, rotation=35, ha="right", fontsize=9)
    ax.set_yticks(range(len(rows)), rows if show_rows else [""] * len(rows), fontsize=9)
    ax.set_xticks(np.arange(-0.5, len(cols)), minor=True)
    ax.set_yticks(np.arange(-0.5, len(rows)), minor=True)
    ax.grid(which="minor", color="white", linewidth=2)
    ax.tick_params(which="minor", length=0)
    ax.set_title(title, fontsize=10)
    return image


def draw_heatmap(frame: pd.DataFrame, path: Path) -> Path:
    labels = frame["model"] + frame["replayed"].map({True: " (replayed)", False: ""})
    # Live models first, replayed ones after (they quote the seed ADR: native only); scenarios alphabetically;
    # one panel per mode, stacked in MODES order with the same columns so a column reads down across modes.
    live = sorted(set(labels[~frame["replayed"]]))
    replayed = sorted(set(labels[frame["replayed"]]))
    cols = sorted(set(frame["scenario"]))
    present = set(frame["mode"])
    modes = [m for m in MODES if m in present] + sorted(present - set(MODES))
    panels = [(mode, live + (replayed if mode == "native" else [])) for mode in modes]
    heights = [max(1, len(rows)) for _, rows in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(1.1 * len(cols) + 4.5, 0.5 * sum(heights) + 1.6 * len(panels) + 1),
                             dpi=120, squeeze=False, gridspec_kw={"height_ratios": heights})
    cmap = matplotlib.colormaps["RdYlGn"].with_extremes(bad="#d9d9d9")
    image = None
    for index, (ax, (mode, rows)) in enumerate(zip(axes[:, 0], panels)):
        image = _panel(ax, frame[frame["mode"] == mode], rows, cols, cmap, f"mode {mode}", True)
        if index < len(panels) - 1:
            ax.set_xticklabels([])
    fig.suptitle("Samples that passed every check, per mode; grey: not run; replayed: seed ADR quotes", fontsize=11)
    bar = fig.colorbar(image, ax=list(axes[:, 0]), fraction=0.025, pad=0.02)
    bar.set_label("pass rate")
    path = Path(path)
    fig.savefig(path, metadata={"Software": None}, bbox_inches="tight")  # no version stamp: CI compares bytes
    plt.close(fig)
    return path
