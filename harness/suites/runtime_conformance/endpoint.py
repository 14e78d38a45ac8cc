"""Runtime conformance against a runtime the user serves (`harness runtime-conformance --endpoint`): the requests
a `harness scripted-model` manifest lists for the scripted model being served, asked non-streamed and streamed,
recorded and labelled as the suite does. The harness cannot swap the model or ask this runtime for its prompt,
so each reply is keyed as the manifest says (`key_source`). Where the answer's usage.prompt_tokens is not that
length, the model wrote at other positions than it was keyed for: the record is labelled prompts-differ and its
reply is not judged (it is not the script's), instead of reading as a runtime that rewrote the reply.

A request the runtime did not answer (no HTTP answer: connection refused or reset, the deadline passed, the server
died; or a status that says "not now": 408, 429, 502, 503, 504) is not recorded: it is not a finding about how
the runtime reads a reply, and a later run asks exactly those again. An answer that arrived whole is a finding
and recorded, whatever its status or body (an HTTP 500 every time, HTML, invalid JSON, an empty body:
`runtime-error`). A redirect says the URL is not the runtime's: the run stops there, naming where it points. Each request has its own deadline (`timeout`), and the
run an overall one (`deadline`): past it no request starts, one under way is cut, and what finished is kept."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.backends.chat_answers import chat_answer, chat_stream
from harness.backends.transport import NOT_NOW
from harness.core.errors import HarnessError
from harness.core.hashing import sha256_json
from harness.suites.runtime_conformance.judging import conformance_record
from harness.suites.runtime_conformance.records import RuntimeConformanceRecord
from harness.storage.transcripts import now, read_transcript
from harness.storage.transcript_writer import TranscriptWriter
from harness.families import get as family_get
from harness.suites.runtime_conformance.driver import EXTRA_TOKENS, TIMEOUT, request_switches
from harness.scripted.manifest import read_manifest


def entry_hash(entry: dict) -> str:
    return sha256_json([entry["request"], entry["reply"]])[:16]


def unanswered(answer: dict) -> bool:
    """Whether an answer is the request failing rather than the runtime answering: a transport failure (no
    status: refused, cut, past the deadline) or a status that says "not now" (NOT_NOW). A complete answer of any
    other status or body (a 500, a refusal, HTML, an empty body, an error event in a stream) is an answer."""
    return bool(answer.get("error")) and "status" in answer and (
        answer["status"] is None or answer["status"] in NOT_NOW)


def redirected(answer: dict) -> bool:
    """A 3xx: the URL given is not where the runtime answers (redirects are not followed): the user's to fix."""
    return bool(answer.get("error")) and 300 <= (answer.get("status") or 0) < 400


def endpoint_key(entry: dict, plain: dict) -> dict:
    """The prompt length of a request the harness could not ask this runtime for: its own count where its answer
    gives one (usage.prompt_tokens), with the length the manifest keyed the model to beside it (`keyed`), so a
    runtime that counts otherwise is labelled prompts-differ and its reply is not judged as the script's; else
    the manifest's."""
    counted = plain.get("prompt_tokens")
    if counted is None:
        return {"tokens": entry["prompt_tokens"], "source": f"the manifest ({entry['key_source']})", "error": None,
                "same_text": None}
    return {"tokens": counted, "source": "usage.prompt_tokens of the answer", "error": None, "same_text": None,
            "keyed": entry["prompt_tokens"]}


def manifest_field(path) -> str:
    """The manifest as a record names it: its path relative to the current folder where it lies inside it, else
    its file name (what `harness scripted-model --template ID` writes), so that a committed record names no
    machine's folders; a replay rebuilds the manifest from the template (harness runtime-conformance --template)."""
    path = Path(path).resolve()
    try:
        return path.relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.name


@dataclass
class EndpointRun:
    written: list = field(default_factory=list)     # the records appended
    failed: list = field(default_factory=list)      # "case/variant: why", not recorded
    not_asked: int = 0                              # requests the overall deadline left unasked

    @property
    def left(self) -> int:
        """Requests a later run asks again."""
        return len(self.failed) + self.not_asked


