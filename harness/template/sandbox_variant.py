"""A second opinion for templates that Hugging Face's immutable sandbox refuses because they call `list.append`.

transformers refuses those templates too, so the refusal stays the verdict. This sandbox differs from HF's in
one permission only: methods that modify a list (append, extend, ...) are allowed. Every list a template can
reach is either one it built or a copy the renderer made for this render (render_inputs._plain), so nothing outside
the render is mutated; dicts, sets and every other sandbox rule stay as HF has them. It is still a Jinja
sandbox with the same filters, globals and budgets: never plain jinja2."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from jinja2.exceptions import SecurityError
from jinja2.sandbox import SandboxedEnvironment

from harness.template import render as rendering

NAME = "immutable sandbox with list methods allowed"


class _ListMethodsSandbox(rendering.BoundedSandbox):
    def is_safe_attribute(self, obj: Any, attr: str, value: Any) -> bool:
        if type(obj) is list:
            # The mutable sandbox's rule: everything but the immutability check.
            return SandboxedEnvironment.is_safe_attribute(self, obj, attr, value)
        return super().is_safe_attribute(obj, attr, value)


@lru_cache(maxsize=1)
def environment() -> _ListMethodsSandbox:
    base = rendering.ENVIRONMENT
    env = _ListMethodsSandbox(trim_blocks=base.trim_blocks, lstrip_blocks=base.lstrip_blocks,
                              extensions=[type(extension) for extension in base.extensions.values()],
                              finalize=base.finalize, optimized=base.optimized)
    # Whatever filters and globals the HF-faithful environment has (caps included), this one has too.
    env.filters.update(base.filters)
    env.globals.update(base.globals)
    return env


def refused_list_method(exc: BaseException) -> bool:
    """The render failed because the sandbox refused a list-modifying method (Kimi-K2's `list.append`)."""
    cause = exc.__cause__
    return isinstance(cause, SecurityError) and "of 'list' object is unsafe" in str(cause)


def render(template: str, messages: list, **kwargs) -> str:
    # In the render process, as every render is; the environment is built there, not sent.
    return rendering.in_render_process(_render_here, template, messages, **kwargs)


def _render_here(template: str, messages: list, **kwargs) -> str:
    return rendering._render_here(template, messages, _environment=environment(), **kwargs)
