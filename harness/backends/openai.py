"""An OpenAI-compatible server as a backend: llama-server's /completion + /detokenize (else /v1/completions) for
the strict path, /v1/chat/completions for the runtime's own path, over the standard library's HTTP client.

Scale-out: several endpoints (replicas of one served model) are used in turn, each with at most `in_flight`
requests open at once; a request that fails for a reason worth retrying (connection refused or reset, 429,
5xx, a timeout) is retried on the next endpoint after an exponential backoff, until `retries` are spent or its
deadline passes. Anything else (a 4xx that says the request is wrong) fails at once with the server's words."""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from typing import ClassVar

from harness.core.replies import Generation, Timings
from harness.backends import runtimes
from harness.backends.base import Backend
from harness.backends.chat_answers import read_message
from harness.backends.transport import check_url, describe, request_json, shown
from harness.core.errors import GenerationError, ServerReplyError


@dataclass(frozen=True)
class Endpoint:
    url: str            # the server's base URL, e.g. http://127.0.0.1:8080 (with or without /v1)
    served_model: str   # the "model" field the server expects

    def __post_init__(self):
        check_url(self.url)

    def route(self, path: str) -> str:
        base = self.url.rstrip("/")
        return f"{base}{path}" if base.endswith("/v1") else f"{base}/v1{path}"

    def root(self, path: str) -> str:
        return self.url.rstrip("/").removesuffix("/v1") + path


@dataclass
class RuntimeReply:
    """What the runtime returned for a conversation: its own parse of the model's reply."""
    content: str | None
    tool_calls: list            # [{"name", "arguments" (the string the runtime sent)}]
    reasoning: str | None
    finish_reason: str | None
    prompt_tokens: int | None
    raw: dict = field(repr=False, default_factory=dict)
    # Where the answer breaks the API's shape (tool_calls not a list, a name not a string, arguments an object
    # instead of a JSON string, ...): each a path and what was there. The fields above keep what was sent.
    problems: list = field(default_factory=list)

    def to_json(self) -> dict:
        out = {"content": self.content, "tool_calls": self.tool_calls, "reasoning": self.reasoning,
               "finish_reason": self.finish_reason, "prompt_tokens": self.prompt_tokens}
        if self.problems:
            out["problems"] = self.problems
        return out


