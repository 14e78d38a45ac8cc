"""`harness run` under faults, as real processes against a real HTTP server on 127.0.0.1 (the strict path of a
served model: no model weights needed): two runs on one results folder, Ctrl-C and SIGTERM mid-run, a file that
cannot grow, a folder gone read-only, and two served models whose names map to one transcript."""

import json
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "backends"))
from hostile_server import HostileServer, completion, raw_json  # noqa: E402

PINNED = "qwen2.5-coder-0.5b-instruct-q4_k_m"
TRANSCRIPT = f"{PINNED}--served.jsonl"


class Gated:
    """A server whose completions wait for the test: `release()` lets them through; `asked` counts them."""

    def __init__(self, free: int = 0):
        self.gate, self.asked, self.free = threading.Event(), 0, free
        self.answer = completion("Hello! How can I help you today?")

    def __call__(self, h):
        if h.command == "GET":
            return raw_json("{}", status=404)(h)
        if h.path.endswith("/completion"):
            return self.answer(h)                 # not llama-server: a 404, and the backend asks /v1/completions
        self.asked += 1
        if self.asked > self.free:
            self.gate.wait()
        return self.answer(h)

    def release(self):
        self.gate.set()


def start(results, url, *more, samples=2, **popen):
    args = [sys.executable, "-m", "harness", "run", "--endpoint", url, "--served-model", PINNED, "--model", PINNED,
            "--scenario", "greeting", "--samples", str(samples), "--results-dir", str(results), "--retries", "0",
            "--timeout", "600", *more]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def until(condition, *alive):
    """Wait for `condition` while every process in `alive` runs (no clock: a process that exits ends the wait)."""
    while not condition():
        if any(p.poll() is not None for p in alive):
            return False
        time.sleep(0.02)
    return True


def samples(results) -> list:
    path = Path(results) / "transcripts" / TRANSCRIPT
    lines = path.read_bytes().split(b"\n") if path.exists() else []
    assert not lines or lines[-1] == b"", "the transcript ends on a whole record"
    return [json.loads(line)["sample"] for line in lines if line and json.loads(line)["kind"] == "sample"]


def _waiting_on(path: Path) -> bool:
    """A process is blocked waiting for the lock of `path` (the kernel's table: a "->" line on its inode)."""
    if not path.exists():
        return False
    info = path.stat()
    key = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    return any("->" in line and key in line for line in Path("/proc/locks").read_text().splitlines())


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs the kernel's lock table (Linux)")
def test_a_second_run_on_a_transcript_being_written_stops_and_names_the_first(tmp_path):
    server_answer = Gated()
    with HostileServer(server_answer) as server:
        first = start(tmp_path, server.url)
        assert until(lambda: server_answer.asked >= 1, first), first.communicate()
        second = start(tmp_path, server.url)
        # The second either stops at once (the fix) or sits waiting for the first's lock (what the issue saw:
        # it then ran the same samples again); either way the first is let through only then.
        until(lambda: _waiting_on(tmp_path / "transcripts" / TRANSCRIPT), second)
        server_answer.release()
        out2, err2 = second.communicate()
        out1, err1 = first.communicate()
    assert first.returncode == 0, err1
    assert second.returncode == 1, out2 + err2
    assert f"is being written by process {first.pid} (" in err2 and "then run this again" in err2, err2
    assert samples(tmp_path) == [0, 1]                  # each sample once
    with HostileServer(completion("Hello!")) as server:
        third = start(tmp_path, server.url)
        out3, err3 = third.communicate()
    assert third.returncode == 0 and "ran 0, already recorded 2" in out3, out3 + err3


@pytest.mark.parametrize("signum,code,said", [(signal.SIGINT, 130, "Ctrl-C (SIGINT)"),
                                              (signal.SIGTERM, 143, "SIGTERM")])
def test_a_stopped_run_says_what_is_recorded_and_the_same_command_resumes(tmp_path, signum, code, said):
    server_answer = Gated(free=1)
    with HostileServer(server_answer) as server:
        run = start(tmp_path, server.url, samples=3)
        assert until(lambda: server_answer.asked >= 2, run), run.communicate()
        assert samples(tmp_path) == [0]
        run.send_signal(signum)
        out, err = run.communicate()
        server_answer.release()
    assert run.returncode == code, out + err
    assert f"stopped by {said}: 1 new sample(s) recorded by this run (1 recorded in all, of 3 planned)" in err, err
    assert "run the same command again to resume" in err and "Traceback" not in err
    assert samples(tmp_path) == [0]
    with HostileServer(completion("Hello!")) as server:
        again = start(tmp_path, server.url, samples=3)
        out, err = again.communicate()
    assert again.returncode == 0 and "ran 2, already recorded 1" in out, out + err
    assert samples(tmp_path) == [0, 1, 2]


