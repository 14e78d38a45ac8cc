"""`harness pin-template`: add a chat template to templates/ and its entry to sources.json in one step.

A user with a template of their own (a .jinja file, a tokenizer_config.json, or a GGUF that embeds one) gets
it pinned the way the shipped ones are: the exact bytes under templates/<id>.jinja, size and SHA-256 in
sources.json, provenance as given. Re-pinning an id is a deliberate act (--force); the new sources.json must
validate before it replaces the old one, and the template file is written only then.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

from harness.core import constants
from harness.core.errors import DownloadError, SourcesError
from harness.pins.fetch import extract_chat_template
from harness.pins.gguf_header import read_gguf_metadata
from harness.pins.hub_download import store_verified
from harness.pins.sources import ID_PATTERN, dump_sources, load_sources, write_sources


def template_entry(tid: str, data: bytes, *, origin: str, repo: str | None = None, repo_basis: str | None = None,
                   variant: str = "default", revision: str | None = None, hub: dict | None = None,
                   model: str | None = None, license: str | None = None, bos_token: str | None = None,
                   eos_token: str | None = None, note: str | None = None) -> dict:
    """One sources.json template entry for `data`, stored as templates/<tid>.jinja."""
    entry = {"id": tid, "file": f"templates/{tid}.jinja", "repo": repo, "repo_basis": repo_basis,
             "variant": variant, "revision": revision, "sha256": hashlib.sha256(data).hexdigest(),
             "size": len(data), "origin": origin, "hub": hub, "model": model, "license": license,
             "bos_token": bos_token, "eos_token": eos_token, "note": note}
    return entry


def read_template_source(path: Path, variant: str | None = None) -> tuple[bytes, dict]:
    """The template bytes in `path` and what the file itself says about them (bos/eos for a GGUF or a
    tokenizer_config.json). Anything that is not a GGUF or a .json is taken as the template text itself."""
    try:
        head = path.open("rb").read(4)
    except OSError as exc:
        raise SourcesError(f"{path}: cannot read: {exc.strerror}") from None
    if head == b"GGUF":
        meta = read_gguf_metadata(path)
        if meta["chat_template"] is None:
            raise SourcesError(f"{path}: the GGUF carries no tokenizer.chat_template")
        return meta["chat_template"], {"bos_token": meta["bos_token"], "eos_token": meta["eos_token"]}
    data = path.read_bytes()
    if path.suffix == ".json":
        try:
            template = extract_chat_template(data, "chat_template", variant, str(path))
        except DownloadError as exc:
            raise SourcesError(str(exc)) from None
        config = json.loads(data)
        return template, {k: _token_text(config.get(k)) for k in ("bos_token", "eos_token")}
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourcesError(f"{path}: a template must be UTF-8 text: {exc}") from None
    return data, {}


def _token_text(value):
    # tokenizer_config.json writes a token as its text or as an AddedToken object {"content": ...}.
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def pin_template(tid: str, path: Path, *, origin: str | None = None, force: bool = False,
                 variant: str | None = None, **provenance) -> dict:
    if not ID_PATTERN.match(tid):
        raise SourcesError(f"template id {tid!r} must be letters, digits, '.', '_' or '-', starting with a letter "
                           f"or digit")
    data, found = read_template_source(path, variant)
    for key, value in found.items():
        if provenance.get(key) is None:
            provenance[key] = value
    if provenance.get("repo") and not provenance.get("repo_basis"):
        provenance["repo_basis"] = "given to harness pin-template"
    raw = json.loads(constants.SOURCES_PATH.read_text(encoding="utf-8"))
    if any(t["id"] == tid for t in raw["templates"]) and not force:
        raise SourcesError(f"template {tid!r} is already pinned; re-pinning is deliberate: pass --force")
    entry = template_entry(tid, data, origin=origin or f"pinned by `harness pin-template` from {path.name}",
                           variant=variant or "default", **provenance)
    raw["templates"] = [t for t in raw["templates"] if t["id"] != tid] + [entry]
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".json", dir=constants.SOURCES_PATH.parent) as f:
        f.write(dump_sources(raw))
        f.flush()
        load_sources(f.name)        # a bad value (a malformed revision, say) stops here, before any write
    dest = constants.TEMPLATES_DIR / f"{tid}.jinja"
    store_verified(dest, lambda w: w.write(data), size=len(data), sha256=entry["sha256"], label=f"template {tid}")
    write_sources(raw)
    return entry
