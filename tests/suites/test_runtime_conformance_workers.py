"""Runtime conformance's workers (driver._in_workers): each share of the templates in a thread of its own; their
records come back together, and a worker that fails stops the others before their next request and is raised."""

import threading

import pytest

from harness.suites.runtime_conformance.driver import Stopped, _in_workers


def test_every_share_is_worked_and_the_records_come_back_together():
    seen = []

    def work(share, stop):
        seen.append(threading.current_thread().name)
        return [f"record of {t}" for t in share]

    got = _in_workers(work, [["a", "c"], ["b"]])
    assert sorted(got) == ["record of a", "record of b", "record of c"]
    assert sorted(seen) == ["conformance-worker-0", "conformance-worker-1"]


def test_a_failing_worker_stops_the_others_and_its_error_is_raised():
    started, stopped_at = threading.Event(), []

    def work(share, stop):
        if share == ["bad"]:
            started.wait(5)
            raise ValueError("the server answered garbage")
        started.set()
        for n in range(1000):            # a worker between requests, as TemplateRun.serve checks `stop`
            if stop.is_set():
                stopped_at.append(n)
                raise Stopped
            stop.wait(0.01)
        return ["never"]

    with pytest.raises(ValueError, match="garbage"):
        _in_workers(work, [["good"], ["bad"]])
    assert stopped_at and stopped_at[0] < 1000
