"""A real HTTP server on 127.0.0.1 that answers like the Hub's file endpoints, for download tests.

`/{org}/{name}/resolve/{revision}/{filename}` answers HEAD and GET the way huggingface_hub expects (read from
huggingface_hub.file_download.get_hf_file_metadata and http_get): an ETag (the file's sha256, quoted), the
commit in X-Repo-Commit, Content-Length, Accept-Ranges and 206 answers to `Range: bytes=N-`; missing things
get the status and X-Error-Code the Hub sends (401 RepoNotFound, as for an anonymous request; 404
RevisionNotFound; 404 EntryNotFound).

Per file, a fault can be injected: "cut" sends the headers and half the body, then closes the connection;
"short" announces the registered size on HEAD but sends a shorter body (with a matching Content-Length);
"head-size" announces a different size on HEAD only; "trickle" announces the whole body and then sends it one
byte every `trickle_interval` seconds (each read succeeds long before any read timeout, so only an overall
deadline ends it); "trickle-headers" does the same with the response's headers (a padding header sent a byte at a
time) on HEAD and GET, "trickle-get-headers" on the GET alone. With `trickle_unknown`, a path that is no Hub file
(a package index's /simple/NAME/, for `pip download`) gets its headers trickled the same way. A trickled
header ends after `trickle_header_bytes` bytes, and the connection with it: a client without a deadline gets a
cut connection late, not never.
"""

from __future__ import annotations

import hashlib
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@dataclass
class HubFile:
    data: bytes
    fault: str | None = None


@dataclass
class FakeHub:
    files: dict = field(default_factory=dict)       # (repo, filename) -> HubFile
    requests: list = field(default_factory=list)    # (method, path) in arrival order
    commit: str = COMMIT
    url: str = ""
    trickle_interval: float = 2.0
    trickle_header_bytes: int = 600
    trickle_unknown: bool = False

    def add(self, repo: str, filename: str, data: bytes, fault: str | None = None) -> None:
        self.files[(repo, filename)] = HubFile(data, fault)


def _handler(hub: FakeHub):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):      # keep pytest output clean
            pass

        def _not_found(self, code: str):
            self.send_response(401 if code == "RepoNotFound" else 404)
            self.send_header("X-Error-Code", code)
            self.send_header("X-Error-Message", f"{code} (fake hub)")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _trickle_header(self) -> None:
            """A padding header sent a byte at a time, then the connection closed before the headers end: a
            client that waited it out learns nothing but a cut connection."""
            line = b"X-Padding: " + b"." * hub.trickle_header_bytes + b"\r\n"
            try:
                self.flush_headers()        # the status line goes first
            except OSError:
                return
            _trickle(self.wfile, line, hub.trickle_interval)
            self.close_connection = True

        def _lookup(self):
            parts = unquote(self.path.split("?", 1)[0]).lstrip("/").split("/")
            if hub.trickle_unknown and (len(parts) < 5 or parts[2] != "resolve"):
                self.send_response(404)
                self._trickle_header()
                return None
            if len(parts) < 5 or parts[2] != "resolve":
                return self._not_found("RepoNotFound")
            repo, revision, filename = "/".join(parts[:2]), parts[3], "/".join(parts[4:])
            if not any(r == repo for r, _ in hub.files):
                return self._not_found("RepoNotFound")
            if revision not in ("main", hub.commit):
                return self._not_found("RevisionNotFound")
            entry = hub.files.get((repo, filename))
            if entry is None:
                return self._not_found("EntryNotFound")
            return entry

        def _headers(self, status: int, entry: HubFile, length: int, extra=()) -> bool:
            self.send_response(status)
            slow = ("trickle-headers",) if self.command == "HEAD" else ("trickle-headers", "trickle-get-headers")
            if entry.fault in slow:
                self._trickle_header()
                return False
            self.send_header("ETag", f'"{hashlib.sha256(entry.data).hexdigest()}"')
            self.send_header("X-Repo-Commit", hub.commit)
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Content-Length", str(length))
            for name, value in extra:
                self.send_header(name, value)
            self.end_headers()
            return True

        def do_HEAD(self):
            hub.requests.append(("HEAD", self.path))
            entry = self._lookup()
            if entry is None:
                return
            size = len(entry.data) + (7 if entry.fault == "head-size" else 0)
            self._headers(200, entry, size)

        def do_GET(self):
            hub.requests.append(("GET", self.path))
            entry = self._lookup()
            if entry is None:
                return
            body = entry.data[: len(entry.data) // 2] if entry.fault == "short" else entry.data
            start = 0
            rng = self.headers.get("Range", "")
            if rng.startswith("bytes=") and rng.endswith("-"):
                start = int(rng[len("bytes="):-1])
            chunk = body[start:]
            if start:
                sent = self._headers(206, entry, len(chunk),
                                     [("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")])
            else:
                sent = self._headers(200, entry, len(chunk))
            if not sent:
                return
            if entry.fault == "trickle":
                _trickle(self.wfile, chunk, hub.trickle_interval)
                self.close_connection = True
                return
            if entry.fault == "cut":
                self.wfile.write(chunk[: len(chunk) // 2])
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
                self.close_connection = True
                return
            self.wfile.write(chunk)

    return Handler


class HubServer:
    """Context manager: `with HubServer() as hub: hub.url ...`."""

    def __enter__(self) -> FakeHub:
        self.hub = FakeHub()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.hub))
        self.httpd.daemon_threads = True
        self.hub.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()
        return self.hub

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def _trickle(out, data: bytes, interval: float) -> None:
    """Write `data` a byte at a time, `interval` seconds apart, until the client gives up (what the test wants)."""
    try:
        for i in range(len(data)):
            out.write(data[i:i + 1])
            out.flush()
            time.sleep(interval)
    except OSError:
        pass
