"""Reasoning kept apart from calls: a `<think>…</think>` block (or the family's own pair) opened by the
model or already opened by the generation prompt. Markup inside reasoning is never a call."""

from harness.formats import deviations as dev

DEFAULT_PAIRS = (("<think>", "</think>"),)


def prompt_opens(prompt: str, open_tag: str) -> bool:
    """True when the generation prompt ends inside an open reasoning block (e.g. `...assistant\\n<think>\\n`)."""
    return prompt.rstrip().endswith(open_tag)


def split_reasoning(text: str, prompt: str, pairs) -> tuple:
    """Return (reasoning or None, the rest of the reply, deviation or None)."""
    stripped = text.lstrip()
    ended = prompt.rstrip()     # prompt_opens for every pair, stripped once per reply
    for open_tag, close_tag in pairs:
        if ended.endswith(open_tag):
            inner = text
        elif stripped.startswith(open_tag):
            inner = stripped[len(open_tag) :]
        elif stripped.startswith(close_tag):
            # Templates that render "no reasoning" as a bare close tag (GLM-4.7, Spark2.5, MiniMax-M3) train their
            # model to open a reply without reasoning with that tag alone.
            return None, stripped[len(close_tag) :], None
        else:
            continue
        end = inner.find(close_tag)
        if end < 0:
            return inner.strip() or None, "", dev.UNCLOSED_REASONING
        return inner[:end].strip() or None, inner[end + len(close_tag) :], None
    return None, text, None
