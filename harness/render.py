"""Render a chat template exactly as Hugging Face's `tokenizer.apply_chat_template(..., tokenize=False)` does.

Faithfulness is the point: detection cuts the probe call out of a render and parsers are judged against it, so a
renderer that differs from the model maker's tooling would test the wrong prompt. The environment below mirrors
`transformers.utils.chat_template_utils._cached_compile_jinja_template` (transformers 5.x) setting for setting, and
`render` mirrors the input preparation of `apply_chat_template` and `render_jinja_template`. transformers is not
imported at runtime (it is a test-only dependency); tests/test_render.py compares both on every template.

Templates are untrusted code: they run in Jinja's immutable sandbox, and a render is bounded in time and size.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import time
from collections.abc import Mapping
from contextvars import ContextVar
from datetime import datetime
from functools import lru_cache
from typing import Any

import jinja2
import jinja2.exceptions
import jinja2.ext
import jinja2.meta
import jinja2.nodes
import jinja2.utils
from jinja2.sandbox import ImmutableSandboxedEnvironment

from harness.errors import TemplateError, TemplateRaisedError

# Older Jinja releases have known sandbox escapes; transformers refuses them for the same reason.
_MIN_JINJA = (3, 1, 6)

# Real templates render in milliseconds and produce kilobytes; these bounds only stop runaway templates.
MAX_RENDER_SECONDS = 10.0
MAX_OUTPUT_CHARS = 8_000_000
# `2 ** n` with a huge n is a single C call that no deadline interrupts, so its size is checked up front.
_MAX_POWER_BITS = 1 << 20
# Field widths and precisions in a %-format ('%0999999999d' allocates a gigabyte in one C call).
_FORMAT_WIDTH = re.compile(r"%(?:\([^)]*\))?[-+ #0]*(\d*)(?:\.(\d*))?")

# Names that apply_chat_template consumes itself instead of passing to the template. Accepting them as template
# variables would silently render something HF never renders.
_HF_CONSUMED = frozenset(
    {"chat_template", "continue_final_message", "return_assistant_tokens_mask", "tokenize", "return_dict",
     "sanitize_control_tokens", "padding", "truncation", "max_length", "return_tensors", "tokenizer_kwargs"}
)
# Names a message's reasoning is passed under; transformers copies the first one found to the others.
_REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")
# Jinja names the template's frames in a rewritten traceback like this when the template came from a string.
_TEMPLATE_FILENAME = "<template>"


class _LimitExceeded(Exception):
    """A render went past MAX_RENDER_SECONDS or MAX_OUTPUT_CHARS."""


@dataclasses.dataclass
class _Budget:
    deadline: float
    max_chars: int


# Set only while `render` runs, so a compiled template used directly behaves exactly like HF's.
_budget: ContextVar[_Budget | None] = ContextVar("render_budget", default=None)


def _check_time() -> None:
    budget = _budget.get()
    if budget is not None and time.monotonic() > budget.deadline:
        raise _LimitExceeded(f"render took longer than {MAX_RENDER_SECONDS:g} s")


def _check_size(value: Any) -> Any:
    budget = _budget.get()
    if budget is not None and isinstance(value, (str, list, tuple)) and len(value) > budget.max_chars:
        raise _LimitExceeded(f"the template built a value of more than {budget.max_chars} items")
    return value


def _now() -> datetime:
    # strftime_now reads the clock through this name, so tests and reproducible runs can freeze it.
    return datetime.now()


class _BoundedSandbox(ImmutableSandboxedEnvironment):
    """HF's sandbox plus runaway guards. The hooks return exactly what the parent returns, so output is unchanged;
    they only raise when a render exceeds its budget. Attribute access, item access and calls happen in every
    loop that does work, which is where the clock is read."""

    # Intercepting these also stops Jinja from constant-folding e.g. `'a' * 10**10` at compile time.
    intercepted_binops = frozenset({"+", "*", "**", "%"})

    def getattr(self, obj: Any, attribute: str) -> Any:
        _check_time()
        return _check_size(super().getattr(obj, attribute))

    def getitem(self, obj: Any, argument: Any) -> Any:
        _check_time()
        return _check_size(super().getitem(obj, argument))

    def call(self, context: Any, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        _check_time()
        budget = _budget.get()
        if budget is not None and isinstance(getattr(obj, "__self__", None), str):
            # 'x'.ljust(10**9) and friends allocate in one C call, before any check after it could run.
            if any(isinstance(arg, int) and arg > budget.max_chars for arg in (*args, *kwargs.values())):
                raise _LimitExceeded(f"a string method was asked for more than {budget.max_chars} characters")
        return _check_size(super().call(context, obj, *args, **kwargs))

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        _check_time()
        budget = _budget.get()
        if budget is not None and operator == "*":
            for seq, count in ((left, right), (right, left)):
                sized = isinstance(seq, (str, list, tuple)) and isinstance(count, int)
                if sized and len(seq) * count > budget.max_chars:
                    raise _LimitExceeded(f"the template built a value of more than {budget.max_chars} items")
        if budget is not None and operator == "%" and isinstance(left, str):
            widths = [int(number) for spec in _FORMAT_WIDTH.findall(left) for number in spec if number]
            if any(width > budget.max_chars for width in widths):
                raise _LimitExceeded(f"a %-format asked for more than {budget.max_chars} characters")
        if budget is not None and operator == "**" and isinstance(left, (int, float)) and isinstance(right, int):
            if abs(left) > 1 and right > 0 and right * math.log2(abs(left)) > _MAX_POWER_BITS:
                raise _LimitExceeded(f"the template computed a power of more than {_MAX_POWER_BITS} bits")
        return _check_size(super().call_binop(context, operator, left, right))


class _GenerationBlock(jinja2.ext.Extension):
    """`{% generation %}...{% endgeneration %}` marks assistant text for HF's training masks. Outside mask
    tracking (the only way `apply_chat_template(tokenize=False)` renders) it outputs its body unchanged."""

    tags = {"generation"}

    def parse(self, parser: Any) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    @jinja2.pass_eval_context
    def _body(self, context: Any, caller: Any) -> str:
        return caller()


def _raise_exception(message: Any) -> None:
    raise TemplateRaisedError(str(message))


def _tojson(
    x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None, sort_keys: bool = False
) -> str:
    # HF's signature and defaults: no HTML escaping (Jinja's own tojson escapes <, >, & and ') and non-ASCII kept.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(format: str) -> str:
    return _now().strftime(format)


class _TemplateDict:
    """`dict` for templates without exposing the type itself (no attribute or type tricks from dict)."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict:
        return dict.fromkeys(*args, **kwargs)


