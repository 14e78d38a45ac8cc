"""The render process: a template that overruns is stopped by a kill, whatever it does, and the next render
gets a fresh process; detection and conformance report such a template as a wall instead of hanging."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest

import harness.template.render as render_module
from harness.core.constants import ROOT
from harness.core.errors import RenderLimitError, TemplateError
from harness.template import render_worker
from harness.template.conformance import check_template
from harness.template.detect import detect
from harness.template.render import render

USER = [{"role": "user", "content": "hi"}]
# No Jinja hook runs inside these loops, so only the kill can end them.
HANGS = "{% set s = 'x' * 6000000 %}{% for a in s %}{% for b in s %}{% endfor %}{% endfor %}"


@pytest.fixture
def short_budget(monkeypatch):
    monkeypatch.setattr(render_module, "MAX_RENDER_SECONDS", 0.5)


def test_a_loop_without_hooks_is_killed_and_the_next_render_works(short_budget):
    with pytest.raises(RenderLimitError, match=r"longer than 0.5 s \(its process was killed\)"):
        render(HANGS, USER)
    assert render("{{ messages[0].content }}", USER) == "hi"


def test_a_template_error_keeps_its_cause_across_the_process():
    with pytest.raises(TemplateError, match="sandbox refused") as caught:
        render("{{ [].append(1) }}", USER)
    assert caught.value.__cause__ is not None and "unsafe" in str(caught.value.__cause__)


def test_the_template_message_of_raise_exception_survives_the_process():
    from harness.core.errors import TemplateRaisedError
    with pytest.raises(TemplateRaisedError) as caught:
        render("{{ raise_exception('roles must alternate') }}", USER)
    assert caught.value.template_message == "roles must alternate"


def test_memory_past_the_process_limit_is_a_named_error():
    # The render process may hold what it inherits plus MEMORY_HEADROOM. A long test session inherits much
    # mapped but free memory a render could reuse, so this runs as a command does: in a fresh interpreter.
    # Sixty copies of 7 MB stay under the size budget each, and together pass what the process may add.
    template = "{% set a = 'x' * 7000000 %}{{ [" + ", ".join(f"a ~ {i}" for i in range(60)) + "]|length }}"
    script = (
        "import sys\n"
        "from harness.core.errors import RenderLimitError\n"
        "from harness.template import render_worker\n"
        "from harness.template.render import render\n"
        "render_worker.MEMORY_HEADROOM = 300 << 20\n"
        "try:\n"
        f"    render({template!r}, {USER!r})\n"
        "except RenderLimitError as exc:\n"
        "    print('limit:', exc)\n"
        "else:\n"
        "    print('rendered')\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert re.search("^limit: .*(out of memory|killed)", done.stdout), done.stdout


def test_detection_of_a_hanging_template_is_a_wall_after_one_overrun(short_budget):
    found = detect(HANGS)
    assert found.status == "wall" and found.family is None
    assert "longer than 0.5 s" in found.reason


def test_conformance_reports_a_hanging_template_as_a_wall(short_budget):
    row = check_template(SimpleNamespace(id="hangs", text=HANGS, bos_token="", eos_token=""))
    assert row["status"] == "wall" and not row["full_conversation_renders"]
    assert "longer than 0.5 s" in row["full_conversation_error"]


def test_a_batch_goes_on_after_an_item_that_overruns(short_budget):
    refs = [SimpleNamespace(id=name, text=text, bos_token="", eos_token="")
            for name, text in (("first", "{{ messages[0].content }}"), ("hangs", HANGS),
                               ("after", "{{ messages[0].content }}!"))]
    from harness.template.conformance import check_templates
    rows = check_templates(refs)
    assert [row["id"] for row in rows] == ["first", "hangs", "after"]
    assert rows[1]["status"] == "wall" and "longer than 0.5 s" in rows[1]["full_conversation_error"]
    assert rows[0]["status"] == rows[2]["status"] == "no tools"


def test_the_caller_s_clock_reaches_the_render_process(monkeypatch):
    from datetime import datetime
    monkeypatch.setattr(render_module, "_now", lambda: datetime(2024, 7, 26))
    assert render("{{ strftime_now('%Y-%m-%d') }}", USER) == "2024-07-26"


def test_renders_from_several_threads_each_get_their_own_answer():
    import threading
    out = {}

    def one(n):
        out[n] = [render("{{ messages[0].content }}", [{"role": "user", "content": f"{n}-{k}"}]) for k in range(20)]

    threads = [threading.Thread(target=one, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == {n: [f"{n}-{k}" for k in range(20)] for n in range(4)}


def test_the_render_process_holds_no_descriptor_of_its_parent(tmp_path):
    # A pipe to another worker, opened before the render process forks: once the parent closes its end, the
    # reader sees end-of-file only if the render process let go of its copy.
    read_end, write_end = os.pipe()
    render_worker.stop()
    try:
        assert render("{{ messages[0].content }}", USER) == "hi"
        os.close(write_end)
        os.set_blocking(read_end, False)
        assert os.read(read_end, 1) == b""      # BlockingIOError: a writer is still alive (the render process)
    finally:
        os.close(read_end)
        render_worker.stop()


def test_a_terminate_ends_the_render_process_whatever_sigterm_handler_the_command_installed():
    # `harness run` turns SIGTERM into an exception to stop cleanly; the fork inherits that handler, and the
    # terminate a parent's exit sends its daemon children then printed a traceback from the read loop.
    import signal

    def stop_cleanly(signum, frame):
        raise SystemExit(3)

    previous = signal.signal(signal.SIGTERM, stop_cleanly)
    render_worker.stop()
    try:
        assert render("{{ messages[0].content }}", USER) == "hi"
        process = render_worker._worker.process
        process.terminate()
        process.join()
        assert process.exitcode == -signal.SIGTERM
    finally:
        signal.signal(signal.SIGTERM, previous)
        render_worker.stop()


def _never_reads():
    import time
    time.sleep(3600)


def test_a_render_process_that_never_reads_its_batch_is_killed_at_the_deadline(monkeypatch):
    # A child hung before its first read (as a fork can hang on a lock another thread held): a batch larger
    # than the pipe holds must not leave the parent blocked in its write.
    import threading
    render_worker.stop()
    monkeypatch.setattr(render_worker, "_cap_memory", _never_reads)        # runs in the child before it reads
    got = {}
    big = [{"role": "user", "content": "x" * (4 << 20)}]

    def ask():
        try:
            got["answer"] = render_worker.map_calls(len, [big], seconds=0.5)
        except BaseException as exc:  # noqa: BLE001
            got["answer"] = exc

    asking = threading.Thread(target=ask, daemon=True)
    asking.start()
    asking.join(300)                   # a hang guard, not a measurement: the deadline is half a second
    hung = asking.is_alive()
    if hung:                           # the child killed, the write fails and the lock the stop needs is let go
        render_worker._worker.process.kill()
        asking.join(60)
    monkeypatch.undo()
    render_worker.stop()
    assert not hung, "the parent waited on a child that never reads"
    (ok, error), = got["answer"]
    assert not ok and isinstance(error, RenderLimitError) and "longer than 0.5 s" in str(error)
    assert render("{{ messages[0].content }}", USER) == "hi"
