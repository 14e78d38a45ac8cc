"""Render a chat template exactly as Hugging Face's `tokenizer.apply_chat_template(..., tokenize=False)` does.

Faithfulness is the point: detection cuts the probe call out of a render and parsers are judged against it, so a
renderer that differs from the model maker's tooling would test the wrong prompt. The environment below mirrors
`transformers.utils.chat_template_utils._cached_compile_jinja_template` (transformers 5.x) setting for setting, and
`render` mirrors the input preparation of `apply_chat_template` and `render_jinja_template`. transformers is not
imported at runtime (it is a test-only dependency); tests/template/test_render.py compares both on every template.

Templates are untrusted code: they run in Jinja's immutable sandbox, and a render is bounded in time and size
(harness.template.limits sizes every operation that could build more than the budget before it runs). Those
checks are cooperative, so every render also runs in a child process with hard time and memory limits
(harness.template.render_worker); `in_render_process` runs a whole batch of renders there in one call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
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

from harness.template import limits, render_worker
from harness.template.render_inputs import _plain, _prepare_messages, _prepare_tools
from harness.core.errors import RenderLimitError, TemplateError, TemplateRaisedError

# Older Jinja releases have known sandbox escapes; transformers refuses them for the same reason.
_MIN_JINJA = (3, 1, 6)

# Real templates render in milliseconds and produce kilobytes; these bounds only stop runaway templates.
MAX_RENDER_SECONDS = 10.0
MAX_OUTPUT_CHARS = 8_000_000
# Compiling is bounded apart from rendering: Python's compiler takes seconds on a 1 MB expression before it
# refuses it, which is a clear error worth waiting for.
MAX_COMPILE_SECONDS = 30.0

# Names that apply_chat_template consumes itself instead of passing to the template. Accepting them as template
# variables would silently render something HF never renders.
_HF_CONSUMED = frozenset(
    {"chat_template", "continue_final_message", "return_assistant_tokens_mask", "tokenize", "return_dict",
     "sanitize_control_tokens", "padding", "truncation", "max_length", "return_tensors", "tokenizer_kwargs"}
)
# Jinja names the template's frames in a rewritten traceback like this when the template came from a string.
_TEMPLATE_FILENAME = "<template>"


def _now() -> datetime:
    # strftime_now reads the clock through this name, so tests and reproducible runs can freeze it.
    return datetime.now()


# In the render process: the caller's time budget and clock for the call being served (its _now and
# MAX_RENDER_SECONDS, read when the call was made, since the child is a copy of an earlier moment).
_caller: tuple[float, datetime] | None = None


def in_render_process(func: Any, *args: Any, **kwargs: Any) -> Any:
    """func(*args, **kwargs) run in the render process (harness.template.render_worker), where its renders run
    directly: one round trip for a batch of renders. func must be a module-level function."""
    if render_worker.inside():
        return func(*args, **kwargs)
    return render_worker.call(_as_caller, (MAX_RENDER_SECONDS, _now(), func, args, kwargs),
                              seconds=MAX_RENDER_SECONDS)


def map_in_render_process(func: Any, items: list) -> list:
    """[(True, func(item)) or (False, its exception)] for every item, all run in the render process in one batch
    (no round trip per item); an item past its limits gets a RenderLimitError and the rest still run."""
    packed = [(MAX_RENDER_SECONDS, _now(), func, (item,), {}) for item in items]
    return render_worker.map_calls(_as_caller_packed, packed, seconds=MAX_RENDER_SECONDS)


def _as_caller_packed(packed: tuple) -> Any:
    return _as_caller(*packed)


def _as_caller(seconds: float, now: datetime, func: Any, args: tuple, kwargs: dict) -> Any:
    global _caller
    _caller = (seconds, now)
    try:
        return func(*args, **kwargs)
    finally:
        _caller = None


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """HF's sandbox plus runaway guards. The hooks return exactly what the parent returns, so output is unchanged;
    they only raise when a render exceeds its budget. Attribute access, item access and calls happen in every
    loop that does work, which is where the clock is read."""

    # Intercepting these also stops Jinja from constant-folding e.g. `'a' * 10**10` at compile time.
    intercepted_binops = frozenset({"+", "*", "**", "%"})

    code_generator_class = limits.CheckedCodeGenerator
    concat = staticmethod(limits.checked_concat)
    checked_parts = staticmethod(limits.checked_parts)

    def getattr(self, obj: Any, attribute: str) -> Any:
        limits.check_time()
        return limits.check_size(super().getattr(obj, attribute))

    def getitem(self, obj: Any, argument: Any) -> Any:
        limits.check_time()
        return limits.check_size(super().getitem(obj, argument))

    def call(self, context: Any, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        limits.check_time()
        if isinstance(getattr(obj, "__self__", None), str):
            limits.check_str_method(obj, args, kwargs)
        return limits.check_size(super().call(context, obj, *args, **kwargs))

    def wrap_str_format(self, value: Any) -> Any:
        # Jinja hands out its own wrapper for str.format and format_map, so `call` never sees the str method.
        wrapper = super().wrap_str_format(value)
        if wrapper is None:
            return None

        def sized(*args: Any, **kwargs: Any) -> Any:
            limits.check_str_method(value, args, kwargs)
            return wrapper(*args, **kwargs)

        return sized

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        limits.check_time()
        limits.check_binop(operator, left, right)
        return limits.check_size(super().call_binop(context, operator, left, right))


def _finalize(value: Any) -> Any:
    # Printing a list that holds one big string a million times is one C call; size it first.
    if isinstance(value, (list, tuple, dict)):
        limits.refuse_over("printing a value", limits.weight(value, MAX_OUTPUT_CHARS))
    return value


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
    return (_now() if _caller is None else _caller[1]).strftime(format)


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


def _make_environment() -> BoundedSandbox:
    version = tuple(int(part) for part in jinja2.__version__.split(".")[:3] if part.isdigit())
    if version < _MIN_JINJA:
        raise TemplateError(
            f"jinja2 {jinja2.__version__} has known sandbox escapes; chat templates need jinja2>=3.1.6"
        )
    # optimized=False skips Jinja's constant folding pass: a fold evaluates at compile time what the render
    # evaluates anyway (same output), and a chat template is rendered a handful of times per compile, so the
    # pass costs more than it saves (about a seventh of compiling); it also leaves every constant expression
    # to the render, where the size guards see it with the line it is on.
    env = BoundedSandbox(trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationBlock, jinja2.ext.loopcontrols],
                          finalize=_finalize, optimized=False)
    env.filters["tojson"] = _tojson
    for name, check in limits.FILTER_CHECKS.items():
        env.filters[name] = limits.guarded(env.filters[name], check)
    for name, check in limits.GLOBAL_CHECKS.items():
        env.globals[name] = limits.guarded(env.globals[name], check)
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["dict"] = _TemplateDict()
    env.globals["namespace"] = _TemplateNamespace
    return env


ENVIRONMENT = _make_environment()


@lru_cache(maxsize=512)
def compiled_cached(template: str) -> jinja2.Template:
    return ENVIRONMENT.from_string(template)


def compile_template(template: str) -> jinja2.Template:
    """The compiled template, cached by source text. Raises TemplateError naming the line of a syntax error."""
    if not isinstance(template, str):
        raise TemplateError(f"a chat template must be a string, got {type(template).__name__}")
    # Jinja folds constant expressions while compiling (`'%999999999s'|format(1)`); under a budget the guards
    # refuse such a fold, which leaves the expression to the render, where the refusal is reported.
    token = limits.budget_var.set(limits.Budget(seconds=MAX_RENDER_SECONDS, max_chars=MAX_OUTPUT_CHARS))
    try:
        return compiled_cached(template)
    except jinja2.exceptions.TemplateSyntaxError as exc:
        raise TemplateError(f"template syntax error at line {exc.lineno}: {exc.message}") from exc
    except jinja2.exceptions.TemplateError as exc:
        raise TemplateError(f"template does not compile: {exc}") from exc
    except (RecursionError, MemoryError) as exc:
        raise TemplateError(f"template does not compile: nested too deeply ({type(exc).__name__})") from None
    except Exception as exc:  # noqa: BLE001 -- Python's compiler refuses some generated code (too many nested blocks)
        raise TemplateError(f"template does not compile: {type(exc).__name__}: {exc}") from exc
    finally:
        limits.budget_var.reset(token)


@lru_cache(maxsize=64)
def _compile_in(environment: jinja2.Environment, template: str) -> jinja2.Template:
    # Another sandbox's compiled templates (sandbox_variant), cached as HF's are: detection renders each a few times.
    return environment.from_string(template)


@lru_cache(maxsize=512)
def template_variables(template: str) -> frozenset[str]:
    """Variables the template reads from outside (e.g. whether it reads `tools` at all)."""
    compile_template(template)
    return frozenset(jinja2.meta.find_undeclared_variables(ENVIRONMENT.parse(template)))


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
    The render runs in the render process (harness.template.render_worker), killed if it overruns.
    """
    return in_render_process(_render_here, template, messages, tools=tools,
                             add_generation_prompt=add_generation_prompt, bos_token=bos_token,
                             eos_token=eos_token, **kwargs)


