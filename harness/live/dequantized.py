"""A pinned GGUF's weights in HF form, for the runtimes that load no GGUF here (vLLM's CPU build, transformers
serve): transformers, in the vLLM environment, reads the GGUF and writes every weight dequantized to float32
(harness/peers/dequantize_worker.py), with chat_template.jinja the template the in-process runs use (the pin's
own, or the stand-in for a GGUF that embeds none) and manifest.json: the GGUF's SHA-256 and quantization, and
every file's SHA-256. The folder is written under a temporary name and renamed into place only once complete,
so a folder under its own name is whole; a run that is killed leaves only a temporary folder the next run
replaces. A conversion that fails raises DequantizeError with transformers' words, which the model's rows then
carry."""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

from harness.core import constants
from harness.core.errors import DequantizeError
from harness.core.hashing import sha256_text
from harness.pins.digest import file_digest

ROOT = constants.CACHE_DIR / "dequantized"
WORKER = Path(__file__).resolve().parents[1] / "peers" / "dequantize_worker.py"
MANIFEST = "manifest.json"
TEMPLATE_FILE = "chat_template.jinja"
TIMEOUT = 3600.0        # a 1.5B model's float32 write on 2 busy cores takes minutes, not an hour


def file_sha256(path: Path) -> str:
    return file_digest(path)[1]


def folder_sha256(files: dict) -> str:
    """One hash for the folder: of its files' `sha256sum` lines, sorted by name (manifest.json not among them)."""
    return sha256_text("".join(f"{sha}  {name}\n" for name, sha in sorted(files.items())))


def quantization(gguf: Path) -> str:
    """The GGUF's quantization as llama.cpp names it (Q4_K_M, Q4_1), from its general.file_type."""
    import gguf as gguf_reader

    field = gguf_reader.GGUFReader(str(gguf)).fields.get("general.file_type")
    if field is None:
        return "unknown"
    name = gguf_reader.LlamaFileType(int(field.parts[field.data[0]][0])).name
    return name.removeprefix("MOSTLY_")


def gguf_path_folder(tmp: Path) -> Path:
    """A folder that puts harness's own GGUF reader (the `gguf` package and its metadata, which transformers
    checks the version of) on the worker's path: the vLLM environment ships none, and transformers reads GGUF
    only through it."""
    shim = tmp / "gguf-reader"
    shim.mkdir(parents=True, exist_ok=True)
    dist = importlib.metadata.distribution("gguf")
    info = Path(dist._path)  # noqa: SLF001 - the dist-info folder itself, which importlib.metadata reads
    for source in (Path(dist.locate_file("gguf")), info):
        link = shim / source.name
        if not link.exists():
            link.symlink_to(source, target_is_directory=True)
    return shim


def _machine_free(words: str, *folders: Path) -> str:
    for folder, name in zip(folders, ("$HARNESS_CACHE", "$TMP")):
        words = words.replace(str(folder), name)
    return words


def read_manifest(folder: Path, verify: bool = True) -> dict | None:
    """The folder's manifest if the folder is whole (every file it lists, with its hash when verify), else None."""
    path = folder / MANIFEST
    if not path.is_file():
        return None
    manifest = json.loads(path.read_text(encoding="utf-8"))
    listed = manifest.get("files") or {}
    present = {p.name for p in folder.iterdir() if p.name != MANIFEST}
    if set(listed) != present:
        return None
    if verify and any(file_sha256(folder / name) != sha for name, sha in listed.items()):
        return None
    return manifest


def make_folder(gguf: Path, out: Path, *, model_id: str, gguf_sha256: str, template: dict, python: Path,
                worker: Path = WORKER) -> dict:
    """Write `out` from the GGUF (temporary folder, then one rename) and return its manifest; `template` is
    {"id", "text"}. A folder already whole is kept as it is."""
    manifest = read_manifest(out)
    if manifest is not None:
        return manifest
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)      # what a killed run left
    scratch = out.with_name(f".{out.name}.scratch")
    started = time.monotonic()
    try:
        env = {**os.environ, "PYTHONPATH": str(gguf_path_folder(scratch)), "HF_HUB_OFFLINE": "1"}
        done = subprocess.run([str(python), str(worker), str(gguf), str(partial)], capture_output=True, text=True,
                              env=env, timeout=TIMEOUT)
        answer = _answer(done.stdout)
        if done.returncode != 0 or "error" in answer:
            why = answer.get("error") or _last_words(done.stderr) or f"the worker exited with {done.returncode}"
            raise DequantizeError(_machine_free(why, constants.CACHE_DIR, out.parent))
        seconds = round(time.monotonic() - started, 1)
        (partial / TEMPLATE_FILE).write_text(template["text"], encoding="utf-8")
        _drop_embedded_template(partial)
        files = {p.name: file_sha256(p) for p in sorted(partial.iterdir())}
        manifest = {"model": model_id, "gguf": {"file": gguf.name, "sha256": gguf_sha256},
                    "from": quantization(gguf), "dtype": answer.get("dtype"),
                    "architecture": answer.get("architecture"), "model_class": answer.get("model_class"),
                    "transformers": answer.get("transformers"),
                    "template": {"id": template["id"], "sha256": sha256_text(template["text"])},
                    "files": files, "folder_sha256": folder_sha256(files), "seconds": seconds,
                    "bytes": sum((partial / name).stat().st_size for name in files)}
        (partial / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        shutil.rmtree(out, ignore_errors=True)      # an incomplete folder someone left under the name
        os.replace(partial, out)
        return manifest
    finally:
        shutil.rmtree(partial, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)


def _answer(stdout: str) -> dict:
    for line in reversed(stdout.splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return {}


def _last_words(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _drop_embedded_template(folder: Path) -> None:
    """chat_template.jinja is the one template the folder holds: a copy in tokenizer_config.json (the GGUF's
    own, which transformers may save there) would be a second, and the stand-in's model has none of its own."""
    path = folder / "tokenizer_config.json"
    if not path.is_file():
        return
    config = json.loads(path.read_text(encoding="utf-8"))
    if config.pop("chat_template", None) is not None:
        path.write_text(json.dumps(config, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def dequantized_field(manifest: dict) -> dict:
    """What a record's model says of the weights it was served with."""
    return {"from": manifest["from"], "dtype": manifest["dtype"], "transformers": manifest["transformers"],
            "folder_sha256": manifest["folder_sha256"]}


def for_model(model_id: str, python: Path, root: Path | None = None) -> tuple:
    """(its folder, its manifest) for a pinned model, made if not yet whole; DequantizeError if it cannot be."""
    from harness.pins.sources import load_sources, model_path, resolve_template

    sources = load_sources()
    pin = sources.model(model_id)
    template_id = pin.template or pin.stand_in_template
    ref = resolve_template(template_id, sources)
    folder = (root or ROOT) / model_id
    manifest = make_folder(model_path(model_id, sources), folder, model_id=model_id, gguf_sha256=pin.sha256,
                           template={"id": ref.id, "text": ref.text}, python=python)
    return folder, manifest
