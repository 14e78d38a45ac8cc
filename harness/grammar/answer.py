"""The plain answer of a call-or-answer grammar: text that does not open like a call.

A model that writes its calls without its family's marker (Qwen2.5-Coder writes bare or fenced JSON under a
Hermes template) never fires a lazy grammar's trigger, so the grammar never constrains it. A grammar that holds
from the first token instead offers two ways in: the family's call, marker included, or an answer whose
opening is none of the ways a call opens (OPENERS, the family's own trigger words and every other family's
markers). Whitespace is no way around that: a few leading blanks are allowed, then the same rule applies to
the first visible character. After its opening the answer is free text that never holds a call in a JSON
dialect (CALL_SHAPED) nor the family's own trigger words: where the family lets text
come before a call, the call that follows is the family's constrained call (as in the lazy grammar, from its
trigger word on)."""

from __future__ import annotations

from functools import lru_cache

from harness.grammar.gbnf import EMPTY, Alt, Lit, PATTERN_SPACE, Raw, Ref, RuleSet, Seq, char_class_escape, seq

# How a call opens in any family's JSON dialect: an object, a list of calls, a fenced block.
OPENERS = ("{", "[", "```")
# What a call written in another shape holds wherever it stands, as the strict parsers name near misses in text
# (harness.formats.deviations.classify_unmarked): a JSON object's call key, doubled braces, a Python dict. An
# answer under the grammar holds none of them, so prose cannot carry a fenced or bare call after a plain first
# line (Qwen2.5-Coder did exactly that once its opening brace was refused, and then wrote {"name': ... once
# only the JSON spelling of the key was refused; Qwen2.5-Coder-1.5B wrote `{{ "name"` past a refused `{{"`, so
# doubled braces are refused whatever follows). The cost: such an answer may not quote these keys, nor double a
# brace, either.
CALL_SHAPED = ('"name"', '"function"', '"tool_name"', '"name\'', '"function\'', '"tool_name\'', '{{', "{'")
_BLANKS = " \t\r\n"


def answer_text(rules: RuleSet, leading, anywhere, hint: str = "answer") -> Ref:
    """Non-empty text whose first visible character starts none of `leading` and which holds none of
    `anywhere` (words the text may not contain at all). Bounded leading whitespace comes first.

    A right-linear grammar of an automaton over two kinds of state: while the text so far (blanks aside) is
    a proper prefix of a `leading` word, the state is that text (so the word can be refused when it
    completes); after that, the longest end of the text that begins an `anywhere` word (as text_without)."""
    leading = tuple(dict.fromkeys(w for w in leading if w))
    anywhere = tuple(dict.fromkeys(w for w in anywhere if w))
    key = ("answer_text", leading, anywhere)
    if key in rules.made:
        return rules.made[key]
    states, table, free0 = _automaton(leading, anywhere)
    names = [rules.reserve(f"{hint}-{i}") for i in range(len(states))]
    for i, (state, (other, moves)) in enumerate(zip(states, table)):
        options = [Seq((Raw("[^" + other + "]"), Ref(names[free0])))]
        options += [Seq((Lit(ch), Ref(names[nxt]))) for ch, nxt in moves]
        if state[0] != "start":
            options.append(EMPTY)  # the answer may end anywhere after its first character
        rules.fill(names[i], Alt(tuple(options)))
    rules.made[key] = rules.define(f"{hint}-text", seq(PATTERN_SPACE, Ref(names[0])))
    return rules.made[key]


@lru_cache(maxsize=64)
def _automaton(leading: tuple, anywhere: tuple) -> tuple:
    """(states, [(characters that lead to the free start state, as a negated class's body), ((character, next
    state index), ...)] per state, the free start state's index): the automaton answer_text writes as rules. It depends on the words alone, and
    every case of a family shares them, so it is built once per process (it is most of a grammar's cost)."""
    opening = sorted({w[:i] for w in leading for i in range(1, len(w))})
    tails = list(dict.fromkeys([""] + [w[:i] for w in anywhere for i in range(1, len(w))]))
    states = [("start", "")] + [("open", p) for p in opening] + [("free", t) for t in tails]
    index = {state: i for i, state in enumerate(states)}
    free0 = index[("free", "")]
    # A free state's text -> its index: the longest end of the text so far that begins an `anywhere` word.
    ends = {text: i for (kind, text), i in index.items() if kind == "free"}

    def free_after(text):
        """The free state after `text` (whose proper prefix holds no word), or None where it now ends in one."""
        if any(text.endswith(w) for w in anywhere):
            return None
        return next(ends[text[i:]] for i in range(len(text) + 1) if text[i:] in ends)

    def step(state, ch):
        kind, text = state
        if kind == "start" and ch in _BLANKS:
            return None  # leading blanks are PATTERN_SPACE's, before the first visible character
        text += ch
        if kind in ("start", "open"):
            if text in leading or any(text.endswith(w) for w in anywhere):
                return None
            if ("open", text) in index:
                return index[("open", text)]
        return free_after(text)

    chars = sorted(set("".join(leading + anywhere)) | set(_BLANKS))
    table = []
    for state in states:
        moves = {ch: step(state, ch) for ch in chars}
        # Characters no word holds lead to the free start state (or, from the start, begin the text there).
        special = sorted(ch for ch, nxt in moves.items() if nxt != free0)
        other = "".join(char_class_escape(c) for c in special) or "\\x00"  # GBNF has no empty negated class
        table.append((other, tuple((ch, moves[ch]) for ch in special if moves[ch] is not None)))
    return tuple(states), tuple(table), free0