class OpenAIBackend(Backend):
    name = "openai"
    serves_chat = True
    # Where a server has no llama-server /completion (llama-cpp-python, vLLM), ask its /v1/completions instead;
    # a subclass that must read token ids only sets this False, and such a server then fails the request.
    completion_fallback: ClassVar[bool] = True

    def __init__(self, endpoints: list, *, in_flight: int = 1, retries: int = 3, backoff: float = 0.5,
                 timeout: float = 180.0):
        if not endpoints:
            raise ValueError("an OpenAI backend needs at least one endpoint")
        self.endpoints = list(endpoints)
        self.retries, self.backoff, self.timeout = retries, backoff, timeout
        self._slots = {e: threading.BoundedSemaphore(in_flight) for e in self.endpoints}
        self._turn = itertools.cycle(self.endpoints)
        self._lock = threading.Lock()
        self._native = None       # whether the servers answer llama-server's /completion (None: not asked yet)
        self._bos = None          # whether they add BOS to a text prompt (None: not asked yet)
        self._applies = None      # whether they answer llama-server's /apply-template (None: not asked yet)

    # --- the two paths ------------------------------------------------------------------------------------

    def complete(self, prompt: str, sampling: dict, seed: int, grammar=None, *, bos_token: str = "",
                 timeout: float | None = None) -> Generation:
        """The strict path: the harness's own rendered prompt, raw text back (as the server detokenizes it). The
        deadline is the backend's own (`timeout` of the constructor, retries included), not the step's."""
        if grammar is not None:
            raise GenerationError("the openai backend runs native mode only: a lazy grammar needs the sampler "
                                  "in this process (use the embedded backend for grammar and fallback)")
        bos = bos_token
        if bos and prompt.startswith(bos) and self._adds_bos():
            # The server adds BOS itself (the vocabulary asks for one): the one the template wrote would be a
            # second. Where the server cannot say, the prompt goes as rendered.
            prompt = prompt[len(bos):]
        started = time.monotonic()
        generation = self._native_completion(prompt, sampling, seed) if self._native is not False else None
        if generation is None:
            answer, endpoint = self._post("/completions", {"prompt": prompt, "seed": seed, **_sampling(sampling)})
            choice = _first_choice(answer, endpoint)
            where = endpoint.route("/completions")
            usage = _usage(answer, where)
            text = _typed(choice, "text", str, where, "choices[0]") or ""
            generation = (text, _count(usage, "prompt_tokens", where), _count(usage, "completion_tokens", where),
                          _finish(choice.get("finish_reason")))
        text, prompt_tokens, completion, finish = generation
        seconds = time.monotonic() - started
        return Generation(text=text, tokens=[], prompt_tokens=prompt_tokens, completion_tokens=completion,
                          finish_reason=finish, timings=Timings(seconds, 0.0, completion / seconds if seconds else 0.0),
                          seed=seed)

    def _adds_bos(self) -> bool:
        """Whether the server puts BOS ahead of a text prompt, asked once (llama-server's /tokenize of "")."""
        if self._bos is None:
            endpoint = self.endpoints[0]
            try:
                tokens = self._post_to(endpoint, endpoint.root("/tokenize"), {"content": "", "add_special": True})
                self._bos = isinstance(tokens.get("tokens"), list) and bool(tokens["tokens"])
            except GenerationError:
                self._bos = False
        return self._bos

    def _native_completion(self, prompt: str, sampling: dict, seed: int):
        """llama-server's own /completion with the sampled token ids, detokenized by /detokenize, which keeps
        special tokens as text: its /v1/completions drops them (unless the server runs with --special), and a
        strict parser must see <tool_call> or [TOOL_CALLS] as written. None where the server has no such
        endpoint (llama-cpp-python, vLLM): then /v1/completions, whose text is what that server gives."""
        body = {"prompt": prompt, "seed": seed, "return_tokens": True, **_sampling(sampling)}
        body["n_predict"] = body.pop("max_tokens", -1)
        body["repeat_last_n"] = 64
        try:
            answer, endpoint = self._post("/completion", body, root=True)
        except ServerReplyError as exc:
            if exc.status in (404, 405):
                return self._no_native(str(exc))
            raise
        tokens = answer.get("tokens")
        if not isinstance(tokens, list):
            return self._no_native(f"{endpoint.root('/completion')} returned no token ids")
        self._native = True
        where = endpoint.root("/completion")
        if not all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
            raise ServerReplyError(f"{where}: tokens holds something other than token ids: "
                                   f"{shown(tokens)}", retry=False)
        sampled = len(tokens)
        stop = answer.get("stop_type")
        if stop == "eos" and tokens:
            tokens = tokens[:-1]            # the end-of-generation token ends the reply; it is not part of it
        text = ""
        if tokens:
            url = endpoint.root("/detokenize")
            text = _typed(self._post_to(endpoint, url, {"tokens": tokens}), "content", str, url, "") or ""
        finish = {"eos": "stop", "limit": "length", "word": "stop_string"}.get(stop, "stop")
        return text, _count(answer, "tokens_evaluated", where, ""), sampled, finish

    def _no_native(self, why: str):
        """The server has no llama-server /completion: None (ask /v1/completions from now on), or, for a backend
        without that fallback, a request that fails with the reason."""
        if not self.completion_fallback:
            raise ServerReplyError(f"the {self.name} backend reads llama-server's /completion only: {why}",
                                   retry=False)
        self._native = False
        return None

    def chat(self, messages: list, tools: list | None, sampling: dict, seed: int,
             template_kwargs: dict | None = None) -> RuntimeReply:
        """The runtime path: messages and tools as an app sends them; the runtime renders and parses."""
        body = {"messages": wire_messages(messages), "seed": seed, **_sampling(sampling)}
        if tools:
            body["tools"] = tools
        if template_kwargs:
            body["chat_template_kwargs"] = template_kwargs      # llama-server and vLLM read it; others ignore it
        answer, endpoint = self._post("/chat/completions", body)
        choice = _first_choice(answer, endpoint)
        content, reasoning, calls, problems = read_message(choice.get("message"), "choices[0].message")
        usage = answer.get("usage")
        prompt_tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        if usage is not None and not isinstance(usage, dict):
            problems.append(f"usage is {describe(usage)}, not an object")
        elif prompt_tokens is not None and (not isinstance(prompt_tokens, int) or isinstance(prompt_tokens, bool)):
            problems.append(f"usage.prompt_tokens is {describe(prompt_tokens)}, not an integer")
            prompt_tokens = None
        finish = choice.get("finish_reason")
        return RuntimeReply(content=content, tool_calls=calls, reasoning=reasoning,
                            finish_reason=finish if isinstance(finish, str) else None,
                            prompt_tokens=prompt_tokens, raw=answer, problems=problems)

    def applied_template(self, messages: list, tools: list | None, template_kwargs: dict | None) -> str | None:
        """The prompt the runtime renders for these messages, where it says (llama-server's /apply-template);
        None where the server has no such endpoint."""
        if self._applies is False:
            return None
        body = {"messages": wire_messages(messages), "tools": tools or [],
                "chat_template_kwargs": template_kwargs or {}}
        endpoint = self.endpoints[0]
        try:
            answer = self._post_to(endpoint, endpoint.root("/apply-template"), body)
        except ServerReplyError as exc:
            if exc.status in (404, 405):
                self._applies = False       # asked once: a server without it will not grow one mid-run
            return None
        prompt = answer.get("prompt")
        return prompt if isinstance(prompt, str) else None

    def describe(self) -> dict:
        return {"backend": "openai", "endpoints": [e.url for e in self.endpoints],
                "served_model": self.endpoints[0].served_model}

    # --- transport ----------------------------------------------------------------------------------------

    def _post(self, path: str, body: dict, root: bool = False) -> tuple:
        deadline = time.monotonic() + self.timeout
        last = None
        for attempt in range(self.retries + 1):
            with self._lock:
                endpoint = next(self._turn)
            left = deadline - time.monotonic()
            if left <= 0:
                break
            url = endpoint.root(path) if root else endpoint.route(path)
            try:
                with self._slots[endpoint]:
                    return request_json(url, {"model": endpoint.served_model, **body}, left), endpoint
            except ServerReplyError as exc:
                if not exc.retry:
                    raise
                last = exc
            pause = self.backoff * 2 ** attempt
            if time.monotonic() + pause >= deadline:
                break
            time.sleep(pause)
        # The last status stays on the error: a 500 given every time is an answer (a caller may record it), a
        # request that got none (status None) is not.
        raise ServerReplyError(f"{path}: no answer after {attempt + 1} attempt(s) within {self.timeout:g} s: {last}",
                               retry=True, status=getattr(last, "status", None))

    def _post_to(self, endpoint: Endpoint, url: str, body: dict) -> dict:
        with self._slots[endpoint]:
            return request_json(url, body, self.timeout)


