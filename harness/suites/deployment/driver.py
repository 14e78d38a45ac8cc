"""The deployment suite's driver: a real GGUF served by a runtime (one the harness starts, or the user's own at
--endpoint), asked every request of harness.suites.deployment.cases, non-streamed and streamed, each answer read
as an app reads it (harness.backends.chat_answers) and recorded with its labels as it lands.

The non-streamed request also asks the runtime to show what the model generated (its `shown_fields`:
llama-server's `verbose`, which changes nothing it generates or parses; or its `generated_fields`: vLLM's
logprobs as token ids, decoded by its own /detokenize, mistral.rs' logprobs' bytes, or llama-cpp-python's content
where its token strings spell it); that text, after the runtime's own
prompt (llama-server's /apply-template), is read by the strict parser of the model's family: the strict path on
the same server. A request that kills a server the harness started is recorded as a runtime error and the
server started again, and one that gets no answer by its deadline while the server runs is asked once more with
more time (SLOW_RETRY); against an --endpoint, a request that got no answer (refused, cut, a timeout, HTTP 408,
429, 502, 503, 504) is not recorded and the next run asks it again."""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.backends import runtimes
from harness.backends.chat_answers import chat_answer, chat_stream
from harness.backends.openai import Endpoint, identify_runtime
from harness.backends.servers import LocalServer
from harness.backends.transport import NOT_NOW, request_json
from harness.core import constants
from harness.core.errors import ServerExitedError, ServerReplyError, ServerStartError
from harness.core.hashing import sha256_text
from harness.storage.results import ResultsDir, file_stem
from harness.storage.transcripts import now, read_transcript
from harness.storage.transcript_writer import TranscriptWriter
from harness.live.opening import N_CTX, template_chat
from harness.pins.sources import load_sources, model_path
from harness.suites.deployment import cases as asked
from harness.suites.deployment.again import STALE, carries, mark_asked_again
from harness.suites.deployment.judging import classify, strict_parse
from harness.suites.deployment.records import DeploymentRecord

FOLDER = "deployment"
TIMEOUT = 600.0          # one request: a 400-token reply of a 1.5B model on 2 cores, prompt included
TAIL = 300               # the end of the runtime's prompt kept with a record (what the strict parser reads after)
THREADS = 1           # as the in-process runs (harness.live.opening): more threads than free cores spin on barriers


def records_path(results: ResultsDir, model_id: str, runtime: str | None = None) -> Path:
    """MODEL.jsonl; a runtime served from HF weights (Hosted) writes MODEL.RUNTIME.jsonl, a file of its own that
    its runs lock and resume apart from the GGUF runtimes' runs on the same model."""
    return results.root / FOLDER / (f"{file_stem(model_id)}.{runtime}.jsonl" if runtime else
                                    f"{file_stem(model_id)}.jsonl")


@dataclass
class Target:
    """Where the requests go and what the records call it."""
    runtime: str                  # the row's name
    server: str                   # a runtime of harness.backends.runtimes the harness starts, or "endpoint"
    base_url: str | None = None   # set once the server is up (or given)
    served: str = ""              # the name requests send as "model"
    kind: str | None = None       # the runtime recognised at the URL (its shown fields and prompt), if any
    endpoint: str | None = None
    local: LocalServer | None = None

    @property
    def known(self):
        """The runtime of harness.backends.runtimes behind it (started here or recognised at the URL), or None."""
        return runtimes.get(self.kind) if self.kind in runtimes.RUNTIMES else None


@dataclass
class Outcome:
    written: list = field(default_factory=list)
    failed: list = field(default_factory=list)     # (request name, why): not recorded, asked again next run
    already: int = 0
    startup: float | None = None    # seconds from starting the runtime to its first ready answer (one it started)
    changed: list = field(default_factory=list)    # asked again (--again): requests whose answer is not as before


