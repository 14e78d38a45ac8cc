"""Runtime checks: ask a served model the strict way and the runtime's own way, for each scenario's opening
conversation and seed, and record both with their label (judging.py defines the labels)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from harness import families
from harness.core.hashing import sha256_text
from harness.backends.transport import NOT_NOW
from harness.core.errors import GenerationError, HarnessError, ServerReplyError, TemplateError
from harness.storage.records import ScenarioRef
from harness.storage.transcripts import now, read_transcript
from harness.storage.transcript_writer import TranscriptWriter
from harness.live.tool_loop import opening_messages, render_prompt
from harness.suites.runtime_check.judging import classify
from harness.suites.runtime_check.records import RuntimeCheckRecord


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
    try:
        generation = backend.complete(prompt, record.sampling, seed, bos_token=chat.bos_token)
    except ServerReplyError as exc:
        redirect = _redirected(exc, scenario, seed)
        if redirect:
            raise redirect from None
        raise
    strict = families.parse(chat.family, generation.text, prompt)
    record.strict = {"prompt_sha256": sha256_text(prompt), "prompt_tokens": generation.prompt_tokens,
                     "reply": generation.text, "finish_reason": generation.finish_reason, "parse": strict.to_json()}
    try:
        reply = backend.chat(messages, tools, record.sampling, seed, chat.template_kwargs)
    except ServerReplyError as exc:
        if exc.status is None or exc.status in NOT_NOW:
            raise                # no answer: not recorded, asked again by a later run
        redirect = _redirected(exc, scenario, seed)
        if redirect:
            raise redirect from None
        # A whole answer that is not a chat completion (a 500 every time, a refusal, HTML, an empty body).
        record.label, record.detail = "runtime-error", str(exc)
        record.runtime_reply = {"error": str(exc), "status": exc.status}
        return record
    theirs = backend.applied_template(messages, tools, chat.template_kwargs)
    bos = chat.bos_token or ""
    same = None if theirs is None else theirs.removeprefix(bos) == prompt.removeprefix(bos)
    record.label, record.detail = classify(strict, generation.prompt_tokens, reply, same)
    record.runtime_reply = {**reply.to_json(), "same_prompt": same}
    return record


def _redirected(exc: ServerReplyError, scenario, seed: int) -> HarnessError | None:
    """A redirect is the URL's fault, not the runtime's: the run stops, saying so (nothing recorded for it)."""
    if exc.status is None or not 300 <= exc.status < 400:
        return None
    return HarnessError(f"{exc}. The endpoint is not where the runtime answers: nothing is recorded for "
                        f"{scenario.name} seed {seed}; give --endpoint the URL that answers")


def run_checks(backend, chat, template_id: str, runtime: str, scenarios, samples: int, base_seed: int, path,
               done: set, workers: int = 1, progress=None) -> tuple:
    """Check every (scenario, seed) not in `done`, `workers` at a time; each record is written as it lands.
    Returns (records, failures): a pair whose request got no answer (the server was down, timed out, said
    "not now"), or whose strict path did not give a completion, is not recorded, so a later run asks it again; its
    failure is returned as "scenario seed N: error". The runtime path answered whole but not with a chat
    completion is recorded as runtime-error; a redirect stops the run (HarnessError)."""
    template_sha = sha256_text(chat.template)
    served = backend.describe()["served_model"]
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

    # The lock is taken before the done set is read, as harness run takes it: a second run on this file stops
    # at once, naming the run that holds it, and one that starts after it skips what it recorded.
    with TranscriptWriter(path, wait=False) as writer, ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        done = set(done) | {r.key() for r in read_transcript(path, kinds=(RuntimeCheckRecord,)).records}
        todo = [(s, base_seed + i) for s in scenarios for i in range(samples or s.samples)
                if (runtime, served, template_sha, s.hash, base_seed + i) not in done]
        futures = [pool.submit(one, item) for item in todo]
        try:
            for future in futures:
                future.result()
        except BaseException:
            for future in futures:       # a redirect stops the run: the pairs not yet started are not asked
                future.cancel()
            raise
    return records, failures
