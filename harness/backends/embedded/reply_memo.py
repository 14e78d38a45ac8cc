"""Replies this process already wrote, handed back when the very same request comes again.

In process, a reply is decided by its request alone: the prompt, the sampling, the seed (the sampler chain is
seeded afresh for every reply) and the grammar. A run that takes a case's modes back to back asks some requests
twice. Fallback's first attempt at a step is native's request exactly, for as long as the two samples have gone
the same way (the same conversation, the same step seed), and every grammar design's fallback asks it once more.
Writing it again costs the whole reply and yields the one already written, so the memo answers it with that
reply, marked `reused`, with no timings of its own (it took none): a transcript tells the replies computed from
the ones handed on.

A reply cut by its deadline is not kept: where it stopped depended on the clock, not on the request. Nor is one
under a grammar object the memo cannot compare (a compiled LlamaGrammar: only GBNF text and a GrammarSpec are
values)."""

from __future__ import annotations

import dataclasses
from collections import OrderedDict

from harness.core.replies import Timings

# Requests kept, the least recently asked dropped first. A case's modes and designs ask a few dozen at most.
KEPT = 256
NO_TIME = Timings(prompt_seconds=0.0, generation_seconds=0.0, tokens_per_second=0.0)


def request_key(prompt: str, sampling: dict, seeds, grammar=None):
    """What decides the replies to a request, as a dictionary key; None for a request the memo cannot compare."""
    if grammar is not None and not isinstance(grammar, str) and not dataclasses.is_dataclass(grammar):
        return None
    key = (prompt, tuple(sorted(sampling.items())), tuple(seeds), grammar)
    try:
        hash(key)
    except TypeError:
        return None
    return key


class ReplyMemo:
    def __init__(self, kept: int = KEPT):
        self._replies: OrderedDict = OrderedDict()
        self._kept = kept
        self.reused = 0  # requests answered from the memo since the last clear()

    def get(self, key) -> list | None:
        """The replies written for `key` (one per seed), as reused replies; None when it was not asked yet."""
        if key is None or key not in self._replies:
            return None
        self._replies.move_to_end(key)
        self.reused += 1
        return [dataclasses.replace(g, timings=NO_TIME, reused=True) for g in self._replies[key]]

    def answer(self, key, write) -> list:
        """The replies to the request `key`: the ones already written, as reused replies, else write()'s (a list,
        one per seed), kept for the next time it is asked."""
        kept = self.get(key)
        if kept is not None:
            return kept
        written = write()
        self.put(key, written)
        return written

    def put(self, key, generations: list) -> None:
        if key is None or any(g.finish_reason == "deadline" for g in generations):
            return
        self._replies[key] = list(generations)
        self._replies.move_to_end(key)
        while len(self._replies) > self._kept:
            self._replies.popitem(last=False)

    def clear(self) -> None:
        self._replies.clear()
        self.reused = 0
