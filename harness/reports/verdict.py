"""summary.md's answer to "which model, in which mode": every (model, runtime, mode) of the live samples ranked
by one stated rule, and the deviations each model writes most. Fallback's first replies are not a mode of
their own (they are fallback's native attempts), so they are not ranked."""

from collections import Counter

import pandas as pd

from harness.evaluation.scoring import wilson
from harness.reports.tables import _known, by_mode, mode_order, of_class, rate_cell

RULE = ("Ranked by the lower end of the Wilson 95% interval of *all checks* over every live sample of the row "
        "(a rate over few samples cannot rank high on its point value alone); ties by the point rate, then by "
        "the lower end of *expected args* where a call is due (the call right, whether or not the answer after "
        "it was), then native before grammar before fallback (the simpler setup first). Each row is over the "
        "scenarios and samples its model was run on.")


def _bounds(values) -> tuple:
    """(Wilson lower end, point rate, samples) where the check applies; (0, 0, 0) where it never does."""
    known = _known(values)
    k, n = sum(known), len(known)
    return (wilson(k, n)[0] if n else 0.0, k / n if n else 0.0, n)


def ranking(live: pd.DataFrame) -> list:
    """(model, runtime, mode, group) of every live row, best first by RULE."""
    rows = [(model, runtime, mode, group) for (model, runtime, mode), group in
            by_mode(live, ["model", "runtime", "mode"])]
    def key(row):
        model, runtime, mode, group = row
        low, rate, _ = _bounds(group["passed"])
        args = _bounds(of_class(group, True)["expected_arguments"])[0]
        return (-low, -rate, -args, mode_order(mode), model, runtime, mode)
    return sorted(rows, key=key)


def verdict_lines(live: pd.DataFrame) -> list:
    ranked = ranking(live)
    if not ranked:
        return []
    several = live["runtime"].nunique() > 1
    table = pd.DataFrame([{"rank": i + 1, "model": model, **({"runtime": runtime} if several else {}),
                           "mode": mode, "samples": len(group), "all checks": rate_cell(group["passed"]),
                           "call due: expected args": rate_cell(of_class(group, True)["expected_arguments"]),
                           "no call due: no call made": rate_cell(of_class(group, False)["right_tool"])}
                          for i, (model, runtime, mode, group) in enumerate(ranked)])
    best, *rest = ranked
    where = f" ({best[1]})" if several else ""
    lines = [f"**{best[0]}{where}, {best[2]} mode**: all checks {rate_cell(best[3]['passed'])}."]
    if rest:
        low = _bounds(best[3]["passed"])[0]
        second = rest[0]
        known = _known(second[3]["passed"])
        high = wilson(sum(known), len(known))[1]
        lines[0] += (f" Its interval overlaps the next row's ({second[0]}, {second[2]}: "
                     f"{rate_cell(second[3]['passed'])}): these samples do not separate the two."
                     if high >= low else " Its interval lies above every other row's.")
    return [RULE, "", *lines, "", table.to_markdown(index=False)]


def top_deviations_lines(live: pd.DataFrame, top: int = 3) -> list:
    """Per model (and runtime), the deviations and findings its live samples show most, over all modes."""
    lines = []
    for (model, runtime), group in live.groupby(["model", "runtime"], sort=True):
        label = model + (f" ({runtime})" if live["runtime"].nunique() > 1 else "")
        parts = []
        for column, title in (("deviations", "deviations"), ("findings", "findings")):
            counts = Counter(name for names in group[column] for name in names)
            shown = ", ".join(f"`{name}` ×{n}" for name, n in sorted(counts.items(), key=lambda c: (-c[1], c[0]))[:top])
            parts.append(f"{title} {shown or 'none'}")
        lines.append(f"- **{label}** ({len(group)} samples): " + "; ".join(parts))
    return lines
