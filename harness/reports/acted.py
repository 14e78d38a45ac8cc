"""How often a grammar acted, from the step log: a grammar that holds from the first token always "takes
over", so what says whether it changed a reply is whether it refused a token the model sampled (steps record
that as `grammar_refused`). Records written before refusals were counted fall back on where a lazy grammar's
trigger fired."""

import pandas as pd


def grammar_acted(step: dict) -> bool:
    """The grammar changed this step's reply: it refused a sampled token (older records, which do not count
    refusals: a lazy grammar's trigger fired)."""
    refused = step.get("grammar_refused")
    return bool(step.get("grammar")) and (refused > 0 if isinstance(refused, int) else step.get("grammar_from", 0)
                                          is not None)


def acted_cell(group: pd.DataFrame) -> str:
    """'k/n steps': of the steps that count their grammar's refusals, those where it refused a sampled token
    (where it refused none, the reply is what the model sampled unconstrained)."""
    return _steps_cell(group, "grammar_acted", "grammar_steps")


def took_over_cell(group: pd.DataFrame) -> str:
    """'k/n steps': of the steps written under a lazy "auto" grammar, those it constrained."""
    return _steps_cell(group, "auto_took_over", "auto_steps")


def _steps_cell(group: pd.DataFrame, hits: str, steps: str) -> str:
    n = int(group[steps].sum())
    return f"{int(group[hits].sum())}/{n} steps" if n else "–"
