"""A real HTTP server on 127.0.0.1, in a thread, that answers every request with whatever bytes a test scripts:
bodies of the wrong shape, a body shorter than its Content-Length, an endless chunked stream, a drip, a
redirect, a complete answer of any bytes, a hang-up. It counts what it sent, so a test bounds bytes rather than
time."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ThreadedServer(ThreadingHTTPServer):
    """A server on a free 127.0.0.1 port, serving from a thread inside a with block."""
    daemon_threads = True

    def __init__(self, handler):
        super().__init__(("127.0.0.1", 0), handler)
        self.lock = threading.Lock()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}"

    def __enter__(self):
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self.shutdown()
        self.server_close()


class HostileServer(ThreadedServer):
    def __init__(self, answer):
        """answer(handler) writes the whole response; handler.server.sent counts body bytes written."""
        super().__init__(_Handler)
        self.answer, self.sent, self.paths = answer, 0, []


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _any(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.body = json.loads(self.rfile.read(length)) if length else None
        with self.server.lock:
            self.server.paths.append((self.command, self.path))
        try:
            self.server.answer(self)
        except (BrokenPipeError, ConnectionResetError):
            pass                                    # the client hung up: what it was told to do
        self.close_connection = True

    do_GET = do_POST = _any

    def send(self, data: bytes):
        self.wfile.write(data)
        self.wfile.flush()
        with self.server.lock:
            self.server.sent += len(data)


def raw_json(payload, status: int = 200, length: int | None = None, plain: bool = True):
    """An answer of these exact bytes (a str is encoded), with a Content-Length (another one if given); a plain
    server answers 404 to llama-server's own /completion."""
    data = payload.encode() if isinstance(payload, str) else payload

    def answer(h):
        if plain and h.path.endswith("/completion"):          # not llama-server: the backend falls back to /v1/completions
            return _not_found(h)
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data) if length is None else length))
        h.end_headers()
        h.send(data)
    return answer


def completion(text="hi"):
    return raw_json(json.dumps({"choices": [{"text": text, "finish_reason": "stop"}],
                                "usage": {"prompt_tokens": 3, "completion_tokens": 1}}))


def endless_chunks(pause: float = 0.0, chunk: bytes = b" " * 4096):
    """A chunked body that never ends (a JSON document's leading whitespace, forever)."""
    def answer(h):
        if h.path.endswith("/completion"):
            return _not_found(h)
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        while True:
            h.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            if pause:
                time.sleep(pause)
    return answer


def drip(pause: float = 0.05):
    """One byte at a time, with the Content-Length of a large answer."""
    def answer(h):
        if h.path.endswith("/completion"):
            return _not_found(h)
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(1 << 20))
        h.end_headers()
        while True:
            h.send(b" ")
            time.sleep(pause)
    return answer


def whole(data: bytes, status: int = 200, content_type: str = "text/html"):
    """A complete answer of these exact bytes with their Content-Length, whatever they hold (HTML, bad UTF-8,
    nothing at all, server-sent events that are not JSON)."""
    def answer(h):
        h.send_response(status)
        h.send_header("Content-Type", content_type)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.send(data)
    return answer


def hang_up(h):
    """No answer: the connection closes before a status line, as under a server killed mid-request."""


def redirect(to: str, status: int = 302):
    def answer(h):
        h.send_response(status)
        h.send_header("Location", to + h.path)
        h.send_header("Content-Length", "0")
        h.end_headers()
    return answer


def _not_found(h):
    h.send_response(404)
    h.send_header("Content-Length", "0")
    h.end_headers()
