"""sources.json, the lock file: which templates and models the harness uses, where each came from, and the
size and SHA-256 every copy on disk must have.

Loading validates the whole file up front so that a typo surfaces as one clear SourcesError naming the entry
and field, not as a KeyError deep in a download (each entry is read by harness.pins.entries). Nothing here
touches the network (see harness.pins.fetch); writing the file is harness.pins.sources_file.
"""

from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from harness.core import constants
from harness.core.errors import DriftError, SourcesError
from harness.core.input_files import read_regular, read_regular_text
from harness.pins.digest import file_drift
from harness.pins.gguf_header import embedded_template, is_gguf
from harness.pins.paths import inside
from harness.pins.entries import ArchivePin, ModelPin, TemplatePin, parse_archive, parse_model, parse_template

SOURCES_VERSION = 1


@dataclass(frozen=True)
class Sources:
    path: Path
    templates: dict      # id -> TemplatePin, in file order
    models: dict         # id -> ModelPin, in file order
    archives: dict = field(default_factory=dict)   # id -> ArchivePin

    def template(self, template_id: str) -> TemplatePin:
        if template_id not in self.templates:
            raise SourcesError(_unknown("template", template_id, self.templates))
        return self.templates[template_id]

    def model(self, model_id: str) -> ModelPin:
        if model_id not in self.models:
            raise SourcesError(_unknown("model", model_id, self.models))
        return self.models[model_id]

    def archive(self, archive_id: str) -> ArchivePin:
        if archive_id not in self.archives:
            raise SourcesError(_unknown("archive", archive_id, self.archives))
        return self.archives[archive_id]

    def default_models(self) -> list:
        return [m for m in self.models.values() if m.default]

    def default_archives(self) -> list:
        return [a for a in self.archives.values() if a.default]


@dataclass(frozen=True)
class ResolvedTemplate:
    id: str
    path: Path
    text: str
    bos_token: str | None
    eos_token: str | None
    entry: TemplatePin | None


def _unknown(kind: str, name: str, known) -> str:
    close = difflib.get_close_matches(name, list(known), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(known) or '(none)'}"
    return f"no {kind} {name!r} in sources.json{hint}"


def read_sources_json(path: Path) -> object:
    """sources.json as JSON, unchecked: refused as a FIFO or device, when larger than any lock file, or when it
    is not JSON a program can hold (a number of thousands of digits, nesting thousands of levels deep)."""
    path = Path(path)
    if not os.path.lexists(path):
        raise SourcesError(f"{path}: not found (set HARNESS_ROOT to a checkout of the project)")
    text = read_regular_text(path, SourcesError)
    try:
        return json.loads(text)
    except RecursionError:
        raise SourcesError(f"{path}: not valid JSON: nested too deep") from None
    except ValueError as exc:           # JSONDecodeError, and int()'s limit on a number's digits
        raise SourcesError(f"{path}: not valid JSON: {exc}") from None


def load_sources(path: Path | str | None = None) -> Sources:
    path = Path(path) if path is not None else constants.SOURCES_PATH
    raw = read_sources_json(path)
    if not isinstance(raw, dict) or raw.get("version") != SOURCES_VERSION:
        raise SourcesError(f"{path}: expected an object with \"version\": {SOURCES_VERSION}")
    for key in ("templates", "models"):
        if not isinstance(raw.get(key), list):
            raise SourcesError(f"{path}: field {key!r} must be a list")
    templates, models = {}, {}
    for i, item in enumerate(raw["templates"]):
        pin = parse_template(item, i, path.parent)
        if pin.id in templates:
            raise SourcesError(f"{path}: template {pin.id!r} is pinned twice")
        templates[pin.id] = pin
    for i, item in enumerate(raw["models"]):
        pin = parse_model(item, i, templates)
        if pin.id in models:
            raise SourcesError(f"{path}: model {pin.id!r} is pinned twice")
        models[pin.id] = pin
    for t in templates.values():
        if t.model is not None and t.model not in models:
            raise SourcesError(f"template {t.id!r}: field 'model' names {t.model!r}, which is not a pinned model")
    if not isinstance(raw.get("archives", []), list):
        raise SourcesError(f"{path}: field 'archives' must be a list")
    archives = {}
    for i, item in enumerate(raw.get("archives", [])):
        pin = parse_archive(item, i)
        if pin.id in archives:
            raise SourcesError(f"{path}: archive {pin.id!r} is pinned twice")
        archives[pin.id] = pin
    return Sources(path=path, templates=templates, models=models, archives=archives)


