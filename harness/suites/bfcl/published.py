"""BFCL's published figures beside ours, column for column: each category run here stands beside the board's
figure for that same category (Python Simple AST beside simple_python, never the overall table's mean over
Python, Java and JavaScript; irrelevance and live_irrelevance apart, never averaged).

The figures were read from the public gorilla repository's gh-pages leaderboard CSVs (`data_non_live.csv`,
`data_live.csv`) of two boards: the current one, and the last that listed Qwen2.5's instruct models. A model no
board ever listed says so; where a board listed a sibling of it (the same family and size, another fine-tune)
that sibling's figures are shown as such, never as the model's own."""

from __future__ import annotations

from harness.reports.rates import rate_cell
from harness.reports.tables import mode_order

BOARDS = {
    "2026-04-12": "BFCL leaderboard v4 of 2026-04-12 (gorilla gh-pages, data_non_live.csv and data_live.csv)",
    "2025-04-25": "BFCL leaderboard v3 of 2025-04-25 (gorilla gh-pages, data_non_live.csv and data_live.csv), "
                  "the last board with Qwen2.5's instruct rows",
}
_ORDER = ("simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance", "live_simple", "live_multiple",
          "live_parallel", "live_parallel_multiple", "live_irrelevance", "live_relevance")


def _row(*figures) -> dict:
    return dict(zip(_ORDER, figures))


# model id -> (BFCL's model, board, per category in percent, "own" or "sibling")
PUBLISHED = {
    "qwen3-0.6b-q8_0": ("Qwen3-0.6B (FC)", "2026-04-12",
                        _row(86.50, 86.00, 67.50, 69.50, 82.50, 61.24, 56.13, 43.75, 37.50, 79.19, 75.00), "own"),
    "llama-3.2-1b-instruct-q4_k_m": ("Llama-3.2-1B-Instruct (FC)", "2026-04-12",
                                     _row(75.00, 50.50, 44.00, 15.00, 35.83, 31.78, 7.31, 0.00, 0.00, 67.31, 43.75),
                                     "own"),
    "qwen2.5-0.5b-instruct-q4_k_m": ("Qwen2.5-0.5B-Instruct (FC)", "2025-04-25",
                                     _row(81.50, 78.00, 60.00, 50.00, 39.17, 56.20, 41.31, 56.25, 20.83, 53.29, 88.89),
                                     "own"),
    "qwen2.5-coder-0.5b-instruct-q4_k_m": ("Qwen2.5-0.5B-Instruct (FC)", "2025-04-25",
                                           _row(81.50, 78.00, 60.00, 50.00, 39.17, 56.20, 41.31, 56.25, 20.83, 53.29,
                                                88.89), "sibling"),
    "qwen2.5-coder-1.5b-instruct-q4_k_m": ("Qwen2.5-1.5B-Instruct (FC)", "2025-04-25",
                                           _row(92.25, 87.00, 81.50, 75.50, 64.58, 74.03, 66.10, 50.00, 45.83, 60.77,
                                                94.44), "sibling"),
}
NEVER = "never listed on a BFCL board"


def published_cell(model: str, category: str) -> str:
    """BFCL's figure for `model` in `category`, with whose it is, or why there is none."""
    entry = PUBLISHED.get(model)
    if entry is None:
        return NEVER
    name, board, figures, kind = entry
    figure = figures.get(category)
    if figure is None:
        return f"{name}: no such column"
    whose = name if kind == "own" else f"sibling {name} (this model {NEVER})"
    return f"{figure:.2f} ({whose}, board {board})"


def published_lines(outcomes: list, verdicts: dict | None, valid, not_judged: str) -> list:
    """The table: every model × category run here, BFCL's figure for that column, and ours per mode (BFCL's
    checker on the strict calls). valid(verdict) reads one checker verdict."""
    lines = ["| model | category | published | here (BFCL's checker, strict calls) |", "|---|---|---|---|"]
    run = sorted({(o.model, o.category) for o in outcomes},
                 key=lambda mc: (mc[0], _ORDER.index(mc[1]) if mc[1] in _ORDER else len(_ORDER)))
    for model, category in run:
        group = [o for o in outcomes if o.model == model and o.category == category]
        cells = []
        for mode in sorted({o.mode for o in group}, key=mode_order):
            mine = [o for o in group if o.mode == mode]
            if verdicts is None:
                cells.append(f"{mode}: {not_judged}")
            else:
                cells.append(f"{mode}: {rate_cell([valid(verdicts[(o.case, o.model, o.mode)][0]) for o in mine])}")
        lines.append(f"| {model} | {category} | {published_cell(model, category)} | {'; '.join(cells)} |")
    used = sorted({PUBLISHED[m][1] for m, _ in run if m in PUBLISHED})
    lines += [""] + [f"- Board {b}: {BOARDS[b]}." for b in used]
    return lines
