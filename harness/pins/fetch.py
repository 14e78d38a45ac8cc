"""Bring pinned templates and models onto disk, verified: the logic behind `harness fetch`.

A file already on disk that matches its pin is left alone. A missing file is fetched from its pinned sources in
order; the first one that delivers the pinned bytes wins. Nothing unverified is ever kept (see
harness.pins.hub_download.store_verified), and a pin without a SHA-256 is refused unless the user explicitly asks
to record the hash of what arrives.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from harness.core import constants
from harness.core.errors import DownloadError, HarnessError, SourcesError
from harness.pins.gguf_header import read_gguf_metadata
from harness.pins.hub_download import assemble_from_wheels, store_verified
from harness.pins.hub_http import fetch_hub_bytes, hub_url, stream_hub_file
from harness.pins.digest import file_digest, file_drift
from harness.pins.sources import Sources, fetch_command, model_cache_path, model_path, read_sources_json
from harness.pins.entries import ModelPin, TemplatePin
from harness.pins.sources_file import sources_locked, write_sources


@dataclass(frozen=True)
class FetchResult:
    kind: str            # "template", "model" or "archive"
    id: str
    path: Path
    status: str          # "present", "fetched", "recorded" (hash written to sources.json), "failed"
    source: str | None = None
    size: int | None = None
    sha256: str | None = None
    detail: str | None = None

    @property
    def ok(self) -> bool:
        return self.status != "failed"

    def as_json(self) -> dict:
        return {"kind": self.kind, "id": self.id, "path": str(self.path), "status": self.status,
                "source": self.source, "size": self.size, "sha256": self.sha256, "detail": self.detail}


def _offline(offline: bool | None) -> bool:
    return constants.HF_HUB_OFFLINE if offline is None else offline


# --- templates -----------------------------------------------------------------------------------------------

def extract_chat_template(config: bytes, key: str, name: str | None, where: str) -> bytes:
    """The chat template inside a tokenizer_config.json, as the exact UTF-8 bytes the pin covers.

    The value is a string, or a list of {"name", "template"} objects when a repo ships named variants
    (tool_use, rag); `name` selects one, defaulting to "default" as transformers does.
    """
    try:
        value = json.loads(config.decode("utf-8"))[key]
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DownloadError(f"{where}: not valid JSON: {exc}") from None
    except RecursionError:
        raise DownloadError(f"{where}: not valid JSON: nested too deep") from None
    except (KeyError, TypeError):
        raise DownloadError(f"{where}: has no {key!r} field") from None
    if isinstance(value, list):
        variants = {v["name"]: v.get("template") for v in value
                    if isinstance(v, dict) and isinstance(v.get("name"), str)}
        wanted = name or "default"
        if not isinstance(variants.get(wanted), str):
            raise DownloadError(f"{where}: no template variant {wanted!r} (variants: {', '.join(variants)})")
        value = variants[wanted]
    elif not isinstance(value, str):
        raise DownloadError(f"{where}: {key!r} is neither a string nor a list of named templates")
    elif name not in (None, "default"):
        raise DownloadError(f"{where}: {key!r} is a single template, not a list with variant {name!r}")
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as exc:        # JSON may spell a lone surrogate ("\ud800"); UTF-8 cannot
        raise DownloadError(f"{where}: {key!r} is not valid text: {exc}") from None


def _template_from_model(pin: TemplatePin, sources: Sources, cache_dir) -> bytes:
    try:
        gguf_path = model_path(pin.model, sources, cache_dir)
    except HarnessError as exc:
        raise DownloadError(f"template {pin.id!r} is read from model {pin.model!r}: {exc}") from None
    data = read_gguf_metadata(gguf_path)["chat_template"]
    if data is None:
        raise DownloadError(f"{gguf_path} carries no tokenizer.chat_template")
    return data


def fetch_template(pin: TemplatePin, sources: Sources, *, endpoint: str | None = None,
                   offline: bool | None = None, cache_dir=None) -> FetchResult:
    path = pin.path
    if path.is_file():
        problem = file_drift(path, pin.size, pin.sha256)
        if problem is None:
            return FetchResult("template", pin.id, path, "present", size=pin.size, sha256=pin.sha256)
        # A changed template is somebody's work: report it, never overwrite it.
        return FetchResult("template", pin.id, path, "failed", detail=f"{problem}; it was left as it is "
                           f"(move it away, or restore it with `git checkout -- {pin.file}`, then fetch again)")
    label = f"template {pin.id}"
    try:
        if pin.model is not None:
            data, source = _template_from_model(pin, sources, cache_dir), f"GGUF of model {pin.model}"
        elif pin.hub is None:
            raise DownloadError(f"no Hub source is pinned; restore it with `git checkout -- {pin.file}`")
        elif _offline(offline):
            raise DownloadError(f"HF_HUB_OFFLINE is set and {path} is missing")
        elif pin.hub["filename"].endswith(".json"):
            where = f"{pin.repo}/{pin.hub['filename']}"
            config = fetch_hub_bytes(repo=pin.repo, filename=pin.hub["filename"], revision=pin.revision,
                                     endpoint=endpoint or constants.HF_ENDPOINT)
            data = extract_chat_template(config, pin.hub["key"], pin.hub.get("name"), where)
            source = f"hub {where}"
        else:
            stored = store_verified(path, lambda w: stream_hub_file(
                w, repo=pin.repo, filename=pin.hub["filename"], revision=pin.revision,
                endpoint=endpoint or constants.HF_ENDPOINT, expected_size=pin.size), size=pin.size,
                sha256=pin.sha256, label=label)
            return FetchResult("template", pin.id, path, "fetched", f"hub {pin.repo}/{pin.hub['filename']}",
                               stored.size, stored.sha256)
        stored = store_verified(path, lambda w: w.write(data), size=pin.size, sha256=pin.sha256, label=label)
        return FetchResult("template", pin.id, path, "fetched", source, stored.size, stored.sha256)
    except HarnessError as exc:
        return FetchResult("template", pin.id, path, "failed", detail=str(exc))


# --- models --------------------------------------------------------------------------------------------------

def _describe(source: dict) -> str:
    if source["kind"] == "pypi":
        names = [p["name"] for p in source["packages"]]
        return f"pypi {names[0]}{' … ' + names[-1] if len(names) > 1 else ''}"
    return "hub"


def _fill_from(source: dict, pin: ModelPin, *, endpoint: str, find_links, log):
    if source["kind"] == "hub":
        return lambda w: stream_hub_file(w, repo=pin.repo, filename=pin.filename, revision=pin.revision,
                                         endpoint=endpoint, expected_size=pin.size)
    return lambda w: assemble_from_wheels(w, source["packages"], find_links=find_links, log=log)


def record_model_hash(sources: Sources, model_id: str, size: int, sha256: str) -> None:
    """Write a first-download hash into sources.json (only ever for a pin whose sha256 was null)."""
    with sources_locked(sources.path):
        raw = read_sources_json(sources.path)
        entry = next(m for m in raw["models"] if m["id"] == model_id)
        if entry.get("sha256") is not None:
            raise SourcesError(f"model {model_id!r} already has a sha256 pin; refusing to overwrite it")
        entry["sha256"] = sha256
        if entry.get("size") is None:
            entry["size"] = size
        write_sources(raw, sources.path)


def fetch_model(pin: ModelPin, sources: Sources, *, endpoint: str | None = None, offline: bool | None = None,
                cache_dir=None, find_links=None, record_hash: bool = False, log=None) -> FetchResult:
    path = model_cache_path(pin, cache_dir)
    find_links = Path(find_links) if find_links else (Path(constants.HARNESS_WHEELS) if constants.HARNESS_WHEELS else None)
    if pin.sha256 is None and not record_hash:
        return FetchResult("model", pin.id, path, "failed", detail=(
            f"model {pin.id!r} has no sha256 pin, so a download could not be verified; to trust the first "
            f"download and record its hash in sources.json, run: {fetch_command(pin.id)} --record-hash"))
    if path.is_file():
        if pin.sha256 is None:
            size, sha = file_digest(path)
            record_model_hash(sources, pin.id, size, sha)
            return FetchResult("model", pin.id, path, "recorded", "cache", size, sha,
                               f"recorded sha256 {sha} of the cached file in {sources.path}")
        problem = file_drift(path, pin.size, pin.sha256)
        if problem is None:
            return FetchResult("model", pin.id, path, "present", "cache", pin.size, pin.sha256)
        if _offline(offline):
            return FetchResult("model", pin.id, path, "failed", detail=f"{problem}; HF_HUB_OFFLINE is set, so it "
                               "cannot be fetched again")
        if log:
            log(f"{pin.id}: cached file does not match its pin ({problem}); fetching it again")
    elif _offline(offline):
        return FetchResult("model", pin.id, path, "failed", detail=(
            f"HF_HUB_OFFLINE is set and model {pin.id!r} is not in the cache ({path}); "
            f"unset HF_HUB_OFFLINE and run: {fetch_command(pin.id)}"))
    failures = []
    for source in pin.sources:
        where = f" {hub_url(pin.repo, pin.filename, pin.revision, endpoint or constants.HF_ENDPOINT)}" \
            if source["kind"] == "hub" else ""
        label = f"{pin.id} ({_describe(source)}{where})"      # a hub's wrong bytes name the URL they came from
        if log:
            log(f"{pin.id}: fetching from {_describe(source)}")
        try:
            fill = _fill_from(source, pin, endpoint=endpoint or constants.HF_ENDPOINT, find_links=find_links, log=log)
            stored = store_verified(path, fill, size=pin.size, sha256=pin.sha256, label=label)
        except HarnessError as exc:
            failures.append(f"{_describe(source)}: {exc}")
            if log:
                log(f"{pin.id}: {_describe(source)} failed: {exc}")
            continue
        if pin.sha256 is None:
            record_model_hash(sources, pin.id, stored.size, stored.sha256)
            return FetchResult("model", pin.id, path, "recorded", _describe(source), stored.size, stored.sha256,
                               f"recorded sha256 {stored.sha256} in {sources.path}")
        return FetchResult("model", pin.id, path, "fetched", _describe(source), stored.size, stored.sha256)
    return FetchResult("model", pin.id, path, "failed", detail="every source failed:\n  " + "\n  ".join(failures))
