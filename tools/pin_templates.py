#!/usr/bin/env python
"""Maintainer tool: (re)write the template entries of sources.json. Not part of the harness package.

    python tools/pin_templates.py llama-cpp DIR        # copy DIR/*.jinja into templates/ and pin them
    python tools/pin_templates.py gguf MODEL_ID PATH   # pin the template embedded in a model's GGUF file

Re-pinning is a deliberate act: it records the bytes that are on disk now. What the tool cannot see in the
files (upstream repo, license, bos/eos tokens) comes from the table below; a value somebody added by hand to
sources.json is kept where the table has none.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.core import constants  # noqa: E402
from harness.pins.gguf_header import read_gguf_metadata  # noqa: E402
from harness.pins.pin_template import template_entry  # noqa: E402
from harness.pins.sources import load_sources  # noqa: E402
from harness.pins.sources_file import sources_locked, write_sources  # noqa: E402

ORIGIN = f"llama-cpp-python {constants.BINDING_VERSION} sdist: vendor/llama.cpp/models/templates/{{name}}"
DS = ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>")
L3 = ("<|begin_of_text|>", "<|eot_id|>")
CHATML = (None, "<|im_end|>")

# Repos that models/templates/README.md names (`get_chat_template.py REPO [VARIANT] > FILE`): those files are
# the tokenizer_config.json chat_template of that repo, byte for byte.
README_REPOS = {
    "CohereForAI-c4ai-command-r-plus-tool_use": "CohereForAI/c4ai-command-r-plus",
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use": "CohereForAI/c4ai-command-r7b-12-2024",
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B": "deepseek-ai/DeepSeek-R1-Distill-Llama-8B",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B",
    "deepseek-ai-DeepSeek-V3.1": "deepseek-ai/DeepSeek-V3.1",
    "fireworks-ai-llama-3-firefunction-v2": "fireworks-ai/llama-3-firefunction-v2",
    "google-gemma-2-2b-it": "google/gemma-2-2b-it",
    "meetkai-functionary-medium-v3.1": "meetkai/functionary-medium-v3.1",
    "meetkai-functionary-medium-v3.2": "meetkai/functionary-medium-v3.2",
    "meta-llama-Llama-3.1-8B-Instruct": "meta-llama/Llama-3.1-8B-Instruct",
    "meta-llama-Llama-3.2-3B-Instruct": "meta-llama/Llama-3.2-3B-Instruct",
    "meta-llama-Llama-3.3-70B-Instruct": "meta-llama/Llama-3.3-70B-Instruct",
    "microsoft-Phi-3.5-mini-instruct": "microsoft/Phi-3.5-mini-instruct",
    "mistralai-Mistral-Nemo-Instruct-2407": "mistralai/Mistral-Nemo-Instruct-2407",
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use": "NousResearch/Hermes-2-Pro-Llama-3-8B",
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use": "NousResearch/Hermes-3-Llama-3.1-8B",
    "Qwen-Qwen2.5-7B-Instruct": "Qwen/Qwen2.5-7B-Instruct",
    "Qwen-QwQ-32B": "Qwen/QwQ-32B",
    "Qwen-Qwen3-0.6B": "Qwen/Qwen3-0.6B",
    # The README writes Spark2.5.jinja from two repos in turn; the last command's output is the file.
    "Spark2.5": "XHToken/Spark-X2.5-4B",
}

# "Org-Name.jinja" is the repo Org/Name (RESOURCES.md: "the file name tells the rest") for these organisations.
ORG_PREFIXES = ("meta-llama", "deepseek-ai", "ibm-granite", "fireworks-ai", "CohereForAI", "HuggingFaceTB",
                "NousResearch", "Qwen", "google", "inclusionai", "meetkai", "microsoft", "mistralai", "openai",
                "openbmb", "poolside", "tencent", "upstage")

# Files whose name is not an Org-Name pair, or is a llama.cpp edit of an upstream template.
NO_REPO_NOTES = {
    "llama-cpp-deepseek-r1": "written by llama.cpp for DeepSeek R1 models; no upstream repo",
    "llama-cpp-rwkv-world": "written by llama.cpp for RWKV World models; no upstream repo",
    "google-gemma-4-31B-it-interleaved": "a llama.cpp variant of google-gemma-4-31B-it; no upstream file",
    "Apriel-1.6-15b-Thinker-fixed": "a fixed copy made for llama.cpp's tests; no upstream file",
    "ibm-granite-granite-4.0": "names a model family, not one repo",
    "ibm-granite-granite-4.1": "names a model family, not one repo",
    "moonshotai-Kimi-K2": "names a model family, not one repo",
    "unsloth-mistral-Devstral-Small-2507": "unsloth's copy of Mistral's Devstral Small 2507; repo name not certain",
}

# license, bos_token, eos_token as the model makers' tokenizer_config.json has them; absent = unknown (null).
KNOWN = {
    "CohereForAI-c4ai-command-r-plus-tool_use": ("cc-by-nc-4.0", "<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>"),
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use": ("cc-by-nc-4.0", "<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>"),
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B": ("mit", *DS),
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": ("mit", *DS),
    "deepseek-ai-DeepSeek-V3.1": ("mit", *DS),
    "deepseek-ai-DeepSeek-V3.2": ("mit", *DS),
    "llama-cpp-deepseek-r1": (None, *DS),
    "fireworks-ai-llama-3-firefunction-v2": ("llama3", L3[0], None),
    "meetkai-functionary-medium-v3.1": (None, L3[0], None),
    "meetkai-functionary-medium-v3.2": (None, L3[0], None),
    "google-gemma-2-2b-it": ("gemma", "<bos>", "<eos>"),
    "meta-llama-Llama-3.1-8B-Instruct": ("llama3.1", *L3),
    "meta-llama-Llama-3.2-3B-Instruct": ("llama3.2", *L3),
    "meta-llama-Llama-3.3-70B-Instruct": ("llama3.3", *L3),
    "microsoft-Phi-3.5-mini-instruct": ("mit", "<s>", "<|endoftext|>"),
    "mistralai-Mistral-Nemo-Instruct-2407": ("apache-2.0", "<s>", "</s>"),
    "Mistral-Small-3.2-24B-Instruct-2506": ("apache-2.0", "<s>", "</s>"),
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use": ("apache-2.0", "<|begin_of_text|>", "<|im_end|>"),
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use": ("llama3", "<|begin_of_text|>", "<|im_end|>"),
    "Qwen-Qwen2.5-7B-Instruct": ("apache-2.0", *CHATML),
    "Qwen-QwQ-32B": ("apache-2.0", *CHATML),
    "Qwen-Qwen3-0.6B": ("apache-2.0", *CHATML),
    "ibm-granite-granite-3.3-2B-Instruct": ("apache-2.0", "<|end_of_text|>", "<|end_of_text|>"),
    "openai-gpt-oss-120b": ("apache-2.0", "<|startoftext|>", "<|return|>"),
    "HuggingFaceTB-SmolLM3-3B": ("apache-2.0", None, None),
}


def _repo(tid: str):
    if tid in README_REPOS:
        return README_REPOS[tid], "models/templates/README.md"
    if tid in NO_REPO_NOTES:
        return None, None
    base = tid.removesuffix("-tool_use")
    for org in ORG_PREFIXES:
        if base.startswith(org + "-"):
            return f"{org}/{base[len(org) + 1:]}", "file name"
    return None, None


def llama_cpp_entry(path: Path, old: dict | None) -> dict:
    tid = path.stem
    repo, basis = _repo(tid)
    variant = "tool_use" if tid.endswith("-tool_use") else "default"
    license_, bos, eos = KNOWN.get(tid, (None, None, None))
    hub = None
    if basis == "models/templates/README.md":
        hub = {"filename": "tokenizer_config.json", "key": "chat_template",
               "name": None if variant == "default" else variant}
    entry = template_entry(tid, path.read_bytes(), origin=ORIGIN.format(name=path.name), repo=repo,
                           repo_basis=basis, variant=variant, hub=hub, license=license_, bos_token=bos,
                           eos_token=eos, note=NO_REPO_NOTES.get(tid))
    for key, value in (old or {}).items():          # keep what was added by hand where the table knows nothing
        if entry.get(key) is None and value is not None:
            entry[key] = value
    return entry


def load_raw() -> dict:
    if constants.SOURCES_PATH.exists():
        return json.loads(constants.SOURCES_PATH.read_text(encoding="utf-8"))
    return {"version": 1, "templates": [], "models": []}


def pin_llama_cpp(folder: Path) -> None:
    raw = load_raw()
    old = {t["id"]: t for t in raw["templates"]}
    constants.TEMPLATES_DIR.mkdir(exist_ok=True)
    for src in sorted(folder.glob("*.jinja")):
        dest = constants.TEMPLATES_DIR / src.name
        shutil.copyfile(src, dest)
        old[src.stem] = llama_cpp_entry(dest, old.get(src.stem))
    raw["templates"] = list(old.values())
    write_sources(raw)
    load_sources()                                   # the result must validate
    print(f"pinned {len(list(folder.glob('*.jinja')))} templates from {folder}")


def _add_note(entry: dict, text: str) -> None:
    if text not in (entry.get("note") or ""):
        entry["note"] = f"{entry['note']} {text}" if entry.get("note") else text


def pin_gguf(model_id: str, gguf: Path, origin: str | None = None) -> None:
    raw = load_raw()
    model = next((m for m in raw["models"] if m["id"] == model_id), None)
    if model is None:
        sys.exit(f"no model {model_id!r} in {constants.SOURCES_PATH}")
    meta = read_gguf_metadata(gguf)
    if meta["chat_template"] is None:
        model["template"] = None
        _add_note(model, "Its GGUF carries no chat template.")
        write_sources(raw)
        print(f"{model_id}: {gguf} carries no chat template")
        return
    data = meta["chat_template"]
    size, sha = len(data), hashlib.sha256(data).hexdigest()
    same = next((t for t in raw["templates"] if t["sha256"] == sha and t["id"].startswith("gguf-")), None)
    twin = next((t["id"] for t in raw["templates"] if t["sha256"] == sha and not t["id"].startswith("gguf-")), None)
    if same is None:
        tid = f"gguf-{model_id}"
        (constants.TEMPLATES_DIR / f"{tid}.jinja").write_bytes(data)
        raw["templates"] = [t for t in raw["templates"] if t["id"] != tid] + [template_entry(
            tid, data, repo=model["repo"], repo_basis="the model's GGUF", revision=model["revision"],
            origin=origin or f"tokenizer.chat_template in the GGUF metadata of {model['filename']} "
                             f"(sha256 {model['sha256']})",
            model=model_id, license=model["license"], bos_token=meta["bos_token"], eos_token=meta["eos_token"],
            note=f"Byte-identical to {twin}." if twin else None)]
        print(f"{model_id}: pinned {tid} ({size} bytes, bos {meta['bos_token']!r}, eos {meta['eos_token']!r})")
    else:
        tid = same["id"]
        print(f"{model_id}: template is byte-identical to {tid}")
    model["template"] = tid
    write_sources(raw)
    load_sources()


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("llama-cpp")
    a.add_argument("folder", type=Path)
    b = sub.add_parser("gguf")
    b.add_argument("model_id")
    b.add_argument("path", type=Path, help="the GGUF, or its first piece: only the metadata is read")
    b.add_argument("--origin", help="where the bytes were read, when PATH is not the whole pinned file")
    args = parser.parse_args()
    with sources_locked():          # the same lock `harness pin-template` takes: one writer at a time
        if args.cmd == "llama-cpp":
            pin_llama_cpp(args.folder)
        else:
            pin_gguf(args.model_id, args.path, args.origin)


if __name__ == "__main__":
    main()
