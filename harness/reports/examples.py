"""Example replies for a failing row of a per-model table (a scenario × mode with failed samples): what the
model actually wrote, so a reader sees the near miss behind a rate without opening the transcript.

Chosen deterministically: failed samples by seed (then sample index); the lowest first, then the lowest whose
label differs from it (a second example of the same failure says less than a different one), else the next."""

from dataclasses import dataclass
from functools import lru_cache

import pandas as pd

from harness.evaluation.scoring import VERDICTS, parse_steps
from harness.storage.transcripts import RecordRef, load_record
from harness.reports.markdown import visible_controls

MARKDOWN_WIDTH = 72  # characters of a reply shown in a markdown cell; the HTML report shows it whole


@dataclass(frozen=True)
class Example:
    model: str
    scenario: str
    mode: str
    sample: int
    seed: int
    turn: int
    step: int
    reply: str
    label: str  # the step's deviation name, else what the sample failed


def _failed(value) -> bool:
    return value is not None and value == value and not value  # None: does not apply; NaN: pandas' missing


def _pick_step(record) -> tuple:
    """(turn, step, reply, deviation) of the first reply the strict parser named a deviation, else the last
    reply (a wrong answer or a call loop is best seen in the text the sample ended on)."""
    last = None
    for t, turn in enumerate(record.turns):
        steps = turn.get("steps", [])
        for s, (step, parse) in enumerate(zip(steps, parse_steps(steps, record.family))):
            if parse.deviation:
                return t, s, step.get("reply", ""), parse.deviation
            last = (t, s, step.get("reply", ""), None)
    return last or (0, 0, "", None)


@lru_cache(maxsize=256)
def _picked(ref: RecordRef) -> tuple:
    """_pick_step of a record read again from its transcript: the markdown and the HTML table ask for the
    same examples, and the record is read once for both."""
    return _pick_step(load_record(ref))


def forget_read_records() -> None:
    """Drop the records read for examples: a new report reads transcripts that may have changed since."""
    _picked.cache_clear()


def _label(deviation, row: dict) -> str:
    failed = [name.replace("_", " ") for name in VERDICTS if _failed(row.get(name))]
    return deviation or ("no deviation; checks failed: " + ", ".join(failed) if failed else "no deviation")


def label_of(row: dict) -> str:
    """An example's label from the row alone where it can be: the scored deviations are those of the record's
    replies in order (harness.evaluation.scoring), so the first is the first reply's deviation _pick_step
    finds; a record with turns the scenario does not score is read to find it."""
    if row.get("turns", 0) > len(row.get("turn_verdicts") or ()):
        return example_of(row).label
    return _label(row["deviations"][0] if row["deviations"] else None, row)


def example_of(row: dict) -> Example:
    record = row["record"]
    turn, step, reply, deviation = _picked(record) if isinstance(record, RecordRef) else _pick_step(record)
    return Example(row["model"], row["scenario"], row["mode"], int(row["sample"]), int(row["seed"]),
                   turn, step, reply, _label(deviation, row))


def failing_examples(group: pd.DataFrame, limit: int = 2) -> list:
    failed = group[[_failed(v) for v in group["passed"]]]
    keys = list(zip(failed["seed"].tolist(), failed["sample"].tolist(), range(len(failed))))
    rows = failed.iloc[[i for *_, i in sorted(keys)]].to_dict("records")
    # In seed order, each failure whose label no chosen example has; then, when too few labels differ, the
    # lowest seeds not chosen. Labels come from the rows; only the chosen records are read for their replies.
    chosen, passed_over = [], []
    for row in rows:
        if len(chosen) == limit:
            break
        label = label_of(row)
        if label in {label_of(c) for c in chosen}:
            passed_over.append(row)
        else:
            chosen.append(row)
    return [example_of(r) for r in chosen + passed_over[:limit - len(chosen)]]


def code_span(text: str) -> str:
    """Markdown inline code holding any text: a backtick fence longer than any run inside, pipes escaped for
    the table (GitHub unescapes \\| inside code spans in tables)."""
    longest, run = 0, 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}".replace("|", "\\|")


def short(reply: str, width: int = MARKDOWN_WIDTH) -> str:
    """One line: newlines, tabs, carriage returns and every other control character written as escapes (an
    ESC sent raw would reach the reader's terminal), cropped to width."""
    flat = visible_controls(reply.replace("\\", "\\\\"))
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def markdown_cell(group: pd.DataFrame) -> str:
    """The examples of a row for a markdown table: 'seed N (label): `reply…`', joined by <br>; '–' when the
    row has no failed sample."""
    examples = failing_examples(group)
    if not examples:
        return "–"
    return "<br>".join(f"seed {e.seed} ({e.label}): {code_span(short(e.reply))}" for e in examples)
