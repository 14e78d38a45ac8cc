"""HTTP for the server backends, on the standard library's http.client, with the limits a hostile or broken
server needs: one overall deadline per request (connect, headers and body together: a per-read timeout lets an
endless chunked stream or a one-byte drip run forever), a cap on the bytes read, no redirects (urllib would turn
a POST into a GET to wherever a 302 points and return that server's answer as this one's), and JSON read
strictly (no NaN or Infinity, no nesting deep enough to exhaust the stack). Every failure is a ServerReplyError
that says which of these it was and whether asking again may help."""

from __future__ import annotations

import difflib
import http.client
import json
import socket
import threading
import urllib.parse

from harness.core.errors import ServerReplyError

RETRY_STATUSES = {408, 429, 500, 502, 503, 504}
# Of those, the statuses that say "not now" instead of answering the request: the server gave up reading it
# (408), is rate-limiting (429) or unavailable for a while, as while it loads its model (503), or a proxy in
# front of it could not reach it (502, 504); a later run asks again. Any other answer that arrived whole (an
# HTTP 500 given every time, a body that is not JSON) is the server's answer: a suite records it.
NOT_NOW = {408, 429, 502, 503, 504}
# A completion of a few thousand tokens, with its token ids, is well under a megabyte; far above that is a
# server gone wrong, and reading it whole would hold it all in memory.
MAX_BODY = 32 * 1024 * 1024
READ_SIZE = 64 * 1024
ERROR_QUOTE = 500


def check_url(url: str) -> str:
    """url if it is an http(s) URL with a host, else ServerReplyError saying what is wrong with it."""
    parts = urllib.parse.urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        hint = f" (did you mean {_likely_url(url)}?{' A URL holds no spaces.' if ' ' in url else ''})" \
            if isinstance(url, str) and "://" not in url else ""
        raise ServerReplyError(f"{url!r} is not an http:// or https:// URL with a host{hint}", retry=False)
    try:
        parts.port
    except ValueError as exc:
        raise ServerReplyError(f"{url!r}: {exc}", retry=False) from None
    return url


def _likely_url(text: str) -> str:
    """The URL a mistyped one most likely meant: a scheme close to http(s) written with one slash or none
    ("htp:/host" -> "http://host"), else the text as a host, after http:// ("localhost:8080")."""
    scheme, colon, rest = text.partition(":")
    if colon and not rest.lstrip("/").split("/")[0].isdigit():
        close = difflib.get_close_matches(scheme.lower(), ["http", "https"], n=1, cutoff=0.6)
        if close:
            return f"{close[0]}://{rest.lstrip('/')}"
    return f"http://{text}"


class Exchange:
    """One request and its answer under an overall deadline: a timer shuts the socket down when it passes, so a
    read blocked on a server that dribbles bytes returns at once instead of when the server stops."""

    def __init__(self, url: str, body: dict | None, timeout: float, max_body: int = MAX_BODY):
        check_url(url)
        self.url, self.timeout, self.max_body = url, timeout, max_body
        parts = urllib.parse.urlsplit(url)
        cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        self.conn = cls(parts.hostname, parts.port, timeout=max(timeout, 0.001))
        self.expired = False
        self.received = 0
        self._timer = threading.Timer(max(timeout, 0.0), self._expire)
        self._timer.daemon = True
        self._timer.start()
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json"} if data is not None else {}
        try:
            self.conn.request("POST" if data is not None else "GET", path, body=data, headers=headers)
            if self.expired:        # the timer fired while connecting, before there was a socket to shut
                raise TimeoutError()
            self.response = self.conn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            raise self._failed(exc) from None

    def _expire(self) -> None:
        self.expired = True
        sock = self.conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _failed(self, exc) -> ServerReplyError:
        if self.expired or isinstance(exc, (socket.timeout, TimeoutError)):
            return ServerReplyError(f"{self.url}: no complete answer within {self.timeout:.3g} s (the deadline of "
                                    f"the whole request; {self.received} bytes of the answer read)", retry=True,
                                    expired=True)
        if isinstance(exc, http.client.IncompleteRead):
            return ServerReplyError(f"{self.url}: the answer was cut short ({exc!r})", retry=True)
        return ServerReplyError(f"{self.url}: {exc.__class__.__name__}: {exc}", retry=True)

    def close(self) -> None:
        self._timer.cancel()
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def chunks(self, limit: int | None = None):
        """The body, as it arrives, until it ends, the cap is passed, or the deadline."""
        limit = self.max_body if limit is None else limit
        declared = self.response.length
        if declared is not None and declared > limit:
            raise ServerReplyError(f"{self.url}: the answer announces {declared} bytes, over the {limit}-byte cap",
                                   retry=False)
        while True:
            try:
                chunk = self.response.read1(READ_SIZE)
            except (OSError, http.client.HTTPException) as exc:
                raise self._failed(exc) from None
            if self.expired:
                raise self._failed(TimeoutError())
            if not chunk:
                break
            self.received += len(chunk)
            if self.received > limit:
                raise ServerReplyError(f"{self.url}: the answer is over the {limit}-byte cap (read so far: "
                                       f"{self.received})", retry=False)
            yield chunk
        if declared is not None and self.received < declared:
            raise ServerReplyError(f"{self.url}: the answer ended after {self.received} of the {declared} bytes its "
                                   "Content-Length announced", retry=True)

    def body(self) -> bytes:
        return b"".join(self.chunks())

    def lines(self):
        """The body line by line (server-sent events), under the same deadline and cap."""
        pending = []        # the pieces of a line not yet ended: joined once, not re-split per chunk
        for chunk in self.chunks():
            *complete, rest = chunk.split(b"\n")
            if complete:
                yield b"".join(pending) + complete[0]
                yield from complete[1:]
                pending = []
            pending.append(rest)
        tail = b"".join(pending)
        if tail:
            yield tail

    def check_status(self) -> None:
        """ServerReplyError for anything but a 2xx: the server's words for an error, the target for a redirect."""
        status = self.response.status
        if 200 <= status < 300:
            return
        if 300 <= status < 400:
            where = self.response.getheader("Location") or "nowhere"
            raise ServerReplyError(f"{self.url}: HTTP {status} redirect to {where}: redirects are not followed "
                                   "(give the URL that answers)", retry=False, status=status)
        try:
            said = b"".join(self.chunks(limit=1 << 20))[:ERROR_QUOTE].decode("utf-8", "replace")
        except ServerReplyError as exc:
            said = f"(its body unread: {exc})"
        raise ServerReplyError(f"{self.url}: HTTP {status}: {said}", retry=status in RETRY_STATUSES, status=status)


