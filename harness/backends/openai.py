"""An OpenAI-compatible server as a backend: llama-server's /completion + /detokenize (else /v1/completions) for
the strict path, /v1/chat/completions for the runtime's own path, over the standard library's HTTP client.

Scale-out: several endpoints (replicas of one served model) are used in turn, each with at most `in_flight`
requests open at once; a request that fails for a reason worth retrying (connection refused or reset, 429,
5xx, a timeout) is retried on the next endpoint after an exponential backoff, until `retries` are spent or its
deadline passes. Anything else (a 4xx that says the request is wrong) fails at once with the server's words."""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

from harness.core.replies import Generation, Timings
from harness.backends.base import Backend
from harness.core.errors import GenerationError, ServerReplyError

RETRY_STATUSES = {408, 429, 500, 502, 503, 504}


@dataclass(frozen=True)
class Endpoint:
    url: str            # the server's base URL, e.g. http://127.0.0.1:8080 (with or without /v1)
    served_model: str   # the "model" field the server expects

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

    def to_json(self) -> dict:
        return {"content": self.content, "tool_calls": self.tool_calls, "reasoning": self.reasoning,
                "finish_reason": self.finish_reason, "prompt_tokens": self.prompt_tokens}


class OpenAIBackend(Backend):
    name = "openai"
    serves_chat = True

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

    def complete(self, chat, prompt: str, sampling: dict, seed: int, grammar=None) -> Generation:
        """The strict path: the harness's own rendered prompt, raw text back (as the server detokenizes it)."""
        if grammar is not None:
            raise GenerationError("the openai backend runs native mode only: a lazy grammar needs the sampler "
                                  "in this process (use the embedded backend for grammar and fallback)")
        bos = getattr(chat, "bos_token", "")
        if bos and prompt.startswith(bos) and self._adds_bos():
            # The server adds BOS itself (the vocabulary asks for one): the one the template wrote would be a
            # second. Where the server cannot say, the prompt goes as rendered.
            prompt = prompt[len(bos):]
        started = time.monotonic()
        generation = self._native_completion(prompt, sampling, seed) if self._native is not False else None
        if generation is None:
            answer, endpoint = self._post("/completions", {"prompt": prompt, "seed": seed, **_sampling(sampling)})
            choice = _first_choice(answer, endpoint)
            usage = answer.get("usage") or {}
            generation = (choice.get("text") or "", usage.get("prompt_tokens") or 0,
                          usage.get("completion_tokens") or 0, _finish(choice.get("finish_reason")))
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
                self._bos = bool(tokens.get("tokens"))
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
                self._native = False
                return None
            raise
        tokens = answer.get("tokens")
        if not isinstance(tokens, list):
            self._native = False
            return None
        self._native = True
        stop = answer.get("stop_type")
        if stop == "eos" and tokens:
            tokens = tokens[:-1]            # the end-of-generation token ends the reply; it is not part of it
        text = ""
        if tokens:
            text = self._post_to(endpoint, endpoint.root("/detokenize"), {"tokens": tokens}).get("content", "")
        finish = {"eos": "stop", "limit": "length", "word": "stop_string"}.get(stop, "stop")
        return text, answer.get("tokens_evaluated") or 0, len(answer.get("tokens") or []), finish

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
        message = choice.get("message") or {}
        calls = [{"name": (c.get("function") or {}).get("name"), "arguments": (c.get("function") or {}).get("arguments")}
                 for c in message.get("tool_calls") or []]
        return RuntimeReply(content=message.get("content"), tool_calls=calls,
                            reasoning=message.get("reasoning_content"), finish_reason=choice.get("finish_reason"),
                            prompt_tokens=(answer.get("usage") or {}).get("prompt_tokens"), raw=answer)

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
                    return post_json(url, {"model": endpoint.served_model, **body}, left), endpoint
            except ServerReplyError as exc:
                if not exc.retry:
                    raise
                last = exc
            pause = self.backoff * 2 ** attempt
            if time.monotonic() + pause >= deadline:
                break
            time.sleep(pause)
        raise GenerationError(f"{path}: no answer after {attempt + 1} attempt(s) within {self.timeout:g} s: {last}")

    def _post_to(self, endpoint: Endpoint, url: str, body: dict) -> dict:
        with self._slots[endpoint]:
            return post_json(url, body, self.timeout)