@dataclass
class Hosted:
    """A runtime the caller starts on weights it made (scripts/deployment_hf.py: vLLM's CPU build or transformers
    serve on the GGUF dequantized to HF form, harness.live.dequantized). Its records name the runtime (`server`)
    and the pinned GGUF (its SHA-256) with `dequantized` beside it."""
    server: str                   # the runtime (harness.backends.runtimes): its record_name names the row
    served: str                   # the name requests send as "model"
    dequantized: dict | None      # record.model["dequantized"]: {"from", "dtype", "transformers", "folder_sha256"}
    local: object | None = None   # started like a LocalServer: start() -> itself (base_url), stop(), running
    unserved: str | None = None   # why nothing can be served (a conversion that failed): each request a
                                  # runtime error with these words, a row rather than a gap


def model_setup(model_id: str) -> tuple:
    """(pin, template id, chat) of a pinned model: its own template, or the stand-in the in-process runs use for
    a GGUF that embeds none, and its family (the strict parser of the generated text)."""
    pin = load_sources().model(model_id)
    template_id = pin.template or pin.stand_in_template
    chat, ref, _ = template_chat(template_id) if template_id else (None, None, None)
    return pin, ref, chat


def _prompt(target: Target, body: dict) -> dict | None:
    runtime = target.known
    if runtime is None or not runtime.shows_prompt:
        return None
    key = runtime.prompt_key(target.base_url, target.served, {**body, "model": target.served}, TIMEOUT)
    if key.prompt is None:
        return {"source": key.source, "error": key.error}
    return {"source": key.source, "tokens": key.tokens, "sha256": sha256_text(key.prompt), "tail": key.prompt[-TAIL:]}


def ask_one(target: Target, request, model: dict, template: dict, family) -> DeploymentRecord:
    url = f"{target.base_url}/v1/chat/completions"
    runtime = target.known
    shown = {**runtime.shown_fields, **runtime.generated_fields} if runtime else {}
    # Each request from a fresh prompt: the streamed one would otherwise reuse what the non-streamed one cached,
    # and stream-differs would count the cache's doing, not the stream's (and a resumed run would differ from
    # one that was never stopped). The runtime's fresh_fields go in the request; a runtime without such a field
    # is sent its fresh_request before each one (_ask), and the record's switches say which.
    fresh = runtime.fresh_fields if runtime else {}
    body = {**_sent(runtime, request.body), "model": target.served, **fresh}
    record = _new_record(target, request, model, template, family)
    record.prompt = _prompt(target, request.body)
    started = time.monotonic()
    record.plain = _ask(target, chat_answer, url, {**body, **shown})
    middle = time.monotonic()
    record.stream = _ask(target, chat_stream, url, body)
    record.seconds = {"plain": round(middle - started, 3), "stream": round(time.monotonic() - middle, 3)}
    generated = record.plain.get("generated")
    if isinstance(generated, str):
        tail = (record.prompt or {}).get("tail") or ""
        record.strict = strict_parse(family, generated, tail, request.body["tools"])
    record.recorded = now()
    record.labels, record.details = classify(record, request.body["tools"])
    return record


def expected_switches(runtime, request) -> dict:
    """The switches a record of this request holds (every record is made with them): one holding others was
    asked otherwise (before a fresh prompt state, or under another bound) and is `stale` to --again."""
    return {**asked.switches(_sent(runtime, request.body)), **(runtime.fresh_marks() if runtime else {})}


def _freshen(target: Target) -> str | None:
    """Send the runtime's fresh_request (where it has one) so the next request is evaluated afresh; a failure to,
    in words (the answer after it may then have reused what the last request left)."""
    runtime = target.known
    if runtime is None or runtime.fresh_request is None:
        return None
    path, body = runtime.fresh_request
    try:
        request_json(target.base_url + path, {**body, "model": target.served}, TIMEOUT)
    except ServerReplyError as exc:
        return str(exc).replace(target.base_url, "")
    return None


def _sent(runtime, body: dict) -> dict:
    """The request as sent to this runtime: without the llama.cpp sampling fields it refuses (transformers serve;
    under greedy decoding top_k and min_p choose nothing, repeat_penalty is then not applied there)."""
    refused = runtime.refuses_fields if runtime else frozenset()
    return {k: v for k, v in body.items() if k not in refused}


