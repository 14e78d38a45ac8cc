"""Stream holdback: decide which streamed reply text is safe to show while a tool call may be starting.

A reply is streamed chunk by chunk, but a tool call must not reach the user as raw text. The holdback
withholds everything from a family's call marker on, keeps back the end of the text while it could still be
the start of a marker, and for families whose call is the whole reply (Llama 3's bare JSON) keeps back the
opening until the first non-space character shows whether the reply opens as a call. A reasoning block that opens
the reply is never a call (the parsers split it off first), so markers it mentions do not stop the stream.
"""

from __future__ import annotations

from typing import Sequence

from harness.formats.reasoning import prompt_opens


class StreamHoldback:
    """Feed reply text chunks; get back the text that is safe to show now.

    markers: strings that open a call anywhere in the reply ("<tool_call>", "[TOOL_CALLS]", "<|python_tag|>").
    whole_reply: the family's call is the whole reply; it opens as a call when, after leading whitespace, it
    starts with "{" or a marker. Such a reply is withheld entirely; any other reply streams. Later in the reply
    only markers longer than one character open a call, as the family's parser reads it: a "{" mid-answer is text.
    reasoning: (open, close) tag pairs of the family's reasoning block. A block that opens the reply (or that the
    generation prompt already opened, see `prompt`) is reasoning, never a call, whatever markers it mentions;
    markers count only after its close tag.

    Text from a marker on stays withheld for good (`withheld` holds it for the parser or for showing a reply
    that did not parse); `finish()` releases only what was held while undecided.
    """

    def __init__(self, markers: Sequence[str], whole_reply: bool = False,
                 reasoning: Sequence[tuple[str, str]] = (), prompt: str = ""):
        self.markers = tuple(m for m in markers if m)
        if len(self.markers) != len(markers):
            raise ValueError("an empty marker would withhold every reply")
        self.whole_reply = whole_reply
        # Where a call may open mid-reply; the whole-reply opening also takes the one-character markers.
        self._anywhere = tuple(m for m in self.markers if len(m) > 1) if whole_reply else self.markers
        self._pairs = tuple((o, c) for o, c in reasoning if o and c)
        # The close tag the reply is inside of from its first character on, when the prompt opened the block.
        self._open_close = next((c for o, c in self._pairs if prompt_opens(prompt, o)), None)
        self._text = ""
        self._shown = 0  # length of the prefix of _text already returned
        self._call_at: int | None = None  # index where a call opens, once known
        self._body_at: int | None = None  # index where the text after any reasoning block starts, once known
        self._decided = not whole_reply  # whole_reply: has the body's opening been judged yet?
        self._longest = max((len(m) for m in self._anywhere), default=0)
        self._finished = False

    @classmethod
    def for_family(cls, family, prompt: str = "") -> "StreamHoldback":
        """The holdback that matches `family`'s parser: its markers, whether its call is the whole reply, and
        its reasoning pairs (for parsers that split reasoning off before looking for a call)."""
        pairs = getattr(family.parser, "reasoning", ())
        return cls(family.markers, whole_reply=family.start_only, reasoning=pairs, prompt=prompt)

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
        if self._body_at is None:
            held_from = self._find_body(final)
            if self._body_at is None:
                return self._show_upto(held_from)
        if not self._decided and not self._judge_opening(final):
            return self._show_upto(self._body_at)
        # A marker may straddle what was shown and what is new.
        start = max(self._body_at, self._shown - self._longest + 1)
        hits = [i for i in (self._text.find(m, start) for m in self._anywhere) if i >= 0]
        if hits:
            self._call_at = min(hits)
            return self._show_upto(self._call_at)
        end = len(self._text) if final else len(self._text) - self._partial_marker_len()
        return self._show_upto(max(end, self._body_at))

    def _find_body(self, final: bool) -> int:
        """Set _body_at once the reasoning block (if any) has ended; else return how much may be shown: all of an
        open reasoning block, nothing while the opening could still become a reasoning tag."""
        text = self._text
        stripped = text.lstrip()
        lead = len(text) - len(stripped)
        inner, close = None, self._open_close
        if close is not None:
            inner = 0
        else:
            for open_tag, close_tag in self._pairs:
                if stripped.startswith(open_tag):
                    inner, close = lead + len(open_tag), close_tag
                    break
                if stripped.startswith(close_tag):  # a bare close tag: the reply opens without reasoning
                    self._body_at = lead + len(close_tag)
                    return self._body_at
            else:
                undecided = any(t.startswith(stripped) for pair in self._pairs for t in pair)
                if undecided and not final:
                    return 0
                self._body_at = 0
                return 0
        end = text.find(close, inner)
        if end >= 0:
            self._body_at = end + len(close)
        elif final:
            self._body_at = len(text)  # an unclosed block is all reasoning
        return len(text)

    def _judge_opening(self, final: bool) -> bool:
        """whole_reply: True once the body's opening shows it is not a call; sets _call_at if it is one."""
        body = self._text[self._body_at:]
        stripped = body.lstrip()
        if not stripped:
            self._decided = final  # only whitespace so far: undecided until the end
            return final
        lead = self._body_at + len(body) - len(stripped)
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
        for m in self._anywhere:
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
