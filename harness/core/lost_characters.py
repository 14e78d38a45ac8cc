"""Whether one text is another with characters beyond ASCII left out, and how many: what a runtime that decodes
each token alone (dropping bytes that do not decode by themselves) makes of a character whose UTF-8 bytes span
two tokens. Its logprob strings and its stream can lose such characters while its whole answer keeps them."""

from __future__ import annotations


def lost_beyond_ascii(kept: str, whole: str) -> int | None:
    """How many characters of `whole` are missing from `kept`, where `kept` is `whole` with only characters
    beyond ASCII left out, in order (0: the same text); None where it is not (another character, another order,
    an ASCII character missing, or one added)."""
    lost, rest = 0, iter(whole)
    for char in kept:
        for have in rest:
            if have == char:
                break
            if ord(have) < 128:
                return None
            lost += 1
        else:
            return None
    for have in rest:
        if ord(have) < 128:
            return None
        lost += 1
    return lost
