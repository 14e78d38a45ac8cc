"""A hostile HF_ENDPOINT: a local server that answers the Hub's HEAD as the Hub does, then on GET sends garbage,
a body announced at 1 GiB, a redirect loop, or a body without end. The fetch fails with the URL it asked, reads
a bounded number of bytes, and puts nothing in the cache."""

import hashlib
import sys
from pathlib import Path

import pytest

from tests.hub_server import COMMIT
from harness.pins.fetch import fetch_template
from harness.pins.sources import load_sources
from tests.pins.test_fetch import DATA, TEMPLATE, fetch, leftovers, model_entry, template_entry, write_root

sys.path.insert(0, str(Path(__file__).parents[1] / "backends"))
from hostile_server import ThreadedServer, _Handler, endless_chunks  # noqa: E402


class _WithHead(_Handler):
    do_HEAD = _Handler._any


class Impostor(ThreadedServer):
    """HEAD answered as the Hub answers it (the pinned file's ETag, commit and size); GET by `answer`."""

    def __init__(self, answer, pinned: bytes = DATA):
        super().__init__(_WithHead)
        self.answer, self.sent, self.paths = self._route(answer, pinned), 0, []

    @staticmethod
    def _route(answer, pinned):
        def route(h):
            if h.command != "HEAD":
                return answer(h)
            h.send_response(200)
            h.send_header("ETag", f'"{hashlib.sha256(pinned).hexdigest()}"')
            h.send_header("X-Repo-Commit", COMMIT)
            h.send_header("Content-Length", str(len(pinned)))
            h.send_header("Accept-Ranges", "bytes")
            h.send_header("Connection", "close")        # the GET comes on a connection of its own
            h.end_headers()
        return route


def garbage(h):
    body = b"<html>" + b"x" * (len(DATA) - 13) + b"</html>"
    h.send_response(200)
    h.send_header("Content-Length", str(len(body)))
    h.send_header("Connection", "close")
    h.end_headers()
    h.send(body)


def huge(h):
    """A body announced at 1 GiB, all of which the server sends if it is read."""
    h.send_response(200)
    h.send_header("Content-Length", str(1 << 30))
    h.send_header("Connection", "close")
    h.end_headers()
    for _ in range(1 << 14):
        h.send(b"\0" * (1 << 16))


def looping(h):
    h.send_response(302)
    h.send_header("Location", h.server.url + h.path)
    h.send_header("Content-Length", "0")
    h.send_header("Connection", "close")
    h.end_headers()


@pytest.mark.parametrize("answer", [garbage, huge, looping, endless_chunks()],
                         ids=["garbage", "huge", "redirect-loop", "endless"])
def test_a_hostile_endpoint_fails_the_fetch_with_its_url_and_stores_nothing(tmp_path, cache, answer):
    with Impostor(answer) as server:
        result = fetch(tmp_path, server, cache, model_entry())
        sent = server.sent
    assert result.status == "failed", result
    assert server.url in result.detail, result.detail
    assert leftovers(cache) == []
    assert {m for m, _ in server.paths} == {"HEAD", "GET"}
    # Read to the pinned size, not to the server's end (what it counts as sent includes the sockets' buffers).
    assert sent <= 64 << 20, sent


def test_a_template_from_an_endless_body_is_cut_off_at_its_pinned_size(tmp_path):
    spec = {"filename": "chat_template.jinja", "key": "chat_template", "name": None}
    sources = load_sources(write_root(tmp_path, templates=[template_entry("t", TEMPLATE.encode(), spec)]))
    with Impostor(endless_chunks(), pinned=TEMPLATE.encode()) as server:
        result = fetch_template(sources.template("t"), sources, endpoint=server.url, offline=False)
        sent = server.sent
    assert result.status == "failed" and server.url in result.detail, result.detail
    assert f"more than the pinned {len(TEMPLATE.encode())} bytes" in result.detail
    assert leftovers(tmp_path / "templates") == [] and sent <= 64 << 20
