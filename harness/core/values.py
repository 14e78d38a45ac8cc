"""Bounds of the numbers a user hands the harness (environment, command-line flags, pytest options), checked
where they enter so that `HARNESS_THREADS=abc` or `--samples 1000000000000` is one clear error naming the
setting, not a traceback or a run that never ends. Scenario YAML values are checked in harness.evaluation.scenarios
against the same caps."""

import argparse
import math

# A scenario's samples are run one after another at seconds each: a thousand per scenario and mode is already
# hours on the 2-core machine; more is a typo (1e12), not a plan.
MAX_SAMPLES = 1000
# llama.cpp takes a uint32 seed, and 0xFFFFFFFF means "pick a random one" .
MAX_SEED = 2**32 - 2
# The chat handler's sampling defaults in llama-cpp-python 0.3.36 (chat_formatter_to_chat_completion_handler in
# llama_chat_format.py), so a sample is what a llama-cpp-python chat would write. Scenarios add max_tokens.
DEFAULT_SAMPLING = {"temperature": 0.2, "top_p": 0.95, "top_k": 40, "min_p": 0.05, "repeat_penalty": 1.1}
# The modes a scenario runs in (harness.live.modes says what each does).
MODES = ("native", "grammar", "fallback")


def valid_modes(modes) -> bool:
    """A default-modes list (a scenario's, or a model's in sources.json): non-empty, distinct, known modes."""
    return bool(modes) and all(m in MODES for m in modes) and len(set(modes)) == len(modes)
# More threads than any machine the harness runs on has cores; llama.cpp spins one per thread.
MAX_THREADS = 256
# One file's download deadline, in seconds: a week is longer than any pinned file needs.
MAX_DEADLINE = 7 * 24 * 3600.0


def parse_int(text, low: int, high: int) -> int:
    """An integer in [low, high] from a string (or an int); ValueError says what is wrong with it."""
    if isinstance(text, bool):
        raise ValueError(f"must be an integer from {low} to {high}, got {text!r}")
    try:
        value = int(str(text).strip(), 10)
    except ValueError:
        raise ValueError(f"must be an integer from {low} to {high}, got {text!r}") from None
    if not low <= value <= high:
        raise ValueError(f"must be an integer from {low} to {high}, got {value}")
    return value


def parse_seconds(text, high: float = MAX_DEADLINE) -> float:
    """A positive, finite number of seconds up to `high`."""
    try:
        value = float(str(text).strip())
    except ValueError:
        raise ValueError(f"must be a number of seconds, got {text!r}") from None
    if not math.isfinite(value) or not 0 < value <= high:
        raise ValueError(f"must be a number of seconds above 0 and at most {high:.0f}, got {text!r}")
    return value


def int_argument(low: int, high: int):
    """An argparse/pytest `type=` that reads an integer in [low, high] and reports a bad one by flag name."""
    return _argument(lambda text: parse_int(text, low, high), "integer")


def seconds_argument(high: float = MAX_DEADLINE):
    """An argparse `type=` for a positive, finite number of seconds up to `high`."""
    return _argument(lambda text: parse_seconds(text, high), "seconds")


def _argument(parse, name: str):
    def read(text):
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    read.__name__ = name
    return read