def model_cache_path(pin: ModelPin, cache_dir: Path | None = None) -> Path:
    return inside(Path(cache_dir or constants.MODELS_CACHE_DIR), f"{pin.id}/{pin.filename}",
                  f"model {pin.id!r}: field 'filename'")


def fetch_command(model_id: str) -> str:
    return f"harness fetch --models {model_id}"


def model_path(model_id: str, sources: Sources | None = None, cache_dir: Path | None = None) -> Path:
    """The cached, verified file of a pinned model; raises with the command that fetches it."""
    sources = sources or load_sources()
    pin = sources.model(model_id)
    path = model_cache_path(pin, cache_dir)
    if not path.is_file():
        raise SourcesError(f"model {model_id!r} is not in the cache ({path}); run: {fetch_command(model_id)}")
    if pin.sha256 is None:
        raise SourcesError(f"model {model_id!r} has no sha256 pin, so {path} cannot be verified; "
                           f"run: {fetch_command(model_id)} --record-hash")
    problem = file_drift(path, pin.size, pin.sha256)
    if problem:
        raise DriftError(f"model {model_id!r}: {problem}; delete it and run: {fetch_command(model_id)}")
    return path


def resolve_template(path_or_id: str | Path, sources: Sources | None = None) -> ResolvedTemplate:
    """A template by pinned id, or by path to any .jinja file (pinned or not) or to a GGUF that embeds one. A
    pinned file is verified, so a renderer never silently works from a template that has drifted from its pin."""
    candidate = Path(path_or_id)
    looks_like_path = candidate.suffix == ".jinja" or os.sep in str(path_or_id) or candidate.is_file()
    if looks_like_path:
        if not candidate.is_file():
            what = "is not a regular file" if candidate.exists() else "does not exist"
            raise SourcesError(f"template file {candidate} {what}")
        if is_gguf(candidate):
            text, bos, eos = embedded_template(candidate)
            return ResolvedTemplate(candidate.stem, candidate, text, bos, eos, entry=None)
        if candidate.suffix.lower() == ".gguf":
            # Read as template text it would render as a template of binary junk: say what it is instead.
            with open(candidate, "rb") as f:
                head = f.read(4)
            raise SourcesError(f"{candidate}: not a GGUF file: it starts with {head!r}, not b'GGUF' (wrong magic)")
        try:
            sources = sources or load_sources()
        except SourcesError:
            sources = None          # an unpinned file outside a checkout still renders
        entry = next((t for t in (sources.templates.values() if sources else ())
                      if t.path.is_file() and os.path.samefile(t.path, candidate)), None)
    else:
        sources = sources or load_sources()
        entry = sources.template(str(path_or_id))
        candidate = entry.path
        if not candidate.is_file():
            raise DriftError(f"template {entry.id!r}: {candidate} is missing; run: harness fetch --templates {entry.id}")
    if entry is not None:
        problem = file_drift(candidate, entry.size, entry.sha256)
        if problem:
            raise DriftError(f"template {entry.id!r}: {problem}")
    data = read_regular(candidate, SourcesError, "template file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourcesError(f"template file {candidate} is not UTF-8: {exc}") from None
    return ResolvedTemplate(id=entry.id if entry else candidate.stem, path=candidate, text=text,
                            bos_token=entry.bos_token if entry else None,
                            eos_token=entry.eos_token if entry else None, entry=entry)


def list_templates(sources: Sources | None = None) -> list:
    return list((sources or load_sources()).templates.values())

