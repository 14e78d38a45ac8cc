"""The Hub's file endpoints over HTTP, within a deadline: the HEAD that checks a file before it is fetched, the
GET that streams it into a store (harness.pins.hub_download.store_verified), and small files (a
tokenizer_config.json) fetched into memory.

The deadline covers the whole exchange: connecting, the HEAD, the GET's headers and body, redirects. A read
timeout alone is per read, so a server sending a header line or a byte now and then would hold a fetch for
ever; a timer shuts the fetch's connections down when its deadline passes (_Watchdog).
"""

from __future__ import annotations

import socket
import threading
import time
from urllib.parse import urljoin, urlsplit

from harness.core.errors import DownloadError, HarnessError
from harness.pins.hub_download import HashingWriter, download_deadline, one_line

HUB_TIMEOUT = 30.0
_MAX_REDIRECTS = 10


def hub_url(repo: str, filename: str, revision: str | None, endpoint: str) -> str:
    from huggingface_hub import hf_hub_url
    return hf_hub_url(repo, filename, revision=revision or "main", endpoint=endpoint)


class _Watchdog:
    """The deadline of one fetch over HTTP. A read timeout is per read, so a server sending a header line or a
    byte now and then holds a fetch for ever; this timer shuts down every connection the fetch opened when the
    deadline passes, and the read blocked on it returns at once. Connections are learnt from the HTTP library's
    `trace` extension as each is opened (a fetch opens its own: see _client)."""

    def __init__(self, seconds: float | None):
        self.expired = False
        self.ends = None if seconds is None else time.monotonic() + seconds
        self._sockets: list = []
        self._lock = threading.Lock()
        self._timer = None
        if seconds is not None:
            self._timer = threading.Timer(max(seconds, 0.0), self._expire)
            self._timer.daemon = True
            self._timer.start()

    def trace(self, event: str, info: dict) -> None:
        if event != "connection.connect_tcp.complete":
            return
        sock = info["return_value"].get_extra_info("socket")
        with self._lock:
            self._sockets.append(sock)
            expired = self.expired
        if expired:                     # the deadline passed while it connected
            _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            _shut(sock)

    def passed(self) -> bool:
        """Whether the deadline has passed (a connection attempt it cut short never reached the timer)."""
        return self.expired or (self.ends is not None and time.monotonic() >= self.ends)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def _shut(sock) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except (OSError, AttributeError):
        pass                            # already closed


def _client(seconds: float | None):
    """An HTTP client of the fetch's own, in the library huggingface_hub speaks: no connection kept from one fetch
    to the next, so each one a fetch uses was opened under its watchdog. A connection attempt waits no longer
    than the deadline leaves (the watchdog learns of a connection only once it is open)."""
    try:
        import httpx2 as httpx
    except ImportError:
        import httpx
    connect = HUB_TIMEOUT if seconds is None else max(min(HUB_TIMEOUT, seconds), 0.001)
    return httpx.Client(timeout=httpx.Timeout(HUB_TIMEOUT, connect=connect),
                        limits=httpx.Limits(max_keepalive_connections=0))


def stream_hub_file(writer, *, repo: str, filename: str, revision: str | None, endpoint: str,
                    expected_size: int | None = None) -> None:
    """Stream one file from the Hub's resolve endpoint into writer, within the writer's deadline.

    The HEAD first turns a missing repo, revision or file into a clear error, and catches a size that disagrees
    with the pin, before a multi-GB GET starts. The GET does not retry or resume: a cut connection fails the
    whole download, and the caller's store discards it.
    """
    from huggingface_hub.utils import build_hf_headers

    url = hub_url(repo, filename, revision, endpoint)
    remaining = getattr(writer, "remaining", None)
    seconds = remaining() if remaining is not None else None
    watchdog = _Watchdog(seconds)
    headers = build_hf_headers()
    headers["Accept-Encoding"] = "identity"     # the pin is over the file's bytes, not a compressed body
    try:
        with _client(seconds) as client:
            try:
                size, commit = _head(client, url, headers, watchdog)
            except HarnessError:
                raise
            except Exception as exc:
                if watchdog.passed():
                    raise writer.deadline_error() from None
                raise DownloadError(f"{url}: {one_line(exc)}") from exc
            if expected_size is not None and size is not None and size != expected_size:
                raise DownloadError(f"{url}: the server announces {size} bytes, the pin says {expected_size}")
            if revision and commit and commit != revision:
                raise DownloadError(f"{url}: the server resolved revision {revision} to commit {commit}")
            try:
                _stream_body(client, writer, url, headers, expected_size, watchdog)
            except HarnessError:
                raise
            except Exception as exc:    # a server that hangs up, loops its redirects, or speaks no HTTP
                if watchdog.passed():
                    raise writer.deadline_error() from None
                raise DownloadError(f"{url}: {one_line(exc)}; nothing was stored") from exc
    finally:
        watchdog.cancel()


