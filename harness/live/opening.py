"""A model opened for a run, and how it is driven: a pinned model file (open_model), an unpinned GGUF (open_gguf) or a
served model known by its template (open_endpoint). Its template (embedded, pinned, given with --template, or
llama.cpp's ChatML default), its special tokens and the family detected from the template decide the chat."""

import re
from dataclasses import dataclass
from pathlib import Path

from harness.backends import DEFAULT_IN_PROCESS, backend_class
from harness.core import constants
from harness.core.errors import SourcesError
from harness.live.tool_loop import DrivenModel
from harness.pins.digest import file_digest
from harness.pins.sources import load_sources, model_path, resolve_template
from harness.template import detect as detection
from harness.template.kwargs import template_kwargs_for

# llama.cpp's template for a GGUF that embeds none (common/chat.cpp, CHATML_TEMPLATE_SRC), used only when
# sources.json pins no template for the model either. Recorded as such in the transcript.
LLAMA_CPP_CHATML = (
    "{%- for message in messages -%}\n"
    "  {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "  {{- '<|im_start|>assistant\n' -}}\n"
    "{%- endif -%}"
)
N_CTX = 4096
# Measured on the 2-core machine while other jobs ran: with 2 threads (llama-cpp-python's batch default) the
# batched first steps of qwen2.5-coder-0.5b wrote 0.3-1 token/s, because ggml's threads spin at every
# barrier and stall whenever the other core is busy; with 1 thread, 7-15 tokens/s and prompts at ~50 tokens/s.
DEFAULT_THREADS = 1


@dataclass
class OpenModel:
    id: str
    sha256: str
    filename: str
    chat: DrivenModel
    template_source: str     # "gguf", "sources.json:<id>" or "llama.cpp-default-chatml"
    template_id: str | None  # the official template sources.json expects this model to carry
    detection: object
    parallel: int = 1        # samples run side by side (a served model's requests in flight)
    pin: str | None = None   # the sources.json model id, where it differs from `id` (run with --template)
    runtime: dict | None = None   # a served model: {"name", "endpoints", "served_model"}; None in process


def open_model(model_id: str, sources=None, threads: int | None = None, template: str | None = None,
               backend_cls=None) -> OpenModel:
    """Load a verified model file and decide how it is driven: its embedded template, its special tokens
    and the family detected from that template, or declared by its pin (mode native, setting auto). `template` (a
    pinned id or a .jinja path) replaces whatever template the model has: the run's id then names it (see
    _override). `backend_cls`: a Backend that loads model files (default: the embedded one)."""
    sources = sources or load_sources()
    pin = sources.model(model_id)
    backend = _load(model_path(model_id, sources), threads, backend_cls)
    model = _driven(backend, model_id, pin.sha256, pin.filename, pin.template or pin.stand_in_template,
                    pin.template, sources, override=template)
    model.pin = model_id
    return model


def open_gguf(path, template: str | None = None, threads: int | None = None, backend_cls=None) -> OpenModel:
    """An unpinned local GGUF (`harness run --model path.gguf`): its SHA-256 is computed and recorded, its id
    is its file name; `template` (a pinned id or a .jinja path) stands in when the file embeds none, and
    replaces the embedded one when it does (a packager trying a template on an existing GGUF)."""
    path = Path(path)
    if not path.is_file():
        raise SourcesError(f"{path}: no such model file")
    _, sha256 = file_digest(path)
    model_id = served_id(path.stem)
    backend = _load(path, threads, backend_cls)
    if not backend.embedded_template():
        return _driven(backend, model_id, sha256, path.name, template, None, load_sources())
    return _driven(backend, model_id, sha256, path.name, None, None, load_sources(), override=template)


