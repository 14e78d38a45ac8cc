"""summary.md's answer to "which model, in which mode": every (model, runtime, mode) of the live samples ranked
by one stated rule, and the deviations each model writes most. Fallback's first replies are not a mode of
their own (they are fallback's native attempts), so they are not ranked."""

from collections import Counter

import pandas as pd

from harness.evaluation.scoring import wilson
from harness.reports import markdown
from harness.reports.tables import known_values, by_mode, mode_order, of_class, rate_cell

RULE = ("Ranked by the lower end of the Wilson 95% interval of *all checks* over every live sample of the row "
        "(a rate over few samples cannot rank high on its point value alone); ties by the point rate, then by "
        "the lower end of *expected args* where a call is due (the call right, whether or not the answer after "
        "it was), then native before grammar before fallback (the simpler setup first). Each row is over the "
        "scenarios and samples its model was run on.")


def _bounds(values) -> tuple:
    """(Wilson lower end, point rate, samples) where the check applies; (0, 0, 0) where it never does."""
    known = known_values(values)
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


def ranking_table(live: pd.DataFrame) -> pd.DataFrame:
    several = live["runtime"].nunique() > 1
    return pd.DataFrame([{"rank": i + 1, "model": model, **({"runtime": runtime} if several else {}),
                          "mode": mode, "samples": len(group), "all checks": rate_cell(group["passed"]),
                          "call due: expected args": rate_cell(of_class(group, True)["expected_arguments"]),
                          "no call due: no call made": rate_cell(of_class(group, False)["right_tool"])}
                         for i, (model, runtime, mode, group) in enumerate(ranking(live))])


def verdict_sentence(live: pd.DataFrame) -> str:
    """The first row by RULE, and whether its interval separates it from the second (markdown emphasis)."""
    best, *rest = ranking(live)
    where = f" ({best[1]})" if live["runtime"].nunique() > 1 else ""
    text = f"**{best[0]}{where}, {best[2]} mode**: all checks {rate_cell(best[3]['passed'])}."
    if not rest:
        return text
    second = rest[0]
    known = known_values(second[3]["passed"])
    overlaps = wilson(sum(known), len(known))[1] >= _bounds(best[3]["passed"])[0]
    return text + (f" Its interval overlaps the next row's ({second[0]}, {second[2]}: "
                   f"{rate_cell(second[3]['passed'])}): these samples do not separate the two." if overlaps else
                   " Its interval lies above every other row's.")


def verdict_lines(live: pd.DataFrame) -> list:
    return [RULE, "", markdown.line(verdict_sentence(live)), "", markdown.table(ranking_table(live))]


def top_names(live: pd.DataFrame, top: int = 3) -> list:
    """(label, samples, [(deviation, count)], [(finding, count)]) per model (and runtime), over all modes."""
    out = []
    several = live["runtime"].nunique() > 1
    for (model, runtime), group in live.groupby(["model", "runtime"], sort=True):
        most = [sorted(Counter(n for names in group[column] for n in names).items(), key=lambda c: (-c[1], c[0]))[:top]
                for column in ("deviations", "findings")]
        out.append((model + (f" ({runtime})" if several else ""), len(group), *most))
    return out


def top_deviations_lines(live: pd.DataFrame, top: int = 3) -> list:
    """Per model (and runtime), the deviations and findings its live samples show most, over all modes."""
    shown = lambda pairs: ", ".join(f"`{name}` ×{n}" for name, n in pairs) or "none"  # noqa: E731
    return [f"- **{markdown.line(label)}** ({n} samples): deviations {shown(devs)}; findings {shown(finds)}"
            for label, n, devs, finds in top_names(live, top)]
