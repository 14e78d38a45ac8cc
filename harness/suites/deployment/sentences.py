"""deployment.md's "What the rows say": per model, the setup(s) in the first place on the cases they share and
those asked fewer cases that pass some; per runtime, what it returned (tool_calls, calls left in content, how the
strict parser read the same text, tool_choice required, streams, errors, seconds)."""

from __future__ import annotations

import re
from collections import Counter

from harness.backends import runtimes
from harness.backends.transport import error_words
from harness.evaluation.judging import label_head
from harness.suites.bfcl.judging import valid_verdict
from harness.suites.deployment.judging import (STREAM_DIFFERENCES, answered, errored, median_answered_seconds,
                                               stream_difference)
from harness.suites.deployment.rows import place, reaches

WORDS = 160      # characters of a runtime's error message a sentence quotes
SAID = 3         # distinct error messages a sentence quotes, the commonest first


def sentences(rows: list, records: list, ranks: dict, judged: bool, unread: dict | None = None) -> list:
    """unread: model id -> the id of its template where that template reads no `tools` (the committed in-process
    records' detection, of the template its runtime records name)."""
    out, unread = [], unread or {}
    for model in sorted({r.model for r in rows}):
        mine = sorted((r for r in rows if r.model == model and ranks[id(r)]),
                      key=lambda r: (place(ranks[id(r)]), r.order))
        if judged and mine:
            k, n = ranks[id(mine[0])].k, ranks[id(mine[0])].n
            if k == 0:       # a leader that passes nothing is no leader: say what every ranked row shares
                lead = f"no ranked setup passes BFCL's checker on any of the {n} call-due cases"
            else:
                # Every setup that shares the first place is named: a tie is no win for the one listed first.
                first = [r.setup for r in mine if ranks[id(r)].place == 1]
                below = [r for r in mine if ranks[id(r)].place > 1]
                overlap = [r for r in below if reaches(ranks[id(r)], ranks[id(mine[0])])]
                names = ", ".join(f"**{x}**" for x in first[:-1]) + (" and " if len(first) > 1 else "") + \
                    f"**{first[-1]}**"
                lead = (f"{names} pass{'es' if len(first) == 1 else ''} BFCL's checker on {k}/{n} of the call-due "
                        "cases every ranked setup was asked"
                        + (", tied for the first place" if len(first) > 1 else "") + "; "
                        + (f"the interval overlaps {_named(overlap, ranks)}, so these cases do not separate them"
                           if overlap else
                           "the interval lies above every lower-ranked setup's" if below else
                           "no other setup is ranked"))
            out.append(f"- **{model}**: {lead}.{_fewer(rows, ranks, model)}{_unread_words(unread.get(model))}")
        elif model in unread:
            out.append(f"- **{model}**:{_unread_words(unread[model])}")
        for runtime in sorted({r.runtime for r in records if r.model["id"] == model}):
            mine_records = [r for r in records if r.model["id"] == model and r.runtime == runtime]
            out.append(f"- {model} on **{runtime}**: " + _runtime_sentence(mine_records) + ".")
    return out


def _unread_words(template: str | None) -> str:
    """Why every served row of a model whose template takes no tools measures a model never shown them: a reader
    would otherwise read its zeros as the runtime's or the model's."""
    if template is None:
        return ""
    return (f" Its template (`{template}`) reads no `tools` (results/conformance.md): served, as in process "
            "native, the offered tools never reach the model, so its runtime rows judge a model not told of them; "
            "the in-process grammar mode (and fallback, where it writes a failed call attempt again under a "
            "grammar) puts them in the prompt itself.")


def _named(overlap: list, ranks: dict, most: int = 3) -> str:
    """The lower-ranked setups whose intervals reach the leader's, by name with k/n (the first `most`, best first),
    so a reader sees which setups these cases do not separate from it."""
    named = [f"**{r.setup}** ({ranks[id(r)].k}/{ranks[id(r)].n})" for r in overlap[:most]]
    more = len(overlap) - len(named)
    if more:
        named.append(f"{more} more lower-ranked setup{'s' if more > 1 else ''}")
    listed = ", ".join(named[:-1]) + (" and " if len(named) > 1 else "") + named[-1]
    return ("that of " if len(overlap) == 1 else "those of ") + listed


def _fewer(rows: list, ranks: dict, model: str) -> str:
    """The setups of a model asked fewer cases than it is ranked on (a run not finished) that pass any: not ranked,
    yet a reader asking where the model's calling works should not miss them."""
    passing = []
    for r in rows:
        if r.model == model and r.ranked and ranks[id(r)] is None:
            k = sum(valid_verdict(a[4]) for a in r.due())
            if k:
                passing.append((-k / len(r.due()), r.order, f"**{r.setup}** {k}/{len(r.due())}"))
    if not passing:
        return ""
    return (" Asked fewer cases, so not ranked, yet passing some: " + "; ".join(x for *_, x in sorted(passing))
            + " (\"Not served, or not finished\" names the command that finishes each).")


