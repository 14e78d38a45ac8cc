"""Runtime checks: ask a served model the strict way and the runtime's own way, for each scenario's opening
conversation and seed, and record both with their label (harness.evaluation.runtime_agreement defines the labels)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from harness import families
from harness.core.hashing import sha256_text
from harness.core.errors import GenerationError, TemplateError
from harness.evaluation.records import RuntimeCheckRecord, ScenarioRef
from harness.evaluation.runtime_agreement import classify
from harness.evaluation.transcripts import TranscriptWriter, now
from harness.live.tool_loop import opening_messages, render_prompt


def greedy(sampling: dict) -> dict:
    return {**sampling, "temperature": 0.0}


def check_one(backend, chat, scenario, seed: int, template_id: str, runtime: str) -> RuntimeCheckRecord:
    messages = opening_messages(scenario) + [{"role": "user", "content": scenario.turns[0].user}]
    described = backend.describe()
    record = RuntimeCheckRecord(
        runtime=runtime, served_model=described["served_model"], endpoints=described["endpoints"],
        scenario=ScenarioRef(scenario.name, scenario.hash), seed=seed,
        template={"id": template_id, "sha256": sha256_text(chat.template)}, family=chat.family,
        sampling=greedy(scenario.sampling), template_kwargs=chat.template_kwargs, recorded=now(), label="")
    try:
        prompt = render_prompt(chat, scenario, messages)
    except TemplateError as exc:
        record.label, record.detail = "template-refused", str(exc)
        return record
    tools = scenario.tool_schemas() or None
    generation = backend.complete(prompt, record.sampling, seed, bos_token=chat.bos_token)
    strict = families.parse(chat.family, generation.text, prompt)
    reply = backend.chat(messages, tools, record.sampling, seed, chat.template_kwargs)
    theirs = backend.applied_template(messages, tools, chat.template_kwargs)
    bos = chat.bos_token or ""
    same = None if theirs is None else theirs.removeprefix(bos) == prompt.removeprefix(bos)
    record.label, record.detail = classify(strict, generation.prompt_tokens, reply, same)
    record.strict = {"prompt_sha256": sha256_text(prompt), "prompt_tokens": generation.prompt_tokens,
                     "reply": generation.text, "finish_reason": generation.finish_reason, "parse": strict.to_json()}
    record.runtime_reply = {**reply.to_json(), "same_prompt": same}
    return record


def run_checks(backend, chat, template_id: str, runtime: str, scenarios, samples: int, base_seed: int, path,
               done: set, workers: int = 1, progress=None) -> tuple:
    """Check every (scenario, seed) not in `done`, `workers` at a time; each record is written as it lands.
    Returns (records, failures): a pair whose request failed (the server was down, timed out, or answered
    something that is not a completion) is not recorded, so a later run asks it again; its failure is
    returned as "scenario seed N: error"."""
    template_sha = sha256_text(chat.template)
    served = backend.describe()["served_model"]
    todo = [(s, base_seed + i) for s in scenarios for i in range(samples or s.samples)
            if (runtime, served, template_sha, s.hash, base_seed + i) not in done]
    lock, records, failures = threading.Lock(), [], []

    def one(item):
        scenario, seed = item
        try:
            record = check_one(backend, chat, scenario, seed, template_id, runtime)
        except GenerationError as exc:
            with lock:
                failures.append(f"{scenario.name} seed {seed}: {exc}")
            return
        with lock:
            writer.append(record)
            records.append(record)
            if progress is not None:
                progress(record)

    with TranscriptWriter(path) as writer, ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for future in [pool.submit(one, item) for item in todo]:
            future.result()
    return records, failures
