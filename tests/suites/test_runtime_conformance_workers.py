"""Runtime conformance's workers (scheduling.in_workers): each share of the templates in a thread of its own; their
records come back together, and a worker that fails stops the others before their next request and is raised."""

import threading

import pytest

from harness.suites.runtime_conformance.scheduling import Stopped, in_workers


def test_every_share_is_worked_and_the_records_come_back_together():
    seen = []

    def work(share, stop):
        seen.append(threading.current_thread().name)
        return [f"record of {t}" for t in share]

    got = in_workers(work, [["a", "c"], ["b"]])
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
        in_workers(work, [["good"], ["bad"]])
    assert stopped_at and stopped_at[0] < 1000


def test_a_template_of_more_requests_than_a_build_holds_goes_in_parts_each_a_chunk_of_its_own():
    from harness.suites.runtime_conformance.scheduling import CHUNK, PART, chunks

    small = [(f"t{i}", "corpus", list(range(25))) for i in range(CHUNK + 1)]
    big = ("replays", "corpus", list(range(2 * PART + 20)))
    got = chunks(small[:3] + [big] + small[3:])
    shapes = [[(t, len(r)) for t, _, r in c] for c in got]
    # The whole templates before it close their chunk; the big one's parts follow, one a chunk, in order; the
    # whole templates after it fill chunks of CHUNK again.
    assert shapes[:4] == [[("t0", 25), ("t1", 25), ("t2", 25)], [("replays", PART)], [("replays", PART)],
                          [("replays", 20)]]
    assert [r for c in got[1:4] for _, _, r in c] == [big[2][i:i + PART] for i in range(0, len(big[2]), PART)]
    assert shapes[4:] == [[(f"t{i}", 25) for i in range(3, CHUNK + 1)]]
    # Nothing is lost or asked twice, and a template's own corpus (a few dozen requests) is never split.
    assert sorted((t, x) for c in got for t, _, r in c for x in r) == sorted(
        (t, x) for t, _, r in small + [big] for x in r)
    assert chunks(small) == [small[:CHUNK], small[CHUNK:]] and chunks([]) == []


def test_whole_templates_go_round_robin_and_one_template_is_cut_so_every_worker_asks_some():
    from harness.suites.runtime_conformance.scheduling import shares

    many = [(f"t{i}", "corpus", list(range(20))) for i in range(5)]
    got = shares(many, 2)
    assert [[ref for chunk in s for ref, _, _ in chunk] for s in got] == [["t0", "t2", "t4"], ["t1", "t3"]]
    assert shares(many, 1) == [[many]]
    # One model's replayed replies are one template: each worker gets a contiguous slice of its requests, and
    # together they are every request once, in order.
    one = [("replays", "corpus", list(range(7)))]
    got = shares(one, 2)
    assert [[(ref, requests) for chunk in s for ref, _, requests in chunk] for s in got] == [
        [("replays", [0, 1, 2])], [("replays", [3, 4, 5, 6])]]
    # A slice longer than a build holds is still cut in parts; a template of fewer requests than workers is not
    # handed to a worker as an empty slice; nothing to ask is one empty share.
    from harness.suites.runtime_conformance.scheduling import PART
    got = shares([("replays", "corpus", list(range(3 * PART)))], 2)
    assert [[len(requests) for chunk in s for _, _, requests in chunk] for s in got] == [
        [PART, PART // 2], [PART, PART // 2]]
    assert shares([("t", "corpus", [0])], 2) == [[[("t", "corpus", [0])]]]
    assert shares([], 2) == [[]]
