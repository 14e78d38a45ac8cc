"""Download faults that need time or a second process: a server trickling bytes (the overall deadline), and a
fetch killed with SIGKILL (its stale partial is cleaned by the next fetch, a live one never is)."""

import os
import subprocess
import sys
import threading
import time

import pytest

from harness.core import constants
from harness.pins.hub_download import DEADLINE_BASE, DEADLINE_MIN_RATE, download_deadline
from tests.pins.test_fetch import DATA, FILE, REPO, ROOT, fetch, leftovers, model_entry, run_cli, write_root


def test_a_trickling_server_is_cut_off_at_the_deadline(tmp_path, hub, cache, monkeypatch):
    monkeypatch.setattr(constants, "HARNESS_DOWNLOAD_DEADLINE", 1.0)
    hub.trickle_interval = 0.1       # ten reads a second: no read timeout ever fires
    hub.add(REPO, FILE, DATA, fault="trickle")
    started, done = time.monotonic(), []
    # In a thread, so that a fetch without a deadline fails this test instead of hanging it for a day.
    worker = threading.Thread(target=lambda: done.append(fetch(tmp_path, hub, cache, model_entry())), daemon=True)
    worker.start()
    worker.join(timeout=10)
    took = time.monotonic() - started
    assert done, "the download was still trickling in after 10 s"
    (result,) = done
    assert result.status == "failed"
    assert "deadline of 1 s" in result.detail and "nothing was stored" in result.detail, result.detail
    assert f"of {len(DATA)} bytes had arrived" in result.detail
    assert 1.0 <= took < 5.0, took
    assert not cache.exists()


def test_the_default_deadline_scales_with_the_pinned_size(monkeypatch):
    monkeypatch.setattr(constants, "HARNESS_DOWNLOAD_DEADLINE", None)
    assert download_deadline(0) == DEADLINE_BASE
    one_gb = download_deadline(10**9)
    assert one_gb == DEADLINE_BASE + 10**9 / DEADLINE_MIN_RATE and 3600 < one_gb < 2 * 3600
    assert download_deadline(None) > download_deadline(10**9)


@pytest.mark.parametrize("value", ["abc", "0", "-5", "nan", "inf", "1e99"])
def test_a_bad_deadline_in_the_environment_is_a_clear_error(tmp_path, hub, value):
    hub.add(REPO, FILE, DATA)
    root = tmp_path / "root"
    write_root(root, [model_entry()])
    env = {"HARNESS_ROOT": str(root), "HF_ENDPOINT": hub.url, "HARNESS_CACHE": str(tmp_path / "c"),
           "HARNESS_DOWNLOAD_DEADLINE": value}
    done = run_cli(["fetch", "--models", "tiny"], env, tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"HARNESS_DOWNLOAD_DEADLINE={value!r}" in done.stderr, done.stderr
    assert [m for m, _ in hub.requests] == []


def partials(folder):
    return sorted(p.name for p in folder.glob(".*.partial")) if folder.exists() else []


def test_a_killed_fetch_leaves_a_partial_the_next_fetch_cleans(tmp_path, hub, monkeypatch):
    # A regression must fail, not hang on the trickle: the in-process fetches get a short deadline.
    monkeypatch.setattr(constants, "HARNESS_DOWNLOAD_DEADLINE", 5.0)
    hub.trickle_interval = 0.05
    hub.add(REPO, FILE, DATA, fault="trickle")
    root = tmp_path / "root"
    write_root(root, [model_entry()])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HARNESS_"))}
    env.update(HARNESS_ROOT=str(root), HF_ENDPOINT=hub.url, HARNESS_CACHE=str(tmp_path / "c"), PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "harness", "fetch", "--models", "tiny"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cache = tmp_path / "c" / "models"          # where the CLI puts models under HARNESS_CACHE
    folder = cache / "tiny"
    try:
        ends = time.monotonic() + 30
        # The partial exists and the body is arriving (the file object buffers, so its size stays 0 a while).
        while not (partials(folder) and "GET" in [m for m, _ in hub.requests]) and time.monotonic() < ends:
            time.sleep(0.05)
        (live,) = partials(folder)

        # While its writer lives, another fetch must neither delete its partial nor write beside it.
        concurrent = fetch(tmp_path / "again", hub, cache, model_entry())
        assert concurrent.status == "failed" and "another fetch is storing" in concurrent.detail
        assert partials(folder) == [live]
    finally:
        proc.kill()                  # SIGKILL: no finally block, no cleanup in the child
        proc.wait(timeout=10)
    assert partials(folder) == [live]

    hub.add(REPO, FILE, DATA)        # the server recovers
    result = fetch(tmp_path / "third", hub, cache, model_entry())
    assert result.status == "fetched", result.detail
    assert leftovers(cache) == [FILE]          # the stale partial and the lock file are gone