def post_json(url: str, body: dict, timeout: float) -> dict:
    data = json.dumps(body).encode("utf-8")
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            payload = response.read()
    except urllib.error.HTTPError as exc:
        said = exc.read()[:500].decode("utf-8", "replace")
        raise ServerReplyError(f"{url}: HTTP {exc.code}: {said}", retry=exc.code in RETRY_STATUSES, status=exc.code) from None
    except (urllib.error.URLError, ConnectionError, socket.timeout, TimeoutError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ServerReplyError(f"{url}: {reason}", retry=True) from None
    try:
        answer = json.loads(payload)
    except ValueError:
        raise ServerReplyError(f"{url}: the answer is not JSON: {payload[:200]!r}", retry=False) from None
    if not isinstance(answer, dict):
        raise ServerReplyError(f"{url}: the answer is not a JSON object", retry=False)
    return answer


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
        raise GenerationError(f"{endpoint.url}: the answer has no choices: {json.dumps(answer)[:200]}")
    return choices[0]


def _sampling(sampling: dict) -> dict:
    # llama-server and llama-cpp-python read top_k, min_p and repeat_penalty beside the OpenAI fields.
    keys = ("max_tokens", "temperature", "top_p", "top_k", "min_p", "repeat_penalty")
    return {k: sampling[k] for k in keys if k in sampling}


def _finish(reason) -> str:
    # OpenAI's "stop" covers an end-of-generation token and a stop string alike; ours are told apart only in
    # process, so a server's "stop" is ours.
    return "length" if reason == "length" else "stop"


def chat_answer(url: str, body: dict, timeout: float) -> dict:
    """One /v1/chat/completions answer as the runtime returned it: content, reasoning_content, tool_calls (name
    and the arguments string), finish_reason, completion tokens; an HTTP or connection failure as `error`."""
    try:
        answer = post_json(url, {**body, "stream": False}, timeout)
    except ServerReplyError as exc:
        return {"error": str(exc), "status": exc.status}
    choices = answer.get("choices") or [{}]
    message = choices[0].get("message") or {}
    return {"status": 200, "content": message.get("content"), "reasoning": message.get("reasoning_content"),
            "tool_calls": [{"name": (c.get("function") or {}).get("name"),
                            "arguments": (c.get("function") or {}).get("arguments")}
                           for c in message.get("tool_calls") or []],
            "finish_reason": choices[0].get("finish_reason"),
            "completion_tokens": (answer.get("usage") or {}).get("completion_tokens")}


def chat_stream(url: str, body: dict, timeout: float) -> dict:
    """The same request streamed: server-sent deltas accumulated as a client does (content and reasoning
    concatenated, tool calls by index with their argument fragments joined), with the number of chunks."""
    data = json.dumps({**body, "stream": True}).encode("utf-8")
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    content, reasoning, calls, finish, chunks = [], [], {}, None, 0
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            for raw in response:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    break
                event = json.loads(payload)
                if "error" in event:
                    return {"error": f"{url}: error event in the stream: {json.dumps(event['error'])[:300]}"}
                chunks += 1
                for choice in event.get("choices") or []:
                    delta = choice.get("delta") or {}
                    content.append(delta.get("content") or "")
                    reasoning.append(delta.get("reasoning_content") or "")
                    for call in delta.get("tool_calls") or []:
                        slot = calls.setdefault(call.get("index", len(calls)), {"name": "", "arguments": ""})
                        function = call.get("function") or {}
                        slot["name"] += function.get("name") or ""
                        slot["arguments"] += function.get("arguments") or ""
                    finish = choice.get("finish_reason") or finish
    except urllib.error.HTTPError as exc:
        said = exc.read()[:500].decode("utf-8", "replace")
        return {"error": f"{url}: HTTP {exc.code}: {said}", "status": exc.code}
    except (urllib.error.URLError, ConnectionError, socket.timeout, TimeoutError, ValueError) as exc:
        return {"error": f"{url}: {getattr(exc, 'reason', exc)}"}
    return {"status": 200, "content": "".join(content) or None, "reasoning": "".join(reasoning) or None,
            "tool_calls": [calls[i] for i in sorted(calls)], "finish_reason": finish, "chunks": chunks}