def _head(client, url: str, headers: dict, watchdog: _Watchdog) -> tuple:
    """(size, commit) the Hub announces for a file, as huggingface_hub's get_hf_file_metadata reads them: a
    redirect on the same host (a renamed repo) is followed; one to another host (a CDN) is not, since the file's
    size and commit are on the redirect itself. Errors are huggingface_hub's own (RepositoryNotFound, ...)."""
    from huggingface_hub.utils import hf_raise_for_status

    for _ in range(_MAX_REDIRECTS):
        resp = client.head(url, headers=headers, follow_redirects=False, extensions={"trace": watchdog.trace})
        hf_raise_for_status(resp)
        location = resp.headers.get("Location") if resp.is_redirect else None
        target = urljoin(url, location) if location else None
        if target is None or urlsplit(target)[:2] != urlsplit(url)[:2]:
            size = resp.headers.get("X-Linked-Size") or (None if resp.is_redirect else resp.headers.get("Content-Length"))
            return (int(size) if size is not None and size.isdigit() else None), resp.headers.get("X-Repo-Commit")
        url = target
    raise DownloadError(f"{url}: more than {_MAX_REDIRECTS} redirects")


def _stream_body(client, writer, url: str, headers: dict, expected_size: int | None, watchdog: _Watchdog) -> None:
    """The GET of stream_hub_file. A body longer than the pinned size is cut off where it passes it (a server
    sending a gigabyte, or without end, for a small file), whatever its headers announced."""
    from huggingface_hub.utils import hf_raise_for_status

    with client.stream("GET", url, headers=headers, follow_redirects=True,
                       extensions={"trace": watchdog.trace}) as resp:
        hf_raise_for_status(resp)
        # Content-Length counts the body as sent; it only measures the file when the body is not encoded.
        encoded = resp.headers.get("Content-Encoding", "identity").lower() != "identity"
        announced = None if encoded else resp.headers.get("Content-Length")
        if announced is not None and expected_size is not None and announced.isdigit() \
                and int(announced) > expected_size:
            raise DownloadError(f"{url}: the body is announced at {announced} bytes, the pin says {expected_size}; "
                                "nothing was stored")
        received = 0
        # Unchunked: each network read reaches the writer, whose deadline then sees a trickle as it arrives.
        for chunk in resp.iter_bytes():
            if expected_size is not None and received + len(chunk) > expected_size:
                raise DownloadError(f"{url}: the server sent more than the pinned {expected_size} bytes; "
                                    "nothing was stored")
            writer.write(chunk)
            received += len(chunk)
        if announced is not None and received != int(announced):
            raise DownloadError(f"{url}: the connection ended after {received} of {announced} bytes")


class _Limited:
    """A file-like sink holding at most `limit` bytes in memory."""

    def __init__(self, limit: int, label: str):
        self.parts, self.size, self.limit, self.label = [], 0, limit, label

    def write(self, data: bytes) -> int:
        self.size += len(data)
        if self.size > self.limit:
            raise DownloadError(f"{self.label}: larger than {self.limit} bytes; not a config file")
        self.parts.append(data)
        return len(data)


def fetch_hub_bytes(*, repo: str, filename: str, revision: str | None, endpoint: str,
                    limit: int = 64 << 20) -> bytes:
    """A small Hub file (tokenizer_config.json) in memory, within the download deadline of a small file; the
    limit guards against a wrong pin."""
    label = f"{repo}/{filename}"
    buf = _Limited(limit, label)
    writer = HashingWriter(buf, deadline=download_deadline(0), label=label)
    try:
        stream_hub_file(writer, repo=repo, filename=filename, revision=revision, endpoint=endpoint)
    except HarnessError:
        raise
    except Exception as exc:
        raise DownloadError(f"{label}: {one_line(exc)}") from exc
    return b"".join(buf.parts)