class _TemplateNamespace(jinja2.utils.Namespace):
    """Jinja's namespace, refusing underscore names that could reach CPython internals (as HF does)."""

    # No named `self`: Jinja's signature trick, so that namespace(self=1) still works.
    def __init__(*args: Any, **kwargs: Any) -> None:  # noqa: N805
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            _TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        _TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check_name(name: Any) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"Chat templates cannot store underscore-prefixed attributes on a namespace, but got {name!r}. "
                "Please rename the attribute."
            )


def _make_environment() -> _BoundedSandbox:
    version = tuple(int(part) for part in jinja2.__version__.split(".")[:3] if part.isdigit())
    if version < _MIN_JINJA:
        raise TemplateError(
            f"jinja2 {jinja2.__version__} has known sandbox escapes; chat templates need jinja2>=3.1.6"
        )
    env = _BoundedSandbox(trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationBlock, jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["dict"] = _TemplateDict()
    env.globals["namespace"] = _TemplateNamespace
    return env


_ENV = _make_environment()


@lru_cache(maxsize=512)
def _compile(template: str) -> jinja2.Template:
    return _ENV.from_string(template)


def compile_template(template: str) -> jinja2.Template:
    """The compiled template, cached by source text. Raises TemplateError naming the line of a syntax error."""
    if not isinstance(template, str):
        raise TemplateError(f"a chat template must be a string, got {type(template).__name__}")
    try:
        return _compile(template)
    except jinja2.exceptions.TemplateSyntaxError as exc:
        raise TemplateError(f"template syntax error at line {exc.lineno}: {exc.message}") from exc
    except jinja2.exceptions.TemplateError as exc:
        raise TemplateError(f"template does not compile: {exc}") from exc


@lru_cache(maxsize=512)
def template_variables(template: str) -> frozenset[str]:
    """Variables the template reads from outside (e.g. whether it reads `tools` at all)."""
    compile_template(template)
    return frozenset(jinja2.meta.find_undeclared_variables(_ENV.parse(template)))


def _plain(value: Any) -> Any:
    """Rebuild a value out of plain JSON types, as transformers' `_plain_template_data` does: the template then
    never sees (or mutates) the caller's objects, and methods of rich objects stay out of the sandbox."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Mapping):
        return {_plain(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_plain(item) for item in value)
    if any(cls.__module__ == "numpy" and cls.__name__ == "generic" for cls in type(value).__mro__):
        return _plain(value.item())  # numpy scalars: np.bool_(False) must not become a truthy placeholder
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: _plain(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if callable(getattr(value, "model_dump", None)):
        return _plain(value.model_dump())
    return f"<{type(value).__name__}>"


def _prepare_messages(messages: Any) -> list[dict]:
    if not isinstance(messages, (list, tuple)):
        raise TemplateError(f"messages must be a list of dicts, got {type(messages).__name__}")
    if not messages:
        raise TemplateError("Cannot apply chat template to an empty conversation. Provide at least one message.")
    prepared = []
    for index, message in enumerate(messages):
        if dataclasses.is_dataclass(message) and not isinstance(message, type):
            message = {field.name: getattr(message, field.name) for field in dataclasses.fields(message)}
        elif callable(getattr(message, "model_dump", None)):
            message = message.model_dump()
        if not isinstance(message, Mapping):
            raise TemplateError(f"message {index} must be a dict, got {type(message).__name__}: {message!r}")
        # apply_chat_template drops keys whose value is None (e.g. OpenAI's content=None): many templates crash on
        # them or print "None", while they handle a missing key.
        message = _plain({key: item for key, item in message.items() if item is not None})
        reasoning = next((message[key] for key in _REASONING_FIELDS if message.get(key) is not None), None)
        if reasoning is not None:
            # Same key order as transformers: `thinking` first (gpt-oss reads it), `reasoning_content` overwritten.
            message = {"thinking": reasoning, **message, "reasoning_content": reasoning}
        prepared.append(message)
    return prepared


def _prepare_tools(tools: Any) -> list[dict] | None:
    if tools is None:
        return None
    if not isinstance(tools, (list, tuple)):
        raise TemplateError(f"tools must be a list of JSON-schema dicts, got {type(tools).__name__}")
    for index, tool in enumerate(tools):
        if not isinstance(tool, Mapping):
            raise TemplateError(f"tool {index} must be a JSON-schema dict, got {type(tool).__name__}")
    return _plain(list(tools))


def _at_line(exc: BaseException) -> str:
    """' at line N' for the template line where a render failed, from the traceback Jinja rewrites to point into
    the template; empty when the failure was not inside the template (e.g. the output limit)."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == _TEMPLATE_FILENAME:
            line = tb.tb_lineno
        tb = tb.tb_next
    return "" if line is None else f" at line {line}"


def render(
    template: str,
    messages: list[dict],
    *,
    tools: list[dict] | None = None,
    add_generation_prompt: bool = False,
    bos_token: str | None = "",
    eos_token: str | None = "",
    **kwargs: Any,
) -> str:
    """Render `messages` (and `tools`, when given) through a chat template, as apply_chat_template(tokenize=False).

    kwargs become template variables (enable_thinking, documents, date_string, ...). `tools=None` leaves the
    variable None, as HF does; `tools=[]` passes an empty list, which some templates treat differently. A token
    given as None is left undefined, as HF leaves out tokens a tokenizer does not have.
    Raises TemplateError (TemplateRaisedError when the template itself rejected the input via raise_exception).
    """
    consumed = sorted(_HF_CONSUMED & kwargs.keys())
    if consumed:
        raise TemplateError(f"{', '.join(consumed)}: not template variables, and not supported by this renderer")
    # A second opinion in another sandbox (harness.sandbox_variant) reuses everything else here; None is HF's.
    environment = kwargs.pop("_environment", None)
    compiled = compile_template(template) if environment is None else environment.from_string(template)
    documents = kwargs.pop("documents", None)
    if documents is not None and not all(isinstance(document, Mapping) for document in documents):
        raise TemplateError("documents must be a list of dicts with 'title' and 'text' keys")
    special = {name: value for name, value in (("bos_token", bos_token), ("eos_token", eos_token)) if value is not None}
    variables = {
        "messages": _prepare_messages(messages),
        "tools": _prepare_tools(tools),
        "documents": _plain(documents),
        "add_generation_prompt": add_generation_prompt,
        **_plain({**special, **kwargs}),
    }
    budget = _Budget(deadline=time.monotonic() + MAX_RENDER_SECONDS, max_chars=MAX_OUTPUT_CHARS)
    token = _budget.set(budget)
    chunks: list[str] = []
    size = 0
    stream = compiled.generate(**variables)
    try:
        for chunk in stream:
            size += len(chunk)
            if size > budget.max_chars:
                raise _LimitExceeded(f"output longer than {budget.max_chars} characters")
            _check_time()
            chunks.append(chunk)
    except TemplateRaisedError as exc:
        raise TemplateRaisedError(f"template raised{_at_line(exc)}: {exc}", template_message=str(exc)) from None
    except _LimitExceeded as exc:
        raise TemplateError(f"render stopped{_at_line(exc)}: {exc}") from None
    except jinja2.exceptions.SecurityError as exc:
        raise TemplateError(f"sandbox refused{_at_line(exc)}: {exc}") from exc
    except RecursionError as exc:
        raise TemplateError(f"render stopped: recursion too deep ({exc})") from None
    except Exception as exc:  # noqa: BLE001 -- any failure inside untrusted template code is a template error
        raise TemplateError(f"render failed{_at_line(exc)}: {type(exc).__name__}: {exc}") from exc
    finally:
        stream.close()
        _budget.reset(token)
    return "".join(chunks)
