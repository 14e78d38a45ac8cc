"""Runtime checks: ask a served model the strict way and the runtime's own way, for each scenario's opening
conversation and seed, and record both with their label (harness.evaluation.runtime_agreement defines the labels)."""

from __future__ import annotations

import hashlib
import threading
from concurrent.futures import ThreadPoolExecutor

from harness import families
from harness.core.errors import TemplateError
from harness.evaluation.runtime_agreement import KIND, classify
from harness.evaluation.transcripts import TranscriptWriter, now
from harness.live.tool_loop import opening_messages, render_prompt


def greedy(sampling: dict) -> dict:
    return {**sampling, "temperature": 0.0}


def check_one(backend, chat, scenario, seed: int, template_id: str) -> dict:
    messages = opening_messages(scenario) + [{"role": "user", "content": scenario.turns[0].user}]
    record = {"kind": KIND, "scenario": {"name": scenario.name, "hash": scenario.hash}, "seed": seed,
              "template": {"id": template_id, "sha256": hashlib.sha256(chat.template.encode()).hexdigest()},
              "family": chat.family, "sampling": greedy(scenario.sampling), "template_kwargs": chat.template_kwargs,
              "recorded": now()}
    try:
        prompt = render_prompt(chat, scenario, messages)
    except TemplateError as exc:
        return {**record, "strict": None, "runtime_reply": None, "label": "template-refused", "detail": str(exc)}
    tools = scenario.tool_schemas() or None
    generation = backend.complete(chat, prompt, record["sampling"], seed)
    strict = families.parse(chat.family, generation.text, prompt)
    runtime = backend.chat(messages, tools, record["sampling"], seed, chat.template_kwargs)
    theirs = backend.applied_template(messages, tools, chat.template_kwargs)
    bos = chat.bos_token or ""
    same = None if theirs is None else theirs.removeprefix(bos) == prompt.removeprefix(bos)
    label, detail = classify(strict, generation.prompt_tokens, runtime, same)
    return {**record,
            "strict": {"prompt_sha256": hashlib.sha256(prompt.encode()).hexdigest(),
                       "prompt_tokens": generation.prompt_tokens, "reply": generation.text,
                       "finish_reason": generation.finish_reason, "parse": strict.to_json()},
            "runtime_reply": {**runtime.to_json(), "same_prompt": same}, "label": label, "detail": detail}


def key(record: dict) -> tuple:
    return (record["runtime"], record["served_model"], record["template"]["sha256"], record["scenario"]["hash"],
            record["seed"])


def run_checks(backend, chat, template_id: str, runtime: str, scenarios, samples: int, base_seed: int, path,
               done: set, workers: int = 1, progress=None) -> list:
    """Check every (scenario, seed) not in `done`, `workers` at a time; each record is written as it lands."""
    template_sha = hashlib.sha256(chat.template.encode()).hexdigest()
    served = backend.describe()["served_model"]
    todo = [(s, base_seed + i) for s in scenarios for i in range(samples or s.samples)
            if (runtime, served, template_sha, s.hash, base_seed + i) not in done]
    lock, records = threading.Lock(), []

    def one(item):
        scenario, seed = item
        record = {"runtime": runtime, "served_model": served, "endpoints": backend.describe()["endpoints"],
                  **check_one(backend, chat, scenario, seed, template_id)}
        with lock:
            writer.append(record)
            records.append(record)
            if progress is not None:
                progress(record)

    with TranscriptWriter(path) as writer, ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for future in [pool.submit(one, item) for item in todo]:
            future.result()          # the first failure stops the run; what landed stays on disk
    return records
