"""The deployment page's opening lines: one row per model with the best ranked setup in process and the best
ranked setup on a runtime, each on BFCL's calls-due accuracy over the cases the model's ranked rows share, so a
reader learns where a model's tool calling works before the table of every setup. Ties are named, not broken: a
setup listed first among equals has won nothing. Within a model only, as the ranks are; models in name order."""

from __future__ import annotations

from html import escape

from harness.suites.deployment.rows import Rank, reaches

COLUMNS = ("model", "ranked on", "best in process", "best on a runtime")
IN_PROCESS, SERVED = 0, 1      # Row.order[0] of in-process and served rows (replays are not ranked)
NAMED = 3                      # tied setups a cell names before counting the rest
GLANCE = ("Per model, where its tool calling works: the best ranked setup in process and the best ranked on a "
          "runtime, on BFCL's calls-due accuracy over the call-due cases the model's ranked rows share (ties "
          "named; a setup below the model's first place says whether its interval reaches it). Every setup "
          "follows, best first within its model.")


def best(rows: list, ranks: dict, kind: int) -> tuple:
    """(the setups of `kind` in its best place, their Rank) among a model's ranked rows; ((), None) for none."""
    mine = [r for r in rows if r.order[0] == kind and ranks[id(r)]]
    if not mine:
        return (), None
    top = min(ranks[id(r)].place for r in mine)
    first = sorted((r for r in mine if ranks[id(r)].place == top), key=lambda r: r.order)
    return tuple(r.setup for r in first), ranks[id(first[0])]


def _cell(setups: tuple, rank: Rank | None, leader: Rank | None) -> str:
    if rank is None:
        return "– (none ranked)"
    if rank.k == 0:
        return f"none passes any ({rank.cell})"
    names = "; ".join(setups[:NAMED]) + (f"; and {len(setups) - NAMED} more tied" if len(setups) > NAMED else "")
    # The model's first place overall, and whether this cell's interval reaches it: a reader should not take a
    # runtime's lower count for a worse runtime when these cases cannot tell the two apart.
    if leader is not None and rank.k < leader.k:
        names += (" (below the first place; its interval " + ("overlaps" if reaches(rank, leader) else "lies below")
                  + " it)")
    return f"{names}: {rank.cell}"


def glance_rows(rows: list, ranks: dict, judged: bool) -> list:
    """Per model in name order: (model, ranked on, best in process, best on a runtime) as cell texts; nothing
    before BFCL's checker judged the rows (there is no accuracy to rank on)."""
    if not judged:
        return []
    out = []
    for model in sorted({r.model for r in rows}):
        mine = [r for r in rows if r.model == model]
        here, there = best(mine, ranks, IN_PROCESS), best(mine, ranks, SERVED)
        ranked = [x[1] for x in (here, there) if x[1] is not None]
        if not ranked:
            continue
        leader = max(ranked, key=lambda x: x.k)
        cases = f"{leader.n} call-due case{'' if leader.n == 1 else 's'}"
        out.append((model, cases, _cell(*here, leader), _cell(*there, leader)))
    return out


def glance_markdown(found: list) -> list:
    if not found:
        return []
    return [GLANCE, "", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS),
            *("| " + " | ".join(cells) + " |" for cells in found), ""]


def glance_html(found: list) -> str:
    if not found:
        return ""
    head = "".join(f"<th>{escape(c)}</th>" for c in COLUMNS)
    # data-model: report.html's model selector shows the chosen model's row alone, as it does the table's.
    body = "".join(f'<tr data-model="{escape(cells[0])}">' + "".join(f"<td>{escape(c)}</td>" for c in cells)
                   + "</tr>" for cells in found)
    return (f'<p>{escape(GLANCE)}</p><table class="glance"><thead><tr>{head}</tr></thead><tbody>{body}</tbody>'
            "</table><p>Every setup:</p>")
