"""One sample's transcript as HTML for the report page: per turn the user message and per step the raw reply
(escaped, special tokens marked), what the strict parser reads in it now, the named deviation with its
explanation, the tool results, and the verdicts per turn."""

import json
import re
from functools import lru_cache
from html import escape
from inspect import getsourcefile

from harness.evaluation import scoring
from harness.template.detect import END_OF_TURN
from harness.formats import deviations
from harness.evaluation.scoring import VERDICTS, parse_steps
from harness.reports.markdown import visible_controls

# `<|im_end|>`-shaped tokens and DeepSeek's fullwidth ones, besides the end-of-turn markers detection knows.
_TOKEN_SHAPES = (r"<\|[^<>|\s]{1,40}\|>", r"<｜[^<>]{1,40}｜>")
_NAME_LINE = re.compile(r'^[A-Z_]+ = "([a-z][a-z-]*)"\s+#\s?(.*)$')
_MORE_LINE = re.compile(r"^#\s{2,}(.*)$")
# Control characters a page shows as escapes; newlines and tabs are laid out as they are.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@lru_cache(maxsize=None)
def explanations() -> dict:
    """Deviation and finding names -> their one-line explanation. The explanations are the comments beside
    the names in harness/formats/deviations.py and harness/evaluation/scoring.py, the one place they are written, so
    they are read from there rather than copied."""
    out = {}
    for module in (deviations, scoring):
        name = None
        with open(getsourcefile(module), encoding="utf-8") as source:
            for line in source:
                line = line.rstrip()
                match, more = _NAME_LINE.match(line), _MORE_LINE.match(line)
                if match:
                    name = match.group(1)
                    out[name] = match.group(2)
                elif more and name:
                    out[name] += " " + more.group(1)  # a comment continued on the next line
                else:
                    name = None
    return out


def token_pattern(model_record) -> re.Pattern:
    markers = set(END_OF_TURN)
    for token in (model_record.bos_token, model_record.eos_token) if model_record else ():
        if token:
            markers.add(token)
    literal = [re.escape(m) for m in sorted(markers, key=lambda m: (-len(m), m))]
    return re.compile("|".join([*literal, *_TOKEN_SHAPES]))


def _shown(text: str) -> str:
    """Text escaped, control characters (a raw ESC, a bidi override) marked as their escapes: the page shows
    them, the browser never acts on them."""
    return _CONTROL.sub(lambda m: f'<span class="tok">{escape(visible_controls(m.group()))}</span>', escape(text))


def raw_html(text: str, tokens: re.Pattern) -> str:
    """The reply escaped, special tokens and control characters marked: every character of the reply is shown
    as it was written."""
    out, at = [], 0
    for match in tokens.finditer(text):
        out.append(_shown(text[at:match.start()]))
        out.append(f'<span class="tok">{_shown(match.group())}</span>')
        at = match.end()
    out.append(_shown(text[at:]))
    return f'<pre class="raw">{"".join(out)}</pre>' if text else '<pre class="raw empty">(empty reply)</pre>'


def _known(value) -> bool:
    return value is not None and value == value  # NaN != NaN: pandas' missing value


def verdict_cell(value) -> str:
    if not _known(value):
        return '<td class="na">–</td>'
    return '<td class="ok">yes</td>' if value else '<td class="bad">no</td>'


def names_html(names) -> str:
    """Deviation or finding names, each with its explanation as a tooltip, counted when repeated."""
    counts = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    explain = explanations()
    return ", ".join(f'<span class="name" title="{escape(explain.get(n, ""))}">{escape(n)}</span>'
                     + (f" ×{k}" if k > 1 else "") for n, k in counts.items()) or "–"


def _parse_html(parse, reply: str) -> str:
    rows = []
    if parse.calls:
        calls = "".join(f"<li><code>{escape(c.name)}({escape(json.dumps(c.arguments, ensure_ascii=False))})</code></li>"
                        for c in parse.calls)
        rows.append(f"<dt>calls</dt><dd><ul>{calls}</ul></dd>")
    else:
        rows.append("<dt>calls</dt><dd>none</dd>")
    if parse.content and parse.content.strip() == reply.strip():
        rows.append("<dt>content</dt><dd>the whole reply</dd>")  # not printed twice: half the page otherwise
    elif parse.content:
        rows.append(f"<dt>content</dt><dd><pre>{escape(parse.content)}</pre></dd>")
    if parse.reasoning:
        rows.append(f"<dt>reasoning</dt><dd><pre>{escape(parse.reasoning)}</pre></dd>")
    if parse.deviation:
        explain = explanations().get(parse.deviation, "")
        detail = f" ({escape(parse.detail)})" if getattr(parse, "detail", None) else ""
        rows.append(f'<dt>deviation</dt><dd><strong class="dev">{escape(parse.deviation)}</strong>: '
                    f"{escape(explain)}{detail}</dd>")
    return f'<dl class="parse">{"".join(rows)}</dl>'


