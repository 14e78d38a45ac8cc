"""What counts as the model's own answer to a turn.

Answer checks are substring tests, so text the model did not write for the user must not reach them: a
reply that repeats the user's words (Gemma 270M's `My name is Priya. mendatang\\nMy name is Priya…`), one that
repeats the tool message the harness sent (`Result of read_note: {…7-31-19…}`), or one that only stopped at
the token limit (a loop or a ramble) answers nothing, whatever words it holds.

The checks read the answer with every copy of those messages cut out. A copy is recognised when it is the
whole message, compared case- and whitespace-insensitively, and long enough not to be a coincidence; the
injected `Result of <tool>:` line is recognised by its prefix, since small models copy it with the JSON
slightly garbled."""

import re
from dataclasses import dataclass

MIN_ECHO = 12  # characters: a shorter message ("Hi", "pong") is as likely a word of the answer as a copy
# The tool message of the modes that write tool results as text (harness.live.modes.calls_as_text_messages), to the end
# of its line: a copy of it is the harness's text whatever follows on that line.
_RESULT_LINE = re.compile(r"result of [A-Za-z_][\w.-]*:[^\n]*", re.IGNORECASE)


def normal(text: str) -> str:
    """Case- and whitespace-insensitive form, the one every answer check compares in."""
    return " ".join(text.casefold().split())


def contains(text: str, needle: str) -> bool:
    return normal(needle) in normal(text)


@dataclass(frozen=True)
class Answer:
    text: str           # the answer as written (before any end-of-turn marker)
    own: str            # normalized, with the copies of user and tool messages cut out
    echoed_user: bool   # held a copy of a user message of the conversation
    echoed_tool: bool   # held a copy of a tool message (the injected `Result of <tool>:` line or the result)
    runaway: bool       # the reply ended at the token limit, not by itself

    @property
    def valid(self) -> bool:
        """An answer of the model's own: it ended by itself and holds words beyond the copies."""
        return not self.runaway and bool(re.search(r"\w", self.own))

    def holds(self, needle: str) -> bool:
        return self.valid and normal(needle) in self.own


def _cut(text: str, copies) -> tuple:
    found = False
    for copy in sorted({normal(c) for c in copies if len(normal(c)) >= MIN_ECHO}, key=len, reverse=True):
        if copy in text:
            text, found = text.replace(copy, " "), True
    return text, found


def read_answer(text: str, finish_reason, user_messages, tool_messages) -> Answer:
    """The turn's answer, judged against what the model was shown: user_messages are the conversation's user
    texts up to this turn, tool_messages the tool results it was sent (as sent)."""
    own, injected = _RESULT_LINE.subn(" ", text)
    own, echoed_user = _cut(normal(own), user_messages)
    own, echoed_tool = _cut(own, tool_messages)
    return Answer(text, own.strip(), echoed_user, echoed_tool or bool(injected), finish_reason == "length")
