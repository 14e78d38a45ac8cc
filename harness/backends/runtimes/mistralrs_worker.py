"""The mistral.rs worker: one GGUF loaded with mistral.rs' Python API (mistralrs.Runner), answering OpenAI chat
completions on 127.0.0.1, non-streamed and streamed (server-sent events), one request at a time.

Runs under the mistral.rs environment's python (scripts/setup_mistralrs.sh builds it; the runtime module
harness.backends.runtimes.mistral_rs starts this file by path), so it imports nothing from harness. mistral.rs'
own HTTP server is a separate binary not on the package registry; this worker is the smallest server over the
Python API: each request's fields go to a ChatCompletionRequest as named below, and the API's answer objects are
written back field by field, nothing added, nothing parsed again.

  messages            -> messages, as sent (a call's arguments as the JSON string the wire carries)
  tools               -> tool_schemas: one JSON string per tool
  tool_choice         -> "none": ToolChoice.NoTools; "auto": ToolChoice.Auto. The API's ToolChoice has no other
                         value: "required" and a named function are sent as Auto (the runtime module declares it)
  chat_template_kwargs.enable_thinking -> enable_thinking; other keys have no field and are dropped
  max_tokens, temperature -> the same fields
  logprobs (true)     -> logprobs: each choice's logprobs.content written back as OpenAI's (token, logprob, the
                         token's bytes as a list of ints), so a client can join the bytes into the generated text
  seed, parallel_tool_calls, model -> no field (a seed cannot be set on CPU: Runner(seed=) raises there)

It computes as mistral.rs does by default but for what its environment says: the runtime module starts it with
MistralRs.process_env (its KV cache in f32, and why).

Usage: python mistralrs_worker.py --model FILE --alias NAME --port N [--threads N]
       python mistralrs_worker.py --hello          (prints {"mistralrs": version, "python": version})
A model mistral.rs refuses to load exits 3 after one line on stderr: "mistralrs refused the model: Type: words".
A request it refuses is answered HTTP 500 (400 for a body that is not a chat request) with its words as
{"error": {"message"}}; an error in the middle of a stream is one `data: {"error": ...}` event.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from importlib import metadata

STARTED = int(time.time())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--hello", action="store_true")
    parser.add_argument("--model")
    parser.add_argument("--alias")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int)
    parser.add_argument("--threads", type=int)
    args = parser.parse_args(argv)
    if args.threads:       # candle's CPU kernels run on rayon's pool, sized from this before the import
        os.environ.setdefault("RAYON_NUM_THREADS", str(args.threads))
    os.environ.setdefault("NO_COLOR", "1")
    os.environ.setdefault("RUST_LOG", "warn")     # its INFO lines would bury the words of a refusal in the log
    if args.hello:
        import mistralrs  # noqa: F401  (the import itself is checked)
        print(json.dumps({"mistralrs": metadata.version("mistralrs"), "python": sys.version.split()[0]}))
        return 0
    import mistralrs
    folder, name = os.path.split(os.path.abspath(args.model))
    try:
        runner = mistralrs.Runner(which=mistralrs.Which.GGUF(quantized_model_id=folder, quantized_filename=name))
    except BaseException as exc:  # a Rust panic arrives as a BaseException subclass
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
        print(f"mistralrs refused the model: {_error(exc)}", file=sys.stderr, flush=True)
        return 3
    Handler.runner, Handler.alias, Handler.api = runner, args.alias or os.path.splitext(name)[0], mistralrs
    Handler.version = metadata.version("mistralrs")
    server = HTTPServer((args.host, args.port), Handler)
    print(f"mistralrs {Handler.version} serving {name} as {Handler.alias} on {args.host}:{args.port}",
          file=sys.stderr, flush=True)
    server.serve_forever()
    return 0


def _error(exc: BaseException) -> str:
    words = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {words[0] if words else ''}".rstrip(": ")


def chat_request(api, body: dict):
    """The ChatCompletionRequest for an OpenAI chat body (see the module's docstring for each field)."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        raise BadRequest("the body is not a chat request: no messages list")
    fields = {"messages": body["messages"], "model": "default", "stream": bool(body.get("stream"))}
    if body.get("tools"):
        fields["tool_schemas"] = [json.dumps(tool, ensure_ascii=False) for tool in body["tools"]]
    choice = body.get("tool_choice")
    if choice is not None:
        fields["tool_choice"] = api.ToolChoice.NoTools if choice == "none" else api.ToolChoice.Auto
    kwargs = body.get("chat_template_kwargs") or {}
    if isinstance(kwargs, dict) and isinstance(kwargs.get("enable_thinking"), bool):
        fields["enable_thinking"] = kwargs["enable_thinking"]
    for key in ("max_tokens", "temperature"):
        if body.get(key) is not None:
            fields[key] = body[key]
    if body.get("logprobs") is True:
        fields["logprobs"] = True
    return api.ChatCompletionRequest(**fields), fields["stream"]


class BadRequest(ValueError):
    pass


def _calls(calls) -> list | None:
    if calls is None:
        return None
    return [{"index": c.index, "id": c.id, "type": "function",
             "function": {"name": c.function.name, "arguments": c.function.arguments}} for c in calls]


def _usage(usage) -> dict | None:
    if usage is None:
        return None
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens}