def _new_record(target: Target, request, model: dict, template: dict, family) -> DeploymentRecord:
    runtime = target.known
    return DeploymentRecord(
        runtime=target.runtime, server=target.server, model=model, template=template, family=family,
        case={"id": request.case.id, "category": request.case.category, "hash": request.case.scenario.hash},
        tool_choice=request.tool_choice, labels=[], request=expected_switches(runtime, request),
        endpoint=target.endpoint)


def refused(target: Target, request, model: dict, template: dict, family, words: str,
            why: str = "the runtime refused the model at start") -> DeploymentRecord:
    """The record of a request the runtime never got to answer because it refused the model at start (its
    process ended before it was ready: an architecture it lacks, a file it cannot read), or because there was
    nothing it could load (`why`: weights that could not be dequantized): a row with its words, not a gap. Both
    answers carry them as the runtime error they are."""
    record = _new_record(target, request, model, template, family)
    error = f"{why}: {words}"
    record.plain, record.stream = {"error": error}, {"error": error}
    record.seconds = {"plain": 0.0, "stream": 0.0}
    record.recorded = now()
    record.labels, record.details = classify(record, request.body["tools"])
    return record


def _machine_free(words: str, *folders: Path) -> str:
    """A server's words with this machine's folders (the model cache, the run's scratch folder) named by what
    they are, so a committed record holds no path of the machine that ran it."""
    for folder, name in zip(folders, ("$HARNESS_CACHE", "$TMP")):
        words = words.replace(str(folder), name)
    return words


# A request to a server the harness started that got no complete answer by its deadline while the server still
# runs is asked once more, with this many times the time, when the server kept computing meanwhile: on a loaded
# machine (other jobs on the cores, a client paused) a healthy runtime misses the deadline, and that is no finding
# about it; a runtime that misses it twice is recorded as one, with both failures in its words.
SLOW_RETRY = 3
# A server that used less CPU than this share of the deadline while the request waited was not computing on it:
# hung (a deadlock, a request it lost), so it is recorded as such at once instead of being waited on again. An idle
# server's housekeeping stays far below it (llama-server: none; a Python server's event loop: tenths of a
# second in ten minutes); a server decoding on a core with four other jobs stays far above it.
HUNG_CPU_SHARE = 0.002


def _ask(target: Target, ask, url: str, body: dict) -> dict:
    server = target.local
    used = getattr(server, "cpu_seconds", lambda: None)
    before = used()
    unfresh = _freshen(target) if target.base_url else None
    answer = ask(url, body, TIMEOUT)
    if answer.get("expired") and server is not None and server.running:
        after = used()
        first = answer["error"]
        if before is not None and after is not None and after - before < HUNG_CPU_SHARE * TIMEOUT:
            answer["error"] = (f"{first}; the server used {after - before:.2f} s of CPU meanwhile: hung, "
                               "not slow, so it was not asked again")
            answer["hung"] = True
            server.stop()           # every request after it would wait on it too: started again below
        else:
            if before is not None and after is not None:
                first = f"{first} (the server used {after - before:.1f} s of CPU meanwhile: slow, not hung)"
            unfresh = _freshen(target)
            answer = ask(url, body, TIMEOUT * SLOW_RETRY)
            answer["asked_again"] = first
            if answer.get("error"):
                answer["error"] = f"{first}; asked again: {answer['error']}"
    if answer.get("error") and server is not None and not server.running:
        answer["error"] += ("; it was stopped" if answer.get("hung") else
                            f"; the server died ({server.exit_status()})")
        try:
            server.start()
            target.base_url = server.base_url
            answer["error"] += " and was started again"
        except ServerStartError as exc:       # the next requests fail alike and are recorded so
            answer["error"] += f" and did not start again: {exc}"
    if unfresh:
        answer["fresh_error"] = unfresh
    if target.base_url:
        _decode_generated(target, answer)
        answer.pop("generated_tokens", None)     # the sampled ids: the generated text says what they say
        answer.pop("logprob_bytes", None)
        answer.pop("logprob_text", None)
        if isinstance(answer.get("error"), str):
            answer["error"] = answer["error"].replace(target.base_url, "")
    return answer


