"""The line protocol the peer workers speak: one JSON request a line on stdin, one JSON answer a line on stdout,
the request's "id" copied into its answer. Stdlib only: the workers run under other environments' pythons,
started by path (harness.peers.process), so they import this module by its bare name from their own folder, and
nothing from harness."""

from __future__ import annotations

import json
import os
import sys


def serve(handle) -> None:
    """Answer every request line with handle(request) until stdin closes. Stdout is the protocol's alone: what a
    library prints (a deprecation notice, a progress line) goes to stderr, where it cannot tear an answer. A
    request that is not JSON or whose handling raises is answered {"error": "Type: message"}, and the worker
    goes on."""
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    for line in sys.stdin:
        if not line.strip():
            continue
        request = {}
        try:
            request = json.loads(line)
            answer = handle(request)
        except Exception as exc:  # one bad request is answered, not fatal
            answer = {"error": f"{type(exc).__name__}: {exc}"[:500]}
        answer["id"] = request.get("id") if isinstance(request, dict) else None
        out.write(json.dumps(answer, ensure_ascii=False, default=repr) + "\n")
        out.flush()
