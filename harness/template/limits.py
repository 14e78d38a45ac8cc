"""Runaway guards for harness.template.render: a render is bounded in time and size.

A check after an allocation is too late when one C call builds gigabytes (`''|center(10**9)`,
`'%999999999s'|format(1)`, `sep.join(items)`), or a pure-Python loop inside a filter never reaches a hook where
the clock is read (`lipsum(1, min=10**9)`, `range(9)|slice(10**8)|list`). So every operation that can multiply
its input is sized from its arguments before it runs, and refused when the result would pass the budget.
Within the budget the original operation runs unchanged, so output stays identical to Hugging Face's.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import re
import string
import time
from contextvars import ContextVar
from typing import Any, Callable

import jinja2.compiler
import jinja2.nodes
import jinja2.sandbox

# `2 ** n` or a product of two huge ints is a single C call that no deadline interrupts, so its size is checked up front.
MAX_INT_BITS = 1 << 20
# Lists a filter may cut a sequence into: the sandbox's own bound on range().
MAX_PIECES = jinja2.sandbox.MAX_RANGE
# Field widths and precisions in a %-format ('%0999999999d' allocates a gigabyte in one C call); `*` takes the
# width from the values.
_PERCENT_FIELD = re.compile(r"%(?:\([^)]*\))?[-+ #0]*(\*|\d*)(?:\.(\*|\d*))?")
# Lorem ipsum words are short; this overestimates a word with its separator.
_CHARS_PER_WORD = 12


class LimitExceeded(Exception):
    """A render went past its time or size budget."""


@dataclasses.dataclass
class Budget:
    seconds: float
    max_chars: int
    deadline: float = 0.0

    def __post_init__(self) -> None:
        self.deadline = time.monotonic() + self.seconds


# Set only while `render` runs, so a compiled template used directly behaves exactly like HF's.
budget_var: ContextVar[Budget | None] = ContextVar("render_budget", default=None)


def check_time() -> None:
    budget = budget_var.get()
    if budget is not None and time.monotonic() > budget.deadline:
        raise LimitExceeded(f"render took longer than {budget.seconds:g} s")


def check_size(value: Any) -> Any:
    budget = budget_var.get()
    if budget is not None and isinstance(value, (str, list, tuple)) and len(value) > budget.max_chars:
        raise LimitExceeded(f"the template built a value of more than {budget.max_chars} items")
    return value


def refuse_over(what: str, size: int) -> None:
    budget = budget_var.get()
    if budget is not None and size > budget.max_chars:
        raise LimitExceeded(f"{what} would build about {size} characters (limit {budget.max_chars})")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def weight(value: Any, limit: int, indent: int = 0) -> int:
    """Characters that printing or serializing `value` writes, counted until `limit` is passed. A list that holds
    the same big string a million times is small in memory and huge in print, so references count each time."""
    total, stack = 0, [(value, 0)]
    while stack and total <= limit:
        item, depth = stack.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, (list, tuple, dict)):
            children = [*item.keys(), *item.values()] if isinstance(item, dict) else item
            total += 2 + len(children) * (2 + indent * (depth + 1))
            stack.extend((child, depth + 1) for child in children)
        elif _is_int(item):
            total += item.bit_length() // 3 + 2  # decimal digits and sign, roughly
        else:
            total += 24  # a float, a bool, None
    return total


def _percent_widths(fmt: str, values: Any) -> list[int]:
    widths = [int(n) for spec in _PERCENT_FIELD.findall(fmt) for n in spec if n.isdigit()]
    if any("*" in spec for spec in _PERCENT_FIELD.findall(fmt)):
        widths += [v for v in (values if isinstance(values, tuple) else (values,)) if _is_int(v)]
    return widths


def check_percent(fmt: str, values: Any) -> None:
    widths = _percent_widths(fmt, values)
    refuse_over("a %-format", max(widths, default=0))


def check_binop(operator: str, left: Any, right: Any) -> None:
    budget = budget_var.get()
    if budget is None:
        return
    if operator == "*":
        for seq, count in ((left, right), (right, left)):
            if isinstance(seq, (str, list, tuple)) and _is_int(count) and count > 0:
                refuse_over("repeating a value", weight(seq, budget.max_chars // count + 1) * count)
        if _is_int(left) and _is_int(right) and left.bit_length() + right.bit_length() > MAX_INT_BITS:
            raise LimitExceeded(f"the template computed a product of more than {MAX_INT_BITS} bits")
    if operator == "%" and isinstance(left, str):
        check_percent(left, right)
        # `'%s' % (d,)` prints every value: a dict holding one big string 150 times is small in memory only.
        refuse_over("a %-format", len(left) + weight(right, budget.max_chars))
    if operator == "**" and isinstance(left, (int, float)) and _is_int(right):
        if abs(left) > 1 and right > 0 and right * math.log2(abs(left)) > MAX_INT_BITS:
            raise LimitExceeded(f"the template computed a power of more than {MAX_INT_BITS} bits")


def _replaced_size(s: str, old: str, new: str, count: int = -1) -> int:
    hits = len(s) + 1 if old == "" else s.count(old)
    if _is_int(count) and count >= 0:
        hits = min(hits, count)
    return len(s) + hits * max(0, len(new) - len(old))


def _text_size(items: Any, limit: int) -> int:
    """Length of the items printed one after another, counted until `limit` is passed."""
    total = 0
    for item in items:
        total += len(item) if isinstance(item, str) else weight(item, limit)
        if total > limit:
            break
    return total


def _joined_size(sep: str, items: Any, limit: int) -> int:
    if isinstance(items, str):
        return len(items) + len(sep) * max(0, len(items) - 1)
    if not isinstance(items, (list, tuple, dict)):
        return 0  # a generator cannot be sized without consuming it; its items pass the other checks
    return len(sep) * max(0, len(items) - 1) + _text_size(items, limit)


def _format_spec_widths(fmt: str) -> list[int]:
    try:
        fields = list(string.Formatter().parse(fmt))
    except ValueError:
        return []  # the call itself reports the malformed format
    return [int(n) for _, _, spec, _ in fields if spec for n in re.findall(r"\d+", spec)]


def check_str_method(method: Any, args: tuple, kwargs: dict) -> None:
    """Size a call of a str method before it runs. Any int argument beyond the budget is refused ('x'.ljust,
    zfill, center); the methods that multiply their input are sized from it."""
    budget = budget_var.get()
    if budget is None:
        return
    s, name, limit = method.__self__, method.__name__, budget.max_chars
    if any(_is_int(arg) and arg > limit for arg in (*args, *kwargs.values())):
        raise LimitExceeded(f"a string method was asked for more than {limit} characters")
    try:
        bound = inspect.signature(getattr(str, name)).bind(s, *args, **kwargs).arguments
    except (TypeError, ValueError):
        bound = {}
    if name in ("format", "format_map"):
        mapping = args[0] if name == "format_map" and args and isinstance(args[0], dict) else {}
        sizes = [*_format_spec_widths(s), *(v for v in mapping.values() if _is_int(v))]
        refuse_over(f"str.{name}", max(sizes, default=0))
        # Each value is printed, possibly more than once ('{0}{0}'): its printed size times the fields.
        fields = max(1, s.count("{"))
        refuse_over(f"str.{name}", len(s) + fields * weight([*args, *kwargs.values()], limit // fields + 1))
    elif name == "replace" and isinstance(bound.get("old"), str) and isinstance(bound.get("new"), str):
        refuse_over("str.replace", _replaced_size(s, bound["old"], bound["new"], bound.get("count", -1)))
    elif name == "join" and "iterable" in bound:
        refuse_over("str.join", _joined_size(s, bound["iterable"], limit))
    elif name == "expandtabs" and _is_int(bound.get("tabsize", 8)):
        refuse_over("str.expandtabs", len(s) + s.count("\t") * bound.get("tabsize", 8))


# -- filters and globals that build text or lists in one call ------------------------------------------------

def _center(a: dict, limit: int) -> None:
    refuse_over("|center", a["width"] if _is_int(a["width"]) else 0)


def _indent(a: dict, limit: int) -> None:
    s, width = str(a["s"]), a["width"]
    step = len(width) if isinstance(width, str) else width if _is_int(width) else 0
    refuse_over("|indent", len(s) + (s.count("\n") + 2) * step)


def _format(a: dict, limit: int) -> None:
    values = a["kwargs"] or a["args"]
    check_percent(str(a["value"]), values if isinstance(values, tuple) else tuple(values.values()))


def _lipsum(a: dict, limit: int) -> None:
    words = a["n"] * max(a["min"], a["max"]) if all(_is_int(a[k]) for k in ("n", "min", "max")) else 0
    refuse_over("lipsum", words * _CHARS_PER_WORD)


def _pieces(name: str, key: str) -> Callable[[dict, int], None]:
    def check(a: dict, limit: int) -> None:
        if _is_int(a[key]) and a[key] > MAX_PIECES:
            raise LimitExceeded(f"|{name} was asked for {a[key]} pieces (limit {MAX_PIECES})")
    return check


def _batch(a: dict, limit: int) -> None:
    # With fill_with the last batch is padded to linecount items.
    if a["fill_with"] is not None and _is_int(a["linecount"]):
        refuse_over("|batch", a["linecount"])


def _join(a: dict, limit: int) -> None:
    refuse_over("|join", _joined_size(str(a["d"]), a["value"], limit))


def _replace(a: dict, limit: int) -> None:
    count = a["count"] if a["count"] is not None else -1
    refuse_over("|replace", _replaced_size(str(a["s"]), str(a["old"]), str(a["new"]), count))


def _tojson(a: dict, limit: int) -> None:
    indent = a["indent"]
    step = len(indent) if isinstance(indent, str) else indent if _is_int(indent) and indent > 0 else 0
    refuse_over("|tojson", weight(a["x"], limit, step))


def _pprint(a: dict, limit: int) -> None:
    refuse_over("|pprint", weight(a["value"], limit))


def _printed(name: str) -> Callable[[dict, int], None]:
    # These filters print their input first (str(value)): a container is sized by what printing it writes.
    def check(a: dict, limit: int) -> None:
        for value in a.values():
            if isinstance(value, (list, tuple, dict)):
                refuse_over(f"|{name}", weight(value, limit))
    return check


_PRINTING = ("string", "e", "escape", "forceescape", "safe", "trim", "upper", "lower", "title", "capitalize",
             "wordwrap", "wordcount", "truncate", "striptags", "urlize", "urlencode")

FILTER_CHECKS = {
    **{name: _printed(name) for name in _PRINTING},
    "center": _center, "indent": _indent, "format": _format, "slice": _pieces("slice", "slices"),
    "batch": _batch, "join": _join, "replace": _replace, "tojson": _tojson, "pprint": _pprint,
}
GLOBAL_CHECKS = {"lipsum": _lipsum}


def guarded(original: Callable, check: Callable[[dict, int], None]) -> Callable:
    """`original` with `check(bound arguments, budget)` run first. functools.wraps keeps Jinja's pass_* marks,
    so the filter still receives its environment or eval context."""
    inner = inspect.unwrap(original)
    signature = inspect.signature(inner)
    # Jinja's async_variant wraps a plain filter in one that takes the eval context first; the plain one does not.
    skip = 1 if getattr(original, "jinja_pass_arg", None) and not getattr(inner, "jinja_pass_arg", None) else 0

    @functools.wraps(original)
    def call(*args: Any, **kwargs: Any) -> Any:
        budget = budget_var.get()
        if budget is not None:
            try:
                bound = signature.bind(*args[skip:], **kwargs)
            except TypeError:
                bound = None  # the original raises its own error for these arguments
            if bound is not None:
                bound.apply_defaults()
                check(bound.arguments, budget.max_chars)
        return original(*args, **kwargs)

    return call


def checked_concat(parts: Any) -> str:
    """Environment.concat: joins the body of a block set, macro or call block; sized before the join."""
    parts = list(parts)
    refuse_over("joining the template's output", sum(len(p) for p in parts))
    return "".join(parts)


def checked_parts(parts: tuple) -> tuple:
    """The operands of `~`, sized before Jinja joins them (`a ~ a ~ a ...` of an 8 MB string is one C call)."""
    budget = budget_var.get()
    if budget is not None:
        refuse_over("the ~ operator", _text_size(parts, budget.max_chars))
    return parts


class CheckedCodeGenerator(jinja2.compiler.CodeGenerator):
    def visit_Concat(self, node: jinja2.nodes.Concat, frame: jinja2.compiler.Frame) -> None:
        # As Jinja's own, with the operands passed through checked_parts on their way to the join.
        if frame.eval_ctx.volatile:
            func_name = "(markup_join if context.eval_ctx.volatile else str_join)"
        elif frame.eval_ctx.autoescape:
            func_name = "markup_join"
        else:
            func_name = "str_join"
        self.write(f"{func_name}(environment.checked_parts((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write(")))")
