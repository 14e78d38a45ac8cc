"""results/heatmap.png: models × scenarios, the share of samples that passed every check, readable at a
glance: red to green, the count written in each cell, grey where a model has no sample of a scenario."""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; never a display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402


def _counts(frame: pd.DataFrame):
    labels = frame["model"] + frame["replayed"].map({True: " (replayed)", False: ""})
    frame = frame.assign(label=labels, ok=frame["passed"].map(lambda v: v is True),
                         known=frame["passed"].map(lambda v: v is not None and v == v))
    grouped = frame.groupby(["label", "scenario"])
    return grouped["ok"].sum().unstack(), grouped["known"].sum().unstack()


def draw_heatmap(frame: pd.DataFrame, path: Path) -> Path:
    passed, known = _counts(frame)
    # Live models first, replayed ones after; scenarios alphabetically.
    rows = sorted(passed.index, key=lambda label: (label.endswith("(replayed)"), label))
    cols = sorted(passed.columns)
    passed, known = passed.reindex(index=rows, columns=cols), known.reindex(index=rows, columns=cols)
    rate = np.where(known.fillna(0).to_numpy() > 0, passed.to_numpy(dtype=float) / known.to_numpy(dtype=float), np.nan)

    fig, ax = plt.subplots(figsize=(1.1 * len(cols) + 3.5, 0.62 * len(rows) + 2.2), dpi=120)
    cmap = matplotlib.colormaps["RdYlGn"].copy()
    cmap.set_bad("#d9d9d9")
    image = ax.imshow(np.ma.masked_invalid(rate), cmap=cmap, vmin=0, vmax=1, aspect="auto")
    for i in range(len(rows)):
        for j in range(len(cols)):
            n = known.iat[i, j]
            if n != n or not n:
                ax.text(j, i, "–", ha="center", va="center", color="#555555", fontsize=9)
                continue
            k = int(passed.iat[i, j])
            ax.text(j, i, f"{k}/{int(n)}", ha="center", va="center", fontsize=9,
                    color="white" if rate[i, j] < 0.2 or rate[i, j] > 0.85 else "black")
    ax.set_xticks(range(len(cols)), cols, rotation=35, ha="right", fontsize=9)
    ax.set_yticks(range(len(rows)), rows, fontsize=9)
    ax.set_xticks(np.arange(-0.5, len(cols)), minor=True)
    ax.set_yticks(np.arange(-0.5, len(rows)), minor=True)
    ax.grid(which="minor", color="white", linewidth=2)
    ax.tick_params(which="minor", length=0)
    ax.set_title("Samples that passed every check (mode native); grey: not run, replayed: seed ADR quotes",
                 fontsize=10)
    bar = fig.colorbar(image, ax=ax, fraction=0.03, pad=0.02)
    bar.set_label("pass rate")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path)
    plt.close(fig)
    return path