def _tool_results(step: dict) -> str:
    items = []
    for call in step.get("calls", []):
        outcome = (call.get("result") if call.get("executed") else
                   f"not run again: the result of {call['repeat_of']}" if call.get("repeat_of") else
                   "not run: " + "; ".join(call.get("errors") or []))
        items.append(f"<li><code>{escape(str(call.get('name')))}</code> → <code>{escape(str(outcome))}</code></li>")
    return f'<p>tool results:</p><ul class="results">{"".join(items)}</ul>' if items else ""


def _step_html(index: int, step: dict, parse, native_parse, tokens) -> str:
    meta = [f"step {index + 1}", f"finish: {step.get('finish_reason') or '–'}",
            f"{step.get('completion_tokens') or 0} tokens"]
    if step.get("grammar"):
        offset = step.get("grammar_from")
        meta.append(f"grammar {step['grammar']}" + ("" if "grammar_from" not in step else
                                                    " (never triggered)" if offset is None else f" from char {offset}")
                    + ("" if not step.get("grammar_trigger") else f" at {step['grammar_trigger']!r}"
                       + (", a call held in another spelling than the family's" if step.get("grammar_held") else ""))
                    + ("" if step.get("grammar_refused") is None else f", refused {step['grammar_refused']} tokens"))
    if step.get("error"):
        meta.append(f"error: {step['error']}")
    parts = [f'<div class="step"><p class="meta">{escape(" · ".join(meta))}</p>']
    if native_parse is not None:
        parts += ['<p class="fallback">native attempt, rewritten under the grammar:</p>',
                  raw_html(step["fallback_from"].get("reply", ""), tokens),
                  _parse_html(native_parse, step["fallback_from"].get("reply", "")),
                  '<p class="fallback">the rewrite:</p>']
    parts += [raw_html(step.get("reply", ""), tokens), _parse_html(parse, step.get("reply", "")),
              _tool_results(step), "</div>\n"]
    return "".join(parts)


STATUS_TEXT = {"pass": "passed", "fail": "failed", "n/a": "no check applies"}


def status(value) -> str:
    if not _known(value):
        return "n/a"
    return "pass" if value else "fail"


def sample_html(row: dict, anchor: str, titles: dict, tokens: re.Pattern) -> str:
    """A <details> block: collapsed to one line (seed, verdict, names), the whole transcript inside."""
    record = row["record"]
    names = [*row["deviations"], *row["findings"]]
    state = status(row["passed"])
    data = " ".join(sorted(set(names)))
    seed = f'seed {int(row["seed"])}' if _known(row["seed"]) else "no seed"  # replayed: the ADR's reply
    summary = (f'{seed} · sample {int(row["sample"])} · '
               f'<span class="{state}">{STATUS_TEXT[state]}</span> · {names_html(names)}'
               + (" · replayed" if row["replayed"] else ""))
    # Only the checks that apply somewhere in the sample: a column of dashes says nothing.
    keys = [k for k in VERDICTS if any(_known(t.get(k)) for t in [row, *row["turn_verdicts"]])]
    header = "".join(f"<th>{escape(titles[k])}</th>" for k in keys)
    rows = "".join(f"<tr><td>turn {i + 1}</td>{''.join(verdict_cell(t.get(k)) for k in keys)}</tr>\n"
                   for i, t in enumerate(row["turn_verdicts"]))
    rows += f"<tr><td>sample</td>{''.join(verdict_cell(row[k]) for k in keys)}</tr>"
    parts = [f'<details class="sample" id="{escape(anchor)}" data-mode="{escape(row["mode"])}" '
             f'data-status="{state}" data-names="{escape(data)}"><summary>{summary}</summary>\n',
             f'<table class="verdicts"><tr><th></th>{header}</tr>{rows}</table>']
    if isinstance(row.get("quote"), str):
        parts.append(f"<p>the seed ADR: “{escape(str(row['quote']))}”</p>")
    if record.error:
        parts.append(f'<p class="bad">error: {escape(str(record.error))}</p>')
    family = record.family
    for t, turn in enumerate(record.turns):
        steps = turn.get("steps", [])
        parts.append(f'<p class="user">turn {t + 1}, user: {escape(str(turn.get("user", "")))}</p>\n')
        natives = parse_steps([s["fallback_from"] for s in steps if s.get("fallback_from")], family)
        natives = iter(natives)
        for s, (step, parse) in enumerate(zip(steps, parse_steps(steps, family))):
            native = next(natives) if step.get("fallback_from") else None
            parts.append(_step_html(s, step, parse, native, tokens))
    parts.append("</details>\n")
    return "".join(parts)