def served_models(manifest: dict, manifest_path, served_model: str | None) -> list:
    """The manifest's models a run asks: the one served as `served_model`, or every one (None)."""
    if served_model is None:
        return list(manifest["models"])
    names = [m["served_name"] for m in manifest["models"]]
    model = next((m for m in manifest["models"] if m["served_name"] == served_model), None)
    if model is None:
        raise HarnessError(f"--served-model {served_model!r} is none of {manifest_path}'s models: {', '.join(names)}")
    return [model]


def run_manifest(url: str, served_model: str | None, manifest_path: Path, runtime: str, path: Path, done: set,
                 cases=None, variants=None, log=print, timeout: float = TIMEOUT,
                 deadline: float | None = None, build: dict | None = None) -> EndpointRun:
    """served_model: the manifest's model being served, or None for every one, each asked by its served name (a
    runtime that hosts them all, or loads the one a request names); done: (template sha256, case, hash, variant)
    already recorded; timeout: seconds per request (each of the two answers); deadline: seconds for the whole
    run, None for no bound; build: what answers, where the records' runtime says it (Runtime.build)."""
    manifest = read_manifest(manifest_path)
    markers = family_get(manifest["family"]).markers if manifest["family"] else ()
    chat = url.rstrip("/").removesuffix("/v1") + "/v1/chat/completions"
    models = served_models(manifest, manifest_path, served_model)
    ends = None if deadline is None else time.monotonic() + deadline
    run = EndpointRun()
    # The lock is taken before the done set is read, as harness run takes it: a second run on this file stops
    # at once, naming the run that holds it, and one that starts after it skips what it recorded.
    with TranscriptWriter(path, wait=False) as writer:
        done = set(done) | {r.done_key() for r in read_transcript(path, kinds=(RuntimeConformanceRecord,)).records}
        todo = []
        for model in models:
            for e in model["requests"]:
                key = (manifest["template"]["sha256"], e["case"], entry_hash(e), e["variant"])
                if key not in done and (not cases or e["case"] in cases) and (
                        not variants or e["variant"] in variants):
                    todo.append((model, e, key[2]))
        for n, (model, e, entry_key) in enumerate(todo):
            remaining = timeout if ends is None else min(timeout, ends - time.monotonic())
            if remaining <= 0:
                run.not_asked = len(todo) - n
                break
            body = {**e["request"], "model": model["served_name"], "max_tokens": e["reply_tokens"] + EXTRA_TOKENS}
            plain = chat_answer(chat, body, remaining)
            stream = {}
            if not unanswered(plain) and not redirected(plain):
                remaining = timeout if ends is None else min(timeout, ends - time.monotonic())
                stream = chat_stream(chat, body, remaining) if remaining > 0 else {
                    "error": "the run's deadline passed before the streamed request", "status": None}
            moved = next((x["error"] for x in (plain, stream) if redirected(x)), None)
            if moved:
                raise HarnessError(f"{moved}. {url} is not where the runtime answers: nothing is recorded for "
                                   f"{e['case']}/{e['variant']}, what was recorded before it is kept, and the "
                                   "command resumes with --endpoint the URL that answers")
            failed = next((f"{what}: {x['error']}" for what, x in (("non-streamed", plain), ("streamed", stream))
                           if unanswered(x)), None)
            if failed:
                run.failed.append(f"{e['case']}/{e['variant']}: {failed}")
                continue
            record = conformance_record(
                runtime=runtime, server="endpoint", endpoint=url, manifest=manifest_field(manifest_path),
                served_model=model["served_name"], template=manifest["template"], family=manifest["family"],
                profile=manifest["vocabulary"], case={"name": e["case"], "hash": entry_key}, variant=e["variant"],
                request=request_switches(e["request"]), reply=e["reply"], reply_tokens=e["reply_tokens"],
                reply_ids=e.get("reply_ids"), expect=e["expect"], ours={"tokens": e["prompt_tokens"]},
                key=endpoint_key(e, plain),
                model=model["file"], plain=plain, stream=stream, recorded=now(),
                tools=e["request"].get("tools") or [], marker=markers[0] if markers else None, build=build,
                history=e.get("history"))
            writer.append(record)
            log(record)
            run.written.append(record)
    return run