def test_a_stopped_run_with_requests_in_flight_says_it_waits_for_them_and_drops_the_rest(tmp_path):
    server_answer = Gated(free=1)
    with HostileServer(server_answer) as server:
        run = start(tmp_path, server.url, "--in-flight", "2", samples=4)
        assert until(lambda: server_answer.asked >= 3, run), run.communicate()
        run.send_signal(signal.SIGINT)
        said = []
        for line in run.stderr:             # until it says it waits (or ends without saying so)
            said.append(line)
            if "stopping: waiting for" in line:
                break
        server_answer.release()
        out, err = run.communicate()
    assert any(re.search(r"stopping: waiting for [23] request\(s\) in flight", line) for line in said), said
    assert run.returncode == 130 and "3 new sample(s) recorded by this run" in err, out + err
    assert sorted(samples(tmp_path)) == [0, 1, 2] and server_answer.asked == 3       # the fourth never asked


def test_a_file_that_cannot_grow_stops_the_run_and_the_rerun_resumes(tmp_path):
    with HostileServer(completion("Hello!")) as server:
        scratch = start(tmp_path / "scratch", server.url, samples=1)
        scratch.communicate()
        one = (tmp_path / "scratch" / "transcripts" / TRANSCRIPT).stat().st_size
        # Room for the model record and one sample, and half of the next: the disk fills during its write.
        limit = one + 1000

        def small_disk():
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

        run = start(tmp_path, server.url, samples=3, preexec_fn=small_disk)
        out, err = run.communicate()
        assert run.returncode == 1, out + err
        assert "cannot write a record: File too large" in err and "the same command resumes" in err, err
        assert "Traceback" not in err
        assert samples(tmp_path) == [0]
        again = start(tmp_path, server.url, samples=3)
        out, err = again.communicate()
    assert again.returncode == 0 and "ran 2, already recorded 1" in out, out + err
    assert samples(tmp_path) == [0, 1, 2] and not list((tmp_path / "transcripts").glob("*.torn"))


def _can_mount() -> bool:
    if os.geteuid() != 0:
        return False
    # A fresh temporary folder (no fixed path): the probe mounts on it once and takes it away.
    with tempfile.TemporaryDirectory(prefix="harness-mount-probe-") as probe:
        return subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", probe],
                              capture_output=True).returncode == 0 and \
            subprocess.run(["umount", probe]).returncode == 0


@pytest.mark.skipif(not _can_mount(), reason="needs root and mount (a tmpfs remounted read-only)")
def test_a_read_only_results_folder_stops_the_run_and_the_rerun_resumes(tmp_path):
    # Linux refuses to remount a filesystem read-only while a file on it is open for writing, so the folder goes
    # read-only between two runs (a write failing mid-run is the full-disk test above: the same cut-back path).
    folder = tmp_path / "mounted"
    folder.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(folder)], check=True)
    try:
        with HostileServer(completion("Hello!")) as server:
            out, err = start(folder, server.url, samples=1).communicate()
            assert samples(folder) == [0], out + err
            before = (folder / "transcripts" / TRANSCRIPT).read_bytes()
            subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
            run = start(folder, server.url, samples=3)
            out, err = run.communicate()
            assert run.returncode == 1 and "cannot open for writing: Read-only file system" in err, out + err
            assert "Traceback" not in err and (folder / "transcripts" / TRANSCRIPT).read_bytes() == before
            subprocess.run(["mount", "-o", "remount,rw", str(folder)], check=True)
            again = start(folder, server.url, samples=3)
            out, err = again.communicate()
        assert again.returncode == 0 and "ran 2, already recorded 1" in out, out + err
        assert samples(folder) == [0, 1, 2]
    finally:
        subprocess.run(["umount", str(folder)])


def test_two_served_models_whose_names_map_to_one_transcript_are_not_mixed(tmp_path):
    def run(name):
        return subprocess.run([sys.executable, "-m", "harness", "run", "--endpoint", server.url, "--served-model",
                               name, "--template", f"gguf-{PINNED}", "--runtime", "r", "--scenario", "greeting",
                               "--samples", "1", "--results-dir", str(tmp_path), "--retries", "0"],
                              capture_output=True, text=True)

    with HostileServer(completion("Hello!")) as server:
        first, second = run("a/b"), run("a--b")
    assert first.returncode == 0, first.stderr
    assert second.returncode == 1, second.stdout + second.stderr
    assert "holds the samples of served model 'a/b' on runtime 'r', and served model 'a--b' on runtime 'r' maps " \
           "to the same id 'a--b--r'" in second.stderr, second.stderr
    records = [json.loads(line) for line in (tmp_path / "transcripts" / "a--b--r.jsonl").read_text().splitlines()]
    assert [r["runtime"]["served_model"] for r in records if r["kind"] == "model"] == ["a/b"]
    assert [r["kind"] for r in records].count("sample") == 1
