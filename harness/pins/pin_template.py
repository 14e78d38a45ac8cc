"""`harness pin-template`: add a chat template to templates/ and its entry to sources.json in one step.

A user with a template of their own (a .jinja file, a tokenizer_config.json, or a GGUF that embeds one) gets
it pinned the way the shipped ones are: the exact bytes under templates/<id>.jinja, size and SHA-256 in
sources.json, provenance as given. Re-pinning an id is a deliberate act (--force); the new sources.json must
validate before it replaces the old one, and the template file is written only then.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from harness.core import constants
from harness.core.errors import DownloadError, HarnessError, SourcesError
from harness.core.hashing import sha256_bytes
from harness.pins.fetch import extract_chat_template
from harness.pins.gguf_header import read_gguf_metadata
from harness.pins.hub_download import store_verified
from harness.pins.sources import load_sources, read_sources_json
from harness.pins.entries import ID_PATTERN
from harness.pins.sources_file import dump_sources, sources_locked, write_sources


def template_entry(tid: str, data: bytes, *, origin: str, repo: str | None = None, repo_basis: str | None = None,
                   variant: str = "default", revision: str | None = None, hub: dict | None = None,
                   model: str | None = None, license: str | None = None, bos_token: str | None = None,
                   eos_token: str | None = None, note: str | None = None) -> dict:
    """One sources.json template entry for `data`, stored as templates/<tid>.jinja."""
    entry = {"id": tid, "file": f"templates/{tid}.jinja", "repo": repo, "repo_basis": repo_basis,
             "variant": variant, "revision": revision, "sha256": sha256_bytes(data),
             "size": len(data), "origin": origin, "hub": hub, "model": model, "license": license,
             "bos_token": bos_token, "eos_token": eos_token, "note": note}
    return entry


# The largest pinned template is about 16 KB; a template a hundred times that is a mistake or an attack, and it
# would be rendered for every probe. A special token is a few dozen bytes.
MAX_TEMPLATE_BYTES = 1 << 20
MAX_TOKEN_CHARS = 256
# A tokenizer_config.json also lists added tokens, which can run to megabytes; more than this is not one.
MAX_CONFIG_BYTES = 64 << 20


def read_template_source(path: Path, variant: str | None = None) -> tuple[bytes, dict]:
    """The template bytes in `path` and what the file itself says about them (bos/eos for a GGUF or a
    tokenizer_config.json). Anything that is not a GGUF or a .json is taken as the template text itself.
    Whatever the source, the bytes are checked here (UTF-8 text, size) so nothing is written for a bad one."""
    try:
        with path.open("rb") as f:
            head = f.read(4)
            if head == b"GGUF":
                data, found = _from_gguf(path)
            else:
                f.seek(0)
                data = f.read(MAX_CONFIG_BYTES + 1)
                if len(data) > MAX_CONFIG_BYTES:
                    raise SourcesError(f"{path}: larger than {MAX_CONFIG_BYTES} bytes; not a template source")
                data, found = _from_json(path, data, variant) if path.suffix == ".json" else (data, {})
    except OSError as exc:
        raise SourcesError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_TEMPLATE_BYTES:
        raise SourcesError(f"{path}: the template is {len(data)} bytes; more than {MAX_TEMPLATE_BYTES} is refused")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SourcesError(f"{path}: a template must be UTF-8 text: {exc}") from None
    return data, found


def _from_gguf(path: Path) -> tuple[bytes, dict]:
    try:
        meta = read_gguf_metadata(path)
    except HarnessError as exc:
        raise SourcesError(str(exc)) from None
    if meta["chat_template"] is None:
        raise SourcesError(f"{path}: the GGUF carries no tokenizer.chat_template")
    return meta["chat_template"], {"bos_token": meta["bos_token"], "eos_token": meta["eos_token"]}


def _from_json(path: Path, data: bytes, variant: str | None) -> tuple[bytes, dict]:
    try:
        template = extract_chat_template(data, "chat_template", variant, str(path))
    except DownloadError as exc:
        raise SourcesError(str(exc)) from None
    config = json.loads(data)       # extract_chat_template has read it as a JSON object already
    return template, {k: _token_text(config.get(k)) for k in ("bos_token", "eos_token")}


def _token_text(value):
    # tokenizer_config.json writes a token as its text or as an AddedToken object {"content": ...}.
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _check_token(key: str, value) -> None:
    if value is None:
        return
    if len(value) > MAX_TOKEN_CHARS:
        raise SourcesError(f"{key} is {len(value)} characters; a special token longer than {MAX_TOKEN_CHARS} "
                           "is refused")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise SourcesError(f"{key} is not valid text: {exc}") from None


def pin_template(tid: str, path: Path, *, origin: str | None = None, force: bool = False,
                 variant: str | None = None, check=None, **provenance) -> dict:
    """Pin the template in `path` as `tid`. `check(text, bos_token, eos_token)`, when given, runs on the bytes
    read before anything is written, and stops the pin by raising (a template that does not render within
    its limits is refused, not pinned and then found to hang)."""
    if not ID_PATTERN.match(tid):
        raise SourcesError(f"template id {tid!r} must be letters, digits, '.', '_' or '-', starting with a letter "
                           f"or digit")
    data, found = read_template_source(path, variant)
    for key, value in found.items():
        if provenance.get(key) is None:
            provenance[key] = value
    for key in ("bos_token", "eos_token"):
        _check_token(key, provenance.get(key))
    if check is not None:
        check(data.decode("utf-8"), provenance.get("bos_token") or "", provenance.get("eos_token") or "")
    if provenance.get("repo") and not provenance.get("repo_basis"):
        provenance["repo_basis"] = "given to harness pin-template"
    entry = template_entry(tid, data, origin=origin or f"pinned by `harness pin-template` from {path.name}",
                           variant=variant or "default", **provenance)
    with sources_locked() as sources_path:
        raw = read_sources_json(sources_path)
        if any(t["id"] == tid for t in raw["templates"]) and not force:
            raise SourcesError(f"template {tid!r} is already pinned; re-pinning is deliberate: pass --force")
        raw["templates"] = [t for t in raw["templates"] if t["id"] != tid] + [entry]
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".json", dir=sources_path.parent) as f:
            f.write(dump_sources(raw))
            f.flush()
            load_sources(f.name)        # a bad value (a malformed revision, say) stops here, before any write
        dest = constants.TEMPLATES_DIR / f"{tid}.jinja"
        store_verified(dest, lambda w: w.write(data), size=len(data), sha256=entry["sha256"],
                       label=f"template {tid}")
        write_sources(raw)
    return entry
