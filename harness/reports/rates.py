"""Rates as every report writes them: successes over the samples where a check applies, with the Wilson 95%
interval, and how many of those samples are distinct replies.

Why distinct replies: at a low temperature, seeds that differ still often give one model the same reply to the
same prompt, word for word. Five copies of one reply are one observation, not five, and an interval that counts
them five times claims more than the samples hold. So a sample's replies are reduced to a key (its scenario and
every reply of every step it wrote), and where keys repeat the interval is computed over the distinct ones: a
distinct reply counts as a success when it passed, as a failure when it failed (one that did both, which only
happens when something besides its text differed, counts on both sides)."""

from itertools import repeat

from harness.core.hashing import sha256_json
from harness.evaluation.scoring import wilson


def known(value) -> bool:
    return value is not None and value == value  # NaN != NaN: pandas' missing value


def known_values(values) -> list:
    return [bool(v) for v in values if known(v)]


def reply_key(scenario: str, steps: list, error: str | None) -> str:
    """What makes two samples the same observation: the scenario asked and everything the model wrote in it
    (each step's reply, and in fallback mode the native reply the grammar rewrote), and the error that stopped
    it. Short: it is compared, never read."""
    written = [[s.get("reply"), (s.get("fallback_from") or {}).get("reply")] for s in steps]
    return sha256_json([scenario, written, error], default=str)[:20]


def counts(values, keys=None) -> tuple:
    """(successes, samples, distinct successes, distinct replies) where the check applies; without keys every
    sample is its own reply."""
    pairs = [(bool(v), k) for v, k in zip(values, keys if keys is not None else repeat(None)) if known(v)]
    k, n = sum(v for v, _ in pairs), len(pairs)
    if keys is None:
        return k, n, k, n
    passed = {key for v, key in pairs if v}
    failed = {key for v, key in pairs if not v}
    return k, n, len(passed), len(passed) + len(failed)


def interval(values, keys=None) -> tuple:
    """The Wilson 95% interval over the distinct replies (over the samples when none repeats)."""
    _, _, kd, nd = counts(values, keys)
    return wilson(kd, nd)


def rate_cell(values, keys=None) -> str:
    """'k/n p% [lo–hi]' over the samples where the check applies; where replies repeat, 'k/n p%, k'/d distinct
    [lo–hi]' with the interval over the d distinct replies; '–' when the check applies to none."""
    k, n, kd, nd = counts(values, keys)
    if not n:
        return "–"
    low, high = wilson(kd, nd)
    bounds = f"[{100 * low:.0f}–{100 * high:.0f}]"
    if nd == n:
        return f"{k}/{n} {100 * k / n:.0f}% {bounds}"
    return f"{k}/{n} {100 * k / n:.0f}%, {kd}/{nd} distinct {bounds}"


def rate_value(values):
    got = known_values(values)
    return (sum(got) / len(got)) if got else None