def _render_here(
    template: str,
    messages: list[dict],
    *,
    tools: list[dict] | None = None,
    add_generation_prompt: bool = False,
    bos_token: str | None = "",
    eos_token: str | None = "",
    **kwargs: Any,
) -> str:
    consumed = sorted(_HF_CONSUMED & kwargs.keys())
    if consumed:
        raise TemplateError(f"{', '.join(consumed)}: not template variables, and not supported by this renderer")
    # A second opinion in another sandbox (harness.template.sandbox_variant) reuses everything else here; None is HF's.
    environment = kwargs.pop("_environment", None)
    render_worker.started(MAX_COMPILE_SECONDS)
    compiled = compile_template(template) if environment is None else _compile_in(environment, template)
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
    seconds = MAX_RENDER_SECONDS if _caller is None else _caller[0]
    render_worker.started(seconds)
    budget = limits.Budget(seconds=seconds, max_chars=MAX_OUTPUT_CHARS)
    token = limits.budget_var.set(budget)
    chunks: list[str] = []
    size = 0
    stream = compiled.generate(**variables)
    try:
        for chunk in stream:
            size += len(chunk)
            if size > budget.max_chars:
                raise limits.LimitExceeded(f"output longer than {budget.max_chars} characters")
            limits.check_time()
            chunks.append(chunk)
    except TemplateRaisedError as exc:
        raise TemplateRaisedError(f"template raised{_at_line(exc)}: {exc}", template_message=str(exc)) from None
    except limits.LimitExceeded as exc:
        raise RenderLimitError(f"render stopped{_at_line(exc)}: {exc}") from None
    except jinja2.exceptions.SecurityError as exc:
        raise TemplateError(f"sandbox refused{_at_line(exc)}: {exc}") from exc
    except RecursionError as exc:
        raise TemplateError(f"render stopped: recursion too deep ({exc})") from None
    except MemoryError:
        # Sizes are checked before the big allocations, but a machine can run out below the budget.
        raise RenderLimitError(
            f"render stopped: out of memory (the budget is {budget.max_chars} characters)") from None
    except Exception as exc:  # noqa: BLE001 -- any failure inside untrusted template code is a template error
        raise TemplateError(f"render failed{_at_line(exc)}: {type(exc).__name__}: {exc}") from exc
    finally:
        stream.close()
        limits.budget_var.reset(token)
    return "".join(chunks)