def _decode_generated(target: Target, answer: dict) -> None:
    """Where the runtime gave what it generated only as logprobs (vLLM's ids, mistral.rs' bytes, llama-cpp-python's
    token strings), its text, for the strict path; a decoding that fails is said beside the answer, which stands."""
    runtime = target.known
    if runtime is None or not runtime.generated_fields or "generated" in answer or answer.get("error"):
        return
    try:
        text = runtime.generated_text(target.base_url, target.served, answer, TIMEOUT)
    except ServerReplyError as exc:
        answer["generated_error"] = str(exc).replace(target.base_url, "")
        return
    if text is not None:
        answer["generated"] = text


def unanswered(record: DeploymentRecord) -> str | None:
    """Why a record against an --endpoint is not kept: a request that got no answer is asked again."""
    for what, answer in (("non-streamed", record.plain or {}), ("streamed", record.stream or {})):
        if answer.get("error") and (answer.get("status") is None or answer.get("status") in NOT_NOW):
            return f"{what}: {answer['error']}"
    return None


def run(model_id: str, results: ResultsDir, *, server: str | None = None, endpoint: str | None = None,
        name: str | None = None, served: str | None = None, per_category: int = asked.DEFAULT_CASES,
        log=print, only: set | None = None, hosted: Hosted | None = None, inflight: int = 1,
        again: tuple = ()) -> Outcome:
    """Ask every request not yet recorded for this model and runtime; each record is written as it lands.
    inflight: against an --endpoint, requests open at once (a cluster answers them side by side). again: labels
    (or a label's head, `runtime-forgave`), or STALE (a record whose switches are not those a record made now
    holds: expected_switches); a request whose latest record is any of them is asked again and its new record
    appended after the old one, which stays in the file: the page reads the latest record of a question."""
    pin, ref, chat = model_setup(model_id)
    family = chat.family if chat else None
    template = {"id": ref.id, "sha256": sha256_text(ref.text)}
    requests = [r for r in asked.requests(asked.cases(per_category) + asked.openings())
                if not only or r.case.id in only]
    path = records_path(results, model_id, runtimes.get(hosted.server).record_name if hosted else None)
    path.parent.mkdir(parents=True, exist_ok=True)
    if endpoint:
        target = Target(name, "endpoint", endpoint.rstrip("/"), served or model_id, endpoint=endpoint)
        target.kind = identify_runtime(Endpoint(endpoint, target.served), 30.0)
        model = {"id": model_id, "sha256": None, "served": target.served}
    elif hosted:
        gguf = None            # the runtime reads the caller's HF folder, not the GGUF
        target = Target(runtimes.get(hosted.server).record_name, hosted.server, served=hosted.served,
                        kind=hosted.server)
        model = {"id": model_id, "sha256": pin.sha256, "served": hosted.served, "dequantized": hosted.dequantized}
    else:
        gguf = model_path(model_id)
        _needs_template_file(server, model_id, pin, ref)
        target = Target(runtimes.get(server).record_name, server, served=model_id, kind=server)
        model = {"id": model_id, "sha256": pin.sha256, "served": model_id}
    out = Outcome()
    # The lock is taken before the done set is read, as harness run takes it: a second run on this file stops
    # at once, naming the run that holds it, and one that starts after it skips what it recorded.
    with TranscriptWriter(path, wait=False) as writer, tempfile.TemporaryDirectory(prefix="harness-deploy-") as tmp:
        latest = {r.key(): r for r in read_transcript(path, kinds=(DeploymentRecord,)).records}
        key = lambda r: (target.runtime, model_id, template["sha256"], r.case.id,  # noqa: E731
                         r.case.scenario.hash, r.tool_choice)
        expected = {key(r): expected_switches(target.known, r) for r in requests} if STALE in again else {}
        due = lambda k, r: any(r.request != expected.get(k) if which == STALE else carries(r, which)  # noqa: E731
                               for which in again)
        done = {k for k, r in latest.items() if not due(k, r)}
        todo = [r for r in requests if key(r) not in done]
        out.already = len(requests) - len(todo)
        if not todo:
            return out
        if hosted and hosted.unserved:
            return _refuse_all(out, writer, log, todo, target, model, template, family, hosted.unserved,
                               "the weights could not be dequantized from the GGUF")
        if not endpoint:
            target.local = hosted.local if hosted else _local(server, gguf, model_id, pin, ref, Path(tmp))
            started = time.monotonic()
            try:
                target.base_url = target.local.start().base_url
                out.startup = round(time.monotonic() - started, 3)
            except ServerExitedError as exc:
                words = str(exc).replace(str(gguf), gguf.name) if gguf else str(exc)
                words = _machine_free(words, constants.CACHE_DIR, Path(tmp))
                return _refuse_all(out, writer, log, todo, target, model, template, family, words)
        ask = lambda request: ask_one(target, request, model, template, family)  # noqa: E731
        try:
            for request, record in _answered(todo, ask, inflight if endpoint else 1):
                why = unanswered(record) if endpoint else None
                if why:
                    out.failed.append((request.name, why))
                    continue
                if (before := latest.get(key(request))) is not None and not mark_asked_again(record, before):
                    out.changed.append(request.name)
                writer.append(record)
                out.written.append(record)
                log(record)
        finally:
            if target.local is not None:
                target.local.stop()
    return out