def open_endpoint(backend, served_model: str, template: str, runtime: str, parallel: int = 1) -> OpenModel:
    """A model behind an OpenAI-compatible server, driven on the strict path: our render of `template`, the
    server's raw completion, our parser. The weights are the server's: no file hash, "served" instead. Its id
    names the runtime too ("<served model>--<runtime>"): a server's alias is often a pinned model's id (LocalServer
    uses the file's stem), and its samples must stand beside the in-process ones, not among them."""
    chat, ref, found = template_chat(template, backend)
    source = f"sources.json:{ref.id}" if ref.entry else str(ref.path)
    endpoints = backend.describe()["endpoints"]
    return OpenModel(served_run_id(served_model, runtime), "served", ", ".join(endpoints), chat, source,
                     ref.id if ref.entry else None, found, parallel=parallel,
                     runtime={"name": runtime, "endpoints": endpoints, "served_model": served_model})


def served_run_id(served_model: str, runtime: str) -> str:
    return f"{served_id(served_model)}--{served_id(runtime)}"


def template_chat(template: str, backend=None) -> tuple:
    """(DrivenModel, ResolvedTemplate, Detection) for a model known only by its template (a pinned id or a .jinja
    path): no weights in this process (`backend` is a server, or None); its special tokens are the pin's, its
    family is detected (or declared by its pin)."""
    ref = resolve_template(template)
    kwargs = template_kwargs_for(ref.text)
    bos, eos = ref.bos_token or "", ref.eos_token or ""
    found = detection.detect_declared(ref.text, bos, eos, **kwargs)
    return DrivenModel(backend, ref.text, bos, eos, found.family, kwargs, tool_placement=found.tool_placement,
                calls_in_content=bool(found.declared)), ref, found


def served_id(name: str) -> str:
    """A model name as a transcript id (it names a file): "Qwen/Qwen3-8B" -> "Qwen--Qwen3-8B"."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "--", name).strip("-.")
    if not cleaned:
        raise SourcesError(f"model name {name!r} has nothing a file name can keep")
    return cleaned


def _load(path, threads, backend_cls=None):
    """The model file in this process, loaded by `backend_cls` (default: the embedded backend, imported here, so
    the binding loads only when a model is really driven)."""
    cls = backend_cls or backend_class(DEFAULT_IN_PROCESS)
    if not cls.loads_model_files:
        raise SourcesError(f"the {cls.name} backend does not load model files: it needs --endpoint")
    if threads is None:
        constants.check_env("HARNESS_THREADS")
    return cls.load(path, n_ctx=N_CTX, n_threads=threads or constants.HARNESS_THREADS or DEFAULT_THREADS)


def _driven(backend, model_id, sha256, filename, fallback, pinned_template, sources, override=None) -> OpenModel:
    template = backend.embedded_template()
    source = "gguf"
    if override:
        model_id, template, source = _override(model_id, override, sources)
    elif not template and fallback:
        ref = resolve_template(fallback, sources)
        template, source = ref.text, f"sources.json:{ref.id}" if ref.entry else str(ref.path)
    elif not template:
        template, source = LLAMA_CPP_CHATML, "llama.cpp-default-chatml"
    bos, eos = backend.special_tokens()
    kwargs = template_kwargs_for(template)
    found = detection.detect_declared(template, bos, eos, **kwargs)
    chat = DrivenModel(backend, template, bos, eos, found.family, kwargs, tool_placement=found.tool_placement,
                calls_in_content=bool(found.declared))
    return OpenModel(model_id, sha256, filename, chat, source, pinned_template, found)


def _override(model_id: str, template: str, sources) -> tuple:
    """(id, text, source) of a model run with `--template` in place of its own. The id names the template, so
    these samples go to a transcript and tables of their own instead of mixing with (or being skipped as) the
    model's runs with its own template; the source says what was replaced, and the report prints it."""
    ref = resolve_template(template, sources)
    label = f"sources.json:{ref.id}" if ref.entry else str(ref.path)
    return (f"{model_id}--template-{served_id(ref.id)}", ref.text,
            f"{label}, given with --template in place of the model's own template")
