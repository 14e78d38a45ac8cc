"""How runtime conformance divides its work: the templates in chunks whose scripted models are built, served and
removed one after another (a template of many requests in parts), and the work among worker threads for a
runtime that answers one request at a time."""

from __future__ import annotations

import threading


# Templates whose scripted models are on disk at once (tens of MB each) and share a llama-cpp-python process.
CHUNK = 12
# Requests of one template whose scripted models are built at once. Every reply is weights of its own (a few MB):
# a template's own corpus asks at most a few dozen, but a large corpus (a model's committed replies replayed by
# the deployment suite, a corpus file) would need more than one build may write (harness.scripted.plan's
# write budget) and refuse. Its requests go in parts, each a chunk of its own: built, served and removed before
# the next, so what is on disk at once stays what a chunk of whole templates takes.
PART = 150


def chunks(share: list) -> list:
    """(template, corpus, requests) triples in the chunks run_suite builds and serves one after another: at most
    CHUNK whole templates, or one part (PART requests) of a template that has more."""
    out, chunk = [], []
    for ref, corpus, requests in share:
        if len(requests) > PART:
            out += [chunk] if chunk else []
            chunk = []
            out += [[(ref, corpus, requests[start:start + PART])] for start in range(0, len(requests), PART)]
            continue
        chunk.append((ref, corpus, requests))
        if len(chunk) == CHUNK:
            out.append(chunk)
            chunk = []
    return out + ([chunk] if chunk else [])


def shares(todo: list, workers: int) -> list:
    """Each worker's chunks. Whole templates go round robin (a template's own corpus is a few dozen requests, and a
    chunk of CHUNK shares one server process); fewer templates than workers (one model's replayed replies is one
    template) have their requests cut in contiguous slices, one a worker, so every worker has some to ask."""
    workers = max(1, workers)
    if len(todo) < workers:
        todo = [(ref, corpus, requests[i * len(requests) // workers:(i + 1) * len(requests) // workers])
                for ref, corpus, requests in todo for i in range(workers)]
        todo = [t for t in todo if t[2]]
    out = [chunks(todo[i::workers]) for i in range(min(workers, len(todo)))]
    return out or [[]]


class Stopped(Exception):
    """A worker's unwinding when another worker failed or the run was stopped (its servers are stopped on the way)."""


def in_workers(work, shares: list) -> list:
    """Each share of the templates by a worker thread of its own (each starts its own servers; records go to the
    shared writer one at a time). A worker that fails, or a run stopped (^C, SIGTERM), sets `stop`: the others
    finish the request they are in, stop their servers and end; the first failure is raised."""
    stop, results, errors = threading.Event(), [[] for _ in shares], []

    def run(i: int) -> None:
        try:
            results[i] = work(shares[i], stop)
        except Stopped:
            pass
        except BaseException as exc:     # noqa: BLE001 - raised again in the caller's thread
            errors.append(exc)
            stop.set()

    threads = [threading.Thread(target=run, args=(i,), name=f"conformance-worker-{i}") for i in range(len(shares))]
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():
                t.join(0.5)
    except BaseException:
        stop.set()
        for t in threads:
            t.join()
        raise
    if errors:
        raise errors[0]
    return [record for found in results for record in found]