def _answered(todo: list, ask, inflight: int):
    """(request, record) as each lands: one request at a time, or `inflight` open at once. The records are written
    as they land, in the order they land (the page reads them in any order); a stop (Ctrl-C, an error) sends no
    request not yet sent, and what landed is already written."""
    if inflight <= 1:
        for request in todo:
            yield request, ask(request)
        return
    from concurrent.futures import ThreadPoolExecutor, as_completed

    pool = ThreadPoolExecutor(inflight, thread_name_prefix="harness-deployment")
    try:
        futures = {pool.submit(ask, request): request for request in todo}
        for future in as_completed(futures):
            yield futures[future], future.result()
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _refuse_all(out: Outcome, writer, log, todo: list, target: Target, model: dict, template: dict, family,
                words: str, *why) -> Outcome:
    for request in todo:
        record = refused(target, request, model, template, family, words, *why)
        writer.append(record)
        out.written.append(record)
        log(record)
    return out


def _needs_template_file(kind: str, model_id: str, pin, ref) -> bool:
    """Whether the runtime must be given the stand-in template as a file (a GGUF that embeds none); a runtime that
    takes no template file is refused, before anything is recorded."""
    if pin.template or ref is None:
        return False
    if runtimes.get(kind).template_file_flag is None:
        raise ServerStartError(f"{kind} takes no chat template file, and {model_id}'s GGUF embeds no template: "
                               f"it would prompt with a fallback of its own, not {ref.id}, and its rows would not "
                               "compare the same model")
    return True


def _local(kind: str, gguf: Path, model_id: str, pin, ref, tmp: Path) -> LocalServer:
    """The runtime started on the model file with the template the in-process runs use: the GGUF's own (loaded
    from the file, --jinja), or, for a GGUF that embeds none, the pinned stand-in given as a file (else the
    runtime falls back to a template of its own and the rows would not compare the same model)."""
    extra = []
    if _needs_template_file(kind, model_id, pin, ref):
        template_file = tmp / f"{ref.id}.jinja"
        template_file.write_text(ref.text, encoding="utf-8")
        extra = [runtimes.get(kind).template_file_flag, str(template_file)]
    threads = constants.HARNESS_THREADS or THREADS
    return LocalServer(kind, gguf, alias=model_id, n_ctx=N_CTX, threads=threads, seed=asked.SEED,
                       extra_args=extra, log_path=tmp / f"{model_id}-{kind}.log", ready_timeout=300)