def wire_messages(messages: list) -> list:
    """Messages as the OpenAI API carries them. Templates take a call's arguments as a mapping (the harness
    keeps them so); on the wire they are a JSON string."""
    out = []
    for message in messages:
        message = dict(message)
        if message.get("tool_calls"):
            message["tool_calls"] = [
                {**call, "function": {**call["function"], "arguments": _json_text(call["function"].get("arguments"))}}
                for call in message["tool_calls"]]
        out.append(message)
    return out


def _json_text(arguments) -> str:
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def _first_choice(answer: dict, endpoint: Endpoint) -> dict:
    choices = answer.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ServerReplyError(f"{endpoint.url}: the answer has no choices: {shown(answer)}", retry=False)
    return choices[0]


def _typed(obj: dict, key: str, kind: type, url: str, where: str):
    """obj[key] when it is of `kind` or null/absent (None); a wrong type is this request's error."""
    value = obj.get(key)
    if value is None or (isinstance(value, kind) and not isinstance(value, bool)):
        return value
    path = f"{where}.{key}" if where else key
    raise ServerReplyError(f"{url}: {path} is {describe(value)}, not {kind.__name__}", retry=False)


def _usage(answer: dict, url: str) -> dict:
    usage = answer.get("usage")
    if usage is None:
        return {}
    if not isinstance(usage, dict):
        raise ServerReplyError(f"{url}: usage is {describe(usage)}, not an object", retry=False)
    return usage


def _count(obj: dict, key: str, url: str, where: str = "usage") -> int:
    value = _typed(obj, key, int, url, where)
    if value is not None and value < 0:
        raise ServerReplyError(f"{url}: {key} is {value}, a negative count", retry=False)
    return value or 0


def _sampling(sampling: dict) -> dict:
    # llama-server and llama-cpp-python read top_k, min_p and repeat_penalty beside the OpenAI fields.
    keys = ("max_tokens", "temperature", "top_p", "top_k", "min_p", "repeat_penalty")
    return {k: sampling[k] for k in keys if k in sampling}


def _finish(reason) -> str:
    # OpenAI's "stop" covers an end-of-generation token and a stop string alike; ours are told apart only in
    # process, so a server's "stop" is ours.
    return "length" if reason == "length" else "stop"


def identify_runtime(endpoint: Endpoint, timeout: float) -> str:
    """Which server answers at an endpoint, where it says so: the first runtime of harness.backends.runtimes whose
    probe (a path and what its JSON answer holds: llama-server's /props with its build and slots,
    llama-cpp-python's OpenAPI title) recognises it; "served" for any other."""
    answers: dict = {}
    for runtime in runtimes.every():
        if not runtime.probe:
            continue
        path = runtime.probe[0]
        if path not in answers:
            try:
                answers[path] = request_json(endpoint.root(path), None, timeout, max_body=1 << 20)
            except ServerReplyError:
                answers[path] = None
        if runtime.identifies(answers[path]):
            return runtime.name
    return "served"
