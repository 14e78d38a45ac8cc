"""Stream holdback: decide which streamed reply text is safe to show while a tool call may be starting.

A reply is streamed chunk by chunk, but a tool call must not reach the user as raw text. The holdback
withholds everything from a family's call marker on, keeps back the end of the text while it could still be
the start of a marker, and for families whose call is the whole reply (Llama 3's bare JSON) keeps back the
opening until the first non-space character shows whether the reply opens as a call.
"""

from __future__ import annotations

from typing import Sequence


class StreamHoldback:
    """Feed reply text chunks; get back the text that is safe to show now.

    markers: strings that open a call anywhere in the reply ("<tool_call>", "[TOOL_CALLS]", "<|python_tag|>").
    whole_reply: the family's call is the whole reply; it opens as a call when, after leading whitespace, it
    starts with "{" or a marker. Such a reply is withheld entirely; any other reply streams.

    Text from a marker on stays withheld for good (`withheld` holds it for the parser or for showing a reply
    that did not parse); `finish()` releases only what was held while undecided.
    """

    def __init__(self, markers: Sequence[str], whole_reply: bool = False):
        self.markers = tuple(m for m in markers if m)
        if len(self.markers) != len(markers):
            raise ValueError("an empty marker would withhold every reply")
        self.whole_reply = whole_reply
        self._text = ""
        self._shown = 0  # length of the prefix of _text already returned
        self._call_at: int | None = None  # index where a call opens, once known
        self._decided = not whole_reply  # whole_reply: has the opening been judged yet?
        self._longest = max((len(m) for m in self.markers), default=0)
        self._finished = False

    @property
    def text(self) -> str:
        """Everything fed so far."""
        return self._text

    @property
    def call_opened(self) -> bool:
        return self._call_at is not None

    @property
    def withheld(self) -> str:
        """The text from the call's opening on ("" while no call has opened)."""
        return "" if self._call_at is None else self._text[self._call_at:]

    def feed(self, chunk: str) -> str:
        if self._finished:
            raise RuntimeError("feed() after finish()")
        self._text += chunk
        return self._release(final=False)

    def finish(self) -> str:
        """End of the reply: return held text that turned out not to open a call."""
        if self._finished:
            return ""
        out = self._release(final=True)
        self._finished = True
        return out

    def _release(self, final: bool) -> str:
        if self._call_at is not None:
            return ""
        if not self._decided and not self._judge_opening(final):
            return ""
        start = max(0, self._shown - self._longest + 1)  # a marker may straddle what was shown and what is new
        hits = [i for i in (self._text.find(m, start) for m in self.markers) if i >= 0]
        if hits:
            self._call_at = min(hits)
            return self._show_upto(self._call_at)
        end = len(self._text) if final else len(self._text) - self._partial_marker_len()
        return self._show_upto(end)

    def _judge_opening(self, final: bool) -> bool:
        """whole_reply: True once the opening shows the reply is not a call; sets _call_at if it is one."""
        stripped = self._text.lstrip()
        if not stripped:
            self._decided = final  # only whitespace so far: undecided until the end
            return final
        lead = len(self._text) - len(stripped)
        if stripped[0] == "{" or any(stripped.startswith(m) for m in self.markers):
            self._call_at = lead
            self._decided = True
            return False
        if not final and any(m.startswith(stripped) for m in self.markers):
            return False  # could still become a marker
        self._decided = True
        return True

    def _partial_marker_len(self) -> int:
        """Length of the longest end of the text that is a proper prefix of some marker."""
        best = 0
        for m in self.markers:
            for k in range(min(len(m) - 1, len(self._text)), best, -1):
                if self._text.endswith(m[:k]):
                    best = k
                    break
        return best

    def _show_upto(self, end: int) -> str:
        if end <= self._shown:
            return ""
        out = self._text[self._shown:end]
        self._shown = end
        return out