def _message(message) -> dict:
    out = {"role": message.role, "content": message.content}
    calls = _calls(message.tool_calls)
    if calls is not None:
        out["tool_calls"] = calls
    if getattr(message, "reasoning_content", None) is not None:
        out["reasoning_content"] = message.reasoning_content
    return out


def _logprobs(logprobs) -> dict | None:
    entries = getattr(logprobs, "content", None)
    if entries is None:
        return None
    return {"content": [{"token": e.token, "logprob": e.logprob,
                         "bytes": list(e.bytes) if e.bytes is not None else None, "top_logprobs": []}
                        for e in entries]}


def answer_json(answer, alias: str) -> dict:
    choices = []
    for c in answer.choices:
        choice = {"index": c.index, "message": _message(c.message), "finish_reason": c.finish_reason}
        logprobs = _logprobs(getattr(c, "logprobs", None))
        if logprobs is not None:
            choice["logprobs"] = logprobs
        choices.append(choice)
    return {"id": answer.id, "object": "chat.completion", "created": answer.created, "model": alias,
            "system_fingerprint": answer.system_fingerprint, "choices": choices, "usage": _usage(answer.usage)}


def chunk_json(chunk, alias: str) -> dict:
    choices = []
    for c in chunk.choices:
        delta = {"role": c.delta.role, "content": c.delta.content}
        calls = _calls(c.delta.tool_calls)
        if calls is not None:
            delta["tool_calls"] = calls
        if getattr(c.delta, "reasoning_content", None) is not None:
            delta["reasoning_content"] = c.delta.reasoning_content
        choices.append({"index": c.index, "delta": delta, "finish_reason": c.finish_reason})
    out = {"id": chunk.id, "object": "chat.completion.chunk", "created": chunk.created, "model": alias,
           "system_fingerprint": chunk.system_fingerprint, "choices": choices}
    usage = _usage(getattr(chunk, "usage", None))
    if usage is not None:
        out["usage"] = usage
    return out


class Handler(BaseHTTPRequestHandler):
    runner = alias = api = version = None
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args) -> None:
        sys.stderr.write(f"{self.command} {self.path} -> {args[1] if len(args) > 1 else ''}\n")

    def do_GET(self) -> None:
        if self.path in ("/health", "/v1/models"):
            self._json(200, {"object": "list", "data": [{"id": self.alias, "object": "model", "created": STARTED,
                                                         "owned_by": f"mistralrs-{self.version}"}]})
        else:
            self._json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        self.streaming = False
        try:
            self._post()
        except BaseException as exc:  # whatever the API raises (a Rust panic too) is answered with its words
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            error = {"error": {"message": _error(exc), "type": "server_error"}}
            if self.streaming:
                self._event(error)
            else:
                self._json(500, error)

    def _post(self) -> None:
        if self.path != "/v1/chat/completions":
            self._json(404, {"error": {"message": f"no route {self.path}"}})
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
            request, stream = chat_request(self.api, json.loads(self.rfile.read(length) or b"null"))
        except (ValueError, TypeError) as exc:
            self._json(400, {"error": {"message": _error(exc), "type": "invalid_request_error"}})
            return
        if not stream:
            self._json(200, answer_json(self.runner.send_chat_completion_request(request), self.alias))
            return
        chunks = iter(self.runner.send_chat_completion_request(request))
        chunk = next(chunks, None)        # a request refused before its first chunk is an HTTP error
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection, self.streaming = True, True
        while chunk is not None:
            self._event(chunk_json(chunk, self.alias))
            chunk = next(chunks, None)
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def _event(self, data: dict) -> None:
        self.wfile.write(b"data: " + json.dumps(data, ensure_ascii=False).encode("utf-8") + b"\n\n")
        self.wfile.flush()

    def _json(self, status: int, data: dict) -> None:
        blob = json.dumps(data, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(blob)))
        self.end_headers()
        self.wfile.write(blob)
        self.wfile.flush()


if __name__ == "__main__":
    sys.exit(main())