def error_words(body: str) -> str | None:
    """The server's own message in an error body check_status quoted ("URL: HTTP 400: BODY"): JSON whose `error`
    is an object with a message (OpenAI's shape, vLLM's, llama-server's) or detail, or is a string, or whose top
    level has a message or detail (FastAPI's); None where the body says it in no such field."""
    try:
        parsed = json.loads(body)
    except ValueError:
        return None
    inner = parsed.get("error", parsed) if isinstance(parsed, dict) else None
    said = inner.get("message") or inner.get("detail") if isinstance(inner, dict) else inner
    return said if isinstance(said, str) and said else None


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def loads(payload: bytes, url: str, status: int | None = None):
    """Strict JSON: NaN and Infinity (Python's json reads them by default) and nesting deeper than the stack are
    refused like any other text that is not JSON. `status`: the HTTP status the payload came with, kept on the
    error: an answer that arrived whole but is not JSON (HTML, bad UTF-8, an empty body) is the server's answer,
    unlike a request that got none (status None)."""
    try:
        return json.loads(payload, parse_constant=_no_constant)
    except RecursionError:
        raise ServerReplyError(f"{url}: the answer is nested too deep to read ({len(payload)} bytes)",
                               retry=False, status=status) from None
    except ValueError as exc:
        said = "the answer is empty" if not payload.strip() else f"the answer is not JSON ({exc}): {payload[:200]!r}"
        raise ServerReplyError(f"{url}: {said}", retry=False, status=status) from None


def request_json(url: str, body: dict | None, timeout: float, max_body: int = MAX_BODY) -> dict:
    """POST body (GET when None) and the answer's JSON object."""
    with Exchange(url, body, timeout, max_body) as exchange:
        exchange.check_status()
        payload = exchange.body()
        status = exchange.response.status
    answer = loads(payload, url, status)
    if not isinstance(answer, dict):
        raise ServerReplyError(f"{url}: the answer is a JSON {type(answer).__name__}, not an object", retry=False,
                               status=status)
    return answer


def probe(url: str, timeout: float) -> str | None:
    """Why the server at `url` cannot be used (nothing listens, it is not HTTP, it redirects), or None when it
    answers HTTP at all: any status but a redirect will do, a server need not list its models."""
    try:
        with Exchange(url, None, timeout, max_body=1 << 20) as exchange:
            if 300 <= exchange.response.status < 400:
                exchange.check_status()
    except ServerReplyError as exc:
        return str(exc)
    return None


def describe(value) -> str:
    """A JSON value for a message: its type and the start of its text."""
    return f"{type(value).__name__} {shown(value, 60)}"


def shown(value, width: int = 200) -> str:
    # ASCII: a lone surrogate a server sent must not make the message itself unprintable.
    try:
        return json.dumps(value)[:width]
    except (ValueError, RecursionError):
        return f"{type(value).__name__} (not printable)"
