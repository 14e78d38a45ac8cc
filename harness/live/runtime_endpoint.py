"""Runtime conformance against a runtime the user serves (`harness runtime-conformance --endpoint`): the requests
a `harness scripted-model` manifest lists for the scripted model being served, asked non-streamed and streamed,
recorded and labelled as the suite does. The harness cannot swap the model or ask this runtime for its prompt,
so each reply is keyed as the manifest says (`key_source`); a runtime that counts the prompt otherwise shows as
`reply-rewritten` (the model wrote its end of turn, or other tokens)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from harness.backends.chat_answers import chat_answer, chat_stream
from harness.core.errors import HarnessError
from harness.evaluation.runtime_conformance import KIND, classify
from harness.evaluation.records import RuntimeConformanceRecord
from harness.evaluation.transcripts import TranscriptWriter, now
from harness.families import get as family_get
from harness.live.runtime_conformance import EXTRA_TOKENS, TIMEOUT, request_switches
from harness.scripted.manifest import read_manifest


def entry_hash(entry: dict) -> str:
    blob = json.dumps([entry["request"], entry["reply"]], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def run_manifest(url: str, served_model: str, manifest_path: Path, runtime: str, path: Path, done: set,
                 cases=None, variants=None, log=print) -> list:
    """done: (template sha256, case, hash, variant) already recorded. Returns the records written."""
    manifest = read_manifest(manifest_path)
    names = [m["served_name"] for m in manifest["models"]]
    model = next((m for m in manifest["models"] if m["served_name"] == served_model), None)
    if model is None:
        raise HarnessError(f"--served-model {served_model!r} is none of {manifest_path}'s models: {', '.join(names)}")
    markers = family_get(manifest["family"]).markers if manifest["family"] else ()
    chat = url.rstrip("/").removesuffix("/v1") + "/v1/chat/completions"
    written = []
    with TranscriptWriter(path) as writer:
        for e in model["requests"]:
            key = (manifest["template"]["sha256"], e["case"], entry_hash(e), e["variant"])
            if key in done or (cases and e["case"] not in cases) or (variants and e["variant"] not in variants):
                continue
            body = {**e["request"], "model": served_model, "max_tokens": e["reply_tokens"] + EXTRA_TOKENS}
            record = {"kind": KIND, "runtime": runtime, "server": "endpoint", "endpoint": url,
                      "manifest": str(manifest_path), "served_model": served_model,
                      "template": manifest["template"], "family": manifest["family"],
                      "profile": manifest["vocabulary"], "case": {"name": e["case"], "hash": key[2]},
                      "variant": e["variant"], "request": request_switches(e["request"]), "reply": e["reply"],
                      "reply_tokens": e["reply_tokens"], "reply_ids": e.get("reply_ids"), "expect": e["expect"],
                      "ours": {"tokens": e["prompt_tokens"]},
                      "key": {"tokens": e["prompt_tokens"], "source": f"the manifest ({e['key_source']})",
                              "error": None, "same_text": None},
                      "model": model["file"], "plain": chat_answer(chat, body, TIMEOUT),
                      "stream": chat_stream(chat, body, TIMEOUT), "recorded": now()}
            record["labels"], record["details"] = classify(record, e["request"].get("tools") or [],
                                                           markers[0] if markers else None)
            typed = RuntimeConformanceRecord.from_json(record)
            writer.append(typed)
            log(typed)
            written.append(typed)
    return written
