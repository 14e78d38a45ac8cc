"""HARNESS_DOWNLOAD_DEADLINE bounds a whole fetch, on every path a pinned file comes by: a model from the Hub (its
HEAD and its GET), a template from a tokenizer_config.json or a .jinja file on the Hub, and an archive from a
package index. A server that trickles its response headers, a byte at a time and each byte long before any read
timeout, is cut off at the deadline with the error that says so.

The server trickles for far longer than the deadline (300 header bytes, a tenth of a second apart), then cuts the
connection: a fetch without the deadline fails otherwise, late. No assertion is made about how long anything
took."""

import json
import os

import pytest

from harness.core import constants
from harness.core.errors import DownloadError
from harness.pins.archives import archive_tree
from harness.pins.fetch import fetch_template
from harness.pins.sources import Sources, load_sources
from harness.pins.entries import ArchivePin
from tests.pins.test_fetch import DATA, FILE, REPO, TEMPLATE, fetch, leftovers, model_entry, template_entry, write_root

DEADLINE = 1.0
SAID = "deadline of 1 s"


def _model(tmp_path, hub, fault):
    hub.add(REPO, FILE, DATA, fault=fault)
    result = fetch(tmp_path, hub, tmp_path / "cache", model_entry())
    assert result.status == "failed"
    assert leftovers(tmp_path / "cache") == []
    return result.detail


def _model_head(tmp_path, hub):
    return _model(tmp_path, hub, "trickle-headers")


def _model_get(tmp_path, hub):
    return _model(tmp_path, hub, "trickle-get-headers")


def _template(tmp_path, hub, filename, data, spec):
    hub.add(REPO, filename, data, fault="trickle-headers")
    sources = load_sources(write_root(tmp_path, templates=[template_entry("t", TEMPLATE.encode(), spec)]))
    result = fetch_template(sources.template("t"), sources, endpoint=hub.url, offline=False)
    assert result.status == "failed"
    assert leftovers(tmp_path / "templates") == []
    return result.detail


def _tokenizer_config(tmp_path, hub):
    spec = {"filename": "tokenizer_config.json", "key": "chat_template", "name": None}
    return _template(tmp_path, hub, "tokenizer_config.json", json.dumps({"chat_template": TEMPLATE}).encode(), spec)


def _jinja_file(tmp_path, hub):
    spec = {"filename": "chat_template.jinja", "key": "chat_template", "name": None}
    return _template(tmp_path, hub, "chat_template.jinja", TEMPLATE.encode(), spec)


def _archive(tmp_path, hub, monkeypatch):
    # `pip download` asks the package index the environment names: here the trickling server.
    hub.trickle_unknown = True
    monkeypatch.setenv("PIP_INDEX_URL", f"{hub.url}/simple/")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    pin = ArchivePin(id="pkg-1.0", package="pkg", version="1.0", filename="pkg-1.0.tar.gz", size=1000,
                     sha256="0" * 64, extract="pkg-1.0/", origin="test", note=None)
    sources = Sources(path=tmp_path / "sources.json", templates={}, models={}, archives={pin.id: pin})
    with pytest.raises(DownloadError) as raised:
        archive_tree(pin.id, sources=sources, cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache" / "archives" / pin.id).exists()
    return str(raised.value)


@pytest.mark.parametrize("entry, said", [
    (_model_head, SAID), (_model_get, SAID), (_tokenizer_config, SAID), (_jinja_file, SAID),
    (_archive, "did not finish within the download deadline"),
], ids=["model-head", "model-get", "tokenizer-config", "jinja-file", "archive"])
def test_a_server_trickling_its_headers_is_cut_off_at_the_deadline(tmp_path, hub, monkeypatch, entry, said):
    monkeypatch.setattr(constants, "HARNESS_DOWNLOAD_DEADLINE", DEADLINE)
    hub.trickle_interval = 0.1          # ten header bytes a second: no read timeout ever fires
    hub.trickle_header_bytes = 300
    args = (tmp_path, hub, monkeypatch) if entry is _archive else (tmp_path, hub)
    detail = entry(*args)
    assert said in detail and "set HARNESS_DOWNLOAD_DEADLINE to allow longer" in detail, detail