def _runtime_sentence(records: list) -> str:
    """What one runtime returned for one model. Each count is over the answers it judges: an errored answer
    carries no tool_calls and ignores nothing, so a runtime that refuses every request is said to refuse them
    (with its words), not to have ignored tool_choice in 0 of them."""
    labelled = lambda among, name: sum(any(label_head(x) == name for x in r.labels) for r in among)  # noqa: E731
    some = [r for r in records if answered(r.plain) or answered(r.stream)]
    plain = [r for r in records if answered(r.plain)]
    both = [r for r in records if answered(r.plain) and answered(r.stream)]
    kinds = Counter(stream_difference(r.plain, r.stream) for r in both
                    if any(label_head(x) == "stream-differs" for x in r.labels))
    required = [r for r in some if r.tool_choice == "required"]
    shown = [r for r in plain if r.strict is not None]
    read_alike = sum(not any(label_head(x) in ("runtime-forgave", "runtime-dropped-call", "calls-differ")
                             for x in r.labels) for r in shown)
    calls = sum(bool(r.plain.get("tool_calls")) for r in plain)
    median = median_answered_seconds(records)
    errors = labelled(records, "runtime-error")
    again = [r for r in records if isinstance(r.again, dict) and isinstance(r.again.get("changed"), list)]
    if not some:
        return (f"no request was answered: runtime errors in {errors}/{len(records)} records"
                + _error_words(records))
    parts = [f"{calls} of {len(plain)} non-streamed answers carry tool_calls",
             f"a call attempt left in content in {labelled(some, 'call-left-in-content')}/{len(some)} records",
             (f"the strict parser reads the generated text as the runtime did in {read_alike}/{len(shown)}"
              + (f" (it showed that text in {len(shown)} of its {len(plain)} answers)" if len(shown) < len(plain)
                 else "")
              + (" (so what the app gets is what the model wrote, not how the runtime read it)"
                 if read_alike == len(shown) else "")) if shown else
             "the runtime does not show the text the model generated, so only its reading is judged",
             *([f"tool_choice required ignored in {labelled(required, 'required-ignored')}/{len(required)}"]
               if required else []),
             *([f"streamed and non-streamed answers differ in {labelled(both, 'stream-differs')}/{len(both)}"
                + _kinds_words(kinds)]
               if both else []),
             f"runtime errors in {errors}/{len(records)}" + (_error_words(records) if errors else ""),
             *([f"asked again (harness deployment --again) in {len(again)}: answered as before in "
                f"{sum(not r.again['changed'] for r in again)}/{len(again)}"] if again else [])]
    if median is not None:
        parts.append(f"median {median:.1f} s a request answered")
    started = runtimes.started_with(records[0].server, records[0].runtime)
    return "; ".join(parts + ([started] if started else []))


def _kinds_words(kinds: Counter) -> str:
    """How the streams that differ differ, commonest kind first ("in 11 only the streamed answer carries
    tool_calls; in 3 ..."); nothing where every one is of no named kind."""
    named = [(n, kind) for kind, n in kinds.most_common() if kind not in (None, "other")]
    if not named:
        return ""
    rest = sum(n for kind, n in kinds.items() if kind in (None, "other"))
    return (" (" + "; ".join(f"in {n} {STREAM_DIFFERENCES[kind]}" for n, kind in named)
            + (f"; in {rest} {STREAM_DIFFERENCES['other']}" if rest else "") + ")")


def _error_words(records: list) -> str:
    """The runtime's own words for its commonest error, as a reader would search for them: the message inside
    an HTTP error's JSON body, not the body's wrapping."""
    counted = Counter(_words(a.get("error") or next(x for x in a["problems"] if "cut short" in x))
                      for r in records for a in (r.plain, r.stream) if errored(a))
    if not counted:
        return ""
    answers = sum(counted.values())
    if len(counted) == 1:
        return f" (every errored answer: `{next(iter(counted))}`)"
    said = [f"{n} of the {answers} errored answers: `{words}`" for words, n in counted.most_common(SAID)]
    rest = answers - sum(n for _, n in counted.most_common(SAID))
    return " (" + "; ".join(said) + (f"; {rest} with other words" if rest else "") + ")"


def _words(error) -> str:
    error = str(error)
    found = re.search(r"HTTP (\d+): (.*)", error, re.S)
    if not found:
        return " ".join(error.split())[:WORDS].replace("`", "'")
    status, body = found.groups()
    said = error_words(body) or body
    return (f"HTTP {status}: " + " ".join(said.split())[:WORDS]).replace("`", "'")
