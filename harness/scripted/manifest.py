"""A `harness scripted-model` manifest read back (runtime-conformance --endpoint asks what it lists): every field
it relies on is checked once here, so a manifest edited by hand or cut short is one HarnessError naming the file
and the field, never a KeyError or TypeError in the middle of a run."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from harness.core.errors import HarnessError

# A manifest lists each request once with its reply: kilobytes per request; a few hundred requests are megabytes.
MAX_MANIFEST_BYTES = 256 << 20

_STR, _INT, _DICT, _LIST = (str,), (int,), (dict,), (list,)
_TOP = {"template": _DICT, "family": (str, type(None)), "vocabulary": _STR, "models": _LIST}
_MODEL = {"file": _STR, "served_name": _STR, "requests": _LIST}
_ENTRY = {"case": _STR, "variant": _STR, "request": _DICT, "reply": _STR, "prompt_tokens": _INT,
          "key_source": _STR, "reply_tokens": _INT, "expect": _DICT}
_NAMES = {str: "text", int: "an integer", dict: "an object", list: "a list", type(None): "null"}


def read_manifest(path: Path | str) -> dict:
    """The manifest at `path`, checked: its template (id, sha256), family, vocabulary and each model's file,
    served name and requests (case, variant, request, reply, prompt_tokens, key_source, reply_tokens, optional
    reply_ids, expect). Raises HarnessError naming the file and the first field that is wrong."""
    path = Path(path)
    try:
        # Opened without blocking, so a FIFO given by mistake is refused rather than waited on.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with open(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise HarnessError(f"{path}: not a regular file; a manifest is the JSON file scripted-model wrote")
            data = f.read(MAX_MANIFEST_BYTES + 1)
    except OSError as exc:
        raise HarnessError(f"{path}: cannot read the manifest: {exc.strerror or exc}") from None
    if len(data) > MAX_MANIFEST_BYTES:
        raise HarnessError(f"{path}: larger than {MAX_MANIFEST_BYTES} bytes; not a scripted-model manifest")
    try:
        manifest = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise HarnessError(f"{path}: the manifest is not UTF-8 text: {exc}") from None
    except json.JSONDecodeError as exc:
        raise HarnessError(f"{path}: the manifest is not JSON: {exc.msg} at line {exc.lineno}, column "
                           f"{exc.colno}") from None
    except RecursionError:
        raise HarnessError(f"{path}: the manifest nests too deeply to be one scripted-model wrote") from None
    _fields(path, manifest, "", _TOP)
    _fields(path, manifest["template"], "template.", {"id": _STR, "sha256": _STR})
    for m, model in enumerate(manifest["models"]):
        _fields(path, model, f"models[{m}].", _MODEL)
        for r, entry in enumerate(model["requests"]):
            where = f"models[{m}].requests[{r}]."
            _fields(path, entry, where, _ENTRY)
            ids = entry.get("reply_ids")
            if ids is not None and not (isinstance(ids, list) and all(type(i) is int for i in ids)):
                raise HarnessError(f"{path}: {where}reply_ids must be a list of token ids")
            if not isinstance(entry.get("history", {}), dict):
                raise HarnessError(f"{path}: {where}history must be an object (the template's renders of a "
                                   "history case)")
            if entry["reply_tokens"] < 0 or entry["prompt_tokens"] < 0:
                raise HarnessError(f"{path}: {where}reply_tokens and prompt_tokens are counts, 0 or more")
    return manifest


def _fields(path: Path, value, where: str, wanted: dict) -> None:
    if not isinstance(value, dict):
        raise HarnessError(f"{path}: {where.rstrip('.') or 'the manifest'} must be an object, not "
                           f"{_kind(value)}")
    for key, kinds in wanted.items():
        if key not in value:
            raise HarnessError(f"{path}: {where}{key} is missing")
        item = value[key]
        # bool is an int to Python, not a count to a manifest.
        if not isinstance(item, kinds) or (isinstance(item, bool) and bool not in kinds):
            expected = " or ".join(_NAMES[k] for k in kinds)
            raise HarnessError(f"{path}: {where}{key} must be {expected}, not {_kind(item)}")


def _kind(value) -> str:
    return "a boolean" if isinstance(value, bool) else _NAMES.get(type(value), type(value).__name__)
